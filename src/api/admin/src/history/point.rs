//! One history point from two scrapes of the node's metrics: counters
//! become rates over the interval between them, histograms become the
//! interval's quantiles (as Prometheus's `histogram_quantile` over a
//! `rate` computes them), gauges are read as they are at its end.

use std::collections::BTreeMap;

use super::scrape::Scrape;
use crate::history_answers::{NodePoint, OpLatency, WorkerPoint};

/// The families the history reads; every other line is skipped unread.
pub const FAMILIES: &[&str] = &[
    "hangar_s3_requests_total",
    "hangar_s3_errors_total",
    "hangar_s3_rejections_total",
    "hangar_s3_request_duration_seconds_bucket",
    "hangar_s3_received_bytes_total",
    "hangar_s3_sent_bytes_total",
    "hangar_node_disk_",
    "hangar_resync_queue_blocks",
    "hangar_resync_checked_total",
    "hangar_scrub_progress_ratio",
    "hangar_table_sync_partitions_pending",
    "hangar_worker_processed_total",
    "hangar_worker_queue_length",
];

/// Operations drawn per point, the busiest first: a bound on a point's
/// size whatever the mix of requests.
pub const MAX_OPS: usize = 12;

/// The point of the interval from `prev` to `cur`, `secs` long, ending
/// at `t`.
pub fn point(prev: &Scrape, cur: &Scrape, secs: f64, t: u64) -> NodePoint {
    let secs = secs.max(1e-3);
    // A counter that went down was reset (it cannot be here, but a rate
    // below zero would be drawn as one): count from zero.
    let rate = |name: &str| (cur.sum(name) - prev.sum(name)).max(0.0) / secs;
    let gauge = |name: &str, label: Option<(&str, &str)>| cur.value(name, label);
    let bytes = |v: Option<f64>| v.map(|v| v as u64);
    NodePoint {
        t,
        requests: rate("hangar_s3_requests_total"),
        errors: rate("hangar_s3_errors_total"),
        slowdowns: rate("hangar_s3_rejections_total"),
        bytes_in: rate("hangar_s3_received_bytes_total"),
        bytes_out: rate("hangar_s3_sent_bytes_total"),
        latency: latencies(prev, cur, secs),
        data_avail: bytes(gauge("hangar_node_disk_avail_bytes", Some(("dir", "data")))),
        data_total: bytes(gauge("hangar_node_disk_total_bytes", Some(("dir", "data")))),
        metadata_avail: bytes(gauge(
            "hangar_node_disk_avail_bytes",
            Some(("dir", "metadata")),
        )),
        metadata_total: bytes(gauge(
            "hangar_node_disk_total_bytes",
            Some(("dir", "metadata")),
        )),
        resync_queue: bytes(gauge("hangar_resync_queue_blocks", None)),
        resync_checked: rate("hangar_resync_checked_total"),
        scrub_progress: gauge("hangar_scrub_progress_ratio", None),
        partitions_pending: bytes(gauge("hangar_table_sync_partitions_pending", None)),
        workers: workers(prev, cur, secs),
    }
}

fn workers(prev: &Scrape, cur: &Scrape, secs: f64) -> Vec<WorkerPoint> {
    let before = prev.by_label("hangar_worker_processed_total", "worker");
    let queues = cur.by_label("hangar_worker_queue_length", "worker");
    cur.by_label("hangar_worker_processed_total", "worker")
        .into_iter()
        .map(|(name, n)| WorkerPoint {
            processed: (n - before.get(&name).copied().unwrap_or(n)).max(0.0) / secs,
            queue: queues.get(&name).map(|q| *q as u64),
            name,
        })
        .collect()
}

