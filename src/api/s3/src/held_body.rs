//! Bodies that carry something along: a guard held until the body is
//! dropped ([`Held`]), and bytes already read from a body put back in
//! front of it ([`Prefixed`]). Size hints and the end of stream are passed
//! on, so wrapping a body changes nothing hyper or s3s decide from them.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// `inner`, holding `guard` until the body is dropped (for a response: once
/// it has been sent whole, or the connection closed).
pub(crate) struct Held<B, G> {
    inner: B,
    _guard: G,
}

impl<B, G> Held<B, G> {
    pub(crate) fn new(inner: B, guard: G) -> Self {
        Held {
            inner,
            _guard: guard,
        }
    }
}

impl<B, G> Body for Held<B, G>
where
    B: Body<Data = Bytes> + Unpin,
    G: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `rest`, with `prefix` (bytes already taken from it) in front.
pub(crate) struct Prefixed<B> {
    prefix: Option<Bytes>,
    rest: B,
}

impl<B> Prefixed<B> {
    pub(crate) fn new(prefix: Bytes, rest: B) -> Self {
        Prefixed {
            prefix: (!prefix.is_empty()).then_some(prefix),
            rest,
        }
    }
}

impl<B> Body for Prefixed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(p) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let extra = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let h = self.rest.size_hint();
        let mut out = SizeHint::new();
        out.set_lower(h.lower() + extra);
        if let Some(u) = h.upper() {
            out.set_upper(u + extra);
        }
        out
    }
}
