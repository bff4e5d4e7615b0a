//! A body that counts the data bytes that pass through it, for the S3
//! endpoint's bytes-in and bytes-out metrics. Size hints and the end of
//! stream are passed through unchanged, so wrapping a body changes nothing
//! that hyper or s3s decide from them (Content-Length, `100-continue`).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;

/// Where the counted bytes go.
pub(crate) enum Tally {
    /// A request's own total, attributed to its operation once known.
    Request(Arc<AtomicU64>),
    /// A response's operation counter, known when the body starts.
    Counter(Counter),
}

impl Tally {
    fn add(&self, n: u64) {
        match self {
            Tally::Request(a) => {
                a.fetch_add(n, Ordering::Relaxed);
            }
            Tally::Counter(c) => {
                c.inc_by(n);
            }
        }
    }
}

/// `inner`, with every data frame's length added to a [`Tally`].
pub(crate) struct Counted<B> {
    inner: B,
    tally: Tally,
}

impl<B> Counted<B> {
    pub(crate) fn new(inner: B, tally: Tally) -> Self {
        Counted { inner, tally }
    }
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r
            && let Some(d) = f.data_ref()
        {
            self.tally.add(d.len() as u64);
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
