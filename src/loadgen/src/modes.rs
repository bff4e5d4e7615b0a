//! The benchmarks, as warp's: put, get, mixed, delete, list and stat. Each runs
//! `concurrent` workers that issue operations back to back until the run's
//! [`Stop`](crate::run::Stop) says to end, and checks what the server answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_s3::Client;
use rand_core::RngCore;

use crate::cli::Mode;
use crate::mix::Mix;
use crate::ops;
use crate::payload::ObjectSpec;
use crate::pool::ObjectPool;
use crate::run::{Outcome, Plan, measure, worker_rng};
use crate::stats::OpKind;

/// A benchmark with its own options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Benchmark {
    /// Upload new objects.
    Put,
    /// Download random prepared objects and check their bodies.
    Get,
    /// A mix of operations over a changing set of objects.
    Mixed(Mix),
    /// Delete the prepared objects, `batch` keys a request.
    Delete {
        /// Keys per DeleteObjects request.
        batch: usize,
    },
    /// List whole prefixes and check the listings.
    List,
    /// Read random prepared objects' metadata and check their length.
    Stat,
}

impl Benchmark {
    /// The benchmark's name and defaults.
    pub fn mode(self) -> Mode {
        match self {
            Benchmark::Put => Mode::Put,
            Benchmark::Get => Mode::Get,
            Benchmark::Mixed(_) => Mode::Mixed,
            Benchmark::Delete { .. } => Mode::Delete,
            Benchmark::List => Mode::List,
            Benchmark::Stat => Mode::Stat,
        }
    }

    /// Runs the measured phase over the `prepared` objects.
    pub async fn run(self, client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>) -> Outcome {
        match self {
            Benchmark::Put => run_put(client, plan).await,
            Benchmark::Get => run_read(client, plan, prepared, OpKind::Get).await,
            Benchmark::Stat => run_read(client, plan, prepared, OpKind::Stat).await,
            Benchmark::Mixed(mix) => run_mixed(client, plan, prepared, mix).await,
            Benchmark::Delete { batch } => run_delete(client, plan, prepared, batch).await,
            Benchmark::List => run_list(client, plan, prepared).await,
        }
    }
}

/// PUT: every worker uploads new objects.
async fn run_put(client: &Client, plan: &Plan) -> Outcome {
    measure(plan, Some(OpKind::Put), |mut log, stop| {
        let (client, plan) = (client.clone(), plan.clone());
        async move {
            let mut rng = worker_rng(&plan, log.index);
            let mut written = Vec::new();
            while stop.running() {
                let spec = ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size);
                // A failed PUT may still have stored the object: clean it up too.
                log.record(
                    OpKind::Put,
                    ops::put(&client, &plan.bucket, &spec, plan.body_kind).await,
                );
                written.push(spec);
            }
            (log, written)
        }
    })
    .await
}

/// GET or STAT: every worker reads random prepared objects and checks each
/// body (GET) or length (STAT).
async fn run_read(client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>, op: OpKind) -> Outcome {
    let prepared = Arc::new(prepared);
    let mut outcome = measure(plan, Some(op), |mut log, stop| {
        let (client, plan, prepared) = (client.clone(), plan.clone(), prepared.clone());
        async move {
            let mut rng = worker_rng(&plan, log.index);
            while stop.running() && !prepared.is_empty() {
                let spec = &prepared[(rng.next_u64() % prepared.len() as u64) as usize];
                let timed = if op == OpKind::Stat {
                    ops::stat(&client, &plan.bucket, spec).await
                } else {
                    ops::get(&client, &plan.bucket, spec).await
                };
                log.record(op, timed);
            }
            (log, Vec::new())
        }
    })
    .await;
    outcome.left = Arc::unwrap_or_clone(prepared);
    outcome
}

