//! The single measured S3 operations. Each returns the object bytes it moved (the
//! objects it handled, for [`delete_batch`] and [`list`]), or an [`OpFailure`] that
//! says what went wrong (with the service's error code when there is one) and
//! whether the server refused the request as overloaded.

use std::time::Instant;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};

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

fn mismatch(message: String) -> OpFailure {
    OpFailure {
        kind: FailureKind::Mismatch,
        message,
        retry_after: None,
    }
}

/// Deletes `specs` with one DeleteObjects request, asking for the per-key
/// results, and checks that every key is reported deleted; returns how many.
pub async fn delete_batch(client: &Client, bucket: &str, specs: &[ObjectSpec]) -> Timed {
    let what = || format!("DELETE {} keys from {}", specs.len(), specs[0].key);
    let delete = specs
        .iter()
        .map(|spec| ObjectIdentifier::builder().key(&spec.key).build())
        .collect::<Result<Vec<_>, _>>()
        .and_then(|objects| Delete::builder().set_objects(Some(objects)).build());
    let delete = match delete {
        Ok(delete) => delete,
        Err(e) => {
            return (
                Default::default(),
                Err(OpFailure::other(format!("{}: {e}", what()))),
            );
        }
    };
    let start = Instant::now();
    let result = client
        .delete_objects()
        .bucket(bucket)
        .delete(delete)
        .send()
        .await;
    let latency = start.elapsed();
    let result = match result {
        Ok(out) if !out.errors().is_empty() => {
            let first = &out.errors()[0];
            Err(OpFailure::other(format!(
                "{}: {} keys not deleted, first {:?}: {:?} {:?}",
                what(),
                out.errors().len(),
                first.key(),
                first.code(),
                first.message()
            )))
        }
        Ok(out) if out.deleted().len() != specs.len() => Err(mismatch(format!(
            "{}: {} reported deleted",
            what(),
            out.deleted().len()
        ))),
        Ok(_) => Ok(specs.len() as u64),
        Err(e) => Err(OpFailure::from_sdk(what(), &e)),
    };
    (latency, result)
}

/// Lists everything under `prefix` (ListObjectsV2, every page) and checks that
/// the listing is exactly `expected` (sorted keys), each of `size` bytes;
/// returns how many keys it listed.
pub async fn list(
    client: &Client,
    bucket: &str,
    prefix: &str,
    expected: &[String],
    size: u64,
) -> Timed {
    let start = Instant::now();
    let mut listed: Vec<(String, Option<i64>)> = Vec::with_capacity(expected.len());
    let mut token = None;
    loop {
        let page = client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token.take())
            .send()
            .await;
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                let failure = OpFailure::from_sdk(format!("LIST {prefix}"), &e);
                return (start.elapsed(), Err(failure));
            }
        };
        listed.extend(
            page.contents()
                .iter()
                .map(|o| (o.key().unwrap_or_default().to_owned(), o.size())),
        );
        match page.next_continuation_token() {
            Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_owned()),
            _ => break,
        }
    }
    let latency = start.elapsed();
    let wrong_key = listed
        .iter()
        .map(|(key, _)| key)
        .zip(expected)
        .position(|(got, want)| got != want);
    let result = if let Some(at) = wrong_key {
        Err(mismatch(format!(
            "LIST {prefix}: key {at} is {:?}, expected {:?}",
            listed[at].0, expected[at]
        )))
    } else if listed.len() != expected.len() {
        Err(mismatch(format!(
            "LIST {prefix}: {} keys, expected {}",
            listed.len(),
            expected.len()
        )))
    } else if let Some((key, got)) = listed.iter().find(|(_, s)| *s != Some(size as i64)) {
        Err(mismatch(format!(
            "LIST {prefix}: {key} of size {got:?}, expected {size}"
        )))
    } else {
        Ok(listed.len() as u64)
    };
    (latency, result)
}
