//! How long a peer has recently taken to answer this node's calls: the
//! measure reads use to prefer the replica that answers fastest now.
//!
//! A ping's round trip says how far a peer is, not how busy: pings are
//! answered ahead of everything else, so a node whose CPU a resync or a
//! client burst is taking keeps a small ping RTT while its answers to reads
//! slow down several times over. Each foreground call without a request
//! body (a table read, a block read's head…) is timed from its request to
//! its answer's head, the peer's queueing and handling included; a call
//! given up while still waiting (its read quorum was met by others) counts
//! for as long as it had waited, so a peer too slow to ever be waited for
//! does not keep the estimate of its better days. The estimate is an
//! exponentially weighted mean that holds for [`FRESH`]: past that, the
//! peer counts as unknown again and callers fall back on its ping RTT,
//! which sends it a read now and then and so finds it when it is fast
//! again (the way Cassandra's dynamic snitch resets its scores).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hangar_util::last_event::LastEvent;

/// How long a sample keeps the estimate valid.
pub const FRESH: Duration = Duration::from_secs(1);
/// Weight of a new sample, in 1/16: the last few calls count most.
const WEIGHT: u64 = 4;
/// How long a probe of a peer whose estimate went stale is waited for
/// before another caller may probe it again.
pub const PROBE_GAP: Duration = Duration::from_millis(250);

/// A peer's recent answer time; shared by every call to it.
#[derive(Debug, Default)]
pub struct AnswerTime {
    mean_us: AtomicU64,
    last: LastEvent,
    /// When a caller last took on probing the peer ([`AnswerTime::claim_probe`]).
    probed: LastEvent,
}

impl AnswerTime {
    /// Adds one call's time. A sample after the estimate went stale starts
    /// it afresh.
    pub fn record(&self, took: Duration) {
        // Bounded so that the weighted sum below cannot overflow.
        let s = took.as_micros().min(u128::from(u64::MAX / 16)) as u64;
        let fresh = self.last.within(FRESH);
        // Concurrent samples may overwrite each other: one lost sample
        // changes a mean of many nothing that matters.
        let old = self.mean_us.load(Ordering::Relaxed);
        let new = if fresh {
            (old * (16 - WEIGHT) + s * WEIGHT) / 16
        } else {
            s
        };
        self.mean_us.store(new, Ordering::Relaxed);
        self.last.record();
    }

    /// The recent mean, if a call ended within [`FRESH`].
    pub fn recent(&self) -> Option<Duration> {
        self.last
            .within(FRESH)
            .then(|| Duration::from_micros(self.mean_us.load(Ordering::Relaxed)))
    }

    /// Whether the caller is the one to probe the peer now: its estimate is
    /// stale and no other caller took that on within [`PROBE_GAP`]. So a
    /// stale peer gets one probe, not one per read until the first answers.
    pub fn claim_probe(&self) -> bool {
        self.recent().is_none() && self.probed.claim(PROBE_GAP)
    }
}

/// Times one call: records when it is answered, or when it is dropped
/// still waiting (given up, or past its deadline); a call that failed
/// otherwise (a lost connection, a refusal) says nothing of the peer's
/// speed and is [`CallTimer::forget`]-ten.
pub(crate) struct CallTimer<'a> {
    to: Option<&'a AnswerTime>,
    started: Instant,
}

impl<'a> CallTimer<'a> {
    /// Starts timing a call; `None` times nothing (a call whose answer
    /// time says little: background, control, or with a request body).
    pub(crate) fn start(to: Option<&'a AnswerTime>) -> Self {
        CallTimer {
            to,
            started: Instant::now(),
        }
    }

    /// The answer's head arrived: records the time.
    pub(crate) fn answered(mut self) {
        if let Some(t) = self.to.take() {
            t.record(self.started.elapsed());
        }
    }

    /// The call failed for a reason that is not slowness.
    pub(crate) fn forget(mut self) {
        self.to = None;
    }
}

impl Drop for CallTimer<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.to.take() {
            t.record(self.started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_follows_recent_calls_and_goes_stale() {
        let t = AnswerTime::default();
        assert_eq!(t.recent(), None, "never called");
        t.record(Duration::from_millis(8));
        assert_eq!(t.recent(), Some(Duration::from_millis(8)));
        t.record(Duration::from_millis(0));
        assert_eq!(
            t.recent(),
            Some(Duration::from_millis(6)),
            "a quarter of the new sample"
        );
        for _ in 0..40 {
            t.record(Duration::from_micros(400));
        }
        let m = t.recent().unwrap();
        assert!(m < Duration::from_micros(420), "{m:?}");
        std::thread::sleep(FRESH + Duration::from_millis(50));
        assert_eq!(t.recent(), None, "stale: the peer counts as unknown");
        t.record(Duration::from_millis(3));
        assert_eq!(t.recent(), Some(Duration::from_millis(3)), "a fresh start");
    }

    #[test]
    fn a_stale_peer_is_probed_once_per_gap() {
        let t = AnswerTime::default();
        assert!(t.claim_probe(), "never called: probe it");
        assert!(!t.claim_probe(), "a probe is under way");
        t.record(Duration::from_millis(30));
        std::thread::sleep(PROBE_GAP + Duration::from_millis(20));
        assert!(!t.claim_probe(), "fresh: nothing to probe");
        std::thread::sleep(FRESH);
        assert!(t.claim_probe(), "stale again");
    }

    #[test]
    fn a_timer_records_an_answer_and_a_call_given_up_but_not_a_failure() {
        let t = AnswerTime::default();
        CallTimer::start(Some(&t)).forget();
        assert_eq!(t.recent(), None, "a failure is no sample");
        let timer = CallTimer::start(Some(&t));
        std::thread::sleep(Duration::from_millis(5));
        drop(timer);
        let given_up = t.recent().expect("a call given up counts");
        assert!(given_up >= Duration::from_millis(5), "{given_up:?}");
        CallTimer::start(Some(&t)).answered();
        assert!(t.recent().unwrap() < given_up, "a quick answer lowers it");
        CallTimer::start(None).answered();
    }
}
