//! Authentication and per-bucket permissions: wrong secret, unknown key, and a second
//! key that gains and loses read, write and the create-bucket right.

use aws_sdk_s3::primitives::ByteStream;
use hangar_sdk_tests::TestServer;

use crate::{assert_error, get, put};

#[tokio::test]
async fn bad_credentials_are_refused() {
    let server = TestServer::start();
    let wrong_secret = aws_sdk_s3::Client::from_conf(
        server
            .config_builder(&server.key.access_key_id, &"0".repeat(64))
            .build(),
    );
    assert_error(
        wrong_secret.list_buckets().send().await,
        403,
        "SignatureDoesNotMatch",
    );
    let unknown = aws_sdk_s3::Client::from_conf(
        server
            .config_builder("GK000000000000000000000000", &server.key.secret_access_key)
            .build(),
    );
    assert_error(
        unknown.list_buckets().send().await,
        403,
        "InvalidAccessKeyId",
    );
}

#[tokio::test]
async fn per_bucket_read_write_owner() {
    let server = TestServer::start();
    let owner = server.client();
    owner.create_bucket().bucket("perm").send().await.unwrap();
    put(&owner, "perm", "existing", b"data").await;

    let other_key = server.create_key("other", false);
    let other = server.client_for(&other_key);
    let id = other_key.access_key_id.as_str();
    assert_error(
        other.create_bucket().bucket("others").send().await,
        403,
        "AccessDenied",
    );
    let listed = other.list_buckets().send().await.unwrap();
    assert!(listed.buckets().is_empty(), "{:?}", listed.buckets());
    let put_other = || {
        other
            .put_object()
            .bucket("perm")
            .key("new")
            .body(ByteStream::from_static(b"new"))
            .send()
    };
    assert_error(
        other
            .get_object()
            .bucket("perm")
            .key("existing")
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_error(
        other.list_objects_v2().bucket("perm").send().await,
        403,
        "AccessDenied",
    );
    assert_error(put_other().await, 403, "AccessDenied");

    server.cli(&["bucket", "allow", "perm", "--key", id, "--read"]);
    assert_eq!(get(&other, "perm", "existing").await, b"data");
    other
        .head_object()
        .bucket("perm")
        .key("existing")
        .send()
        .await
        .unwrap();
    other.list_objects_v2().bucket("perm").send().await.unwrap();
    let listed = other.list_buckets().send().await.unwrap();
    assert_eq!(listed.buckets().len(), 1);
    assert_error(put_other().await, 403, "AccessDenied");
    assert_error(
        other
            .delete_object()
            .bucket("perm")
            .key("existing")
            .send()
            .await,
        403,
        "AccessDenied",
    );

    server.cli(&["bucket", "allow", "perm", "--key", id, "--write"]);
    put_other().await.unwrap();
    other
        .copy_object()
        .bucket("perm")
        .key("copied")
        .copy_source("perm/existing")
        .send()
        .await
        .unwrap();
    other
        .delete_object()
        .bucket("perm")
        .key("copied")
        .send()
        .await
        .unwrap();
    assert_error(
        other.delete_bucket().bucket("perm").send().await,
        403,
        "AccessDenied",
    );

    server.cli(&["bucket", "deny", "perm", "--key", id, "--read", "--write"]);
    assert_error(
        other
            .get_object()
            .bucket("perm")
            .key("existing")
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_error(put_other().await, 403, "AccessDenied");

    // The create-bucket right makes the key owner of what it creates.
    server.cli(&["key", "allow", id, "--create-bucket"]);
    other.create_bucket().bucket("others").send().await.unwrap();
    put(&other, "others", "k", b"v").await;
    assert_error(
        owner.get_object().bucket("others").key("k").send().await,
        403,
        "AccessDenied",
    );
    other
        .delete_object()
        .bucket("others")
        .key("k")
        .send()
        .await
        .unwrap();
    other.delete_bucket().bucket("others").send().await.unwrap();
}
