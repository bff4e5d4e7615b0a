//! CopyObject: COPY and REPLACE metadata directives, across buckets, copy-source
//! conditions, and the errors S3 gives.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::MetadataDirective;
use hangar_sdk_tests::random_bytes;

use crate::{assert_error, assert_same_bytes, etag_of, get, put, server_with_bucket};

async fn put_with_metadata(client: &aws_sdk_s3::Client, bucket: &str, key: &str, data: &[u8]) {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(data.to_vec()))
        .content_type("text/x-source")
        .cache_control("max-age=1")
        .metadata("origin", "source")
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn copy_keeps_or_replaces_metadata() {
    let (_server, client) = server_with_bucket("copy").await;
    let data = random_bytes(3 * 1024 * 1024 + 3, 1);
    put_with_metadata(&client, "copy", "src", &data).await;

    let copied = client
        .copy_object()
        .bucket("copy")
        .key("dst-copy")
        .copy_source("copy/src")
        .send()
        .await
        .unwrap();
    let result = copied.copy_object_result().expect("CopyObjectResult");
    assert_eq!(result.e_tag(), Some(etag_of(&data).as_str()));
    assert!(result.last_modified().is_some());
    let head = client
        .head_object()
        .bucket("copy")
        .key("dst-copy")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("text/x-source"));
    assert_eq!(head.cache_control(), Some("max-age=1"));
    assert_eq!(
        head.metadata()
            .and_then(|m| m.get("origin"))
            .map(String::as_str),
        Some("source")
    );
    assert_same_bytes(&get(&client, "copy", "dst-copy").await, &data, "COPY body");

    client
        .copy_object()
        .bucket("copy")
        .key("dst-replace")
        .copy_source("copy/src")
        .metadata_directive(MetadataDirective::Replace)
        .content_type("application/x-replaced")
        .metadata("origin", "replaced")
        .metadata("extra", "1")
        .send()
        .await
        .unwrap();
    let head = client
        .head_object()
        .bucket("copy")
        .key("dst-replace")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("application/x-replaced"));
    assert_eq!(
        head.cache_control(),
        None,
        "REPLACE drops the source's system metadata"
    );
    let meta = head.metadata().expect("metadata");
    assert_eq!(meta.get("origin").map(String::as_str), Some("replaced"));
    assert_eq!(meta.get("extra").map(String::as_str), Some("1"));
    assert_eq!(meta.len(), 2);
    assert_same_bytes(
        &get(&client, "copy", "dst-replace").await,
        &data,
        "REPLACE body",
    );

    // The copies are independent of the source.
    client
        .delete_object()
        .bucket("copy")
        .key("src")
        .send()
        .await
        .unwrap();
    assert_same_bytes(
        &get(&client, "copy", "dst-copy").await,
        &data,
        "after source delete",
    );
}

#[tokio::test]
async fn copy_across_buckets_and_small_objects() {
    let (_server, client) = server_with_bucket("copy-a").await;
    client
        .create_bucket()
        .bucket("copy-b")
        .send()
        .await
        .unwrap();
    for (i, size) in [0usize, 1, 3 * 1024].into_iter().enumerate() {
        let data = random_bytes(size, i as u64);
        let key = format!("k{size}");
        put(&client, "copy-a", &key, &data).await;
        client
            .copy_object()
            .bucket("copy-b")
            .key(format!("copied/{key}"))
            .copy_source(format!("copy-a/{key}"))
            .send()
            .await
            .unwrap();
        assert_same_bytes(
            &get(&client, "copy-b", &format!("copied/{key}")).await,
            &data,
            &key,
        );
    }
    // A copy source key with characters that must be URL-encoded.
    put(&client, "copy-a", "dir/a b+é", b"encoded").await;
    client
        .copy_object()
        .bucket("copy-b")
        .key("plain")
        .copy_source("copy-a/dir/a%20b%2B%C3%A9")
        .send()
        .await
        .unwrap();
    assert_eq!(get(&client, "copy-b", "plain").await, b"encoded");
}

#[tokio::test]
async fn copy_source_conditions() {
    let (_server, client) = server_with_bucket("copy-cond").await;
    let data = random_bytes(1000, 1);
    put(&client, "copy-cond", "src", &data).await;
    let etag = etag_of(&data);
    let copy = |dst: &'static str| {
        client
            .copy_object()
            .bucket("copy-cond")
            .key(dst)
            .copy_source("copy-cond/src")
    };
    copy("ok1")
        .copy_source_if_match(&etag)
        .send()
        .await
        .unwrap();
    copy("ok2")
        .copy_source_if_none_match("\"other\"")
        .send()
        .await
        .unwrap();
    assert_error(
        copy("no1").copy_source_if_match("\"other\"").send().await,
        412,
        "PreconditionFailed",
    );
    assert_error(
        copy("no2").copy_source_if_none_match(&etag).send().await,
        412,
        "PreconditionFailed",
    );
    let far_future = aws_sdk_s3::primitives::DateTime::from_secs(4_000_000_000);
    assert_error(
        copy("no3")
            .copy_source_if_modified_since(far_future)
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    let long_ago = aws_sdk_s3::primitives::DateTime::from_secs(1_000_000_000);
    assert_error(
        copy("no4")
            .copy_source_if_unmodified_since(long_ago)
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    let listed = client
        .list_objects_v2()
        .bucket("copy-cond")
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["ok1", "ok2", "src"]);
}

#[tokio::test]
async fn copy_errors() {
    let (_server, client) = server_with_bucket("copy-err").await;
    assert_error(
        client
            .copy_object()
            .bucket("copy-err")
            .key("dst")
            .copy_source("copy-err/missing")
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    assert_error(
        client
            .copy_object()
            .bucket("copy-err")
            .key("dst")
            .copy_source("no-such-bucket/x")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

#[tokio::test]
async fn copy_onto_itself_needs_a_change() {
    let (_server, client) = server_with_bucket("copy-self").await;
    put(&client, "copy-self", "obj", b"same").await;
    // S3: copying an object onto itself without changing anything is InvalidRequest.
    assert_error(
        client
            .copy_object()
            .bucket("copy-self")
            .key("obj")
            .copy_source("copy-self/obj")
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    // With REPLACE it is how metadata is changed in place.
    client
        .copy_object()
        .bucket("copy-self")
        .key("obj")
        .copy_source("copy-self/obj")
        .metadata_directive(MetadataDirective::Replace)
        .metadata("changed", "yes")
        .send()
        .await
        .unwrap();
    let head = client
        .head_object()
        .bucket("copy-self")
        .key("obj")
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.metadata()
            .and_then(|m| m.get("changed"))
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(get(&client, "copy-self", "obj").await, b"same");
}
