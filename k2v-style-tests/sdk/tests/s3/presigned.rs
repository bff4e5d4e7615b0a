//! Presigned URLs: GET and PUT through a plain HTTP client, expiry and tampering.

use std::time::Duration;

use aws_sdk_s3::presigning::{PresignedRequest, PresigningConfig};
use hangar_sdk_tests::{RawResponse, random_bytes, raw_request};

use crate::{assert_same_bytes, get, put, server_with_bucket};

async fn send(request: &PresignedRequest, url: &str, body: Vec<u8>) -> RawResponse {
    let headers: Vec<(&str, &str)> = request.headers().collect();
    raw_request(request.method(), url, &headers, body).await
}

fn minutes(n: u64) -> PresigningConfig {
    PresigningConfig::expires_in(Duration::from_secs(60 * n)).unwrap()
}

#[tokio::test]
async fn presigned_get_and_put() {
    let (_server, client) = server_with_bucket("presign").await;
    let data = random_bytes(1024 * 1024 + 1, 1);
    put(&client, "presign", "obj", &data).await;
    let request = client
        .get_object()
        .bucket("presign")
        .key("obj")
        .presigned(minutes(5))
        .await
        .unwrap();
    let response = send(&request, request.uri(), Vec::new()).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_same_bytes(&response.body, &data, "presigned GET");

    let upload = random_bytes(300_000, 2);
    let request = client
        .put_object()
        .bucket("presign")
        .key("uploaded")
        .presigned(minutes(5))
        .await
        .unwrap();
    let response = send(&request, request.uri(), upload.clone()).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_same_bytes(
        &get(&client, "presign", "uploaded").await,
        &upload,
        "presigned PUT",
    );
}

#[tokio::test]
async fn expired_and_tampered_urls_are_refused() {
    let (_server, client) = server_with_bucket("presign-bad").await;
    put(&client, "presign-bad", "obj", b"secret").await;
    let request = client
        .get_object()
        .bucket("presign-bad")
        .key("obj")
        .presigned(minutes(5))
        .await
        .unwrap();
    // Another key with the same signature.
    let other_key = request.uri().replace("/obj?", "/obk?");
    let response = send(&request, &other_key, Vec::new()).await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert!(
        response
            .text()
            .contains("<Code>SignatureDoesNotMatch</Code>"),
        "{}",
        response.text()
    );
    // A longer expiry than was signed.
    let longer = request
        .uri()
        .replace("X-Amz-Expires=300", "X-Amz-Expires=600");
    assert_ne!(longer, request.uri());
    let response = send(&request, &longer, Vec::new()).await;
    assert_eq!(response.status, 403, "{}", response.text());

    let request = client
        .get_object()
        .bucket("presign-bad")
        .key("obj")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(1)).unwrap())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let response = send(&request, request.uri(), Vec::new()).await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert!(
        response.text().contains("<Code>AccessDenied</Code>"),
        "{}",
        response.text()
    );
}
