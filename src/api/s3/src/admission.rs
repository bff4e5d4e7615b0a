//! Admission control: the RAM that block buffers of requests in flight may
//! use is bounded, and a request that cannot get its share within a short
//! wait is refused with `503 SlowDown` rather than queued in memory.
//!
//! What is scarce is bytes, not requests: an upload that streams blocks
//! holds up to `BLOCKS_IN_FLIGHT + 1` blocks, a GET up to its read-ahead;
//! inline-sized requests need no share. The answer carries `Retry-After`
//! (seconds) and `x-amz-retry-after` (milliseconds, which the newest AWS
//! SDK retry strategies honour).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use s3s::{S3Error, S3ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A budget of block buffers shared by all requests of a node.
#[derive(Clone, Debug)]
pub struct RamBudget {
    blocks: Arc<Semaphore>,
    capacity: u32,
    block_size: u64,
    wait: Duration,
    rejected: Arc<AtomicU64>,
}

impl RamBudget {
    /// A budget of `bytes`, in units of `block_size`; a request waits at
    /// most `wait` for its share.
    pub fn new(bytes: u64, block_size: usize, wait: Duration) -> Self {
        let capacity = (bytes / block_size.max(1) as u64).clamp(1, u32::MAX as u64) as u32;
        RamBudget {
            blocks: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            block_size: block_size.max(1) as u64,
            wait,
            rejected: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Reserves `blocks` block buffers, or answers SlowDown.
    pub async fn reserve(&self, blocks: u32) -> Result<OwnedSemaphorePermit, S3Error> {
        // A request bigger than the whole budget still runs, alone.
        let n = blocks.min(self.capacity);
        match tokio::time::timeout(self.wait, self.blocks.clone().acquire_many_owned(n)).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                Err(slow_down())
            }
        }
    }

    /// Requests refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Block buffers free right now.
    pub fn available(&self) -> usize {
        self.blocks.available_permits()
    }

    /// The whole budget in bytes (whole blocks).
    pub fn capacity_bytes(&self) -> u64 {
        u64::from(self.capacity) * self.block_size
    }

    /// Bytes of the budget held by requests now.
    pub fn in_use_bytes(&self) -> u64 {
        let free = (self.available() as u64).min(u64::from(self.capacity));
        (u64::from(self.capacity) - free) * self.block_size
    }
}

/// S3's `503 SlowDown`, with the retry hints.
pub fn slow_down() -> S3Error {
    let mut e = S3Error::with_message(
        S3ErrorCode::SlowDown,
        "Please reduce your request rate: the node's buffers for data in flight are full.",
    );
    let mut h = http::HeaderMap::new();
    h.insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    h.insert("x-amz-retry-after", http::HeaderValue::from_static("1000"));
    e.set_headers(h);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_budget_answers_slow_down_after_the_wait_and_recovers() {
        let budget = RamBudget::new(10 << 20, 1 << 20, Duration::from_millis(50));
        let held = budget.reserve(8).await.unwrap();
        let second = budget.reserve(2).await.unwrap();
        let t = std::time::Instant::now();
        let err = budget.reserve(1).await.unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(45));
        assert_eq!(*err.code(), S3ErrorCode::SlowDown);
        assert_eq!(
            err.status_code(),
            Some(http::StatusCode::SERVICE_UNAVAILABLE)
        );
        assert_eq!(budget.rejected(), 1);
        drop(held);
        assert!(budget.reserve(5).await.is_ok());
        drop(second);
    }

    #[tokio::test]
    async fn a_waiting_request_gets_in_when_buffers_free_up() {
        let budget = RamBudget::new(4 << 20, 1 << 20, Duration::from_secs(5));
        let held = budget.reserve(4).await.unwrap();
        let b = budget.clone();
        let waiter = tokio::spawn(async move { b.reserve(3).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        waiter.await.unwrap().unwrap();
        assert_eq!(budget.rejected(), 0);
    }

    #[tokio::test]
    async fn oversized_requests_are_clamped_to_the_budget() {
        let budget = RamBudget::new(2 << 20, 1 << 20, Duration::from_millis(10));
        assert!(budget.reserve(100).await.is_ok());
    }
}
