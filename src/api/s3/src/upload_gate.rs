//! Admission of uploads by the wait their blocks would have (Little's law
//! on the node's queue of block writes).
//!
//! Without it a node accepts every upload that finds RAM for its blocks,
//! and under a storm each block waits behind all the others: the accepted
//! p99 becomes clients ÷ throughput, seconds to tens of seconds
//! (doc/operations.md, "Overload, measured"). The gate estimates the wait a
//! new block would have, the bytes of blocks handed to the store and not
//! yet stored divided by the rate at which the node stores them, and
//! refuses a new upload with `503 SlowDown` and the retry hints on arrival
//! while that is more than `s3_upload_latency_target_msec`.
//!
//! Only clients that wait for `100 Continue` are refused (aws-cli, boto3,
//! the Java SDK): to them a refusal costs no body. The others send their
//! body whatever the answer, so refusing them saves nothing and costs the
//! uploads that would have gone through (measured, doc/operations.md);
//! their blocks are admitted and counted, and so hold back the former.
//!
//! What counts is work the node has been given, not work a client has
//! promised: a client that sends its body slowly has no block in the queue
//! until one is full, so it cannot hold the gate shut. An admitted upload
//! reserves one block (or its size, if smaller) until its first block
//! reaches the store, for at most [`RESERVE_FOR`]: without that, a burst
//! of uploads arriving together would all find the queue empty.
//!
//! The rate is the bytes stored per second during which blocks were
//! queued, sampled over windows of [`WINDOW`] in which blocks were queued
//! at least half the time, and smoothed. Until the first such window the
//! gate admits every upload: a node that was never busy has no measure of
//! what it can do, and a few uploads of one client are no storm. The rate
//! is measured at whatever the gate admits, so it settles where blocks wait
//! about the target: less, and the limit grows past the queue; more, and
//! it shrinks, never below a floor (`floor` bytes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use s3s::S3Error;

/// How often the rate takes a new sample.
const WINDOW: Duration = Duration::from_millis(500);
/// The weight of a new sample in the smoothed rate.
const ALPHA: f64 = 0.3;
/// How long an admitted upload's reservation lasts without a block queued:
/// long enough for a body to start arriving, short enough that a client
/// holding its body back does not hold the gate.
const RESERVE_FOR: Duration = Duration::from_secs(1);

/// The upload gate of a node; clones share it.
#[derive(Clone, Debug)]
pub struct UploadGate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Zero: the gate is off and admits every upload.
    target: Duration,
    floor: u64,
    /// The most an upload reserves.
    block_size: u64,
    state: Mutex<State>,
    refused: AtomicU64,
}

#[derive(Debug)]
struct State {
    /// Bytes of blocks handed to the store and not yet stored.
    queued: u64,
    /// Bytes reserved by admitted uploads that have no block queued yet.
    reserved: u64,
    /// Those reservations in the order they were made (so, of expiry).
    reservations: VecDeque<(Instant, u64, Arc<AtomicBool>)>,
    window_start: Instant,
    /// Time of the current window with blocks queued, up to `busy_since`.
    busy: Duration,
    /// Since when blocks have been queued without a break.
    busy_since: Option<Instant>,
    /// Bytes stored in the current window.
    done: u64,
    /// Bytes stored per busy second, smoothed; `None` until measured.
    rate: Option<f64>,
}

