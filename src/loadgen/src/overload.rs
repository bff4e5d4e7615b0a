//! Overload mode: far more clients than the server can serve, each issuing 1:1 PUTs
//! of new objects and GETs of prepared ones back to back, with no retries. A
//! refused request is reported, not retried; by default its client then backs off
//! before its next request as the AWS SDKs' standard retry strategy would before a
//! retry ([`AfterRefusal`]).
//!
//! What it measures is how the server sheds load: per second of the run, the
//! accepted operations, their bytes and p99 latency, the requests refused with
//! `503 SlowDown` and the other failures; over the run, how fast refusals came and
//! whether they carried a retry hint. Afterwards every acknowledged PUT is read back
//! and compared byte for byte, so that shedding load is never paid for with a lost
//! write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::ops::{self, FailureKind};
use crate::payload::ObjectSpec;
use crate::run::Plan;
use crate::stats::keep_samples;

/// Parallel readers of the read-back phase.
const VERIFY_WORKERS: usize = 16;
/// Attempts to read one acknowledged object back before it counts as unreadable
/// (the server may still be refusing work right after the storm).
const VERIFY_ATTEMPTS: usize = 5;

/// What happened in one second of the run (by the time operations ended).
#[derive(Debug, Default, Clone)]
struct Second {
    put_ok: u64,
    get_ok: u64,
    bytes: u64,
    rejected: u64,
    failed: u64,
    latencies_us: Vec<u64>,
}

/// What one worker (or, merged, the whole run) observed.
#[derive(Debug, Default)]
struct Observed {
    seconds: Vec<Second>,
    reject_latencies_us: Vec<u64>,
    /// Latencies of accepted PUTs and GETs apart (the per-second ones mix them).
    put_latencies_us: Vec<u64>,
    get_latencies_us: Vec<u64>,
    rejected_with_hint: u64,
    mismatched: u64,
    failure_samples: Vec<String>,
    acked: Vec<ObjectSpec>,
    written: Vec<ObjectSpec>,
}

impl Observed {
    fn second(&mut self, at: Duration) -> &mut Second {
        let index = at.as_secs() as usize;
        if self.seconds.len() <= index {
            self.seconds.resize_with(index + 1, Second::default);
        }
        &mut self.seconds[index]
    }

    fn record(&mut self, at: Duration, put: bool, (latency, result): ops::Timed) -> bool {
        match result {
            Ok(bytes) => {
                let us = latency.as_micros() as u64;
                let s = self.second(at);
                if put {
                    s.put_ok += 1;
                } else {
                    s.get_ok += 1;
                }
                s.bytes += bytes;
                s.latencies_us.push(us);
                if put {
                    self.put_latencies_us.push(us);
                } else {
                    self.get_latencies_us.push(us);
                }
                true
            }
            Err(failure) => {
                match failure.kind {
                    FailureKind::SlowDown { retry_hint } => {
                        self.second(at).rejected += 1;
                        self.reject_latencies_us.push(latency.as_micros() as u64);
                        self.rejected_with_hint += u64::from(retry_hint);
                    }
                    FailureKind::Mismatch => {
                        self.mismatched += 1;
                        self.second(at).failed += 1;
                    }
                    FailureKind::Other => self.second(at).failed += 1,
                }
                if failure.kind != (FailureKind::SlowDown { retry_hint: true }) {
                    keep_samples(&mut self.failure_samples, [failure.message]);
                }
                false
            }
        }
    }

    fn merge(&mut self, other: Observed) {
        if self.seconds.len() < other.seconds.len() {
            self.seconds
                .resize_with(other.seconds.len(), Second::default);
        }
        for (mine, theirs) in self.seconds.iter_mut().zip(other.seconds) {
            mine.put_ok += theirs.put_ok;
            mine.get_ok += theirs.get_ok;
            mine.bytes += theirs.bytes;
            mine.rejected += theirs.rejected;
            mine.failed += theirs.failed;
            mine.latencies_us.extend(theirs.latencies_us);
        }
        self.reject_latencies_us.extend(other.reject_latencies_us);
        self.put_latencies_us.extend(other.put_latencies_us);
        self.get_latencies_us.extend(other.get_latencies_us);
        self.rejected_with_hint += other.rejected_with_hint;
        self.mismatched += other.mismatched;
        keep_samples(&mut self.failure_samples, other.failure_samples);
        self.acked.extend(other.acked);
        self.written.extend(other.written);
    }
}

