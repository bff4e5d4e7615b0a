//! Per-operation measurements: latencies, bytes and objects moved over time,
//! errors, and their summary.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::timeline::{Split, Timeline};

/// Segment length of the throughput split in reports (warp's "split into N x 1s").
const SPLIT_SEGMENT: Duration = Duration::from_secs(1);

/// The S3 operations the generator measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// PutObject.
    Put,
    /// GetObject, body read in full.
    Get,
    /// HeadObject (warp calls it STAT).
    Stat,
    /// DeleteObject, or DeleteObjects of a batch.
    Delete,
    /// ListObjectsV2 of a whole prefix, every page.
    List,
}

impl OpKind {
    /// All kinds, in report order.
    pub const ALL: [OpKind; 5] = [
        OpKind::Put,
        OpKind::Get,
        OpKind::Stat,
        OpKind::Delete,
        OpKind::List,
    ];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Put => "PUT",
            OpKind::Get => "GET",
            OpKind::Stat => "STAT",
            OpKind::Delete => "DELETE",
            OpKind::List => "LIST",
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

/// When an operation ran: offsets from the start of its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// When it started.
    pub start: Duration,
    /// When it ended.
    pub end: Duration,
}

impl Span {
    fn latency(self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// What one worker (or, once merged, the whole run) observed for one operation kind.
#[derive(Debug, Default, Clone)]
struct OpRecord {
    latencies_us: Vec<u64>,
    bytes: u64,
    objects: u64,
    errors: u64,
    error_samples: Vec<String>,
    timeline: Timeline,
    /// From the first start to the last end of this kind's operations.
    span: Option<(Duration, Duration)>,
}

impl OpRecord {
    fn ran(&mut self, span: Span) {
        let (first, last) = self.span.get_or_insert((span.start, span.end));
        *first = (*first).min(span.start);
        *last = (*last).max(span.end);
    }
}

/// Measurements for every operation kind, recorded by one worker without locking and
/// merged at the end of the run.
#[derive(Debug, Default, Clone)]
pub struct Recorder {
    ops: [OpRecord; 5],
    /// One worker's: from its first start to its last end. Merged: from when every
    /// worker had started to when the first worker had finished (warp's active
    /// range, the part of the phase with all workers busy).
    active: Option<(Duration, Duration)>,
}

impl Recorder {
    /// Records a successful operation that moved `bytes` of object data and
    /// handled `objects` objects (one, or a batch's or a listing's count).
    pub fn success(&mut self, op: OpKind, span: Span, bytes: u64, objects: u64) {
        self.worked(span);
        let record = &mut self.ops[op.index()];
        record.latencies_us.push(span.latency().as_micros() as u64);
        record.bytes += bytes;
        record.objects += objects;
        record.timeline.add(span.start, span.end, bytes, objects);
        record.ran(span);
    }

    /// Records a failed operation; failures do not count towards throughput or latency.
    pub fn failure(&mut self, op: OpKind, span: Span, message: String) {
        self.worked(span);
        let record = &mut self.ops[op.index()];
        record.errors += 1;
        keep_samples(&mut record.error_samples, [message]);
        record.ran(span);
    }

    fn worked(&mut self, span: Span) {
        let (first, last) = self.active.get_or_insert((span.start, span.end));
        *first = (*first).min(span.start);
        *last = (*last).max(span.end);
    }

    /// Adds another worker's measurements to these.
    pub fn merge(&mut self, other: Recorder) {
        for (mine, theirs) in self.ops.iter_mut().zip(other.ops) {
            mine.latencies_us.extend(theirs.latencies_us);
            mine.bytes += theirs.bytes;
            mine.objects += theirs.objects;
            mine.errors += theirs.errors;
            keep_samples(&mut mine.error_samples, theirs.error_samples);
            mine.timeline.merge(&theirs.timeline);
            mine.span = match (mine.span, theirs.span) {
                (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
                (one, other) => one.or(other),
            };
        }
        self.active = match (self.active, other.active) {
            (Some((a, b)), Some((c, d))) => Some((a.max(c), b.min(d))),
            (one, other) => one.or(other),
        };
    }

    /// Summarises every operation kind that was attempted, over `elapsed` of wall time.
    pub fn summarize(mut self, elapsed: Duration) -> Vec<OpSummary> {
        let secs = elapsed.as_secs_f64().max(f64::EPSILON);
        let active = self.active;
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
                let split =
                    active.and_then(|(from, to)| record.timeline.split(from, to, SPLIT_SEGMENT));
                Some(OpSummary {
                    op: op.name().to_owned(),
                    count,
                    errors: record.errors,
                    bytes: record.bytes,
                    objects: record.objects,
                    ran_s: record
                        .span
                        .map_or(0.0, |(first, last)| (last - first).as_secs_f64()),
                    split,
                    mib_per_s: record.bytes as f64 / (1024.0 * 1024.0) / secs,
                    obj_per_s: count as f64 / secs,
                    latency_ms: LatencyMs {
                        mean: mean_us / 1000.0,
                        p50: percentile(lat, 50.0),
                        p90: percentile(lat, 90.0),
                        p99: percentile(lat, 99.0),
                        max: lat.last().map_or(0.0, |&us| us as f64 / 1000.0),
                        min: lat.first().map_or(0.0, |&us| us as f64 / 1000.0),
                    },
                    error_samples: std::mem::take(&mut record.error_samples),
                })
            })
            .collect()
    }
}

/// The nearest-rank percentile of sorted microsecond latencies, in milliseconds.
pub(crate) fn percentile(sorted_us: &[u64], pct: f64) -> f64 {
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
    /// Fastest operation.
    #[serde(default)]
    pub min: f64,
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
    /// Objects handled by successful operations: one per request, but a
    /// DeleteObjects batch's or a listing's count.
    #[serde(default)]
    pub objects: u64,
    /// Seconds from the first start to the last end of this kind's operations.
    #[serde(default)]
    pub ran_s: f64,
    /// Throughput in 1-second segments of the span where every worker was busy;
    /// `None` when that span holds no whole second.
    #[serde(default)]
    pub split: Option<Split>,
    /// Object bytes per second, in MiB.
    pub mib_per_s: f64,
    /// Successful operations (requests) per second.
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

    fn span(start_ms: u64, end_ms: u64) -> Span {
        Span {
            start: Duration::from_millis(start_ms),
            end: Duration::from_millis(end_ms),
        }
    }

    #[test]
    fn merge_and_summarize() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        a.success(OpKind::Put, span(0, 10), 1 << 20, 1);
        b.success(OpKind::Put, span(1970, 2000), 1 << 20, 1);
        b.failure(OpKind::Get, span(5, 6), "boom".into());
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
        assert_eq!(put.latency_ms.min, 10.0);
        assert_eq!((put.objects, put.ran_s), (2, 2.0));
        // Worker a was busy from 0 to 10 ms, b from 5 ms to 2 s: not one whole
        // second with both busy.
        assert_eq!(put.split, None);
        let get = &summary[1];
        assert_eq!((get.op.as_str(), get.count, get.errors), ("GET", 0, 1));
        assert_eq!(get.error_samples, vec!["boom".to_owned()]);
    }

    #[test]
    fn split_covers_the_span_where_every_worker_was_busy() {
        let mut merged = Recorder::default();
        for worker in 0..2u64 {
            let mut r = Recorder::default();
            // Worker 0 from 0 to 3.05 s, worker 1 from 0.01 to 5 s; 10 ops a second.
            let end = if worker == 0 { 3050 } else { 5000 };
            let mut t = worker * 10;
            while t + 100 <= end {
                r.success(OpKind::Delete, span(t, t + 100), 0, 100);
                t += 100;
            }
            merged.merge(r);
        }
        let summary = merged.summarize(Duration::from_secs(5));
        let delete = &summary[0];
        assert_eq!((delete.op.as_str(), delete.count), ("DELETE", 30 + 49));
        assert_eq!(delete.objects, 100 * (30 + 49));
        // Busy together from 10 ms to 3 s: two whole seconds.
        let split = delete.split.as_ref().unwrap();
        assert_eq!(split.segments, 2);
        assert!((split.median.obj_per_s - 2000.0).abs() < 1.0, "{split:?}");
    }
}
