//! Admission control: the RAM that block buffers of requests in flight may
//! use is bounded, and so is the queue of requests waiting for it. A request
//! that finds the queue full is refused with `503 SlowDown` at once; one that
//! queues but cannot get its share within a short wait is refused then.
//!
//! What is scarce is bytes, not requests: an upload that streams blocks
//! holds up to `BLOCKS_IN_FLIGHT + 1` blocks, a GET up to its read-ahead;
//! inline-sized requests need no share. The queue is bounded in the same
//! unit (blocks asked for by waiters, `s3_ram_queue_max`, by default one
//! budget's worth): a waiter then has roughly one turnover of the budget
//! ahead of it, so it is likely served within the wait, and under a storm
//! the surplus is refused in microseconds instead of after the whole wait
//! (the lesson of Elasticsearch's bounded bulk queues). The answer carries
//! `Retry-After` (seconds) and `x-amz-retry-after` (milliseconds, which the
//! newest AWS SDK retry strategies honour).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hangar_util::last_event::LastEvent;
use s3s::{S3Error, S3ErrorCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A budget of block buffers shared by all requests of a node.
#[derive(Clone, Debug)]
pub struct RamBudget {
    blocks: Arc<Semaphore>,
    capacity: u32,
    queue_capacity: u64,
    block_size: u64,
    wait: Duration,
    /// Blocks asked for by the requests waiting now.
    queued: Arc<AtomicU64>,
    rejected: Arc<AtomicU64>,
    /// Uploads refused on arrival because block puts had just failed for
    /// overload ([`RamBudget::shed`]).
    shed: Arc<AtomicU64>,
    /// When a request last asked for a share.
    last_reserve: Arc<LastEvent>,
}

/// A waiter's place in the queue, given back when it stops waiting.
struct Queued<'a> {
    queued: &'a AtomicU64,
    blocks: u64,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.blocks, Ordering::AcqRel);
    }
}

impl RamBudget {
    /// A budget of `bytes`, in units of `block_size`, with a queue of
    /// waiters that may ask for `queue_bytes` together (0: no request ever
    /// waits); a request waits at most `wait` for its share.
    pub fn new(bytes: u64, queue_bytes: u64, block_size: usize, wait: Duration) -> Self {
        let block = block_size.max(1) as u64;
        let capacity = (bytes / block).clamp(1, u32::MAX as u64) as u32;
        RamBudget {
            blocks: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            queue_capacity: queue_bytes / block,
            block_size: block_size.max(1) as u64,
            wait,
            queued: Arc::new(AtomicU64::new(0)),
            rejected: Arc::new(AtomicU64::new(0)),
            shed: Arc::new(AtomicU64::new(0)),
            last_reserve: Arc::default(),
        }
    }

    /// Reserves `blocks` block buffers, or answers SlowDown: at once when the
    /// queue of waiters is full, else when the wait runs out.
    pub async fn reserve(&self, blocks: u32) -> Result<OwnedSemaphorePermit, S3Error> {
        self.last_reserve.record();
        // A request bigger than the whole budget still runs, alone.
        let n = blocks.min(self.capacity);
        if let Ok(permit) = self.blocks.clone().try_acquire_many_owned(n) {
            return Ok(permit);
        }
        let place = Queued {
            queued: &self.queued,
            blocks: u64::from(n),
        };
        let ahead = self.queued.fetch_add(place.blocks, Ordering::AcqRel);
        if ahead + place.blocks > self.queue_capacity {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(slow_down());
        }
        let acquired =
            tokio::time::timeout(self.wait, self.blocks.clone().acquire_many_owned(n)).await;
        drop(place);
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                Err(slow_down())
            }
        }
    }

    /// Blocks asked for by the requests waiting now.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Requests refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Counts an upload refused on arrival because the node's block puts
    /// failed for overload a moment ago, and gives its answer: waiting
    /// would most likely end in the same refusal, seconds later, after
    /// taking a place among the copies in flight.
    pub fn shed(&self) -> S3Error {
        self.shed.fetch_add(1, Ordering::Relaxed);
        slow_down_because(
            "Please reduce your request rate: this node's block writes to its replicas are overloaded.",
        )
    }

    /// Uploads refused by [`RamBudget::shed`] so far.
    pub fn shed_count(&self) -> u64 {
        self.shed.load(Ordering::Relaxed)
    }

    /// Block buffers free right now.
    pub fn available(&self) -> usize {
        self.blocks.available_permits()
    }

    /// The whole budget in bytes (whole blocks).
    pub fn capacity_bytes(&self) -> u64 {
        u64::from(self.capacity) * self.block_size
    }

    /// Whether requests hold part of the budget now, or one asked for a
    /// share within the last `within`: the node is serving clients.
    pub fn active_within(&self, within: Duration) -> bool {
        self.last_reserve.within(within) || self.in_use_bytes() > 0
    }

    /// Bytes of the budget held by requests now.
    pub fn in_use_bytes(&self) -> u64 {
        let free = (self.available() as u64).min(u64::from(self.capacity));
        (u64::from(self.capacity) - free) * self.block_size
    }
}