/// Per operation: (upper bound, cumulative count) of each bucket of its
/// latency histogram.
fn histograms(s: &Scrape) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let samples = s.samples.get("hangar_s3_request_duration_seconds_bucket");
    for (labels, v) in samples.into_iter().flatten() {
        let get = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, x)| x.as_str());
        let (Some(op), Some(le)) = (get("op"), get("le")) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse() {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        out.entry(op.to_owned()).or_default().push((le, *v));
    }
    for b in out.values_mut() {
        b.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn latencies(prev: &Scrape, cur: &Scrape, secs: f64) -> Vec<OpLatency> {
    let before = histograms(prev);
    let mut out: Vec<OpLatency> = histograms(cur)
        .into_iter()
        .filter_map(|(op, buckets)| {
            let old = before.get(&op);
            let delta: Vec<(f64, f64)> = buckets
                .iter()
                .map(|&(le, n)| {
                    let was = old
                        .and_then(|o| o.iter().find(|(l, _)| *l == le))
                        .map_or(0.0, |(_, c)| *c);
                    (le, (n - was).max(0.0))
                })
                .collect();
            let total = delta.last().map_or(0.0, |(_, n)| *n);
            (total > 0.0).then(|| OpLatency {
                rate: total / secs,
                p50_secs: quantile(&delta, 0.5),
                p99_secs: quantile(&delta, 0.99),
                op,
            })
        })
        .collect();
    out.sort_by(|a, b| b.rate.total_cmp(&a.rate).then_with(|| a.op.cmp(&b.op)));
    out.truncate(MAX_OPS);
    out
}

/// The `q` quantile of cumulative buckets `b` (sorted by bound, the last
/// `+Inf`), interpolated linearly inside the bucket it falls in; the
/// largest finite bound when it falls past it.
pub fn quantile(b: &[(f64, f64)], q: f64) -> f64 {
    let Some(&(_, total)) = b.last() else {
        return 0.0;
    };
    let target = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, n) in b {
        if n >= target && n > 0.0 {
            if le.is_infinite() {
                return lower.0;
            }
            let within = n - lower.1;
            let frac = if within > 0.0 {
                (target - lower.1) / within
            } else {
                1.0
            };
            return lower.0 + (le - lower.0) * frac;
        }
        lower = (le, n);
    }
    lower.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let b = [
            (0.1, 0.0),
            (0.2, 50.0),
            (0.4, 100.0),
            (f64::INFINITY, 100.0),
        ];
        assert!((quantile(&b, 0.5) - 0.2).abs() < 1e-9);
        assert!((quantile(&b, 0.25) - 0.15).abs() < 1e-9);
        assert!((quantile(&b, 0.99) - 0.396).abs() < 1e-9);
        // Past the last finite bound: that bound.
        let slow = [(0.1, 0.0), (f64::INFINITY, 10.0)];
        assert_eq!(quantile(&slow, 0.5), 0.1);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn rates_and_latencies_over_the_interval() {
        let prev = Scrape::parse(
            "hangar_s3_requests_total{op=\"GetObject\"} 10\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"0.01\"} 10\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"0.02\"} 10\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"+Inf\"} 10\n\
             hangar_worker_processed_total{worker=\"lifecycle\"} 5\n",
            FAMILIES,
        );
        let cur = Scrape::parse(
            "hangar_s3_requests_total{op=\"GetObject\"} 30\n\
             hangar_s3_requests_total{op=\"PutObject\"} 10\n\
             hangar_s3_errors_total{op=\"PutObject\",code=\"SlowDown\"} 4\n\
             hangar_s3_rejections_total{reason=\"ram_budget\"} 4\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"0.01\"} 10\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"0.02\"} 30\n\
             hangar_s3_request_duration_seconds_bucket{op=\"GetObject\",le=\"+Inf\"} 30\n\
             hangar_node_disk_avail_bytes{dir=\"data\"} 100\n\
             hangar_node_disk_total_bytes{dir=\"data\"} 400\n\
             hangar_resync_queue_blocks 7\n\
             hangar_worker_processed_total{worker=\"lifecycle\"} 15\n\
             hangar_worker_queue_length{worker=\"lifecycle\"} 3\n",
            FAMILIES,
        );
        let p = point(&prev, &cur, 5.0, 1000);
        assert_eq!(p.t, 1000);
        assert_eq!(p.requests, 6.0);
        assert_eq!(p.errors, 0.8);
        assert_eq!(p.slowdowns, 0.8);
        assert_eq!((p.data_avail, p.data_total), (Some(100), Some(400)));
        assert_eq!(p.metadata_avail, None);
        assert_eq!(p.resync_queue, Some(7));
        // Only the 20 GETs of the interval, all between 10 and 20 ms.
        assert_eq!(p.latency.len(), 1);
        assert_eq!(p.latency[0].op, "GetObject");
        assert_eq!(p.latency[0].rate, 4.0);
        assert!((p.latency[0].p50_secs - 0.015).abs() < 1e-9);
        assert_eq!(
            p.workers,
            vec![WorkerPoint {
                name: "lifecycle".into(),
                processed: 2.0,
                queue: Some(3)
            }]
        );
    }
}