impl State {
    /// Ends the current window if it is over, taking its sample when blocks
    /// were queued for at least half of it.
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) < WINDOW {
            return;
        }
        let mut busy = self.busy;
        if let Some(since) = self.busy_since {
            busy += now.duration_since(since);
            self.busy_since = Some(now);
        }
        if busy >= WINDOW / 2 {
            let sample = self.done as f64 / busy.as_secs_f64();
            self.rate = Some(match self.rate {
                None => sample,
                Some(r) => r * (1.0 - ALPHA) + sample * ALPHA,
            });
        }
        self.window_start = now;
        self.busy = Duration::ZERO;
        self.done = 0;
    }

    /// Drops the reservations that were taken up, or made longer than
    /// [`RESERVE_FOR`] ago.
    fn expire(&mut self, now: Instant) {
        while let Some((at, bytes, taken)) = self.reservations.front() {
            let old = now.duration_since(*at) > RESERVE_FOR;
            if !old && !taken.load(Ordering::Acquire) {
                break;
            }
            if !taken.swap(true, Ordering::AcqRel) {
                self.reserved = self.reserved.saturating_sub(*bytes);
            }
            self.reservations.pop_front();
        }
    }

    /// Queued bytes past which an upload may be refused; `None` until the
    /// rate is measured.
    fn limit(&self, target: Duration, floor: u64) -> Option<u64> {
        let by_rate = self.rate? * target.as_secs_f64();
        Some((by_rate as u64).max(floor))
    }

    fn start_busy(&mut self, now: Instant) {
        if self.busy_since.is_none() {
            self.busy_since = Some(now);
        }
    }
}

/// An admitted upload; its blocks go through [`Admission::block`].
#[derive(Debug)]
pub struct Admission {
    gate: Arc<Inner>,
    bytes: u64,
    /// Whether the reservation was given back (by the first block, by
    /// expiry, or by the drop).
    taken: Arc<AtomicBool>,
}

impl Admission {
    /// Counts a block of `bytes` handed to the store until the returned
    /// ticket is [finished](BlockTicket::finish) or dropped; the first one
    /// takes up the upload's reservation.
    pub fn block(&self, bytes: u64) -> BlockTicket {
        self.block_at(bytes, Instant::now())
    }

    fn block_at(&self, bytes: u64, now: Instant) -> BlockTicket {
        let mut s = self.gate.state();
        s.roll(now);
        self.give_back(&mut s);
        s.queued = s.queued.saturating_add(bytes);
        s.start_busy(now);
        BlockTicket {
            gate: self.gate.clone(),
            bytes,
            stored: false,
        }
    }

