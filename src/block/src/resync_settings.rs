//! The resync settings of a node: its worker's (window, rate,
//! tranquility) and its own as a source (how long a block asked for by
//! another node waits for this node's clients to go quiet). Every field
//! may change while the node runs (`hangar worker set`).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use hangar_util::foreground::Foreground;

/// Largest window accepted, and where the `auto` window stops.
pub const MAX_CHUNKS_IN_FLIGHT: usize = hangar_util::config::MAX_RESYNC_CHUNKS_IN_FLIGHT;
/// The longest a source may hold a resync block back for its clients: a
/// peer's call must not wait anywhere near the RPC timeout.
pub const MAX_YIELD_MSEC: u64 = 1000;
/// The worker's settings, and those of this node as a resync source;
/// every field may change while it runs.
#[derive(Debug)]
pub struct ResyncSettings {
    /// A fixed window, or 0 for `auto` (`resync_window.rs`).
    chunks_in_flight: AtomicUsize,
    max_bytes_per_sec: AtomicU64,
    tranquility: AtomicU32,
    yield_msec: AtomicU64,
    /// Whether this node's clients are being served now.
    foreground: Foreground,
}

impl ResyncSettings {
    /// `chunks_in_flight` 0 is `auto`.
    pub fn new(chunks_in_flight: usize, max_bytes_per_sec: u64, tranquility: u32) -> Self {
        ResyncSettings {
            chunks_in_flight: AtomicUsize::new(chunks_in_flight.min(MAX_CHUNKS_IN_FLIGHT)),
            max_bytes_per_sec: AtomicU64::new(max_bytes_per_sec),
            tranquility: AtomicU32::new(tranquility),
            yield_msec: AtomicU64::new(0),
            foreground: Foreground::default(),
        }
    }

    /// As a source, a block asked for by another node's resync waits up to
    /// `msec` for this node's clients to go quiet before it is read and
    /// sent (0: never waits), as `foreground` tells.
    pub fn yielding_to(self, foreground: Foreground, msec: u64) -> Self {
        self.yield_msec.store(msec, Ordering::Relaxed);
        ResyncSettings { foreground, ..self }
    }

    /// How long a source's block waits at most for its clients to go quiet.
    pub fn yield_max(&self) -> Duration {
        Duration::from_millis(self.yield_msec.load(Ordering::Relaxed))
    }

    /// Whether this node's clients are being served now.
    pub fn foreground_busy(&self) -> bool {
        self.foreground.busy()
    }

    /// The window set by the operator; `None` when it is `auto`.
    pub fn fixed_window(&self) -> Option<usize> {
        match self.chunks_in_flight.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    pub fn max_bytes_per_sec(&self) -> u64 {
        self.max_bytes_per_sec.load(Ordering::Relaxed)
    }

    pub fn tranquility(&self) -> u32 {
        self.tranquility.load(Ordering::Relaxed)
    }

    /// Changes one setting by its name (`resync-chunks-in-flight`,
    /// `resync-max-bytes-per-sec`, `resync-tranquility`); returns the value
    /// now in force, or why it was refused.
    pub fn set(&self, name: &str, value: &str) -> std::result::Result<String, String> {
        if name == "resync-chunks-in-flight" && value.trim() == "auto" {
            self.chunks_in_flight.store(0, Ordering::Relaxed);
            return Ok("auto".into());
        }
        let n: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{name}: `{value}` is not a whole number"))?;
        match name {
            "resync-chunks-in-flight" => {
                if n == 0 || n > MAX_CHUNKS_IN_FLIGHT as u64 {
                    return Err(format!(
                        "{name} must be `auto` or between 1 and {MAX_CHUNKS_IN_FLIGHT}"
                    ));
                }
                self.chunks_in_flight.store(n as usize, Ordering::Relaxed);
            }
            "resync-max-bytes-per-sec" => self.max_bytes_per_sec.store(n, Ordering::Relaxed),
            "resync-tranquility" => {
                let t = u32::try_from(n).map_err(|_| format!("{name}: {n} is too large"))?;
                self.tranquility.store(t, Ordering::Relaxed);
            }
            "resync-yield-msec" => {
                if n > MAX_YIELD_MSEC {
                    return Err(format!("{name} must be at most {MAX_YIELD_MSEC}"));
                }
                self.yield_msec.store(n, Ordering::Relaxed);
            }
            _ => {
                return Err(format!(
                    "no setting {name}: resync-chunks-in-flight, resync-max-bytes-per-sec, resync-tranquility, resync-yield-msec or scrub-tranquility"
                ));
            }
        }
        Ok(n.to_string())
    }

    /// Every setting, by name.
    pub fn list(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "resync-chunks-in-flight",
                self.fixed_window()
                    .map_or_else(|| "auto".to_string(), |n| n.to_string()),
            ),
            (
                "resync-max-bytes-per-sec",
                self.max_bytes_per_sec().to_string(),
            ),
            ("resync-tranquility", self.tranquility().to_string()),
            (
                "resync-yield-msec",
                self.yield_msec.load(Ordering::Relaxed).to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_auto_or_a_number_from_1_to_64() {
        let s = ResyncSettings::new(0, 0, 0);
        assert_eq!(s.fixed_window(), None);
        assert_eq!(s.set("resync-chunks-in-flight", "8"), Ok("8".into()));
        assert_eq!(s.fixed_window(), Some(8));
        assert_eq!(s.list()[0], ("resync-chunks-in-flight", "8".to_string()));
        assert_eq!(s.set("resync-chunks-in-flight", "auto"), Ok("auto".into()));
        assert_eq!(s.fixed_window(), None);
        assert_eq!(s.list()[0], ("resync-chunks-in-flight", "auto".to_string()));
        for bad in ["0", "65", "fast"] {
            assert!(s.set("resync-chunks-in-flight", bad).is_err(), "{bad}");
        }
        assert_eq!(s.fixed_window(), None);
        assert_eq!(
            ResyncSettings::new(100, 0, 0).fixed_window(),
            Some(MAX_CHUNKS_IN_FLIGHT)
        );
    }
}