/// One second of the run, as reported.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecondLine {
    /// Seconds since the start of the measured phase.
    pub t: u64,
    /// PUTs acknowledged in this second.
    pub put_ok: u64,
    /// GETs that returned the right content in this second.
    pub get_ok: u64,
    /// Object MiB moved by accepted operations.
    pub mib: f64,
    /// Requests refused with `503 SlowDown`.
    pub rejected: u64,
    /// Other failures.
    pub failed: u64,
    /// p99 latency of accepted operations, in ms.
    pub p99_ms: f64,
}

/// The result of reading every acknowledged PUT back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verified {
    /// Acknowledged objects read back.
    pub checked: u64,
    /// Those whose content was exactly what was written.
    pub intact: u64,
    /// Answered `NoSuchKey`: an acknowledged write lost.
    pub missing: u64,
    /// Wrong content.
    pub corrupt: u64,
    /// Could not be read after every attempt (other errors).
    pub unreadable: u64,
    /// The first few problems.
    pub samples: Vec<String>,
}

/// Everything an overload run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadReport {
    /// The S3 endpoint measured.
    pub endpoint: String,
    /// Object size in bytes.
    pub obj_size: u64,
    /// Clients issuing requests at once.
    pub concurrent: usize,
    /// Share of operations that are GETs, in percent.
    pub get_percent: u8,
    /// Whether a refused client backed off before its next request.
    #[serde(default)]
    pub backed_off: bool,
    /// When the measured phase started, in seconds since the Unix epoch (to line
    /// the timeline up with other processes' samples).
    pub start_unix_s: f64,
    /// Measured wall time, in seconds.
    pub elapsed_s: f64,
    /// Per-second timeline.
    pub seconds: Vec<SecondLine>,
    /// Accepted operations over the run.
    pub accepted: u64,
    /// Accepted object MiB per second over the run.
    pub accepted_mib_per_s: f64,
    /// Accepted operations per second over the run.
    pub accepted_ops_per_s: f64,
    /// Latency of accepted operations, ms: p50, p99, max.
    pub accepted_latency_ms: [f64; 3],
    /// Latency of accepted PUTs alone, ms: p50, p99, max.
    #[serde(default)]
    pub put_latency_ms: [f64; 3],
    /// Latency of accepted GETs alone, ms: p50, p99, max.
    #[serde(default)]
    pub get_latency_ms: [f64; 3],
    /// Requests refused with `503 SlowDown`.
    pub rejected: u64,
    /// Refusals that carried a retry hint.
    pub rejected_with_hint: u64,
    /// Time to get the refusal, ms: p50, p99, max.
    pub rejected_latency_ms: [f64; 3],
    /// Other failures (transport errors, timeouts, other codes).
    pub failed: u64,
    /// GETs whose content was wrong during the run.
    pub mismatched: u64,
    /// The first few failures other than hinted refusals.
    pub failure_samples: Vec<String>,
    /// PUTs acknowledged.
    pub acked_puts: u64,
    /// The read-back of every acknowledged PUT.
    pub verified: Verified,
}

/// Nearest-rank p50, p99 and max of `us`, in ms.
fn percentiles(us: &mut [u64]) -> [f64; 3] {
    if us.is_empty() {
        return [0.0; 3];
    }
    us.sort_unstable();
    let at = |pct: f64| {
        let rank = ((pct / 100.0) * us.len() as f64).ceil() as usize;
        us[rank.clamp(1, us.len()) - 1] as f64 / 1000.0
    };
    [at(50.0), at(99.0), us[us.len() - 1] as f64 / 1000.0]
}

/// What a client does after a refusal (`503 SlowDown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Backs off as the AWS SDKs' standard retry strategy does before a
    /// retry: after the n-th refusal in a row, a random wait below
    /// min(2^(n-1) s, [`MAX_BACKOFF`]) ("full jitter"), and at least the
    /// refusal's retry hint.
    BackOff,
    /// Sends its next request at once, as a client without a retry strategy.
    Ignore,
}

/// Longest back-off, as the SDKs' standard retry strategy.
pub const MAX_BACKOFF: Duration = Duration::from_secs(20);

/// One client's back-off state.
struct Backoff {
    policy: AfterRefusal,
    refused_in_a_row: u32,
}