    fn give_back(&self, s: &mut State) {
        if !self.taken.swap(true, Ordering::AcqRel) {
            s.reserved = s.reserved.saturating_sub(self.bytes);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.taken.load(Ordering::Acquire) {
            let mut s = self.gate.state();
            self.give_back(&mut s);
        }
    }
}

/// A block in the store's queue, counted until dropped.
#[derive(Debug)]
pub struct BlockTicket {
    gate: Arc<Inner>,
    bytes: u64,
    stored: bool,
}

impl BlockTicket {
    /// Records whether the block was stored: only stored bytes count
    /// towards the rate, so time spent on failed writes lowers it.
    pub fn finish(mut self, stored: bool) {
        self.stored = stored;
    }
}

impl Drop for BlockTicket {
    fn drop(&mut self) {
        let done = if self.stored { self.bytes } else { 0 };
        self.gate.finish(self.bytes, done, Instant::now());
    }
}

impl UploadGate {
    /// A gate that admits uploads while a new block would wait less than
    /// `target` (zero: always), always while `floor` bytes or fewer are
    /// queued, and always until the node was first busy; an upload
    /// reserves at most `block_size`.
    pub fn new(target: Duration, floor: u64, block_size: u64) -> Self {
        UploadGate {
            inner: Arc::new(Inner {
                target,
                floor,
                block_size,
                state: Mutex::new(State {
                    queued: 0,
                    reserved: 0,
                    reservations: VecDeque::new(),
                    window_start: Instant::now(),
                    busy: Duration::ZERO,
                    busy_since: None,
                    done: 0,
                    rate: None,
                }),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Admits an upload of `bytes` (unknown: `None`), or, if `may_refuse`
    /// and a new block would wait longer than the target, answers
    /// `503 SlowDown`.
    pub fn admit(&self, bytes: Option<u64>, may_refuse: bool) -> Result<Admission, S3Error> {
        self.admit_at(bytes, may_refuse, Instant::now())
    }

    fn admit_at(
        &self,
        bytes: Option<u64>,
        may_refuse: bool,
        now: Instant,
    ) -> Result<Admission, S3Error> {
        let inner = &self.inner;
        let reserve = bytes.map_or(inner.block_size, |b| b.min(inner.block_size));
        let taken = Arc::new(AtomicBool::new(inner.target.is_zero()));
        let mut s = inner.state();
        if !inner.target.is_zero() {
            s.roll(now);
            s.expire(now);
            let ahead = s.queued.saturating_add(s.reserved).saturating_add(reserve);
            if may_refuse
                && s.limit(inner.target, inner.floor)
                    .is_some_and(|l| ahead > l)
            {
                drop(s);
                inner.refused.fetch_add(1, Ordering::Relaxed);
                return Err(crate::admission::slow_down_because(
                    "Please reduce your request rate: a new upload's blocks would wait on this node longer than s3_upload_latency_target_msec.",
                ));
            }
            s.reserved = s.reserved.saturating_add(reserve);
            s.reservations.push_back((now, reserve, taken.clone()));
        }
        Ok(Admission {
            gate: inner.clone(),
            bytes: reserve,
            taken,
        })
    }

    /// Uploads refused so far.
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Bytes of blocks queued for the store now, and reserved by uploads
    /// admitted that have none queued yet.
    pub fn queued_bytes(&self) -> u64 {
        let mut s = self.inner.state();
        s.expire(Instant::now());
        s.queued.saturating_add(s.reserved)
    }

    /// Queued bytes past which an upload that may be refused is; 0 when
    /// the gate is off or has no rate yet.
    pub fn limit_bytes(&self) -> u64 {
        if self.inner.target.is_zero() {
            return 0;
        }
        let mut s = self.inner.state();
        s.roll(Instant::now());
        s.limit(self.inner.target, self.inner.floor).unwrap_or(0)
    }
}

impl Inner {
    /// The state; no code panics while holding the lock halfway through an
    /// update, so a poisoned one is taken as it is.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, bytes: u64, done: u64, now: Instant) {
        let mut s = self.state();
        s.roll(now);
        s.queued = s.queued.saturating_sub(bytes);
        s.done = s.done.saturating_add(done);
        if s.queued == 0
            && let Some(since) = s.busy_since.take()
        {
            s.busy += now.duration_since(since);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn gate(target_ms: u64, floor: u64) -> UploadGate {
        UploadGate::new(Duration::from_millis(target_ms), floor, MIB)
    }

    /// Writes `blocks` blocks of 1 MiB one after another, `each` apart,
    /// starting at `now`, each stored or failed as `stored` says; returns
    /// the time after the last.
    fn write_blocks(
        g: &UploadGate,
        blocks: u32,
        each: Duration,
        mut now: Instant,
        stored: bool,
    ) -> Instant {
        for _ in 0..blocks {
            let a = g.admit_at(Some(MIB), false, now).unwrap();
            let t = a.block_at(MIB, now);
            now += each;
            let (bytes, gate) = (t.bytes, t.gate.clone());
            std::mem::forget(t);
            gate.finish(bytes, if stored { bytes } else { 0 }, now);
        }
        now
    }

    fn store_steadily(g: &UploadGate, blocks: u32, each: Duration, now: Instant) -> Instant {
        write_blocks(g, blocks, each, now, true)
    }

    /// Admits `n` uploads of `bytes` that may be refused, all of which must
    /// be admitted.
    fn admit_all(g: &UploadGate, n: u64, bytes: u64, now: Instant) -> Vec<Admission> {
        (0..n)
            .map(|_| g.admit_at(Some(bytes), true, now).unwrap())
            .collect()
    }

    /// A gate whose limit is its floor: its rate is measured, and times
    /// the 1 ms target it is far below the floor.
    fn at_the_floor(floor: u64) -> (UploadGate, Instant) {
        let g = gate(1, floor);
        let now = store_steadily(&g, 20, Duration::from_millis(50), Instant::now());
        assert_eq!(g.limit_bytes(), floor);
        (g, now)
    }

    #[test]
    fn a_node_never_busy_admits_every_upload() {
        let g = gate(1000, MIB);
        let held = admit_all(&g, 100, MIB, Instant::now());
        assert_eq!(g.limit_bytes(), 0);
        assert_eq!(g.queued_bytes(), 100 * MIB);
        // Blocks stored quickly, never half a window busy: still no measure.
        let now = store_steadily(&g, 3, Duration::from_millis(50), Instant::now());
        assert_eq!(g.limit_bytes(), 0);
        drop(held);
        assert!(g.admit_at(Some(MIB), true, now).is_ok());
    }

    #[test]
    fn reservations_fill_the_floor_then_uploads_that_wait_are_refused() {
        let (g, now) = at_the_floor(4 * MIB);
        let held = admit_all(&g, 4, 5 << 30, now);
        // Each reserved one block, whatever its size.
        assert_eq!(g.queued_bytes(), 4 * MIB);
        let err = g.admit_at(Some(MIB), true, now).unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::SlowDown);
        assert_eq!(
            err.headers().and_then(|h| h.get("retry-after")),
            Some(&http::HeaderValue::from_static("1"))
        );
        assert_eq!(g.refused(), 1);
        // A client that sends its body anyway is admitted and counted.
        let counted = g.admit_at(Some(MIB), false, now).unwrap();
        assert_eq!(g.queued_bytes(), 5 * MIB);
        drop(counted);
        drop(held);
        assert_eq!(g.queued_bytes(), 0);
        assert!(g.admit_at(Some(MIB), true, now).is_ok());
    }

    #[test]
    fn a_slow_client_holds_its_reservation_for_a_second_only() {
        let (g, now) = at_the_floor(MIB);
        let slow = g.admit_at(Some(100 * MIB), true, now).unwrap();
        assert!(g.admit_at(Some(MIB), true, now).is_err());
        // No block of it was queued within the target: the gate reopens.
        let later = now + Duration::from_millis(1001);
        let next = g
            .admit_at(Some(MIB), true, later)
            .expect("reservation expired");
        drop((slow, next));
        assert_eq!(g.queued_bytes(), 0);
    }

    #[test]
    fn the_first_block_takes_up_the_reservation() {
        let g = gate(1000, 10 * MIB);
        let a = g.admit(Some(3 * MIB), true).unwrap();
        assert_eq!(g.queued_bytes(), MIB);
        let b1 = a.block(MIB);
        let b2 = a.block(MIB);
        assert_eq!(g.queued_bytes(), 2 * MIB);
        b1.finish(true);
        drop(a);
        assert_eq!(g.queued_bytes(), MIB);
        b2.finish(false);
        assert_eq!(g.queued_bytes(), 0);
    }

    #[test]
    fn the_limit_follows_the_rate_at_which_blocks_are_stored() {
        let g = gate(2000, MIB);
        // 1 MiB stored every 50 ms with blocks always queued: 20 MiB/s, so
        // 40 MiB may wait within the 2 s target.
        let now = store_steadily(&g, 200, Duration::from_millis(50), Instant::now());
        let limit = g.limit_bytes();
        assert!((38 * MIB..=42 * MIB).contains(&limit), "{limit}");
        let held = admit_all(&g, limit / MIB, MIB, now);
        assert!(g.admit_at(Some(MIB), true, now).is_err());
        drop(held);
    }

    #[test]
    fn idle_time_does_not_lower_the_rate_and_failed_writes_do() {
        let g = gate(1000, MIB);
        let now = store_steadily(&g, 100, Duration::from_millis(100), Instant::now());
        let measured = g.limit_bytes();
        assert!(measured > 8 * MIB, "{measured}");
        // An hour without uploads changes nothing.
        let now = store_steadily(
            &g,
            1,
            Duration::from_millis(100),
            now + Duration::from_secs(3600),
        );
        assert!(g.limit_bytes() >= measured * 9 / 10, "{}", g.limit_bytes());
        // Blocks that fail store nothing: the limit falls to the floor.
        write_blocks(&g, 40, WINDOW, now, false);
        assert_eq!(g.limit_bytes(), MIB);
    }

    #[test]
    fn an_off_gate_refuses_and_counts_nothing() {
        let g = gate(0, MIB);
        let held = admit_all(&g, 100, MIB, Instant::now());
        assert_eq!(g.limit_bytes(), 0);
        assert_eq!(g.refused(), 0);
        assert_eq!(g.queued_bytes(), 0);
        drop(held);
    }
}
