//! Every S3 operation in issue 2's scope, and issue 11's (versioning, object lock,
//! lifecycle, websites, SSE-C, policies and ACLs), through the AWS Rust SDK against a real
//! `hangar server` (one per test, see `hangar_sdk_tests::TestServer`).

mod access;
mod buckets;
mod checksums;
mod conditional;
mod copy;
mod delete_objects;
mod lifecycle;
mod list;
mod metadata;
mod multipart;
mod not_implemented;
mod object_lock;
mod objects;
mod permissions;
mod presigned;
mod ranges;
mod sse_c;
mod tagging_cors;
mod versioning;
mod vhost;
mod website;

use std::fmt::Debug;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::ByteStream;
use hangar_sdk_tests::TestServer;
use md5::{Digest, Md5};

/// A fresh server, a client for its test key, and an empty bucket `bucket` on it.
pub async fn server_with_bucket(bucket: &str) -> (TestServer, Client) {
    let server = TestServer::start();
    let client = server.client();
    client
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateBucket {bucket}: {e:?}"));
    (server, client)
}

/// The HTTP status and S3 error code of a request that must fail; panics if it succeeded.
#[track_caller]
pub fn failure<T: Debug, E: ProvideErrorMetadata + Debug>(
    result: Result<T, SdkError<E>>,
) -> (u16, Option<String>) {
    match result {
        Ok(output) => panic!("expected an error, got {output:?}"),
        Err(err) => {
            let status = err
                .raw_response()
                .map(|r| r.status().as_u16())
                .unwrap_or_else(|| panic!("no HTTP response: {err:?}"));
            let code = err
                .as_service_error()
                .and_then(|e| e.code())
                .map(str::to_owned);
            (status, code)
        }
    }
}

/// Asserts that a request failed with `status` and S3 error `code`.
#[track_caller]
pub fn assert_error<T: Debug, E: ProvideErrorMetadata + Debug>(
    result: Result<T, SdkError<E>>,
    status: u16,
    code: &str,
) {
    let got = failure(result);
    assert_eq!(
        got,
        (status, Some(code.to_owned())),
        "expected {status} {code}"
    );
}

/// Uploads `body` to `bucket/key`.
pub async fn put(client: &Client, bucket: &str, key: &str, body: &[u8]) {
    client
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body.to_vec()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {bucket}/{key}: {e:?}"));
}

/// Downloads `bucket/key` in full.
pub async fn get(client: &Client, bucket: &str, key: &str) -> Vec<u8> {
    let output = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetObject {bucket}/{key}: {e:?}"));
    body(output).await
}

/// The whole body of a GetObject answer.
pub async fn body(output: GetObjectOutput) -> Vec<u8> {
    output
        .body
        .collect()
        .await
        .expect("reading the body")
        .into_bytes()
        .to_vec()
}

/// S3's ETag for a single-part object: the quoted hex MD5 of its content.
pub fn etag_of(data: &[u8]) -> String {
    format!("\"{}\"", hex::encode(Md5::digest(data)))
}

/// Asserts two bodies are identical without printing megabytes on failure.
#[track_caller]
pub fn assert_same_bytes(got: &[u8], expected: &[u8], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: length");
    if let Some(at) = got.iter().zip(expected).position(|(a, b)| a != b) {
        panic!("{what}: content differs at byte {at}");
    }
}