impl Backoff {
    /// How long to wait after `timed` before the next request.
    fn wait(&mut self, timed: &ops::Timed, rng: &mut impl RngCore) -> Option<Duration> {
        let refusal = match &timed.1 {
            Err(f) if matches!(f.kind, FailureKind::SlowDown { .. }) => f,
            _ => {
                self.refused_in_a_row = 0;
                return None;
            }
        };
        if self.policy == AfterRefusal::Ignore {
            return None;
        }
        self.refused_in_a_row += 1;
        let ceiling =
            Duration::from_secs(1u64 << (self.refused_in_a_row - 1).min(5)).min(MAX_BACKOFF);
        let jittered = ceiling.mul_f64((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64);
        Some(jittered.max(refusal.retry_after.unwrap_or_default().min(MAX_BACKOFF)))
    }
}

/// Runs the storm: `plan.concurrent` clients for `plan.duration`, `get_percent` of
/// their operations GETs of `prepared` objects, the rest PUTs of new ones.
async fn storm(
    client: &Client,
    plan: &Plan,
    prepared: Arc<Vec<ObjectSpec>>,
    get_percent: u8,
    after_refusal: AfterRefusal,
) -> (Observed, Duration, f64) {
    let start_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let start = Instant::now();
    let deadline = start + plan.duration;
    let mut workers = JoinSet::new();
    for index in 0..plan.concurrent {
        let (client, plan, prepared) = (client.clone(), plan.clone(), prepared.clone());
        workers.spawn(async move {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                plan.nonce ^ (index as u64).rotate_left(40) ^ 0x0fe2_10ad,
            );
            let mut seen = Observed::default();
            let mut backoff = Backoff {
                policy: after_refusal,
                refused_in_a_row: 0,
            };
            while Instant::now() < deadline {
                let get = !prepared.is_empty() && rng.next_u64() % 100 < u64::from(get_percent);
                let wait = if get {
                    let spec = &prepared[(rng.next_u64() % prepared.len() as u64) as usize];
                    let timed = ops::get(&client, &plan.bucket, spec).await;
                    let wait = backoff.wait(&timed, &mut rng);
                    seen.record(start.elapsed(), false, timed);
                    wait
                } else {
                    let spec = ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size);
                    let timed = ops::put(&client, &plan.bucket, &spec, plan.body_kind).await;
                    let wait = backoff.wait(&timed, &mut rng);
                    if seen.record(start.elapsed(), true, timed) {
                        seen.acked.push(spec.clone());
                    }
                    // A failed PUT may still have stored the object: clean it up too.
                    seen.written.push(spec);
                    wait
                };
                if let Some(wait) = wait {
                    tokio::time::sleep_until((Instant::now() + wait).min(deadline).into()).await;
                }
            }
            seen
        });
    }
    let mut all = Observed::default();
    while let Some(joined) = workers.join_next().await {
        all.merge(joined.expect("overload worker panicked"));
    }
    (all, start.elapsed(), start_unix_s)
}

/// Reads every acknowledged object back and compares it byte for byte.
async fn verify(client: &Client, bucket: &str, acked: &[ObjectSpec]) -> Verified {
    let acked = Arc::new(acked.to_vec());
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    for _ in 0..VERIFY_WORKERS {
        let (client, bucket, acked, next) = (
            client.clone(),
            bucket.to_owned(),
            acked.clone(),
            next.clone(),
        );
        workers.spawn(async move {
            let mut v = Verified::default();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(spec) = acked.get(i) else { return v };
                v.checked += 1;
                let mut last = None;
                for attempt in 0..VERIFY_ATTEMPTS {
                    match ops::get(&client, &bucket, spec).await.1 {
                        Ok(_) => {
                            last = None;
                            v.intact += 1;
                            break;
                        }
                        Err(f) if f.kind == FailureKind::Mismatch => {
                            v.corrupt += 1;
                            last = Some(f.message);
                            break;
                        }
                        Err(f) if f.message.contains("NoSuchKey") => {
                            v.missing += 1;
                            last = Some(f.message);
                            break;
                        }
                        Err(f) => {
                            last = Some(f.message);
                            if attempt + 1 == VERIFY_ATTEMPTS {
                                v.unreadable += 1;
                            } else {
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                        }
                    }
                }
                keep_samples(&mut v.samples, last);
            }
        });
    }
    let mut total = Verified::default();
    while let Some(joined) = workers.join_next().await {
        let v = joined.expect("verify worker panicked");
        total.checked += v.checked;
        total.intact += v.intact;
        total.missing += v.missing;
        total.corrupt += v.corrupt;
        total.unreadable += v.unreadable;
        keep_samples(&mut total.samples, v.samples);
    }
    total
}

