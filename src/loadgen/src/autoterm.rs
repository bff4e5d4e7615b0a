//! `--autoterm`: ends the measured phase early once its throughput is stable,
//! as warp does. Every second the phase so far (from when every worker had
//! started to when every worker had finished an operation) is cut into 25
//! segments; it is stable when each of the 6 segments before the last is within
//! `--autoterm.pct` percent of the last one, in MiB/s (objects/s when the
//! operations move no bytes), and those 7 segments together last at least
//! `--autoterm.dur`.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::timeline::Timeline;
use crate::warp_report::go_duration;

/// Segments the phase so far is cut into.
const SEGMENTS: u32 = 25;
/// Segments at the end that must agree: the last one and the 6 before it.
const STABLE_SEGMENTS: u32 = 7;

/// The stability rule's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// How long the throughput must have been stable (`--autoterm.dur`).
    pub min_stable: Duration,
    /// How far, in percent of the last segment's throughput, each earlier
    /// segment may be from it (`--autoterm.pct`).
    pub pct: f64,
}

/// What the stable throughput was measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// MiB of object data per second.
    MibPerS,
    /// Objects per second (operations that move no object data).
    ObjectsPerS,
}

/// The finding that ends a phase: its throughput and for how long it held.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// The last segment's throughput, in `unit`.
    pub rate: f64,
    /// What `rate` counts.
    pub unit: Unit,
    /// The tolerance, in percent.
    pub pct: f64,
    /// The span of the segments that agreed.
    pub stable_for: Duration,
}

impl fmt::Display for Verdict {
    /// Warp's line, e.g. `Throughput 297.5MiB/s within 7.500000% for 16.457s.
    /// Assuming stability. Terminating benchmark.`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rate = match self.unit {
            Unit::MibPerS => format!("{:.1}MiB/s", self.rate),
            Unit::ObjectsPerS => format!("{:.1} objects/s", self.rate),
        };
        write!(
            f,
            "Throughput {rate} within {:.6}% for {}. Assuming stability. Terminating benchmark.",
            self.pct,
            go_duration(self.stable_for)
        )
    }
}

/// Whether the phase whose operations `timeline` holds is stable over its
/// `active` span (offsets from the phase's start).
pub fn check(
    config: &Config,
    timeline: &Timeline,
    active: (Duration, Duration),
) -> Option<Verdict> {
    let (start, end) = active;
    let span = end.checked_sub(start)?;
    // The stable segments must be able to cover `min_stable`.
    if span <= config.min_stable * SEGMENTS / STABLE_SEGMENTS {
        return None;
    }
    let segment = span / SEGMENTS;
    let rate = |i: u32| timeline.rate(start + segment * i, start + segment * (i + 1));
    let last = rate(SEGMENTS - 1);
    let mib = last.bytes_per_s / (1024.0 * 1024.0);
    let (base, unit) = if mib > 0.0 {
        (mib, Unit::MibPerS)
    } else {
        (last.obj_per_s, Unit::ObjectsPerS)
    };
    // A phase that does nothing is stuck, not stable.
    if base <= 0.0 {
        return None;
    }
    let tolerance = config.pct / 100.0 * base;
    for i in SEGMENTS - STABLE_SEGMENTS..SEGMENTS - 1 {
        let r = rate(i);
        let value = match unit {
            Unit::MibPerS => r.bytes_per_s / (1024.0 * 1024.0),
            Unit::ObjectsPerS => r.obj_per_s,
        };
        if (value - base).abs() > tolerance {
            return None;
        }
    }
    // Warp rounds the segment to the millisecond before multiplying.
    let rounded = Duration::from_millis(((segment.as_nanos() + 500_000) / 1_000_000) as u64);
    Some(Verdict {
        rate: base,
        unit,
        pct: config.pct,
        stable_for: rounded * STABLE_SEGMENTS,
    })
}

/// When each worker started its first and ended its last operation.
#[derive(Debug, Clone, Copy)]
struct Activity {
    first_start: Duration,
    last_end: Duration,
}

#[derive(Debug, Default)]
struct LiveState {
    timeline: Timeline,
    workers: Vec<Option<Activity>>,
}

/// The phase so far, shared by its workers while it runs, for [`check`].
#[derive(Debug)]
pub struct Live {
    state: Mutex<LiveState>,
}

