//! `Expect: 100-continue` answered as S3 answers it, so that botocore
//! (aws-cli, boto3) keeps its connections.
//!
//! hyper writes `100 Continue` when a request body is first polled, and
//! never for an empty body (`Content-Length: 0`), nor when the answer comes
//! before the body is read (an authentication error, a refusal). Answering
//! with a final status alone is legal, but botocore then keeps a stale
//! response parser on the pooled connection: the next `Expect` request on it
//! stalls until the client's read timeout (measured here: 3 s per request
//! after each empty PUT; 60 s with aws-cli's defaults) or fails and is
//! retried. S3 itself writes `100 Continue` before the final answer to an
//! empty `Expect` request, and so does Hangar, through [`ContinueIo`]: the
//! connection's stream writes the interim answer just before the final one.
//! A refused request whose body was never read still gets its connection
//! closed after the answer (`Connection: close`), which resets botocore's
//! state; so does an empty one on a connection where the interim answer
//! could not be placed safely (a client that pipelines requests).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use http::HeaderValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The interim answer, as S3 sends it.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Whether the request asks for `100 Continue`.
pub fn expects_continue<B>(req: &http::Request<B>) -> bool {
    header_expects_continue(req.headers())
}

/// Whether request headers `h` ask for `100 Continue`.
pub fn header_expects_continue(h: &http::HeaderMap) -> bool {
    h.get(http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
}

/// Whether a response to a request that expected `100 Continue` may have
/// gone out without one: its body was empty and no interim answer was
/// placed before it (`continued`), or it was refused.
pub fn needs_close(body_was_empty: bool, continued: bool, status: http::StatusCode) -> bool {
    (body_was_empty && !continued) || status.is_client_error() || status.is_server_error()
}

/// Marks `resp` so that hyper closes the connection after it.
pub fn close_after<B>(resp: &mut http::Response<B>) {
    resp.headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
}

/// What a connection's stream and its requests share.
#[derive(Debug)]
struct State {
    /// Nothing hyper handed the stream is unsent: the stream was flushed
    /// after its last write (hyper flushes the stream only once its own
    /// buffer is empty).
    flushed: bool,
    /// Requests whose answer is not wholly handed to hyper yet.
    answering: u32,
    /// `100 Continue` goes out before the next byte written.
    pending: bool,
}

/// A connection's handle for its requests: places `100 Continue` before an
/// answer, and counts the answers under way.
#[derive(Clone, Debug)]
pub struct Continuer(Arc<Mutex<State>>);

/// Held for as long as an answer is under way (dropped with its body).
#[derive(Debug)]
pub struct Answering(Continuer);

impl Drop for Answering {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.answering = s.answering.saturating_sub(1);
    }
}

impl Continuer {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().expect("continue state lock")
    }

    /// Counts a request whose answer starts now; with `wants_continue`
    /// (an empty `Expect` request), places `100 Continue` before its answer
    /// when that is safe: no earlier answer is under way or unsent, so the
    /// next bytes written are this request's answer. Returns whether it
    /// was placed.
    pub fn answer(&self, wants_continue: bool) -> (Answering, bool) {
        let mut s = self.lock();
        let placed = wants_continue && s.answering == 0 && s.flushed;
        s.pending |= placed;
        s.answering += 1;
        (Answering(self.clone()), placed)
    }
}

/// A connection's stream that writes `100 Continue` where its
/// [`Continuer`] placed one.
pub struct ContinueIo<T> {
    inner: T,
    state: Continuer,
    /// Bytes of [`CONTINUE`] still to write, once one is taken.
    interim: &'static [u8],
}

impl<T> ContinueIo<T> {
    /// `inner`, and the handle its requests use.
    pub fn new(inner: T) -> (Self, Continuer) {
        let state = Continuer(Arc::new(Mutex::new(State {
            flushed: true,
            answering: 0,
            pending: false,
        })));
        (
            ContinueIo {
                inner,
                state: state.clone(),
                interim: &[],
            },
            state,
        )
    }
}

impl<T: AsyncWrite + Unpin> ContinueIo<T> {
    /// Writes a placed `100 Continue` before anything else, and marks the
    /// stream as holding unsent bytes.
    fn poll_before_write(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        {
            let mut s = self.state.lock();
            s.flushed = false;
            if std::mem::take(&mut s.pending) {
                self.interim = CONTINUE;
            }
        }
        while !self.interim.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, self.interim))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.interim = &self.interim[n..];
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ContinueIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ContinueIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_before_write(cx))?;
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_before_write(cx))?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        if self.interim.is_empty() {
            self.state.lock().flushed = true;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn placed_continue_precedes_the_answer() {
        let (client, server) = tokio::io::duplex(1024);
        let (mut io, c) = ContinueIo::new(server);
        let (_a, placed) = c.answer(true);
        assert!(placed);
        io.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        io.flush().await.unwrap();
        drop(io);
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n");
    }

    #[tokio::test]
    async fn not_placed_while_an_earlier_answer_is_under_way_or_unsent() {
        let (_client, server) = tokio::io::duplex(1024);
        let (mut io, c) = ContinueIo::new(server);
        let (earlier, _) = c.answer(false);
        assert!(!c.answer(true).1, "an earlier answer is under way");
        drop(earlier);
        io.write_all(b"tail of an earlier answer").await.unwrap();
        assert!(!c.answer(true).1, "written but not flushed");
        io.flush().await.unwrap();
        // The second refused request's `Answering` was dropped at once.
        assert!(c.answer(true).1);
    }

    #[tokio::test]
    async fn without_expect_nothing_is_written() {
        let (client, server) = tokio::io::duplex(1024);
        let (mut io, c) = ContinueIo::new(server);
        let (_a, placed) = c.answer(false);
        assert!(!placed);
        io.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        drop(io);
        let mut got = Vec::new();
        let mut client = client;
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 200 OK\r\n\r\n");
    }

    #[test]
    fn refusals_close_and_continued_empty_answers_do_not() {
        use http::StatusCode;
        assert!(!needs_close(true, true, StatusCode::OK));
        assert!(needs_close(true, false, StatusCode::OK));
        assert!(needs_close(false, false, StatusCode::FORBIDDEN));
        assert!(needs_close(true, true, StatusCode::SERVICE_UNAVAILABLE));
        assert!(!needs_close(false, false, StatusCode::OK));
    }
}
