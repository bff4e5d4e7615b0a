//! What every benchmark shares: the plan of a run, the upload of the objects it
//! works on (itself measured, as warp reports it), the measured phase (its
//! workers, when they stop, `--autoterm`, what they record) and the cleanup.
//! The benchmarks themselves are in `crate::modes`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tokio::task::JoinSet;

use crate::autoterm::{self, Live, Verdict};
use crate::error::LoadgenError;
use crate::ops::{self, OpFailure};
use crate::payload::ObjectSpec;
use crate::stats::{OpKind, Recorder, Span};

/// Keys per DeleteObjects request during cleanup (S3's maximum).
const DELETE_BATCH: usize = 1000;
/// Most uploads in flight while preparing objects: the prepare phase is not the
/// one measured, and an overload run's hundreds of clients would only get it refused.
const PREPARE_WORKERS: usize = 32;
/// Attempts to prepare one object when the server refuses it with a retry hint
/// (`503 SlowDown`, its hint waited for between attempts).
const PREPARE_ATTEMPTS: u32 = 20;
/// How often `--autoterm` looks at the throughput, as warp.
const AUTOTERM_EVERY: Duration = Duration::from_secs(1);

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Bucket holding the objects.
    pub bucket: String,
    /// Size of every object written.
    pub obj_size: u64,
    /// Workers issuing requests in parallel.
    pub concurrent: usize,
    /// How long workers keep starting new operations.
    pub duration: Duration,
    /// Objects uploaded before the measured phase.
    pub objects: usize,
    /// Key prefix unique to this run, so that runs never see each other's objects.
    pub prefix: String,
    /// Sub-prefixes the prepared objects are spread over (list: one per worker);
    /// with 1 they all sit right under `prefix`.
    pub prefixes: usize,
    /// Seeds every worker's random stream.
    pub nonce: u64,
    /// How PUT bodies are given to the SDK.
    pub body_kind: ops::BodyKind,
    /// End the measured phase early once its throughput is stable.
    pub autoterm: Option<autoterm::Config>,
}

impl Plan {
    /// The prefix of prepared object number `index`.
    pub fn prefix_of(&self, index: usize) -> String {
        if self.prefixes > 1 {
            format!("{}/p{:03}", self.prefix, index % self.prefixes)
        } else {
            self.prefix.clone()
        }
    }
}

/// The objects a run prepared, and how their upload went.
#[derive(Debug)]
pub struct Prepared {
    /// The objects, in the order of their index.
    pub specs: Vec<ObjectSpec>,
    /// The uploads' measurements.
    pub recorder: Recorder,
    /// Wall time of the upload.
    pub elapsed: Duration,
    /// Uploads in flight at once.
    pub workers: usize,
}

/// What a measured phase produced.
#[derive(Debug)]
pub struct Outcome {
    /// Measurements of all workers, merged.
    pub recorder: Recorder,
    /// Wall time from the first operation to the end of the last one.
    pub elapsed: Duration,
    /// Objects this run left in the bucket (to delete unless asked to keep them).
    pub left: Vec<ObjectSpec>,
    /// Why `--autoterm` ended the phase early, if it did.
    pub verdict: Option<Verdict>,
}

/// Tells workers when to stop starting operations: at the deadline, or earlier
/// once `--autoterm` finds the throughput stable.
#[derive(Debug, Clone)]
pub struct Stop {
    deadline: Instant,
    stopped: Arc<AtomicBool>,
}

