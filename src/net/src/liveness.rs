//! Evidence that a peer is alive besides its pings.
//!
//! Two signs prove that both directions of the link work and that the
//! peer's process runs and reads what this node sends: an answer to any of
//! this node's calls (any response header: a result, an error,
//! "overloaded"; [`AnswerClock`]), and new flow-control credit from the
//! peer (QUIC `MAX_DATA` / `MAX_STREAM_DATA` frames, which it sends only
//! after its application read this node's data; [`credit_frames`]). The
//! failure detector ([`crate::ping`]) counts a ping that timed out as a
//! failure only when neither came since the ping was sent: a peer busy
//! enough to answer its pings late (they wait behind the calls' data) is
//! slow, not dead, and closing its connection would fail every call in
//! flight on it. A killed, paused or cut-off peer (either direction) shows
//! neither, so it is still declared down within the same bound.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The instant the clocks count from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Microseconds from the origin to `t`, plus one (0 means "never").
fn micros(t: Instant) -> u64 {
    t.saturating_duration_since(origin()).as_micros() as u64 + 1
}

/// The time of the newest answer from one peer; shared by every call to it.
#[derive(Debug, Default)]
pub(crate) struct AnswerClock {
    last: AtomicU64,
}

impl AnswerClock {
    /// Records an answer received now.
    pub(crate) fn record(&self) {
        self.last
            .fetch_max(micros(Instant::now()), Ordering::Relaxed);
    }

    /// Whether an answer arrived at or after `since`.
    pub(crate) fn answered_since(&self, since: Instant) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last != 0 && last >= micros(since)
    }
}

/// Flow-control credit frames received on `conn` so far: a count that
/// grows only while the peer reads this node's data.
pub(crate) fn credit_frames(conn: &quinn::Connection) -> u64 {
    let rx = conn.stats().frame_rx;
    rx.max_data + rx.max_stream_data
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_answer_counts_only_for_pings_sent_before_it() {
        let clock = AnswerClock::default();
        let before = Instant::now();
        assert!(!clock.answered_since(before), "never answered");
        std::thread::sleep(Duration::from_millis(2));
        clock.record();
        assert!(clock.answered_since(before));
        std::thread::sleep(Duration::from_millis(2));
        let after = Instant::now();
        assert!(
            !clock.answered_since(after),
            "the answer is older than this ping"
        );
        clock.record();
        assert!(clock.answered_since(after));
    }
}