/// Runs the storm, then the read-back. Returns the report and the objects to clean up.
pub async fn run(
    client: &Client,
    endpoint: &str,
    plan: &Plan,
    prepared: Vec<ObjectSpec>,
    get_percent: u8,
    after_refusal: AfterRefusal,
) -> (OverloadReport, Vec<ObjectSpec>) {
    let prepared = Arc::new(prepared);
    let (mut seen, elapsed, start_unix_s) =
        storm(client, plan, prepared.clone(), get_percent, after_refusal).await;
    tracing::info!("reading back {} acknowledged objects", seen.acked.len());
    let verified = verify(client, &plan.bucket, &seen.acked).await;

    let mut accepted_us: Vec<u64> = Vec::new();
    let mut seconds = Vec::with_capacity(seen.seconds.len());
    let (mut accepted, mut bytes, mut rejected, mut failed) = (0, 0, 0, 0);
    for (t, s) in seen.seconds.iter_mut().enumerate() {
        accepted += s.put_ok + s.get_ok;
        bytes += s.bytes;
        rejected += s.rejected;
        failed += s.failed;
        seconds.push(SecondLine {
            t: t as u64,
            put_ok: s.put_ok,
            get_ok: s.get_ok,
            mib: s.bytes as f64 / (1 << 20) as f64,
            rejected: s.rejected,
            failed: s.failed,
            p99_ms: percentiles(&mut s.latencies_us)[1],
        });
        accepted_us.append(&mut s.latencies_us);
    }
    let secs = elapsed.as_secs_f64().max(f64::EPSILON);
    let report = OverloadReport {
        endpoint: endpoint.to_owned(),
        obj_size: plan.obj_size,
        concurrent: plan.concurrent,
        get_percent,
        backed_off: after_refusal == AfterRefusal::BackOff,
        start_unix_s,
        elapsed_s: elapsed.as_secs_f64(),
        seconds,
        accepted,
        accepted_mib_per_s: bytes as f64 / (1 << 20) as f64 / secs,
        accepted_ops_per_s: accepted as f64 / secs,
        accepted_latency_ms: percentiles(&mut accepted_us),
        put_latency_ms: percentiles(&mut seen.put_latencies_us),
        get_latency_ms: percentiles(&mut seen.get_latencies_us),
        rejected,
        rejected_with_hint: seen.rejected_with_hint,
        rejected_latency_ms: percentiles(&mut seen.reject_latencies_us),
        failed,
        mismatched: seen.mismatched,
        failure_samples: seen.failure_samples,
        acked_puts: seen.acked.len() as u64,
        verified,
    };
    let mut left = seen.written;
    left.extend(Arc::unwrap_or_clone(prepared));
    (report, left)
}

impl OverloadReport {
    /// A short human summary.
    pub fn to_table(&self) -> String {
        let [a50, a99, amax] = self.accepted_latency_ms;
        let [r50, r99, rmax] = self.rejected_latency_ms;
        let [p50, p99, pmax] = self.put_latency_ms;
        let [g50, g99, gmax] = self.get_latency_ms;
        let mut out = format!(
            "overload {}B x{} ({}% GET) for {:.1}s at {}\n\
             accepted {} ({:.1} ops/s, {:.1} MiB/s), latency ms p50 {a50:.1} p99 {a99:.1} max {amax:.1}\n\
             \x20 PUT latency ms p50 {p50:.1} p99 {p99:.1} max {pmax:.1}; GET p50 {g50:.1} p99 {g99:.1} max {gmax:.1}\n\
             rejected {} (with retry hint {}), latency ms p50 {r50:.1} p99 {r99:.1} max {rmax:.1}\n\
             failed {}, mismatched {}\n\
             acked PUTs {}: read back {}, intact {}, missing {}, corrupt {}, unreadable {}\n",
            self.obj_size,
            self.concurrent,
            self.get_percent,
            self.elapsed_s,
            self.endpoint,
            self.accepted,
            self.accepted_ops_per_s,
            self.accepted_mib_per_s,
            self.rejected,
            self.rejected_with_hint,
            self.failed,
            self.mismatched,
            self.acked_puts,
            self.verified.checked,
            self.verified.intact,
            self.verified.missing,
            self.verified.corrupt,
            self.verified.unreadable,
        );
        for sample in self.failure_samples.iter().chain(&self.verified.samples) {
            out.push_str(&format!("  error: {sample}\n"));
        }
        out
    }

