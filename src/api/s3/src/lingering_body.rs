//! Lingering close for uploads answered before their body ended.
//!
//! A PUT refused part way (`503 SlowDown` when the RAM budget is full, a
//! lost write quorum, a bad checksum) is answered while the client is still
//! sending. If the server then stops reading, the connection is closed with
//! unread data in it: the client's kernel gets a reset, and a client that
//! sends its whole body before reading (no `Expect: 100-continue`: the AWS
//! Rust SDK, most HTTP libraries) sees "connection reset" or "broken pipe"
//! instead of the answer, and cannot honour the retry hint. So the rest of
//! such a body is read and thrown away in the background — at most
//! [`DRAIN_MAX_BYTES`] and [`DRAIN_MAX_TIME`], so a refused request costs
//! no memory and a bounded time — after which the connection serves the
//! client's next request. A body longer than that is cut off as before.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// The most of a refused body that is read to keep its connection.
pub const DRAIN_MAX_BYTES: u64 = 16 << 20;
/// The longest time spent reading it.
pub const DRAIN_MAX_TIME: Duration = Duration::from_secs(5);

type Chunks<E> = Pin<Box<dyn Stream<Item = Result<Bytes, E>> + Send>>;

/// A request body that, dropped before its end, is drained in the
/// background (see the module documentation).
pub struct LingeringBody<E: Send + 'static> {
    chunks: Option<Chunks<E>>,
    /// The body's declared length, when known.
    declared: Option<u64>,
    read: u64,
    ended: bool,
}

impl<E: Send + 'static> LingeringBody<E> {
    pub fn new(chunks: Chunks<E>, declared: Option<u64>) -> Self {
        LingeringBody {
            chunks: Some(chunks),
            declared,
            read: 0,
            ended: false,
        }
    }

    /// The next chunk, as the body's own stream gives it.
    pub async fn next(&mut self) -> Option<Result<Bytes, E>> {
        let item = self.chunks.as_mut()?.next().await;
        match &item {
            Some(Ok(chunk)) => self.read += chunk.len() as u64,
            // After an error the body is of no further use.
            Some(Err(_)) | None => self.ended = true,
        }
        item
    }
}

impl<E: Send + 'static> Drop for LingeringBody<E> {
    fn drop(&mut self) {
        let Some(mut chunks) = self.chunks.take() else {
            return;
        };
        let left = self.declared.map(|d| d.saturating_sub(self.read));
        if self.ended || left == Some(0) || left.is_some_and(|l| l > DRAIN_MAX_BYTES) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let drain = async {
                let mut drained = 0u64;
                while let Some(Ok(chunk)) = chunks.next().await {
                    drained += chunk.len() as u64;
                    if drained > DRAIN_MAX_BYTES {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_MAX_TIME, drain).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn counted(chunks: u64, size: usize, pulled: Arc<AtomicU64>) -> Chunks<std::io::Error> {
        Box::pin(futures::stream::iter(0..chunks).map(move |_| {
            pulled.fetch_add(1, Ordering::SeqCst);
            Ok(Bytes::from(vec![0u8; size]))
        }))
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_body_dropped_early_is_read_to_its_end() {
        let pulled = Arc::new(AtomicU64::new(0));
        let mut body = LingeringBody::new(counted(10, 1024, pulled.clone()), Some(10 * 1024));
        body.next().await.unwrap().unwrap();
        drop(body);
        settle().await;
        assert_eq!(pulled.load(Ordering::SeqCst), 10);
    }

    #[tokio::test]
    async fn a_body_longer_than_the_bound_is_not_read() {
        let pulled = Arc::new(AtomicU64::new(0));
        let chunks = (DRAIN_MAX_BYTES >> 20) + 4;
        let mut body =
            LingeringBody::new(counted(chunks, 1 << 20, pulled.clone()), Some(chunks << 20));
        body.next().await.unwrap().unwrap();
        drop(body);
        settle().await;
        assert_eq!(pulled.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_body_of_unknown_length_is_read_up_to_the_bound() {
        let pulled = Arc::new(AtomicU64::new(0));
        let body = LingeringBody::new(counted(1000, 1 << 20, pulled.clone()), None);
        drop(body);
        settle().await;
        assert_eq!(pulled.load(Ordering::SeqCst), (DRAIN_MAX_BYTES >> 20) + 1);
    }
}
