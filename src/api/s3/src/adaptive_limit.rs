//! The latency-driven part of admission control: how many block buffers of
//! the S3 RAM budget requests may hold at once, adapted to how fast this
//! node's block operations finish.
//!
//! RAM alone is a poor limit on a cluster: a coordinator with room for 512
//! blocks admits 512 requests, each waits for replicas that are as loaded as
//! the coordinator, and every accepted request becomes slow (Little's law:
//! latency = requests in flight / throughput). So the budget that requests
//! may use shrinks while block operations (a store at the write quorum, a
//! read) take longer than `target`, and grows back while they do not and
//! requests are waiting for it: additive-increase, multiplicative-decrease,
//! as TCP does with a window, driven by latency instead of loss. Requests
//! past the limit queue (in a queue that shrinks with the limit) or get
//! `503 SlowDown` at once, so the accepted ones keep a bounded latency and
//! the throughput of the node stays what its disks and network can do.
//!
//! The signal is the time of block operations only, never the time a
//! request spends reading its body from the client or waiting for its
//! share: a slow client does not make the limit shrink for everyone.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the limit is reconsidered (when samples arrived).
pub const WINDOW: Duration = Duration::from_millis(100);
/// Fewest block buffers the limit leaves, so that a node always serves.
pub const MIN_BLOCKS: u32 = 8;
/// Share of a window's samples that may exceed the target before the
/// limit shrinks: the limit aims at the 90th percentile.
const OVER_TARGET_SHARE: f64 = 0.1;
/// A congested window multiplies the limit by this.
const DECREASE: f64 = 0.8;
/// A window with waiting requests and no congestion adds this share of the
/// limit (at least one block).
const INCREASE: f64 = 0.1;

/// The adaptive limit, in block buffers, between [`MIN_BLOCKS`] (or the
/// budget, if smaller) and the whole budget.
#[derive(Debug)]
pub struct AdaptiveLimit {
    target: Option<Duration>,
    min: u32,
    max: u32,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    limit: u32,
    started: Instant,
    samples: u32,
    over: u32,
    /// A request found no room within the limit during this window.
    wanted_more: bool,
}

impl AdaptiveLimit {
    /// A limit over a budget of `max` blocks aiming at block operations of
    /// at most `target` (`None`: the limit is the budget, always).
    pub fn new(max: u32, target: Option<Duration>) -> Self {
        let max = max.max(1);
        AdaptiveLimit {
            target,
            min: MIN_BLOCKS.min(max),
            max,
            state: Mutex::new(Window {
                limit: max,
                started: Instant::now(),
                samples: 0,
                over: 0,
                wanted_more: false,
            }),
        }
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.state.lock().expect("limit lock").limit
    }

    /// Notes that a request found the limit reached (a reason to grow it).
    pub fn note_wanted_more(&self) {
        self.state.lock().expect("limit lock").wanted_more = true;
    }

    /// Records one block operation that took `took`, at `now`; returns the
    /// new limit when this sample closed a window that changed it.
    pub fn record(&self, took: Duration, now: Instant) -> Option<u32> {
        let target = self.target?;
        let mut w = self.state.lock().expect("limit lock");
        w.samples += 1;
        if took > target {
            w.over += 1;
        }
        if now.duration_since(w.started) < WINDOW {
            return None;
        }
        let before = w.limit;
        if f64::from(w.over) > OVER_TARGET_SHARE * f64::from(w.samples) {
            w.limit = ((f64::from(w.limit) * DECREASE) as u32).max(self.min);
        } else if w.wanted_more {
            let step = ((f64::from(w.limit) * INCREASE) as u32).max(1);
            w.limit = w.limit.saturating_add(step).min(self.max);
        }
        w.started = now;
        w.samples = 0;
        w.over = 0;
        w.wanted_more = false;
        (w.limit != before).then_some(w.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(l: &AdaptiveLimit, took: Duration, windows: u32, now: &mut Instant) {
        for _ in 0..windows {
            for _ in 0..10 {
                l.record(took, *now);
            }
            *now += WINDOW;
            l.note_wanted_more();
            l.record(took, *now);
        }
    }

    #[test]
    fn slow_operations_shrink_the_limit_to_its_floor_and_fast_ones_grow_it_back() {
        let l = AdaptiveLimit::new(512, Some(Duration::from_millis(100)));
        let mut now = Instant::now();
        feed(&l, Duration::from_millis(300), 40, &mut now);
        assert_eq!(l.limit(), MIN_BLOCKS);
        feed(&l, Duration::from_millis(10), 80, &mut now);
        assert_eq!(l.limit(), 512);
    }

    #[test]
    fn one_slow_operation_in_a_window_of_fast_ones_is_tolerated() {
        let l = AdaptiveLimit::new(100, Some(Duration::from_millis(100)));
        let mut now = Instant::now();
        for _ in 0..19 {
            l.record(Duration::from_millis(5), now);
        }
        now += WINDOW;
        assert_eq!(l.record(Duration::from_millis(500), now), None);
        assert_eq!(l.limit(), 100);
    }

    #[test]
    fn without_waiting_requests_the_limit_does_not_grow() {
        let l = AdaptiveLimit::new(100, Some(Duration::from_millis(100)));
        let mut now = Instant::now();
        feed(&l, Duration::from_millis(300), 5, &mut now);
        let shrunk = l.limit();
        assert!(shrunk < 100);
        for _ in 0..20 {
            now += WINDOW;
            l.record(Duration::from_millis(1), now);
        }
        assert_eq!(l.limit(), shrunk);
    }

    #[test]
    fn without_a_target_the_limit_is_the_budget() {
        let l = AdaptiveLimit::new(64, None);
        let mut now = Instant::now();
        feed(&l, Duration::from_secs(10), 10, &mut now);
        assert_eq!(l.limit(), 64);
    }

    #[test]
    fn a_budget_smaller_than_the_floor_is_its_own_floor() {
        let l = AdaptiveLimit::new(3, Some(Duration::from_millis(1)));
        let mut now = Instant::now();
        feed(&l, Duration::from_secs(1), 10, &mut now);
        assert_eq!(l.limit(), 3);
    }
}