/// MIXED: operations drawn by `mix` over the prepared objects plus those the run
/// itself writes; autoterm judges all of them together, as warp.
async fn run_mixed(client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>, mix: Mix) -> Outcome {
    let pool = Arc::new(ObjectPool::new(prepared));
    let mut outcome = measure(plan, None, |mut log, stop| {
        let (client, plan, pool) = (client.clone(), plan.clone(), pool.clone());
        async move {
            let mut rng = worker_rng(&plan, log.index);
            let mut maybe_left = Vec::new();
            while stop.running() {
                let op = mix.pick(rng.next_u64());
                let lease = match op {
                    OpKind::Get | OpKind::Stat => pool.lease(rng.next_u64()),
                    _ => None,
                };
                if let Some(lease) = lease {
                    let timed = if op == OpKind::Get {
                        ops::get(&client, &plan.bucket, lease.spec()).await
                    } else {
                        ops::stat(&client, &plan.bucket, lease.spec()).await
                    };
                    log.record(op, timed);
                } else if op == OpKind::Delete {
                    // Keep enough objects that every worker can still read one.
                    let randoms = std::iter::repeat_with(|| rng.next_u64());
                    if let Some(spec) = pool.take_idle(plan.concurrent, randoms) {
                        let timed = ops::delete(&client, &plan.bucket, &spec).await;
                        if !log.record(OpKind::Delete, timed) {
                            maybe_left.push(spec);
                        }
                    }
                } else {
                    // PUT, or a read on a pool that is momentarily empty.
                    let spec = ObjectSpec::new(&plan.prefix, rng.next_u64(), plan.obj_size);
                    let timed = ops::put(&client, &plan.bucket, &spec, plan.body_kind).await;
                    if log.record(OpKind::Put, timed) {
                        pool.insert(spec);
                    } else {
                        maybe_left.push(spec);
                    }
                }
            }
            (log, maybe_left)
        }
    })
    .await;
    outcome.left.extend(pool.specs());
    outcome
}

/// DELETE: workers take the prepared objects `batch` at a time and delete each
/// batch with one DeleteObjects request, until none are left or time is up.
async fn run_delete(
    client: &Client,
    plan: &Plan,
    prepared: Vec<ObjectSpec>,
    batch: usize,
) -> Outcome {
    let prepared = Arc::new(prepared);
    let next = Arc::new(AtomicUsize::new(0));
    let mut outcome = measure(plan, Some(OpKind::Delete), |mut log, stop| {
        let (client, bucket) = (client.clone(), plan.bucket.clone());
        let (prepared, next) = (prepared.clone(), next.clone());
        async move {
            let mut left = Vec::new();
            while stop.running() {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= prepared.len() {
                    break;
                }
                let chunk = &prepared[from..(from + batch).min(prepared.len())];
                let timed = ops::delete_batch(&client, &bucket, chunk).await;
                // A failed batch may be partly deleted: clean all of it up.
                if !log.record_objects(OpKind::Delete, timed) {
                    left.extend_from_slice(chunk);
                }
            }
            (log, left)
        }
    })
    .await;
    let reached = next.load(Ordering::Relaxed).min(prepared.len());
    outcome.left.extend_from_slice(&prepared[reached..]);
    outcome
}

/// LIST: the prepared objects are spread over one prefix per worker; each worker
/// lists its prefix in full, again and again, and checks every listing.
async fn run_list(client: &Client, plan: &Plan, prepared: Vec<ObjectSpec>) -> Outcome {
    let prefixes = plan.prefixes.max(1);
    let mut expected = vec![Vec::new(); prefixes];
    for (index, spec) in prepared.iter().enumerate() {
        expected[index % prefixes].push(spec.key.clone());
    }
    for keys in &mut expected {
        // S3 lists in byte order of the keys.
        keys.sort_unstable();
    }
    let expected = Arc::new(expected);
    let mut outcome = measure(plan, Some(OpKind::List), |mut log, stop| {
        let (client, bucket, size) = (client.clone(), plan.bucket.clone(), plan.obj_size);
        let prefix = format!("{}/", plan.prefix_of(log.index));
        let expected = expected.clone();
        async move {
            let want = &expected[log.index % expected.len()];
            while stop.running() {
                let timed = ops::list(&client, &bucket, &prefix, want, size).await;
                log.record_objects(OpKind::List, timed);
            }
            (log, Vec::new())
        }
    })
    .await;
    outcome.left = prepared;
    outcome
}
