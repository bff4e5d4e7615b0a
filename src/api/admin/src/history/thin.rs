//! Fewer, coarser points for long windows: an answer holds at most
//! [`MAX_ANSWER_POINTS`] points per node whatever the window asked, so a
//! console showing the last hour of a cluster every few seconds fetches
//! what a screen can draw, not the ring.
//!
//! Points are grouped on wall-clock multiples of the coarser step (so the
//! nodes' groups line up as their points do). Within a group, rates are
//! averaged, gauges are read at its end, and latency quantiles take the
//! group's largest: a slow interval stays visible in a coarser plot.

use std::collections::BTreeMap;

use crate::history_answers::{NodePoint, OpLatency, WorkerPoint};

/// Points per node in one answer, at most.
pub const MAX_ANSWER_POINTS: u64 = 180;

/// The step of an answer over `secs` seconds of points every `interval`.
pub fn step(secs: u64, interval: u64) -> u64 {
    let points = secs.div_ceil(interval.max(1));
    points.div_ceil(MAX_ANSWER_POINTS).max(1) * interval
}

/// `points` (oldest first, every `interval` seconds) as one point per
/// `step` seconds, each at the end of its step.
pub fn thin(points: Vec<NodePoint>, interval: u64, step: u64) -> Vec<NodePoint> {
    if step <= interval {
        return points;
    }
    let mut groups: BTreeMap<u64, Vec<NodePoint>> = BTreeMap::new();
    for p in points {
        groups.entry(p.t.div_ceil(step) * step).or_default().push(p);
    }
    groups.into_iter().map(|(t, g)| merge(t, g)).collect()
}

fn merge(t: u64, g: Vec<NodePoint>) -> NodePoint {
    let n = g.len() as f64;
    let mean = |f: fn(&NodePoint) -> f64| g.iter().map(f).sum::<f64>() / n;
    let last = g.last().cloned().unwrap_or_default();
    let mut ops: BTreeMap<String, OpLatency> = BTreeMap::new();
    for l in g.iter().flat_map(|p| &p.latency) {
        let e = ops.entry(l.op.clone()).or_insert_with(|| OpLatency {
            op: l.op.clone(),
            ..OpLatency::default()
        });
        e.rate += l.rate / n;
        e.p50_secs = e.p50_secs.max(l.p50_secs);
        e.p99_secs = e.p99_secs.max(l.p99_secs);
    }
    let mut latency: Vec<OpLatency> = ops.into_values().collect();
    latency.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.op.cmp(&b.op)));
    latency.truncate(super::point::MAX_OPS);
    let mut processed: BTreeMap<String, f64> = BTreeMap::new();
    for w in g.iter().flat_map(|p| &p.workers) {
        *processed.entry(w.name.clone()).or_default() += w.processed / n;
    }
    let workers = last
        .workers
        .iter()
        .map(|w| WorkerPoint {
            name: w.name.clone(),
            processed: processed.get(&w.name).copied().unwrap_or(0.0),
            queue: w.queue,
        })
        .collect();
    NodePoint {
        t,
        requests: mean(|p| p.requests),
        errors: mean(|p| p.errors),
        slowdowns: mean(|p| p.slowdowns),
        bytes_in: mean(|p| p.bytes_in),
        bytes_out: mean(|p| p.bytes_out),
        resync_checked: mean(|p| p.resync_checked),
        latency,
        workers,
        ..last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: u64, requests: f64, p99: f64, queue: u64) -> NodePoint {
        NodePoint {
            t,
            requests,
            latency: vec![OpLatency {
                op: "GetObject".into(),
                rate: requests,
                p50_secs: p99 / 2.0,
                p99_secs: p99,
            }],
            resync_queue: Some(queue),
            workers: vec![WorkerPoint {
                name: "lifecycle".into(),
                processed: requests,
                queue: Some(queue),
            }],
            ..NodePoint::default()
        }
    }

    #[test]
    fn an_hour_is_answered_in_at_most_180_points_a_short_window_as_kept() {
        assert_eq!(step(900, 5), 5);
        assert_eq!(step(3600, 5), 20);
        assert_eq!(step(901, 5), 10);
        let hour: Vec<_> = (1..=720).map(|i| at(1000 + i * 5, 1.0, 0.1, i)).collect();
        let thin = thin(hour.clone(), 5, step(3600, 5));
        assert!(thin.len() as u64 <= MAX_ANSWER_POINTS + 1, "{}", thin.len());
        assert!(thin.iter().all(|p| p.t % 20 == 0));
        assert_eq!(super::thin(hour.clone(), 5, 5), hour);
    }

    #[test]
    fn rates_are_averaged_gauges_taken_at_the_end_and_the_slowest_kept() {
        let g = vec![
            at(1005, 2.0, 0.1, 9),
            at(1010, 4.0, 0.8, 7),
            at(1015, 6.0, 0.2, 5),
            at(1020, 0.0, 0.0, 3),
        ];
        let t = thin(g, 5, 20);
        assert_eq!(t.len(), 1, "{t:?}");
        let p = &t[0];
        assert_eq!(p.t, 1020);
        assert_eq!(p.requests, 3.0);
        assert_eq!(p.resync_queue, Some(3));
        assert_eq!(p.latency[0].p99_secs, 0.8);
        assert_eq!(p.latency[0].p50_secs, 0.4);
        assert_eq!(p.latency[0].rate, 3.0);
        assert_eq!(
            p.workers,
            vec![WorkerPoint {
                name: "lifecycle".into(),
                processed: 3.0,
                queue: Some(3)
            }]
        );
    }
}
