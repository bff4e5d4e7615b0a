//! The three benchmark modes (put, get, mixed), their prepare phase and the cleanup:
//! `concurrent` workers issue operations back to back until the duration is over.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tokio::task::JoinSet;

use crate::error::LoadgenError;
use crate::ops::{self, OpFailure};
use crate::payload::ObjectSpec;
use crate::pool::ObjectPool;
use crate::stats::{OpKind, Recorder};

/// Keys per DeleteObjects request during cleanup (S3's maximum).
const DELETE_BATCH: usize = 1000;
/// Most uploads in flight while preparing objects: the prepare phase is not measured,
/// and an overload run's hundreds of clients would only get it refused.
const PREPARE_WORKERS: usize = 32;
/// Attempts to prepare one object when the server refuses it with a retry hint
/// (`503 SlowDown`, its hint waited for between attempts).
const PREPARE_ATTEMPTS: u32 = 20;

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
    /// Objects uploaded before a get or mixed run.
    pub objects: usize,
    /// Key prefix unique to this run, so that runs never see each other's objects.
    pub prefix: String,
    /// Seeds every worker's random stream.
    pub nonce: u64,
    /// How PUT bodies are given to the SDK.
    pub body_kind: ops::BodyKind,
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
}

fn worker_rng(plan: &Plan, worker: usize) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(plan.nonce ^ (worker as u64).rotate_left(40))
}

fn record(recorder: &mut Recorder, op: OpKind, (latency, result): ops::Timed) -> bool {
    match result {
        Ok(bytes) => {
            recorder.success(op, latency, bytes);
            true
        }
        Err(failure) => {
            recorder.failure(op, failure.message);
            false
        }
    }
}

