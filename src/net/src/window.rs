//! Flow-control windows that follow the link (doc/rpc.md, "Flow control").
//!
//! A QUIC connection moves at most one window per round trip: the 4 MiB
//! default carries 100 MiB/s at 40 ms but only 50 MiB/s at 80 ms, where a
//! 1 Gbit/s link needs 10 MB in flight. So, as Linux's TCP receive-buffer
//! autotuning does, each connection's receive and send windows grow to
//! twice what the connection moved in its last round trip, from the
//! configured windows (the floor) up to `max_window`, and never shrink
//! while it lives (credit granted to the peer cannot be taken back). A
//! connection that moves less than its window per round trip never grows:
//! only a link kept full by its window asks for more.
//!
//! Memory: what a window lets a peer send is what this node may have to
//! hold unread, so the growth of every connection together is bounded by a
//! budget ([`WindowBudget`]); a connection returns its share when it
//! closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::NetMetrics;

/// How often a connection's traffic is measured, at least (and at most
/// once per round trip above that).
const TICK_MIN: Duration = Duration::from_millis(100);

/// The bytes of window growth every connection of a node may hold
/// together beyond its configured windows.
#[derive(Debug)]
pub(crate) struct WindowBudget {
    max: u64,
    used: AtomicU64,
}

impl WindowBudget {
    pub(crate) fn new(max: u64) -> Arc<WindowBudget> {
        Arc::new(WindowBudget {
            max,
            used: AtomicU64::new(0),
        })
    }

    /// Takes up to `want` bytes; returns how many it got.
    fn take(&self, want: u64) -> u64 {
        let mut got = 0;
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                got = want.min(self.max.saturating_sub(used));
                Some(used + got)
            });
        got
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes of growth held now.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

/// One direction's window: where it stands and how much of it is growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) floor: u64,
    pub(crate) now: u64,
}

impl Window {
    pub(crate) fn new(floor: u64) -> Window {
        Window { floor, now: floor }
    }

    /// The window after a round trip that moved `per_rtt` bytes: twice
    /// that if it is more than the window now, capped by `max` and by what
    /// `budget` still holds; `None` when it stays.
    fn grown(&self, per_rtt: u64, max: u64, budget: &WindowBudget) -> Option<u64> {
        let want = per_rtt.saturating_mul(2).min(max.max(self.floor));
        if want <= self.now {
            return None;
        }
        let got = budget.take(want - self.now);
        (got > 0).then_some(self.now + got)
    }
}

/// The bytes a round trip of `rtt` moved, from `bytes` over `elapsed`.
fn per_rtt(bytes: u64, elapsed: Duration, rtt: Duration) -> u64 {
    if elapsed.is_zero() {
        return 0;
    }
    (bytes as f64 * rtt.as_secs_f64() / elapsed.as_secs_f64()) as u64
}

/// Grows `conn`'s windows while it lives (see the module's comment), from
/// `recv_floor` / `send_floor` up to `max_window` each, within `budget`.
pub(crate) async fn follow(
    conn: quinn::Connection,
    recv_floor: u64,
    send_floor: u64,
    max_window: u64,
    budget: Arc<WindowBudget>,
    metrics: NetMetrics,
) {
    let mut recv = Window::new(recv_floor);
    let mut send = Window::new(send_floor);
    let first = conn.stats();
    let mut last = (Instant::now(), first.udp_rx.bytes, first.udp_tx.bytes);
    loop {
        let rtt = conn.rtt();
        tokio::select! {
            _ = conn.closed() => break,
            _ = tokio::time::sleep(rtt.max(TICK_MIN)) => {}
        }
        let stats = conn.stats();
        let now = Instant::now();
        let elapsed = now.duration_since(last.0);
        let rx = per_rtt(stats.udp_rx.bytes - last.1, elapsed, rtt);
        let tx = per_rtt(stats.udp_tx.bytes - last.2, elapsed, rtt);
        last = (now, stats.udp_rx.bytes, stats.udp_tx.bytes);
        if let Some(w) = recv.grown(rx, max_window, &budget)
            && let Ok(v) = quinn::VarInt::from_u64(w)
        {
            conn.set_receive_window(v);
            recv.now = w;
            tracing::debug!(remote = %conn.remote_address(), window = w, ?rtt, "receive window grown");
        }
        if let Some(w) = send.grown(tx, max_window, &budget) {
            conn.set_send_window(w);
            send.now = w;
            tracing::debug!(remote = %conn.remote_address(), window = w, ?rtt, "send window grown");
        }
        metrics.set_window_growth(budget.used());
    }
    budget.give_back((recv.now - recv.floor) + (send.now - send.floor));
    metrics.set_window_growth(budget.used());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_window_full_every_round_trip_doubles_up_to_the_cap() {
        let budget = WindowBudget::new(1 << 40);
        let mut w = Window::new(4 * MIB);
        let mut seen = vec![];
        // The link carries whatever the window allows (up to 10 MiB per
        // round trip): each round trip moves the whole window.
        for _ in 0..8 {
            let moved = w.now.min(10 * MIB);
            if let Some(n) = w.grown(moved, 32 * MIB, &budget) {
                w.now = n;
            }
            seen.push(w.now / MIB);
        }
        assert_eq!(seen, vec![8, 16, 20, 20, 20, 20, 20, 20]);
        assert_eq!(budget.used(), 16 * MIB);
    }

    #[test]
    fn a_link_that_does_not_fill_the_window_never_grows_it() {
        let budget = WindowBudget::new(1 << 40);
        let w = Window::new(4 * MIB);
        assert_eq!(w.grown(2 * MIB, 32 * MIB, &budget), None);
        assert_eq!(w.grown(0, 32 * MIB, &budget), None);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn per_rtt_scales_a_measurement_to_one_round_trip() {
        assert_eq!(
            per_rtt(
                10 * MIB,
                Duration::from_millis(100),
                Duration::from_millis(50)
            ),
            5 * MIB
        );
        assert_eq!(
            per_rtt(10 * MIB, Duration::ZERO, Duration::from_millis(50)),
            0
        );
    }

    proptest! {
        /// Whatever the traffic of many connections, the growth they hold
        /// together never passes the budget, no window passes its cap or
        /// goes below its floor, and closing every connection returns all
        /// of it.
        #[test]
        fn growth_stays_within_the_budget_and_comes_back(
            budget_mib in 0u64..64,
            traffic in proptest::collection::vec((0usize..8, 0u64..200 * MIB), 0..200),
        ) {
            let budget = WindowBudget::new(budget_mib * MIB);
            let mut wins: Vec<Window> = (0..8).map(|_| Window::new(4 * MIB)).collect();
            for (c, moved) in traffic {
                if let Some(n) = wins[c].grown(moved, 32 * MIB, &budget) {
                    prop_assert!(n > wins[c].now && n <= 32 * MIB);
                    wins[c].now = n;
                }
                let held: u64 = wins.iter().map(|w| w.now - w.floor).sum();
                prop_assert_eq!(held, budget.used());
                prop_assert!(budget.used() <= budget_mib * MIB);
            }
            for w in &wins {
                budget.give_back(w.now - w.floor);
            }
            prop_assert_eq!(budget.used(), 0);
        }
    }
}
