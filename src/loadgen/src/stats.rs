//! Per-operation measurements: latencies, bytes moved, errors, and their summary.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The S3 operations the generator measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// PutObject.
    Put,
    /// GetObject, body read in full.
    Get,
    /// HeadObject (warp calls it STAT).
    Stat,
    /// DeleteObject.
    Delete,
}

impl OpKind {
    /// All kinds, in report order.
    pub const ALL: [OpKind; 4] = [OpKind::Put, OpKind::Get, OpKind::Stat, OpKind::Delete];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Put => "PUT",
            OpKind::Get => "GET",
            OpKind::Stat => "STAT",
            OpKind::Delete => "DELETE",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many error messages are kept per operation kind; the rest are only counted.
const KEPT_ERRORS: usize = 5;

/// Appends `more` to `samples` up to [`KEPT_ERRORS`] in all.
pub fn keep_samples(samples: &mut Vec<String>, more: impl IntoIterator<Item = String>) {
    let room = KEPT_ERRORS.saturating_sub(samples.len());
    samples.extend(more.into_iter().take(room));
}

/// What one worker (or, once merged, the whole run) observed for one operation kind.
#[derive(Debug, Default, Clone)]
struct OpRecord {
    latencies_us: Vec<u64>,
    bytes: u64,
    errors: u64,
    error_samples: Vec<String>,
}

/// Measurements for every operation kind, recorded by one worker without locking and
/// merged at the end of the run.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    ops: [OpRecord; 4],
}

impl Recorder {
    /// Records a successful operation that moved `bytes` of object data.
    pub fn success(&mut self, op: OpKind, latency: Duration, bytes: u64) {
        let record = &mut self.ops[op.index()];
        record.latencies_us.push(latency.as_micros() as u64);
        record.bytes += bytes;
    }

    /// Records a failed operation; failures do not count towards throughput or latency.
    pub fn failure(&mut self, op: OpKind, message: String) {
        let record = &mut self.ops[op.index()];
        record.errors += 1;
        keep_samples(&mut record.error_samples, [message]);
    }

    /// Adds another worker's measurements to these.
    pub fn merge(&mut self, other: Recorder) {
        for (mine, theirs) in self.ops.iter_mut().zip(other.ops) {
            mine.latencies_us.extend(theirs.latencies_us);
            mine.bytes += theirs.bytes;
            mine.errors += theirs.errors;
            keep_samples(&mut mine.error_samples, theirs.error_samples);
        }
    }

    /// Summarises every operation kind that was attempted, over `elapsed` of wall time.
    pub fn summarize(mut self, elapsed: Duration) -> Vec<OpSummary> {
        let secs = elapsed.as_secs_f64().max(f64::EPSILON);
        OpKind::ALL
            .into_iter()
            .filter_map(|op| {
                let record = &mut self.ops[op.index()];
                if record.latencies_us.is_empty() && record.errors == 0 {
                    return None;
                }
                record.latencies_us.sort_unstable();
                let lat = &record.latencies_us;
                let count = lat.len() as u64;
                let mean_us = if lat.is_empty() {
                    0.0
                } else {
                    lat.iter().sum::<u64>() as f64 / lat.len() as f64
                };
                Some(OpSummary {
                    op: op.name().to_owned(),
                    count,
                    errors: record.errors,
                    bytes: record.bytes,
                    mib_per_s: record.bytes as f64 / (1024.0 * 1024.0) / secs,
                    obj_per_s: count as f64 / secs,
                    latency_ms: LatencyMs {
                        mean: mean_us / 1000.0,
                        p50: percentile(lat, 50.0),
                        p90: percentile(lat, 90.0),
                        p99: percentile(lat, 99.0),
                        max: lat.last().map_or(0.0, |&us| us as f64 / 1000.0),
                    },
                    error_samples: std::mem::take(&mut record.error_samples),
                })
            })
            .collect()
    }
}

/// The nearest-rank percentile of sorted microsecond latencies, in milliseconds.
fn percentile(sorted_us: &[u64], pct: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let rank = ((pct / 100.0) * sorted_us.len() as f64).ceil() as usize;
    sorted_us[rank.clamp(1, sorted_us.len()) - 1] as f64 / 1000.0
}

/// Latency figures of successful operations, in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest operation.
    pub max: f64,
}

/// The summary of one operation kind over a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpSummary {
    /// `PUT`, `GET`, `STAT` or `DELETE`.
    pub op: String,
    /// Successful operations.
    pub count: u64,
    /// Failed operations (including GETs whose content did not match).
    pub errors: u64,
    /// Object bytes moved by successful operations.
    pub bytes: u64,
    /// Object bytes per second, in MiB.
    pub mib_per_s: f64,
    /// Successful operations per second.
    pub obj_per_s: f64,
    /// Latencies of successful operations.
    pub latency_ms: LatencyMs,
    /// The first few error messages.
    pub error_samples: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let lat: Vec<u64> = (1..=100).map(|ms| ms * 1000).collect();
        assert_eq!(percentile(&lat, 50.0), 50.0);
        assert_eq!(percentile(&lat, 99.0), 99.0);
        assert_eq!(percentile(&lat, 100.0), 100.0);
        assert_eq!(percentile(&[7000], 99.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn merge_and_summarize() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        a.success(OpKind::Put, Duration::from_millis(10), 1 << 20);
        b.success(OpKind::Put, Duration::from_millis(30), 1 << 20);
        b.failure(OpKind::Get, "boom".into());
        a.merge(b);
        let summary = a.summarize(Duration::from_secs(2));
        assert_eq!(summary.len(), 2);
        let put = &summary[0];
        assert_eq!((put.op.as_str(), put.count, put.errors), ("PUT", 2, 0));
        assert_eq!(put.mib_per_s, 1.0);
        assert_eq!(put.obj_per_s, 1.0);
        assert_eq!(put.latency_ms.p50, 10.0);
        assert_eq!(put.latency_ms.max, 30.0);
        assert_eq!(put.latency_ms.mean, 20.0);
        let get = &summary[1];
        assert_eq!((get.op.as_str(), get.count, get.errors), ("GET", 0, 1));
        assert_eq!(get.error_samples, vec!["boom".to_owned()]);
    }
}
