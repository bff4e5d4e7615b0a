//! Throughput over time: the bytes and objects of completed operations spread over
//! narrow time buckets, each operation in proportion to how much of it fell in each
//! bucket (as warp segments its operations), and warp's split statistics (fastest,
//! median and slowest segment of a run) drawn from them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Width of one bucket: narrow enough that a segment starting anywhere (a
/// 1-second split segment, an autoterm segment) is summed with an error below
/// one tenth of a second's worth, wide enough that a worker's timeline of a
/// 5-minute run stays a few tens of KiB.
pub const RESOLUTION: Duration = Duration::from_millis(100);

/// Object bytes and objects.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Amount {
    /// Object bytes moved.
    pub bytes: f64,
    /// Objects handled (one per request, or a request's batch or listing).
    pub objects: f64,
}

/// What completed operations moved, per [`RESOLUTION`]-wide bucket from the
/// phase's start.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    buckets: Vec<Amount>,
}

/// A throughput: object bytes and objects per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Object bytes per second.
    pub bytes_per_s: f64,
    /// Objects per second.
    pub obj_per_s: f64,
}

/// Warp's "Throughput, split into N x 1s": the run cut into equal segments,
/// and the fastest, median and slowest of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Length of one segment, in seconds.
    pub segment_s: f64,
    /// Number of segments.
    pub segments: usize,
    /// The fastest segment.
    pub fastest: Rate,
    /// The median segment (warp's: the upper one of an even count).
    pub median: Rate,
    /// The slowest segment.
    pub slowest: Rate,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Timeline {
    /// Adds an operation that ran from `start` to `end` (offsets from the phase's
    /// start) and moved `bytes` and `objects`, spread evenly over its duration.
    pub fn add(&mut self, start: Duration, end: Duration, bytes: u64, objects: u64) {
        let width = secs(RESOLUTION);
        let (s, e) = (secs(start), secs(end.max(start)));
        let first = (s / width) as usize;
        let last = (e / width) as usize;
        if self.buckets.len() <= last {
            self.buckets.resize(last + 1, Amount::default());
        }
        let (bytes, objects) = (bytes as f64, objects as f64);
        if e <= s {
            let bucket = &mut self.buckets[first];
            bucket.bytes += bytes;
            bucket.objects += objects;
            return;
        }
        for (index, bucket) in self.buckets[first..=last].iter_mut().enumerate() {
            let lo = ((first + index) as f64 * width).max(s);
            let hi = ((first + index + 1) as f64 * width).min(e);
            if hi > lo {
                let share = (hi - lo) / (e - s);
                bucket.bytes += bytes * share;
                bucket.objects += objects * share;
            }
        }
    }

    /// Adds another timeline of the same phase to this one.
    pub fn merge(&mut self, other: &Timeline) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), Amount::default());
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            mine.bytes += theirs.bytes;
            mine.objects += theirs.objects;
        }
    }

    /// What was moved from `from` to `to`; a bucket cut by either edge counts in
    /// proportion to the part inside.
    pub fn sum(&self, from: Duration, to: Duration) -> Amount {
        let width = secs(RESOLUTION);
        let (s, e) = (secs(from), secs(to));
        let mut total = Amount::default();
        if e <= s {
            return total;
        }
        let first = (s / width) as usize;
        let last = ((e / width) as usize).min(self.buckets.len().saturating_sub(1));
        for index in first..=last {
            let Some(bucket) = self.buckets.get(index) else {
                break;
            };
            let lo = (index as f64 * width).max(s);
            let hi = ((index + 1) as f64 * width).min(e);
            if hi > lo {
                let share = (hi - lo) / width;
                total.bytes += bucket.bytes * share;
                total.objects += bucket.objects * share;
            }
        }
        total
    }

    /// The throughput from `from` to `to`.
    pub fn rate(&self, from: Duration, to: Duration) -> Rate {
        let amount = self.sum(from, to);
        let length = secs(to.saturating_sub(from)).max(f64::EPSILON);
        Rate {
            bytes_per_s: amount.bytes / length,
            obj_per_s: amount.objects / length,
        }
    }

    /// Cuts `from..to` into whole `segment`s (a partial one at the end is left
    /// out) and ranks them by bytes per second, or by objects per second when
    /// the operations moved no bytes; `None` without a whole segment.
    pub fn split(&self, from: Duration, to: Duration, segment: Duration) -> Option<Split> {
        if segment.is_zero() || to <= from {
            return None;
        }
        let count = (secs(to - from) / secs(segment)).floor() as usize;
        if count == 0 {
            return None;
        }
        let mut rates: Vec<Rate> = (0..count as u32)
            .map(|i| self.rate(from + segment * i, from + segment * (i + 1)))
            .collect();
        let by_bytes = rates.iter().any(|r| r.bytes_per_s > 0.0);
        let key = |r: &Rate| {
            if by_bytes { r.bytes_per_s } else { r.obj_per_s }
        };
        rates.sort_by(|a, b| key(a).total_cmp(&key(b)));
        // Warp's median of segments sorted slowest first: index round(n/2).
        let median = ((count as f64 * 0.5).round() as usize).min(count - 1);
        Some(Split {
            segment_s: secs(segment),
            segments: count,
            fastest: rates[count - 1],
            median: rates[median],
            slowest: rates[0],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn an_operation_is_spread_over_the_buckets_it_spans() {
        let mut t = Timeline::default();
        // 50 ms in bucket 0, 100 ms in bucket 1, 50 ms in bucket 2.
        t.add(ms(50), ms(250), 200, 4);
        assert!(close(t.sum(ms(0), ms(100)).bytes, 50.0));
        assert!(close(t.sum(ms(100), ms(200)).bytes, 100.0));
        assert!(close(t.sum(ms(200), ms(300)).objects, 1.0));
        assert!(close(t.sum(ms(0), ms(1000)).bytes, 200.0));
        // Half a bucket counts half.
        assert!(close(t.sum(ms(150), ms(200)).bytes, 50.0));
        // An instantaneous operation lands whole in its bucket.
        t.add(ms(420), ms(420), 10, 1);
        assert!(close(t.sum(ms(400), ms(500)).bytes, 10.0));
        assert_eq!(t.sum(ms(500), ms(400)), Amount::default());
    }

    #[test]
    fn merge_adds_bucket_by_bucket() {
        let mut a = Timeline::default();
        let mut b = Timeline::default();
        a.add(ms(0), ms(100), 10, 1);
        b.add(ms(0), ms(100), 5, 1);
        b.add(ms(900), ms(1000), 7, 1);
        a.merge(&b);
        assert!(close(a.sum(ms(0), ms(100)).bytes, 15.0));
        assert!(close(a.sum(ms(0), ms(1000)).objects, 3.0));
    }

    #[test]
    fn split_ranks_whole_segments() {
        let mut t = Timeline::default();
        // Five seconds at 1, 5, 3, 2 and 4 objects of 1 MiB per second, then a
        // partial sixth second that must not count.
        for (second, per_s) in [1u64, 5, 3, 2, 4].into_iter().enumerate() {
            for i in 0..per_s {
                let start = Duration::from_secs(second as u64) + ms(i * 1000 / per_s);
                t.add(start, start + ms(10), 1 << 20, 1);
            }
        }
        t.add(ms(5100), ms(5200), 100 << 20, 100);
        let split = t
            .split(Duration::ZERO, ms(5500), Duration::from_secs(1))
            .unwrap();
        assert_eq!(split.segments, 5);
        assert!(close(split.fastest.obj_per_s, 5.0));
        assert!(close(split.slowest.bytes_per_s, (1 << 20) as f64));
        // Sorted 1, 2, 3, 4, 5: index round(2.5) = 3.
        assert!(close(split.median.obj_per_s, 4.0));
        assert!(
            t.split(Duration::ZERO, ms(900), Duration::from_secs(1))
                .is_none()
        );
    }

    #[test]
    fn split_without_bytes_ranks_by_objects() {
        let mut t = Timeline::default();
        t.add(ms(100), ms(200), 0, 100);
        t.add(ms(1100), ms(1200), 0, 300);
        let split = t
            .split(Duration::ZERO, ms(2000), Duration::from_secs(1))
            .unwrap();
        assert!(close(split.fastest.obj_per_s, 300.0));
        assert!(close(split.slowest.obj_per_s, 100.0));
        assert!(close(split.median.obj_per_s, 300.0));
    }
}