    /// True when no acknowledged write was lost or damaged and every read was right.
    pub fn intact(&self) -> bool {
        self.mismatched == 0
            && self.verified.missing == 0
            && self.verified.corrupt == 0
            && self.verified.unreadable == 0
            && self.verified.checked == self.acked_puts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::OpFailure;

    #[test]
    fn refused_clients_back_off_exponentially_at_least_the_hint() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let refused = |hint_ms: Option<u64>| -> ops::Timed {
            (
                Duration::from_millis(3),
                Err(OpFailure {
                    kind: FailureKind::SlowDown { retry_hint: true },
                    message: "refused".into(),
                    retry_after: hint_ms.map(Duration::from_millis),
                }),
            )
        };
        let mut b = Backoff {
            policy: AfterRefusal::BackOff,
            refused_in_a_row: 0,
        };
        let mut longest = Duration::ZERO;
        for n in 1..=8u32 {
            let w = b.wait(&refused(None), &mut rng).unwrap();
            let ceiling = Duration::from_secs(1 << (n - 1).min(5)).min(MAX_BACKOFF);
            assert!(w < ceiling, "refusal {n}: {w:?}");
            longest = longest.max(w);
        }
        assert!(longest > Duration::from_secs(4), "no growth: {longest:?}");
        // A success resets it; a hint is a lower bound.
        assert_eq!(b.wait(&(Duration::ZERO, Ok(1)), &mut rng), None);
        let w = b.wait(&refused(Some(1500)), &mut rng).unwrap();
        assert!(
            w >= Duration::from_millis(1500) && w < Duration::from_secs(2),
            "{w:?}"
        );
        // Other failures are no reason to wait; ignoring refusals never waits.
        assert_eq!(b.wait(&fail(FailureKind::Other), &mut rng), None);
        let mut eager = Backoff {
            policy: AfterRefusal::Ignore,
            refused_in_a_row: 0,
        };
        assert_eq!(eager.wait(&refused(Some(1000)), &mut rng), None);
    }

    fn fail(kind: FailureKind) -> ops::Timed {
        (
            Duration::from_millis(3),
            Err(OpFailure {
                kind,
                message: format!("{kind:?}"),
                retry_after: None,
            }),
        )
    }

    #[test]
    fn seconds_count_each_outcome_where_it_ended() {
        let mut a = Observed::default();
        let ok = (Duration::from_millis(20), Ok(1 << 20));
        assert!(a.record(Duration::from_millis(500), true, ok.clone()));
        assert!(a.record(Duration::from_millis(2500), false, ok));
        assert!(!a.record(
            Duration::from_millis(2600),
            true,
            fail(FailureKind::SlowDown { retry_hint: true })
        ));
        let mut b = Observed::default();
        assert!(!b.record(
            Duration::from_millis(100),
            false,
            fail(FailureKind::Mismatch)
        ));
        assert!(!b.record(
            Duration::from_millis(3100),
            false,
            fail(FailureKind::SlowDown { retry_hint: false })
        ));
        a.merge(b);
        assert_eq!(a.seconds.len(), 4);
        assert_eq!((a.seconds[0].put_ok, a.seconds[0].failed), (1, 1));
        assert_eq!((a.seconds[2].get_ok, a.seconds[2].rejected), (1, 1));
        assert_eq!(a.seconds[3].rejected, 1);
        assert_eq!(a.rejected_with_hint, 1);
        assert_eq!(a.mismatched, 1);
        // A hinted refusal is expected under overload; the rest are worth showing.
        assert_eq!(a.failure_samples.len(), 2);
    }

    #[test]
    fn accepted_puts_and_gets_keep_their_latencies_apart_across_merges() {
        let mut a = Observed::default();
        let took = |ms| (Duration::from_millis(ms), Ok(1 << 20));
        assert!(a.record(Duration::ZERO, true, took(900)));
        assert!(a.record(Duration::ZERO, false, took(30)));
        let mut b = Observed::default();
        assert!(b.record(Duration::from_secs(1), true, took(700)));
        assert!(!b.record(
            Duration::from_secs(1),
            true,
            fail(FailureKind::SlowDown { retry_hint: true })
        ));
        a.merge(b);
        assert_eq!(a.put_latencies_us, [900_000, 700_000]);
        assert_eq!(a.get_latencies_us, [30_000]);
        assert_eq!(percentiles(&mut a.put_latencies_us), [700.0, 900.0, 900.0]);
    }

    #[test]
    fn percentiles_of_nothing_and_of_some() {
        assert_eq!(percentiles(&mut []), [0.0; 3]);
        let mut us: Vec<u64> = (1..=100).rev().map(|ms| ms * 1000).collect();
        assert_eq!(percentiles(&mut us), [50.0, 99.0, 100.0]);
    }
}
