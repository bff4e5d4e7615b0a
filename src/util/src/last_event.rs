//! When something last happened, readable and writable from any thread
//! without a lock: the S3 layer's last request for buffers (whether the
//! node is serving clients, `foreground`), a peer's last answer to a call
//! (the failure detector's evidence besides pings).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The instant every [`LastEvent`] counts from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Microseconds from the origin to `t`, plus one (0 means "never").
fn micros(t: Instant) -> u64 {
    t.saturating_duration_since(origin()).as_micros() as u64 + 1
}

/// The time of the newest [`LastEvent::record`]; never goes back.
#[derive(Debug, Default)]
pub struct LastEvent {
    at: AtomicU64,
}

impl LastEvent {
    /// Records that the event happened now.
    pub fn record(&self) {
        self.at.fetch_max(micros(Instant::now()), Ordering::Relaxed);
    }

    /// Whether it happened at or after `since`.
    pub fn at_or_after(&self, since: Instant) -> bool {
        let at = self.at.load(Ordering::Relaxed);
        at != 0 && at >= micros(since)
    }

    /// Whether it happened within the last `window`.
    pub fn within(&self, window: Duration) -> bool {
        let now = Instant::now();
        self.at_or_after(now.checked_sub(window).unwrap_or(origin()))
    }

    /// Records the event now unless it happened within the last `window`,
    /// and says whether this call recorded it: of callers trying at once,
    /// one wins.
    pub fn claim(&self, window: Duration) -> bool {
        let now = micros(Instant::now());
        let window = window.as_micros() as u64;
        let mut at = self.at.load(Ordering::Relaxed);
        loop {
            if at != 0 && at.saturating_add(window) >= now {
                return false;
            }
            match self
                .at
                .compare_exchange_weak(at, now, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(seen) => at = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_counts_from_when_it_was_recorded() {
        let event = LastEvent::default();
        let before = Instant::now();
        assert!(!event.at_or_after(before), "never happened");
        assert!(!event.within(Duration::from_secs(3600)), "never happened");
        std::thread::sleep(Duration::from_millis(2));
        event.record();
        assert!(event.at_or_after(before));
        assert!(event.within(Duration::from_millis(100)));
        std::thread::sleep(Duration::from_millis(120));
        assert!(
            !event.within(Duration::from_millis(100)),
            "older than the window"
        );
        let after = Instant::now();
        assert!(!event.at_or_after(after), "older than `after`");
        event.record();
        assert!(event.at_or_after(after));
    }

    #[test]
    fn one_claim_wins_per_window() {
        let event = LastEvent::default();
        assert!(event.claim(Duration::from_millis(50)), "never happened");
        assert!(!event.claim(Duration::from_millis(50)), "just claimed");
        assert!(
            event.within(Duration::from_millis(50)),
            "a claim records it"
        );
        std::thread::sleep(Duration::from_millis(60));
        assert!(event.claim(Duration::from_millis(50)), "the window passed");
        let event = std::sync::Arc::new(LastEvent::default());
        let won: usize = (0..8)
            .map(|_| {
                let e = event.clone();
                std::thread::spawn(move || e.claim(Duration::from_secs(60)))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(won, 1, "of eight at once, one claim wins");
    }
}
