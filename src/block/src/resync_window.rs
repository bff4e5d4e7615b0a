//! The resync worker's window when `resync_chunks_in_flight` is `auto`
//! (the default): as many transfers in flight as keep the path full, found
//! from what the transfers themselves take (doc/block-files.md, "The
//! window").
//!
//! A fetch costs a round trip plus the block's time on the link, so a path
//! with a bandwidth-delay product of B bytes needs about B / block size
//! transfers in flight: 2–3 on a LAN, 10 or more at 80 ms and 1 Gbit/s.
//! Neither the rate nor the product is known in advance, so the window
//! measures it, as TCP Vegas does with packets: each round (as many
//! completions as the window) compares the transfers' mean time with the
//! least round mean seen lately. `window × least / mean` is the part of
//! the window the path carries without queueing (the product, in
//! transfers); the window
//! becomes twice that, moving at most ×2 or ÷2 a round. So it doubles while
//! transfers take no longer than the least, and settles where they take
//! twice the least: half the window waits, which keeps the path full
//! through a lost packet's resend or a source's pause, and bounds what
//! queues behind the link, a source's disk or CPU, or this node's. It
//! starts at the least, so that the least time it measures is that of
//! transfers that did not queue. A source that refuses a transfer (its
//! bound of transfers served is full), or a transfer that fails, halves
//! the window at once, once per round.

use std::time::Duration;

use tokio::time::Instant;

/// The window never goes below this: one transfer's round trip is idle
/// time that a second one fills (the seed's lesson).
pub const AUTO_MIN: usize = 2;
/// The window is this many times what the path carries unqueued.
const HEADROOM: f64 = 2.0;
/// The least time is the least of the last one or two of these periods, so
/// that it follows a path that became slower (a source changed, the
/// network got longer).
const MIN_PERIOD: Duration = Duration::from_secs(10);

/// The least of recent values: two periods, the current and the last.
#[derive(Debug)]
struct RecentMin {
    since: Instant,
    current: Option<Duration>,
    last: Option<Duration>,
}

impl RecentMin {
    fn add(&mut self, now: Instant, v: Duration) {
        if now.duration_since(self.since) >= MIN_PERIOD {
            self.last = self.current.take();
            self.since = now;
        }
        self.current = Some(self.current.map_or(v, |c| c.min(v)));
    }

