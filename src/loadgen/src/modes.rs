//! The benchmarks, as warp's: put, get, mixed, delete, list and stat. Each runs
//! `concurrent` workers that issue operations back to back until the run's
//! [`Stop`](crate::run::Stop) says to end, and checks what the server answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_s3::Client;
use rand_core::RngCore;

use crate::cli::Mode;
use crate::ops;
use crate::payload::ObjectSpec;
use crate::pool::ObjectPool;
use crate::run::{Outcome, Plan, measure, worker_rng};
use crate::stats::OpKind;

/// Relative weights of the operations of a mixed run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// GetObject of a live object.
    pub get: f64,
    /// HeadObject of a live object.
    pub stat: f64,
    /// PutObject of a new object.
    pub put: f64,
    /// DeleteObject of a live object nobody is reading.
    pub delete: f64,
}

impl Mix {
    /// Warp's default mix: 45 % GET, 30 % STAT, 15 % PUT, 10 % DELETE.
    pub const WARP: Mix = Mix {
        get: 45.0,
        stat: 30.0,
        put: 15.0,
        delete: 10.0,
    };

    /// Whether the weights make a run that cannot run out of objects.
    pub fn check(&self) -> Result<(), String> {
        let all = [self.get, self.stat, self.put, self.delete];
        if all.iter().any(|w| !w.is_finite() || *w < 0.0) || all.iter().sum::<f64>() <= 0.0 {
            return Err("weights must be non-negative and not all 0".into());
        }
        if self.delete > self.put {
            return Err("--delete-distrib must not exceed --put-distrib".into());
        }
        Ok(())
    }

    /// The operation a uniform `random` picks.
    fn pick(&self, random: u64) -> OpKind {
        let total = self.get + self.stat + self.put + self.delete;
        // The top 53 bits as a fraction in [0, 1).
        let x = (random >> 11) as f64 / (1u64 << 53) as f64 * total;
        if x < self.get {
            OpKind::Get
        } else if x < self.get + self.put {
            OpKind::Put
        } else if x < self.get + self.put + self.stat {
            OpKind::Stat
        } else {
            OpKind::Delete
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_picks_by_weight() {
        let mut counts = [0u32; 5];
        let steps = 10_000u64;
        for i in 0..steps {
            // Evenly spread over the u64 range.
            let random = i * (u64::MAX / steps);
            counts[Mix::WARP.pick(random) as usize] += 1;
        }
        // Within one pick of the weights (a pick on a boundary may go either way).
        for (op, want) in [
            (OpKind::Get, 4500),
            (OpKind::Put, 1500),
            (OpKind::Stat, 3000),
            (OpKind::Delete, 1000),
        ] {
            let got = counts[op as usize];
            assert!(got.abs_diff(want) <= 1, "{op:?}: {got}");
        }
    }

    #[test]
    fn mix_is_checked() {
        assert!(Mix::WARP.check().is_ok());
        let more_deletes = Mix {
            delete: 20.0,
            ..Mix::WARP
        };
        assert!(more_deletes.check().is_err());
        let nothing = Mix {
            get: 0.0,
            stat: 0.0,
            put: 0.0,
            delete: 0.0,
        };
        assert!(nothing.check().is_err());
        let only_get = Mix {
            get: 1.0,
            ..nothing
        };
        assert!(only_get.check().is_ok());
        assert_eq!(only_get.pick(u64::MAX), OpKind::Get);
    }
}
