//! A connection that fails once it made no progress for a while: the bound
//! on a client that stops sending a body half way, or stops reading a
//! response, and holds a connection slot forever.
//!
//! Progress is any byte read or written. A long download to a client that
//! keeps reading, or a long upload from one that keeps sending, never
//! trips it; a request the server is still computing does not either,
//! because hyper does not read or write meanwhile and the timer only runs
//! while an operation is pending.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner`, failing a read or write with `TimedOut` once neither made
/// progress for `idle`.
pub struct IdleTimeout<T> {
    inner: T,
    idle: Duration,
    /// Set while a read or write is pending; reset by progress.
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl<T> IdleTimeout<T> {
    pub fn new(inner: T, idle: Duration) -> Self {
        IdleTimeout {
            inner,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            armed: false,
        }
    }

    fn progressed(&mut self) {
        self.armed = false;
    }

    /// Called when an operation is pending: arms the timer if it is not,
    /// and reports whether it expired.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            self.armed = true;
            self.timer.as_mut().reset(Instant::now() + self.idle);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }

    /// The result of a write, with the idle timer accounted for.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        match r {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.progressed();
                }
                Poll::Ready(r)
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(self.timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn timed_out(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no byte sent or received for {} s: connection closed",
                self.idle.as_secs()
            ),
        )
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.progressed();
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                if self.expired(cx) {
                    Poll::Ready(Err(self.timed_out()))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        self.after_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
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
    async fn a_silent_peer_times_out_and_a_talking_one_does_not() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = IdleTimeout::new(a, Duration::from_millis(200));
        // Bytes every 100 ms for 600 ms: never idle for 200 ms.
        let talker = tokio::spawn(async move {
            for _ in 0..6 {
                b.write_all(b"x").await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            b
        });
        let mut got = [0u8; 6];
        a.read_exact(&mut got).await.unwrap();
        let _b = talker.await.unwrap();
        // Then silence: the next read fails after about 200 ms.
        let t0 = Instant::now();
        let e = a.read(&mut [0u8; 1]).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(190) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }
}