impl Stop {
    fn new(deadline: Instant) -> Self {
        Stop {
            deadline,
            stopped: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a worker may start another operation.
    pub fn running(&self) -> bool {
        !self.stopped.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// One worker's record of its operations; under `--autoterm` also fed to the
/// phase's shared [`Live`] view.
#[derive(Debug)]
pub struct WorkerLog {
    /// The worker's number, from 0.
    pub index: usize,
    recorder: Recorder,
    origin: Instant,
    /// The live view, and the operation kind it judges (all kinds when `None`).
    live: Option<(Arc<Live>, Option<OpKind>)>,
}

impl WorkerLog {
    fn new(index: usize, origin: Instant, live: Option<(Arc<Live>, Option<OpKind>)>) -> Self {
        WorkerLog {
            index,
            recorder: Recorder::default(),
            origin,
            live,
        }
    }

    /// Records an operation whose result is the object bytes it moved (one
    /// object); says whether it succeeded.
    pub fn record(&mut self, op: OpKind, timed: ops::Timed) -> bool {
        self.log(op, timed, |bytes| (bytes, 1))
    }

    /// Records an operation whose result is the number of objects it handled
    /// (a DeleteObjects batch, a listing), moving no object bytes.
    pub fn record_objects(&mut self, op: OpKind, timed: ops::Timed) -> bool {
        self.log(op, timed, |objects| (0, objects))
    }

    fn log(
        &mut self,
        op: OpKind,
        (latency, result): ops::Timed,
        moved: fn(u64) -> (u64, u64),
    ) -> bool {
        // The operation just ended; its latency says when it started.
        let end = self.origin.elapsed();
        let span = Span {
            start: end.saturating_sub(latency),
            end,
        };
        let (moved, ok) = match result {
            Ok(value) => {
                let (bytes, objects) = moved(value);
                self.recorder.success(op, span, bytes, objects);
                (Some((bytes, objects)), true)
            }
            Err(failure) => {
                self.recorder.failure(op, span, failure.message);
                (None, false)
            }
        };
        if let Some((live, watched)) = &self.live {
            let counted = moved.filter(|_| watched.is_none_or(|w| w == op));
            live.record(self.index, span.start, span.end, counted);
        }
        ok
    }
}

/// A worker's random stream, distinct per run and worker.
pub fn worker_rng(plan: &Plan, worker: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(plan.nonce ^ (worker as u64).rotate_left(40))
}

/// Uploads `plan.objects` objects with up to `plan.concurrent` workers (at most
/// [`PREPARE_WORKERS`]); a refusal with a retry hint is retried after it (up to
/// [`PREPARE_ATTEMPTS`] times), any other failure aborts, since a measurement on a
/// partial data set would mislead.
pub async fn prepare(client: &Client, plan: &Plan) -> Result<Prepared, LoadgenError> {
    let mut rng = worker_rng(plan, usize::MAX);
    let specs: Arc<Vec<ObjectSpec>> = Arc::new(
        (0..plan.objects)
            .map(|index| ObjectSpec::new(&plan.prefix_of(index), rng.next_u64(), plan.obj_size))
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let body_kind = plan.body_kind;
    let workers = plan
        .concurrent
        .min(PREPARE_WORKERS)
        .min(plan.objects.max(1));
    let origin = Instant::now();
    let mut tasks = JoinSet::new();
    for index in 0..workers {
        let (client, bucket, specs, next) = (
            client.clone(),
            plan.bucket.clone(),
            specs.clone(),
            next.clone(),
        );
        tasks.spawn(async move {
            let mut log = WorkerLog::new(index, origin, None);
            loop {
                let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return Ok(log.recorder);
                };
                // A refusal is retried after its hint; only the upload that
                // stored the object is recorded.
                let mut attempt = 1;
                loop {
                    match ops::put(&client, &bucket, spec, body_kind).await {
                        (latency, Ok(bytes)) => {
                            log.record(OpKind::Put, (latency, Ok(bytes)));
                            break;
                        }
                        (
                            _,
                            Err(OpFailure {
                                retry_after: Some(hint),
                                ..
                            }),
                        ) if attempt < PREPARE_ATTEMPTS => {
                            tokio::time::sleep(hint).await;
                            attempt += 1;
                        }
                        (_, Err(f)) => return Err(f.message),
                    }
                }
            }
        });
    }
    let mut recorder = Recorder::default();
    while let Some(joined) = tasks.join_next().await {
        let worker = joined
            .expect("prepare worker panicked")
            .map_err(|message| LoadgenError::Setup {
                phase: "preparing objects",
                message,
            })?;
        recorder.merge(worker);
    }
    Ok(Prepared {
        specs: Arc::unwrap_or_clone(specs),
        recorder,
        elapsed: origin.elapsed(),
        workers,
    })
}

/// Runs `worker` `plan.concurrent` times in parallel until they return (each
/// checks its [`Stop`]), and merges what they recorded. Under `--autoterm`,
/// the operations of kind `watched` (all kinds when `None`) are judged every
/// second, and the workers stopped once their throughput is stable.
pub async fn measure<F, Fut>(plan: &Plan, watched: Option<OpKind>, worker: F) -> Outcome
where
    F: Fn(WorkerLog, Stop) -> Fut,
    Fut: Future<Output = (WorkerLog, Vec<ObjectSpec>)> + Send + 'static,
{
    let origin = Instant::now();
    let stop = Stop::new(origin + plan.duration);
    let live = plan
        .autoterm
        .map(|config| (config, Arc::new(Live::new(plan.concurrent))));
    let verdict = Arc::new(OnceLock::new());
    let judge = live.as_ref().map(|(config, live)| {
        tokio::spawn(judge_stability(
            *config,
            live.clone(),
            stop.clone(),
            verdict.clone(),
        ))
    });
    let mut workers = JoinSet::new();
    for index in 0..plan.concurrent {
        let live = live.as_ref().map(|(_, live)| (live.clone(), watched));
        workers.spawn(worker(WorkerLog::new(index, origin, live), stop.clone()));
    }
    let mut recorder = Recorder::default();
    let mut left = Vec::new();
    while let Some(joined) = workers.join_next().await {
        let (log, worker_left) = joined.expect("load worker panicked");
        recorder.merge(log.recorder);
        left.extend(worker_left);
    }
    let elapsed = origin.elapsed();
    if let Some(judge) = judge {
        judge.abort();
    }
    Outcome {
        recorder,
        elapsed,
        left,
        verdict: verdict.get().copied(),
    }
}

/// Checks the live throughput every second until it is stable, then records
/// the verdict and stops the workers.
async fn judge_stability(
    config: autoterm::Config,
    live: Arc<Live>,
    stop: Stop,
    verdict: Arc<OnceLock<Verdict>>,
) {
    let mut ticks = tokio::time::interval(AUTOTERM_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first tick is immediate.
    ticks.tick().await;
    while stop.running() {
        ticks.tick().await;
        if let Some(found) = live.check(&config) {
            let _ = verdict.set(found);
            stop.stop();
        }
    }
}

/// Deletes `specs` with DeleteObjects; returns how many could not be deleted.
pub async fn cleanup(client: &Client, bucket: &str, specs: &[ObjectSpec]) -> usize {
    let mut failed = 0;
    for batch in specs.chunks(DELETE_BATCH) {
        let identifiers = batch
            .iter()
            .map(|spec| ObjectIdentifier::builder().key(&spec.key).build())
            .collect::<Result<Vec<_>, _>>();
        let delete = identifiers.and_then(|objects| {
            Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
        });
        let delete = match delete {
            Ok(delete) => delete,
            Err(e) => {
                tracing::warn!("cleanup: {e}");
                failed += batch.len();
                continue;
            }
        };
        match client
            .delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
        {
            Ok(output) => {
                let errors = output.errors();
                if let Some(first) = errors.first() {
                    tracing::warn!(
                        "cleanup: {} objects not deleted, first: {:?} {:?}",
                        errors.len(),
                        first.key(),
                        first.code()
                    );
                }
                failed += errors.len();
            }
            Err(e) => {
                tracing::warn!("cleanup: DeleteObjects failed: {}", DisplayErrorContext(&e));
                failed += batch.len();
            }
        }
    }
    failed
}
