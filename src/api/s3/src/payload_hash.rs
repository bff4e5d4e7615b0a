//! A wrong `x-amz-content-sha256` on a body s3s reads whole (the XML of
//! DeleteObjects, CompleteMultipartUpload, CreateBucket…) answered as S3
//! does, `400 XAmzContentSHA256Mismatch`, instead of the `500
//! InternalError` s3s 0.14 gives it (it reports only its own size-limit
//! error by name; streamed uploads map the mismatch themselves, in
//! `ops_put::body_error`).
//!
//! For a request that announces a body hash and a length s3s may read whole
//! ([`MAX_BUFFERED_BODY`]), the body is hashed as it passes; if the
//! request then fails with a 500 and the hash was not the announced one, the
//! hash is the reason and the answer says so. Nothing else is changed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use s3s::crypto::{Checksum, Sha256};

use crate::body_limits::MAX_BUFFERED_BODY;

/// Set once the body has ended with another hash than announced.
#[derive(Clone, Default)]
pub(crate) struct Mismatch(Arc<AtomicBool>);

impl Mismatch {
    fn seen(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A body that hashes what passes and compares it at the end.
struct Hashing {
    inner: s3s::Body,
    hasher: Option<Sha256>,
    announced: [u8; 32],
    /// Bytes still to come: s3s stops reading at the announced length,
    /// without waiting for the end of the body.
    remaining: u64,
    mismatch: Mismatch,
}

impl Hashing {
    fn finish(&mut self) {
        if let Some(h) = self.hasher.take()
            && h.finalize() != self.announced
        {
            self.mismatch.0.store(true, Ordering::Relaxed);
        }
    }
}

impl Body for Hashing {
    type Data = Bytes;
    type Error = s3s::StdError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(h), Some(data)) = (this.hasher.as_mut(), frame.data_ref()) {
                    h.update(data);
                    this.remaining = this.remaining.saturating_sub(data.len() as u64);
                    if this.remaining == 0 {
                        this.finish();
                    }
                }
            }
            Poll::Ready(None) => this.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The announced SHA-256 of a body s3s may read whole, and its length
/// (known from `Content-Length`: s3s refuses a hashed body of unknown
/// length itself).
fn announced(req: &http::Request<s3s::Body>) -> Option<([u8; 32], u64)> {
    let headers = req.headers();
    let len = req.body().size_hint().exact()?;
    if len > MAX_BUFFERED_BODY {
        return None;
    }
    let hex = headers.get("x-amz-content-sha256")?.as_bytes();
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex, &mut out).ok()?;
    Some((out, len))
}

/// Hashes the request's body if it announces a hash worth checking.
pub(crate) fn watch(req: http::Request<s3s::Body>) -> (http::Request<s3s::Body>, Option<Mismatch>) {
    let Some((announced, len)) = announced(&req) else {
        return (req, None);
    };
    let mismatch = Mismatch::default();
    if len == 0 {
        // s3s may never poll an empty body: its hash is known now.
        let empty = Sha256::checksum(b"");
        mismatch.0.store(empty != announced, Ordering::Relaxed);
        return (req, Some(mismatch));
    }
    let watcher = mismatch.clone();
    let req = req.map(move |inner| {
        s3s::Body::http_body_unsync(Hashing {
            inner,
            hasher: Some(Sha256::new()),
            announced,
            remaining: len,
            mismatch: watcher,
        })
    });
    (req, Some(mismatch))
}

/// The answer to a request whose body failed its announced hash: what S3
/// says, in place of s3s's internal error.
pub(crate) fn correct(
    resp: http::Response<s3s::Body>,
    mismatch: Option<&Mismatch>,
) -> http::Response<s3s::Body> {
    if resp.status() != http::StatusCode::INTERNAL_SERVER_ERROR
        || !mismatch.is_some_and(Mismatch::seen)
    {
        return resp;
    }
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>XAmzContentSHA256Mismatch</Code>\
<Message>The provided 'x-amz-content-sha256' header does not match what was computed.</Message></Error>";
    let mut out = http::Response::new(s3s::Body::from(body.to_owned()));
    *out.status_mut() = http::StatusCode::BAD_REQUEST;
    out.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/xml"),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &'static [u8], announced: &[u8]) -> http::Request<s3s::Body> {
        http::Request::builder()
            .header("content-length", body.len().to_string())
            .header(
                "x-amz-content-sha256",
                hex::encode(Sha256::checksum(announced)),
            )
            .body(s3s::Body::from(Bytes::from_static(body)))
            .unwrap()
    }

    fn internal_error() -> http::Response<s3s::Body> {
        let mut r = http::Response::new(s3s::Body::empty());
        *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        r
    }

    /// Reads the body as far as its announced length, as s3s does.
    async fn drain(req: http::Request<s3s::Body>) {
        let mut body = req.into_body();
        let got = body.store_all_limited(1 << 20).await.unwrap();
        assert!(!got.is_empty());
    }

    #[tokio::test]
    async fn a_body_that_is_not_its_hash_turns_the_500_into_the_mismatch() {
        let (req, mismatch) = watch(request(b"<Delete/>", b"something else"));
        drain(req).await;
        let resp = correct(internal_error(), mismatch.as_ref());
        assert_eq!(resp.status(), http::StatusCode::BAD_REQUEST);
        let body = resp.into_body().store_all_limited(4096).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("XAmzContentSHA256Mismatch"));

        let (_, empty) = watch(request(b"", b"not empty"));
        let resp = correct(internal_error(), empty.as_ref());
        assert_eq!(resp.status(), http::StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn other_500s_stay_as_they_are() {
        let (req, mismatch) = watch(request(b"<Delete/>", b"<Delete/>"));
        drain(req).await;
        let resp = correct(internal_error(), mismatch.as_ref());
        assert_eq!(resp.status(), http::StatusCode::INTERNAL_SERVER_ERROR);

        let unsigned = http::Request::builder()
            .header("content-length", "9")
            .header("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
            .body(s3s::Body::from(Bytes::from_static(b"<Delete/>")))
            .unwrap();
        let (_, none) = watch(unsigned);
        assert!(none.is_none());
    }
}
