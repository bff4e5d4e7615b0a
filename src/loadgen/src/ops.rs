//! The single measured S3 operations. Each returns the object bytes it moved, or an
//! [`OpFailure`] that says what went wrong (with the service's error code when there
//! is one) and whether the server refused the request as overloaded.

use std::fmt;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;

use crate::payload::ObjectSpec;

/// The outcome of one timed operation: its latency, and bytes moved or a failure.
pub type Timed = (Duration, Result<u64, OpFailure>);

/// What kind of failure an operation met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// `503 SlowDown`: the server refused the request as overloaded; `retry_hint` says
    /// whether it told when to retry (`Retry-After` or `x-amz-retry-after`).
    SlowDown {
        /// A retry hint header came with the refusal.
        retry_hint: bool,
    },
    /// A GET whose body was not the object's content.
    Mismatch,
    /// Anything else: another error code, a transport error, a timeout.
    Other,
}

/// A failed operation: its kind and a message naming the key and the cause.
#[derive(Debug, Clone)]
pub struct OpFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The operation, key and cause, for reports.
    pub message: String,
    /// How long the server asked the client to wait before its next request
    /// (`x-amz-retry-after` in ms, else `Retry-After` in seconds).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl OpFailure {
    fn other(message: String) -> Self {
        OpFailure {
            kind: FailureKind::Other,
            message,
            retry_after: None,
        }
    }

    /// Classifies an SDK error of operation `what`.
    fn from_sdk<E>(what: String, err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let response = err.raw_response();
        let slow_down =
            err.code() == Some("SlowDown") || response.is_some_and(|r| r.status().as_u16() == 503);
        let header = |name: &str| response.and_then(|r| r.headers().get(name));
        let number = |name: &str| header(name).and_then(|v| v.trim().parse::<u64>().ok());
        let (kind, retry_after) = if slow_down {
            let retry_hint =
                header("retry-after").is_some() || header("x-amz-retry-after").is_some();
            let retry_after = number("x-amz-retry-after")
                .map(Duration::from_millis)
                .or_else(|| number("retry-after").map(Duration::from_secs));
            (FailureKind::SlowDown { retry_hint }, retry_after)
        } else {
            (FailureKind::Other, None)
        };
        OpFailure {
            kind,
            message: format!("{what}: {}", DisplayErrorContext(err)),
            retry_after,
        }
    }
}

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