    fn get(&self) -> Option<Duration> {
        match (self.current, self.last) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The adaptive window (see the module's comment).
#[derive(Debug)]
pub struct AutoWindow {
    now: usize,
    max: usize,
    least: RecentMin,
    round_done: usize,
    round_time: Duration,
    /// The window was halved since the current round began: the
    /// transfers that were in flight then report the same cause.
    backed_off: bool,
}

impl AutoWindow {
    /// A window between [`AUTO_MIN`] and `max`, starting at [`AUTO_MIN`].
    pub fn new(now: Instant, max: usize) -> AutoWindow {
        let max = max.max(AUTO_MIN);
        AutoWindow {
            now: AUTO_MIN,
            max,
            least: RecentMin {
                since: now,
                current: None,
                last: None,
            },
            round_done: 0,
            round_time: Duration::ZERO,
            backed_off: false,
        }
    }

    pub fn current(&self) -> usize {
        self.now
    }

    /// A transfer completed at `now` after `took`.
    pub fn completed(&mut self, now: Instant, took: Duration) {
        self.round_done += 1;
        self.round_time += took;
        if self.round_done < self.now {
            return;
        }
        let mean = self.round_time / self.round_done as u32;
        self.round_done = 0;
        self.round_time = Duration::ZERO;
        self.backed_off = false;
        // The least of the rounds' means, not of single transfers: one that
        // found its block in a source's page cache, or a source alone,
        // says nothing about what the path carries.
        self.least.add(now, mean);
        let mean = mean.as_secs_f64();
        let Some(least) = self.least.get() else {
            return;
        };
        let w = self.now as f64;
        let target = HEADROOM * w * least.as_secs_f64() / mean.max(1e-9);
        let next = target.round().clamp((w / 2.0).floor(), w * 2.0) as usize;
        self.now = next.clamp(AUTO_MIN, self.max);
    }

    /// A source was busy or a transfer failed: half the window, at once,
    /// and a new round; once per round, since every transfer in flight
    /// when the sources filled up reports it.
    pub fn back_off(&mut self) {
        if self.backed_off {
            return;
        }
        self.backed_off = true;
        self.now = (self.now / 2).max(AUTO_MIN);
        self.round_done = 0;
        self.round_time = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A path of round trip `rtt` and `rate` bytes/s moving 1 MiB blocks
    /// from one source: with `w` in flight, each transfer takes a round
    /// trip plus its time on the link, and once the link is full, the time
    /// of the others queued ahead of it.
    fn transfer_time(w: usize, rtt: Duration, rate: f64) -> Duration {
        let on_link = (1u64 << 20) as f64 / rate;
        let bdp_blocks = (rtt.as_secs_f64() / on_link) + 1.0;
        let queued = (w as f64 - bdp_blocks).max(0.0) * on_link;
        rtt + Duration::from_secs_f64(on_link + queued)
    }

    fn settle(rtt_ms: u64, rate: f64) -> usize {
        let mut now = Instant::now();
        let mut w = AutoWindow::new(now, 64);
        for _ in 0..2000 {
            let took = transfer_time(w.current(), Duration::from_millis(rtt_ms), rate);
            now += took / w.current() as u32;
            w.completed(now, took);
        }
        w.current()
    }

    #[test]
    fn the_window_settles_near_the_bandwidth_delay_product() {
        let gbit = 125e6;
        // 1 MiB takes 8.4 ms on 1 Gbit/s: the product is rtt / 8.4 ms + 1
        // blocks, and the window settles near twice that.
        for (rtt_ms, lo, hi) in [(1, 2, 5), (20, 5, 8), (40, 9, 13), (80, 17, 23)] {
            let w = settle(rtt_ms, gbit);
            assert!(
                (lo..=hi).contains(&w),
                "{rtt_ms} ms: window {w}, not in {lo}..={hi}"
            );
        }
    }

    #[test]
    fn a_busy_source_halves_the_window_and_it_never_drops_below_two() {
        let now = Instant::now();
        let mut w = AutoWindow::new(now, 64);
        w.now = 20;
        w.back_off();
        assert_eq!(w.current(), 10);
        // The other transfers of the same round report the same busy
        // source: once per round.
        w.back_off();
        assert_eq!(w.current(), 10);
        // A new round (its mean twice the least: the window holds), then
        // a busy source again: halved again, never below the floor.
        w.least.add(now, Duration::from_millis(50));
        for _ in 0..10 {
            for _ in 0..w.current() {
                w.completed(now, Duration::from_millis(100));
            }
            w.back_off();
        }
        assert_eq!(w.current(), AUTO_MIN);
    }

    #[test]
    fn the_least_time_follows_a_path_that_got_longer() {
        let mut now = Instant::now();
        let mut w = AutoWindow::new(now, 64);
        // A fast path: the window grows.
        for _ in 0..200 {
            now += Duration::from_millis(1);
            w.completed(now, Duration::from_millis(2));
        }
        let grown = w.current();
        assert!(grown > AUTO_MIN, "{grown}");
        // Then every transfer takes 20 ms (a far source): at first it looks
        // queued and shrinks; once the old least time has aged out, the
        // window grows again.
        for _ in 0..3000 {
            now += Duration::from_millis(10);
            w.completed(now, Duration::from_millis(20));
        }
        assert!(w.current() > AUTO_MIN, "{}", w.current());
    }

    proptest! {
        /// Whatever the transfers take, the window stays within its bounds.
        #[test]
        fn the_window_stays_within_its_bounds(
            max in 1usize..80,
            events in proptest::collection::vec((0u64..500_000, any::<bool>()), 0..500),
        ) {
            let mut now = Instant::now();
            let mut w = AutoWindow::new(now, max);
            for (micros, busy) in events {
                now += Duration::from_micros(micros);
                if busy {
                    w.back_off();
                } else {
                    w.completed(now, Duration::from_micros(micros + 1));
                }
                prop_assert!(w.current() >= AUTO_MIN && w.current() <= max.max(AUTO_MIN));
            }
        }
    }
}
