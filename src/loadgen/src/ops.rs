//! The single measured S3 operations. Each returns the object bytes it moved, or an
//! [`OpFailure`] that says what went wrong (with the service's error code when there
//! is one) and whether the server refused the request as overloaded.

use std::time::Instant;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;

pub use crate::outcome::{FailureKind, OpFailure, Timed};
use crate::payload::ObjectSpec;

/// How PUT bodies are handed to the SDK, which decides from that how to send them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// Bytes in memory: the SDK signs the payload (its SHA-256 in
    /// `x-amz-content-sha256`) and sends the CRC32 as a header.
    InMemory,
    /// A stream of known length: the SDK sends it aws-chunked,
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, with the CRC32 in a trailer.
    Streaming,
    /// Not through the SDK's HTTP client: a presigned PUT with `Expect:
    /// 100-continue`, the body sent only after `100 Continue`, as botocore
    /// and the Java SDK send uploads ([`crate::expect`]).
    ExpectContinue,
}

/// Uploads `spec`'s body. The body is generated before the clock starts.
pub async fn put(client: &Client, bucket: &str, spec: &ObjectSpec, kind: BodyKind) -> Timed {
    let body = match kind {
        BodyKind::InMemory => ByteStream::from(spec.body()),
        BodyKind::Streaming => ByteStream::from_body_1_x(http_body_util::Full::new(spec.body())),
        BodyKind::ExpectContinue => return crate::expect::put(client, bucket, spec).await,
    };
    let start = Instant::now();
    let result = client
        .put_object()
        .bucket(bucket)
        .key(&spec.key)
        .body(body)
        .send()
        .await;
    let latency = start.elapsed();
    (
        latency,
        result
            .map(|_| spec.size)
            .map_err(|e| OpFailure::from_sdk(format!("PUT {}", spec.key), &e)),
    )
}

/// Downloads `spec` in full; the clock stops when the last byte has arrived, and the
/// content is then checked against the seed in the key.
pub async fn get(client: &Client, bucket: &str, spec: &ObjectSpec) -> Timed {
    let start = Instant::now();
    let body = match client
        .get_object()
        .bucket(bucket)
        .key(&spec.key)
        .send()
        .await
    {
        Ok(output) => output.body.collect().await.map(|data| data.into_bytes()),
        Err(e) => {
            let failure = OpFailure::from_sdk(format!("GET {}", spec.key), &e);
            return (start.elapsed(), Err(failure));
        }
    };
    let latency = start.elapsed();
    let result = match body {
        Ok(body) => spec
            .verify(&body)
            .map(|()| spec.size)
            .map_err(|e| OpFailure {
                kind: FailureKind::Mismatch,
                message: format!("GET content mismatch: {e}"),
                retry_after: None,
            }),
        Err(e) => Err(OpFailure::other(format!(
            "GET {} body: {}",
            spec.key,
            DisplayErrorContext(&e)
        ))),
    };
    (latency, result)
}

/// Reads `spec`'s metadata and checks the reported length. Moves no object bytes.
pub async fn stat(client: &Client, bucket: &str, spec: &ObjectSpec) -> Timed {
    let start = Instant::now();
    let result = client
        .head_object()
        .bucket(bucket)
        .key(&spec.key)
        .send()
        .await;
    let latency = start.elapsed();
    let result = match result {
        Ok(head) if head.content_length() == Some(spec.size as i64) => Ok(0),
        Ok(head) => Err(OpFailure {
            kind: FailureKind::Mismatch,
            message: format!(
                "STAT {}: content-length {:?}, expected {}",
                spec.key,
                head.content_length(),
                spec.size
            ),
            retry_after: None,
        }),
        Err(e) => Err(OpFailure::from_sdk(format!("STAT {}", spec.key), &e)),
    };
    (latency, result)
}

/// Deletes `spec`. Moves no object bytes.
pub async fn delete(client: &Client, bucket: &str, spec: &ObjectSpec) -> Timed {
    let start = Instant::now();
    let result = client
        .delete_object()
        .bucket(bucket)
        .key(&spec.key)
        .send()
        .await;
    let latency = start.elapsed();
    (
        latency,
        result
            .map(|_| 0)
            .map_err(|e| OpFailure::from_sdk(format!("DELETE {}", spec.key), &e)),
    )
}
