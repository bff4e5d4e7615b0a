//! ListBuckets, CreateBucket (name rules), HeadBucket, GetBucketLocation, DeleteBucket.

use hangar_sdk_tests::TestServer;

use crate::{assert_error, failure, put};

#[tokio::test]
async fn create_list_head_locate_delete() {
    let server = TestServer::start();
    let client = server.client();
    for bucket in ["bucket-one", "bucket-two"] {
        client.create_bucket().bucket(bucket).send().await.unwrap();
    }
    let listed = client.list_buckets().send().await.unwrap();
    let mut names: Vec<&str> = listed.buckets().iter().filter_map(|b| b.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["bucket-one", "bucket-two"]);
    assert!(listed.buckets().iter().all(|b| b.creation_date().is_some()));

    client
        .head_bucket()
        .bucket("bucket-one")
        .send()
        .await
        .unwrap();
    let location = client
        .get_bucket_location()
        .bucket("bucket-one")
        .send()
        .await
        .unwrap();
    // Garage answers with its s3_region; so does Hangar.
    assert_eq!(
        location.location_constraint().map(|l| l.as_str()),
        Some(hangar_sdk_tests::REGION)
    );

    client
        .delete_bucket()
        .bucket("bucket-one")
        .send()
        .await
        .unwrap();
    let (status, _) = failure(client.head_bucket().bucket("bucket-one").send().await);
    assert_eq!(status, 404);
    let listed = client.list_buckets().send().await.unwrap();
    let names: Vec<&str> = listed.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, ["bucket-two"]);
}

#[tokio::test]
async fn delete_refuses_non_empty_and_unknown_buckets() {
    let server = TestServer::start();
    let client = server.client();
    client.create_bucket().bucket("full").send().await.unwrap();
    put(&client, "full", "one", b"1").await;
    assert_error(
        client.delete_bucket().bucket("full").send().await,
        409,
        "BucketNotEmpty",
    );
    // Refused means nothing changed.
    client
        .head_object()
        .bucket("full")
        .key("one")
        .send()
        .await
        .unwrap();
    client
        .delete_object()
        .bucket("full")
        .key("one")
        .send()
        .await
        .unwrap();
    client.delete_bucket().bucket("full").send().await.unwrap();

    assert_error(
        client.delete_bucket().bucket("never-created").send().await,
        404,
        "NoSuchBucket",
    );
    assert_error(
        client
            .list_objects_v2()
            .bucket("never-created")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

#[tokio::test]
async fn invalid_bucket_names_are_refused() {
    let server = TestServer::start();
    let client = server.client();
    let too_long = "a".repeat(64);
    for name in [
        "ab",
        too_long.as_str(),
        "UpperCase",
        "under_score",
        "-leading-dash",
        "trailing-dash-",
        "double..dot",
        "192.168.5.4",
        "xn--punycode",
        "bad-suffix-s3alias",
    ] {
        assert_error(
            client.create_bucket().bucket(name).send().await,
            400,
            "InvalidBucketName",
        );
    }
    let listed = client.list_buckets().send().await.unwrap();
    assert!(listed.buckets().is_empty(), "{:?}", listed.buckets());
    // Edge cases that are valid.
    let longest = "b".repeat(63);
    for name in ["abc", longest.as_str(), "with.dots-and-1"] {
        client.create_bucket().bucket(name).send().await.unwrap();
    }
}
