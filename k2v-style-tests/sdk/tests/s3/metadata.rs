//! System and user metadata round trip, response-* overrides, and Content-MD5.

use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::{ByteStream, DateTime, DateTimeFormat};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hangar_sdk_tests::{random_bytes, raw_request};
use md5::{Digest, Md5};

use crate::{assert_error, assert_same_bytes, failure, get, put, server_with_bucket};

fn http_date(t: &DateTime) -> String {
    t.fmt(DateTimeFormat::HttpDate).unwrap()
}

#[tokio::test]
async fn metadata_round_trips_on_get_and_head() {
    let (_server, client) = server_with_bucket("meta").await;
    let expires = DateTime::from_secs(1_900_000_000);
    let data = random_bytes(2000, 1);
    client
        .put_object()
        .bucket("meta")
        .key("obj")
        .body(ByteStream::from(data.clone()))
        .content_type("application/x-hangar-test")
        .content_encoding("gzip")
        .content_disposition("attachment; filename=\"report.bin\"")
        .content_language("fr-CA")
        .cache_control("max-age=3600, private")
        .expires(expires)
        .metadata("color", "blue")
        .metadata("multi-word-name", "a value with spaces")
        .send()
        .await
        .unwrap();

    let got = client
        .get_object()
        .bucket("meta")
        .key("obj")
        .send()
        .await
        .unwrap();
    assert_eq!(got.content_type(), Some("application/x-hangar-test"));
    assert_eq!(got.content_encoding(), Some("gzip"));
    assert_eq!(
        got.content_disposition(),
        Some("attachment; filename=\"report.bin\"")
    );
    assert_eq!(got.content_language(), Some("fr-CA"));
    assert_eq!(got.cache_control(), Some("max-age=3600, private"));
    assert_eq!(got.expires_string(), Some(http_date(&expires).as_str()));
    let meta = got.metadata().expect("user metadata");
    assert_eq!(meta.get("color").map(String::as_str), Some("blue"));
    assert_eq!(
        meta.get("multi-word-name").map(String::as_str),
        Some("a value with spaces")
    );
    assert_eq!(meta.len(), 2, "{meta:?}");
    assert_same_bytes(&crate::body(got).await, &data, "body");

    let head = client
        .head_object()
        .bucket("meta")
        .key("obj")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("application/x-hangar-test"));
    assert_eq!(head.content_encoding(), Some("gzip"));
    assert_eq!(head.content_language(), Some("fr-CA"));
    assert_eq!(head.cache_control(), Some("max-age=3600, private"));
    assert_eq!(head.expires_string(), Some(http_date(&expires).as_str()));
    assert_eq!(head.metadata().map(|m| m.len()), Some(2));
}

#[tokio::test]
async fn default_content_type_is_binary() {
    // The SDK always sends a Content-Type (application/octet-stream by default) except on
    // presigned requests: upload through a presigned URL with no Content-Type at all.
    let (_server, client) = server_with_bucket("ctype").await;
    let request = client
        .put_object()
        .bucket("ctype")
        .key("obj")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300)).unwrap())
        .await
        .unwrap();
    let headers: Vec<(&str, &str)> = request.headers().collect();
    assert!(
        !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type")),
        "{headers:?}"
    );
    let response = raw_request("PUT", request.uri(), &headers, b"abc".to_vec()).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let head = client
        .head_object()
        .bucket("ctype")
        .key("obj")
        .send()
        .await
        .unwrap();
    // S3 stores binary/octet-stream when the upload names no type.
    assert_eq!(head.content_type(), Some("binary/octet-stream"));
}

#[tokio::test]
async fn response_overrides_apply_to_get() {
    let (_server, client) = server_with_bucket("override").await;
    put(&client, "override", "obj", b"hello").await;
    let expires = DateTime::from_secs(2_000_000_000);
    let got = client
        .get_object()
        .bucket("override")
        .key("obj")
        .response_content_type("text/plain; charset=utf-8")
        .response_content_disposition("inline")
        .response_content_encoding("identity")
        .response_content_language("de")
        .response_cache_control("no-store")
        .response_expires(expires)
        .send()
        .await
        .unwrap();
    assert_eq!(got.content_type(), Some("text/plain; charset=utf-8"));
    assert_eq!(got.content_disposition(), Some("inline"));
    assert_eq!(got.content_encoding(), Some("identity"));
    assert_eq!(got.content_language(), Some("de"));
    assert_eq!(got.cache_control(), Some("no-store"));
    assert_eq!(got.expires_string(), Some(http_date(&expires).as_str()));
    assert_eq!(crate::body(got).await, b"hello");
    // Overrides change the answer, not the stored object (uploaded with the SDK's default
    // type).
    let head = client
        .head_object()
        .bucket("override")
        .key("obj")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("application/octet-stream"));
    assert_eq!(head.cache_control(), None);
}

#[tokio::test]
async fn content_md5_is_verified() {
    let (_server, client) = server_with_bucket("md5").await;
    let data = random_bytes(70_000, 1);
    let good = BASE64.encode(Md5::digest(&data));
    client
        .put_object()
        .bucket("md5")
        .key("good")
        .content_md5(&good)
        .body(ByteStream::from(data.clone()))
        .send()
        .await
        .unwrap();
    assert_same_bytes(&get(&client, "md5", "good").await, &data, "good MD5");

    let wrong = BASE64.encode(Md5::digest(b"something else"));
    let put_with = |md5: String, key: &'static str| {
        client
            .put_object()
            .bucket("md5")
            .key(key)
            .content_md5(md5)
            .body(ByteStream::from(data.clone()))
            .send()
    };
    assert_error(put_with(wrong.clone(), "bad").await, 400, "BadDigest");
    assert_eq!(
        failure(client.head_object().bucket("md5").key("bad").send().await).0,
        404
    );
    // Over an existing object, a refused upload leaves the old content.
    assert_error(put_with(wrong, "good").await, 400, "BadDigest");
    assert_same_bytes(
        &get(&client, "md5", "good").await,
        &data,
        "after refused PUT",
    );
    assert_error(
        put_with("not base64!".into(), "bad").await,
        400,
        "InvalidDigest",
    );
}

#[tokio::test]
async fn content_encoding_survives_aws_chunked_upload() {
    // A streaming body goes aws-chunked: the SDK adds `aws-chunked` to Content-Encoding,
    // and the server must store only the user's encoding.
    let (_server, client) = server_with_bucket("chunked-enc").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("body");
    let data = random_bytes(200_000, 5);
    std::fs::write(&path, &data).unwrap();
    client
        .put_object()
        .bucket("chunked-enc")
        .key("obj")
        .content_encoding("gzip")
        .content_type("application/x-tar")
        .body(ByteStream::from_path(&path).await.unwrap())
        .send()
        .await
        .unwrap();
    let head = client
        .head_object()
        .bucket("chunked-enc")
        .key("obj")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_encoding(), Some("gzip"));
    assert_eq!(head.content_type(), Some("application/x-tar"));
    assert_eq!(head.content_length(), Some(data.len() as i64));
    assert_same_bytes(
        &get(&client, "chunked-enc", "obj").await,
        &data,
        "chunked body",
    );
}