/// Uploads `plan.objects` objects with up to `plan.concurrent` workers (at most
/// [`PREPARE_WORKERS`]); a refusal with a retry hint is retried after it (up to
/// [`PREPARE_ATTEMPTS`] times), any other failure aborts, since a measurement on a
/// partial data set would mislead.
pub async fn prepare(client: &Client, plan: &Plan) -> Result<Vec<ObjectSpec>, LoadgenError> {
    let mut rng = worker_rng(plan, usize::MAX);
    let specs: Arc<Vec<ObjectSpec>> = Arc::new(
        (0..plan.objects)
            .map(|_| ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size))
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let body_kind = plan.body_kind;
    let mut workers = JoinSet::new();
    for _ in 0..plan
        .concurrent
        .min(PREPARE_WORKERS)
        .min(plan.objects.max(1))
    {
        let (client, bucket, specs, next) = (
            client.clone(),
            plan.bucket.clone(),
            specs.clone(),
            next.clone(),
        );
        workers.spawn(async move {
            loop {
                let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return Ok(());
                };
                // Not measured: a refusal is retried after its hint.
                let mut attempt = 1;
                loop {
                    match ops::put(&client, &bucket, spec, body_kind).await.1 {
                        Ok(_) => break,
                        Err(OpFailure {
                            retry_after: Some(hint),
                            ..
                        }) if attempt < PREPARE_ATTEMPTS => {
                            tokio::time::sleep(hint).await;
                            attempt += 1;
                        }
                        Err(f) => return Err(f.message),
                    }
                }
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined
            .expect("prepare worker panicked")
            .map_err(|message| LoadgenError::Setup {
                phase: "preparing objects",
                message,
            })?;
    }
    Ok(Arc::unwrap_or_clone(specs))
}

/// Runs `worker` `plan.concurrent` times in parallel and merges what they recorded.
async fn measure<F, Fut>(plan: &Plan, worker: F) -> (Recorder, Duration, Vec<ObjectSpec>)
where
    F: Fn(usize, Instant) -> Fut,
    Fut: std::future::Future<Output = (Recorder, Vec<ObjectSpec>)> + Send + 'static,
{
    let start = Instant::now();
    let deadline = start + plan.duration;
    let mut workers = JoinSet::new();
    for index in 0..plan.concurrent {
        workers.spawn(worker(index, deadline));
    }
    let mut recorder = Recorder::default();
    let mut left = Vec::new();
    while let Some(joined) = workers.join_next().await {
        let (worker_recorder, worker_left) = joined.expect("load worker panicked");
        recorder.merge(worker_recorder);
        left.extend(worker_left);
    }
    (recorder, start.elapsed(), left)
}

/// PUT mode: every worker uploads new objects until the deadline.
pub async fn run_put(client: &Client, plan: &Plan) -> Outcome {
    let (recorder, elapsed, left) = measure(plan, |index, deadline| {
        let (client, plan) = (client.clone(), plan.clone());
        async move {
            let mut rng = worker_rng(&plan, index);
            let mut recorder = Recorder::default();
            let mut written = Vec::new();
            while Instant::now() < deadline {
                let spec = ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size);
                // A failed PUT may still have stored the object: clean it up too.
                record(
                    &mut recorder,
                    OpKind::Put,
                    ops::put(&client, &plan.bucket, &spec, plan.body_kind).await,
                );
                written.push(spec);
            }
            (recorder, written)
        }
    })
    .await;
    Outcome {
        recorder,
        elapsed,
        left,
    }
}

/// GET mode: every worker downloads random prepared objects until the deadline and
/// checks each body.
pub async fn run_get(client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>) -> Outcome {
    let prepared = Arc::new(prepared);
    let (recorder, elapsed, _) = measure(plan, |index, deadline| {
        let (client, plan, prepared) = (client.clone(), plan.clone(), prepared.clone());
        async move {
            let mut rng = worker_rng(&plan, index);
            let mut recorder = Recorder::default();
            while Instant::now() < deadline && !prepared.is_empty() {
                let spec = &prepared[(rng.next_u64() % prepared.len() as u64) as usize];
                record(
                    &mut recorder,
                    OpKind::Get,
                    ops::get(&client, &plan.bucket, spec).await,
                );
            }
            (recorder, Vec::new())
        }
    })
    .await;
    Outcome {
        recorder,
        elapsed,
        left: Arc::unwrap_or_clone(prepared),
    }
}

/// MIXED mode with warp's default distribution: 45 % GET, 15 % PUT, 30 % STAT and
/// 10 % DELETE, over the prepared objects plus those the run itself writes.
pub async fn run_mixed(client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>) -> Outcome {
    let pool = Arc::new(ObjectPool::new(prepared));
    let (recorder, elapsed, mut left) = measure(plan, |index, deadline| {
        let (client, plan, pool) = (client.clone(), plan.clone(), pool.clone());
        async move {
            let mut rng = worker_rng(&plan, index);
            let mut recorder = Recorder::default();
            let mut maybe_left = Vec::new();
            while Instant::now() < deadline {
                let roll = rng.next_u64() % 100;
                let lease = if roll < 45 || (60..90).contains(&roll) {
                    pool.lease(rng.next_u64())
                } else {
                    None
                };
                if let Some(lease) = lease {
                    let (op, timed) = if roll < 45 {
                        (
                            OpKind::Get,
                            ops::get(&client, &plan.bucket, lease.spec()).await,
                        )
                    } else {
                        (
                            OpKind::Stat,
                            ops::stat(&client, &plan.bucket, lease.spec()).await,
                        )
                    };
                    record(&mut recorder, op, timed);
                } else if roll >= 90 {
                    // Keep enough objects that every worker can still read one.
                    let randoms = std::iter::repeat_with(|| rng.next_u64());
                    if let Some(spec) = pool.take_idle(plan.concurrent, randoms) {
                        let timed = ops::delete(&client, &plan.bucket, &spec).await;
                        if !record(&mut recorder, OpKind::Delete, timed) {
                            maybe_left.push(spec);
                        }
                    }
                } else {
                    // PUT, or a read on a pool that is momentarily empty.
                    let spec = ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size);
                    if record(
                        &mut recorder,
                        OpKind::Put,
                        ops::put(&client, &plan.bucket, &spec, plan.body_kind).await,
                    ) {
                        pool.insert(spec);
                    } else {
                        maybe_left.push(spec);
                    }
                }
            }
            (recorder, maybe_left)
        }
    })
    .await;
    left.extend(pool.specs());
    Outcome {
        recorder,
        elapsed,
        left,
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
