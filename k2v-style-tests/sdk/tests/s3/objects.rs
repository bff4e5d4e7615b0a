//! PutObject, GetObject, HeadObject, DeleteObject over the sizes that sit on either side
//! of the inline limit and the 1 MiB block boundary, random and compressible content.

use aws_sdk_s3::primitives::ByteStream;
use hangar_sdk_tests::{compressible_bytes, random_bytes};

use crate::{assert_error, assert_same_bytes, etag_of, failure, get, put, server_with_bucket};

const MIB: usize = 1024 * 1024;

#[tokio::test]
async fn sizes_round_trip_byte_for_byte() {
    let (_server, client) = server_with_bucket("sizes").await;
    let sizes = [0, 1, 3 * 1024, MIB - 1, MIB, MIB + 1];
    for (i, &size) in sizes.iter().enumerate() {
        for (kind, data) in [
            ("random", random_bytes(size, i as u64)),
            ("compressible", compressible_bytes(size, i as u64)),
        ] {
            let key = format!("{kind}/{size}");
            let output = client
                .put_object()
                .bucket("sizes")
                .key(&key)
                .body(ByteStream::from(data.clone()))
                .send()
                .await
                .unwrap_or_else(|e| panic!("PUT {key}: {e:?}"));
            assert_eq!(output.e_tag(), Some(etag_of(&data).as_str()), "{key} ETag");

            let got = client
                .get_object()
                .bucket("sizes")
                .key(&key)
                .send()
                .await
                .unwrap();
            assert_eq!(got.content_length(), Some(size as i64), "{key}");
            assert_eq!(got.e_tag(), Some(etag_of(&data).as_str()), "{key}");
            assert!(got.last_modified().is_some(), "{key} Last-Modified");
            assert_same_bytes(&crate::body(got).await, &data, &key);

            let head = client
                .head_object()
                .bucket("sizes")
                .key(&key)
                .send()
                .await
                .unwrap();
            assert_eq!(head.content_length(), Some(size as i64), "{key}");
            assert_eq!(head.e_tag(), Some(etag_of(&data).as_str()), "{key}");
        }
    }
    for (i, &size) in sizes.iter().enumerate() {
        for kind in ["random", "compressible"] {
            let key = format!("{kind}/{size}");
            client
                .delete_object()
                .bucket("sizes")
                .key(&key)
                .send()
                .await
                .unwrap();
            assert_error(
                client.get_object().bucket("sizes").key(&key).send().await,
                404,
                "NoSuchKey",
            );
            let (status, _) = failure(client.head_object().bucket("sizes").key(&key).send().await);
            assert_eq!(status, 404, "HEAD {key} after delete ({i})");
        }
    }
}

#[tokio::test]
async fn fifty_mib_round_trip() {
    let (_server, client) = server_with_bucket("big").await;
    let data = random_bytes(50 * MIB, 50);
    put(&client, "big", "random-50MiB", &data).await;
    let head = client
        .head_object()
        .bucket("big")
        .key("random-50MiB")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(data.len() as i64));
    assert_eq!(head.e_tag(), Some(etag_of(&data).as_str()));
    assert_same_bytes(
        &get(&client, "big", "random-50MiB").await,
        &data,
        "50 MiB random",
    );

    let data = compressible_bytes(50 * MIB, 51);
    put(&client, "big", "compressible-50MiB", &data).await;
    assert_same_bytes(
        &get(&client, "big", "compressible-50MiB").await,
        &data,
        "50 MiB compressible",
    );
}

#[tokio::test]
async fn overwrite_replaces_content() {
    let (_server, client) = server_with_bucket("over").await;
    let first = random_bytes(2 * MIB + 5, 1);
    let second = random_bytes(3 * 1024, 2);
    put(&client, "over", "k", &first).await;
    put(&client, "over", "k", &second).await;
    assert_same_bytes(&get(&client, "over", "k").await, &second, "small over big");
    put(&client, "over", "k", &first).await;
    assert_same_bytes(&get(&client, "over", "k").await, &first, "big over small");
}

#[tokio::test]
async fn identical_content_under_two_keys() {
    // Blocks are deduplicated by hash: deleting one key must not break the other.
    let (_server, client) = server_with_bucket("dedup").await;
    let data = random_bytes(3 * MIB, 3);
    put(&client, "dedup", "a", &data).await;
    put(&client, "dedup", "b", &data).await;
    client
        .delete_object()
        .bucket("dedup")
        .key("a")
        .send()
        .await
        .unwrap();
    assert_same_bytes(&get(&client, "dedup", "b").await, &data, "surviving copy");
}

#[tokio::test]
async fn unusual_keys_round_trip() {
    let (_server, client) = server_with_bucket("keys").await;
    let long = "k".repeat(1024);
    let keys = [
        "with space",
        "unicode/é漢字🚀",
        "../dots/../up",
        "a+b=c&d?e#f%g",
        "trailing/",
        "//double//slash",
        long.as_str(),
    ];
    for (i, key) in keys.iter().enumerate() {
        let data = random_bytes(100 + i, i as u64);
        put(&client, "keys", key, &data).await;
        assert_same_bytes(&get(&client, "keys", key).await, &data, key);
    }
    let listed = client
        .list_objects_v2()
        .bucket("keys")
        .send()
        .await
        .unwrap();
    let mut listed: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    let mut expected = keys.to_vec();
    listed.sort_unstable();
    expected.sort_unstable();
    assert_eq!(listed, expected);

    let too_long = "k".repeat(1025);
    assert_error(
        client
            .put_object()
            .bucket("keys")
            .key(&too_long)
            .body(ByteStream::from_static(b"x"))
            .send()
            .await,
        400,
        "KeyTooLongError",
    );
}

#[tokio::test]
async fn missing_things_and_idempotent_delete() {
    let (_server, client) = server_with_bucket("missing").await;
    assert_error(
        client
            .get_object()
            .bucket("missing")
            .key("nope")
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    assert_error(
        client
            .get_object()
            .bucket("no-such-bucket")
            .key("nope")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
    assert_error(
        client
            .put_object()
            .bucket("no-such-bucket")
            .key("k")
            .body(ByteStream::from_static(b"x"))
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
    // Deleting a key that does not exist succeeds (204), as in S3.
    client
        .delete_object()
        .bucket("missing")
        .key("nope")
        .send()
        .await
        .unwrap();
}