/// S3's `503 SlowDown`, with the retry hints.
pub fn slow_down() -> S3Error {
    slow_down_because(
        "Please reduce your request rate: the node's buffers for data in flight are full.",
    )
}

/// S3's `503 SlowDown` with the retry hints and `message`.
pub fn slow_down_because(message: &str) -> S3Error {
    with_retry_hints(S3ErrorCode::SlowDown, message)
}

/// An S3 error `code` with `message` and the retry hints: `Retry-After: 1`
/// (seconds) and `x-amz-retry-after: 1000` (milliseconds).
pub fn with_retry_hints(code: S3ErrorCode, message: &str) -> S3Error {
    let mut e = S3Error::with_message(code, message.to_owned());
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
        let budget = RamBudget::new(10 << 20, 10 << 20, 1 << 20, Duration::from_millis(50));
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
        let budget = RamBudget::new(4 << 20, 4 << 20, 1 << 20, Duration::from_secs(5));
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
        let budget = RamBudget::new(2 << 20, 0, 1 << 20, Duration::from_millis(10));
        assert!(budget.reserve(100).await.is_ok());
    }

    #[tokio::test]
    async fn past_a_full_queue_requests_are_refused_at_once() {
        // A budget of 4 blocks and a queue for 4 more.
        let budget = RamBudget::new(4 << 20, 4 << 20, 1 << 20, Duration::from_secs(30));
        let held = budget.reserve(4).await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let b = budget.clone();
            waiters.push(tokio::spawn(async move { b.reserve(2).await.map(|_| ()) }));
        }
        while budget.queued() < 4 {
            tokio::task::yield_now().await;
        }
        let t = std::time::Instant::now();
        let err = budget.reserve(1).await.unwrap_err();
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "refused after {:?}, not at once",
            t.elapsed()
        );
        assert_eq!(*err.code(), S3ErrorCode::SlowDown);
        assert_eq!(budget.rejected(), 1);
        // The queued ones are served when the budget frees up, and their
        // places are given back.
        drop(held);
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        assert_eq!(budget.queued(), 0);
        assert_eq!(budget.rejected(), 1);
    }

    #[tokio::test]
    async fn a_waiter_that_times_out_gives_its_place_back() {
        let budget = RamBudget::new(2 << 20, 2 << 20, 1 << 20, Duration::from_millis(20));
        let _held = budget.reserve(2).await.unwrap();
        assert!(budget.reserve(2).await.is_err());
        assert_eq!(budget.queued(), 0);
        let t = std::time::Instant::now();
        assert!(budget.reserve(2).await.is_err());
        assert!(
            t.elapsed() >= Duration::from_millis(15),
            "refused for a full queue, which should be empty again"
        );
        assert_eq!(budget.rejected(), 2);
    }

    #[tokio::test]
    async fn the_budget_counts_as_active_while_held_and_shortly_after() {
        let budget = RamBudget::new(4 << 20, 4 << 20, 1 << 20, Duration::from_millis(20));
        let recent = Duration::from_millis(100);
        assert!(!budget.active_within(recent), "no request yet");
        let held = budget.reserve(1).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(budget.active_within(recent), "held");
        drop(held);
        assert!(
            !budget.active_within(recent),
            "released, asked for long ago"
        );
        let held = budget.reserve(1).await.unwrap();
        drop(held);
        assert!(budget.active_within(recent), "asked for just now");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(
            !budget.active_within(recent),
            "quiet for longer than `within`"
        );
    }
}