impl Live {
    /// An empty record for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Live {
            state: Mutex::new(LiveState {
                timeline: Timeline::default(),
                workers: vec![None; workers],
            }),
        }
    }

    /// Records that `worker` ran an operation from `start` to `end`; `moved`
    /// is its bytes and objects when it counts towards the throughput watched.
    pub fn record(&self, worker: usize, start: Duration, end: Duration, moved: Option<(u64, u64)>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((bytes, objects)) = moved {
            state.timeline.add(start, end, bytes, objects);
        }
        if let Some(slot) = state.workers.get_mut(worker) {
            let activity = slot.get_or_insert(Activity {
                first_start: start,
                last_end: end,
            });
            activity.first_start = activity.first_start.min(start);
            activity.last_end = activity.last_end.max(end);
        }
    }

    /// Checks the phase so far. Its span ends when the last worker to finish
    /// an operation did: every operation that overlaps the span has then
    /// completed, so the last segment is not short of operations in flight.
    pub fn check(&self, config: &Config) -> Option<Verdict> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let active = state.workers.iter().flatten();
        let start = active.clone().map(|a| a.first_start).max()?;
        let end = active.map(|a| a.last_end).min()?;
        check(config, &state.timeline, (start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: Config = Config {
        min_stable: Duration::from_secs(10),
        pct: 7.5,
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A timeline of 1 MiB objects at `per_s(second)` objects per second.
    fn steady(seconds: u64, per_s: impl Fn(u64) -> u64, bytes: u64) -> Timeline {
        let mut t = Timeline::default();
        for second in 0..seconds {
            let n = per_s(second);
            for i in 0..n {
                let start = Duration::from_secs(second) + ms(i * 1000 / n);
                t.add(start, start + ms(5), bytes, 1);
            }
        }
        t
    }

    #[test]
    fn too_short_a_run_is_never_stable() {
        let t = steady(30, |_| 100, 1 << 20);
        // 10 s over 7 of 25 segments needs more than 35.7 s.
        assert_eq!(
            check(&CONFIG, &t, (Duration::ZERO, Duration::from_secs(30))),
            None
        );
        assert_eq!(check(&CONFIG, &t, (ms(5), ms(2))), None);
    }

    #[test]
    fn steady_throughput_is_stable() {
        let t = steady(60, |_| 300, 1 << 20);
        let verdict = check(&CONFIG, &t, (Duration::ZERO, ms(58_775))).unwrap();
        assert_eq!(verdict.unit, Unit::MibPerS);
        assert!((verdict.rate - 300.0).abs() < 1.0, "{verdict:?}");
        // 58.775 s / 25 = 2.351 s, times 7.
        assert_eq!(verdict.stable_for, ms(16_457));
        assert_eq!(
            verdict.to_string(),
            "Throughput 300.0MiB/s within 7.500000% for 16.457s. Assuming stability. Terminating benchmark."
        );
    }

    #[test]
    fn a_drift_beyond_the_tolerance_is_not_stable() {
        // Climbing 2 % a second: the 7 last segments (2 s each) span 28 %.
        let t = steady(50, |s| 100 + 2 * s, 1 << 20);
        assert_eq!(check(&CONFIG, &t, (Duration::ZERO, ms(50_000))), None);
        // The same within a 40 % tolerance is stable.
        let loose = Config {
            pct: 40.0,
            ..CONFIG
        };
        assert!(check(&loose, &t, (Duration::ZERO, ms(50_000))).is_some());
    }

    #[test]
    fn operations_without_bytes_are_judged_in_objects() {
        let t = steady(40, |_| 50, 0);
        let verdict = check(&CONFIG, &t, (Duration::ZERO, ms(40_000))).unwrap();
        assert_eq!(verdict.unit, Unit::ObjectsPerS);
        assert!(
            verdict
                .to_string()
                .starts_with("Throughput 50.0 objects/s within 7.500000% for 11.2s.")
        );
        // Nothing at all is not stability.
        let idle = Timeline::default();
        assert_eq!(check(&CONFIG, &idle, (Duration::ZERO, ms(40_000))), None);
    }

    #[test]
    fn live_span_is_where_every_worker_was_busy() {
        let live = Live::new(2);
        assert_eq!(live.check(&CONFIG), None);
        for second in 0..40u64 {
            for i in 0..20u64 {
                let start = Duration::from_secs(second) + ms(i * 50);
                live.record(0, start, start + ms(50), Some((1 << 20, 1)));
            }
        }
        // Worker 1 has not finished anything yet: only worker 0 counts.
        assert!(live.check(&CONFIG).is_some());
        // Worker 1 ends at 20 s: the span is cut there, too short.
        live.record(1, ms(0), ms(20_000), None);
        assert_eq!(live.check(&CONFIG), None);
    }
}
