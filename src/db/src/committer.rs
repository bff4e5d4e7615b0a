//! The committer and syncer threads behind [`crate::Db`].
//!
//! The committer runs the writers' closures one after the other over a
//! [`Tx`] — each sees the writes of those before it — and applies the
//! surviving writes of a batch to the engine as one atomic batch. What
//! happens next depends on the mode:
//!
//! * no fsync: the batch is applied and its writers answered at once;
//! * serial (per-write fsync, `max_batch = 1`, or [`Pipelining::Off`]): the
//!   committer takes every job waiting (up to `max_batch`), applies and syncs
//!   the batch in one engine call, answers, and only then looks at the queue
//!   again;
//! * pipelined (fsync and `max_batch > 1`, the default): the committer hands
//!   the batch to the syncer thread, which applies it with sync (one engine
//!   call: one sled flush + fdatasync, one redb durable commit) and answers
//!   its writers. While that runs, the committer keeps taking jobs as they
//!   arrive and runs their closures into the next batch (up to `max_batch`;
//!   later jobs wait their turn); when the syncer reports back, that whole
//!   batch is handed over in turn. So closures overlap the fsync, a batch
//!   holds every writer that arrived during the previous commit, and there
//!   is one sync per batch and at most one batch being committed.
//!
//! A closure of the next batch must see the writes of the batch being
//! committed, which the engine may not show yet: [`Tx`] reads them from that
//! batch's write set (kept until the syncer reports back) before the engine.
//! The engine applies each batch atomically, so a read of a key the batch
//! being committed does not touch is the same before and after it lands.
//!
//! A failed commit with sync poisons the store: the failed batch's writes may
//! or may not be on disk (an fsync error leaves the page cache in an unknown
//! state, the lesson of PostgreSQL's "fsyncgate"), and the next batch may
//! have read them, so every later write fails with the same error until the
//! node restarts and the engine recovers. A batch that fails to apply without
//! sync fails alone.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::tx::{Completion, Job, Msg, PendingMap, Tx};
use crate::{CommitStats, DbError, DbOptions, Engine, Result, WriteOp};

/// Whether the commit of one batch may overlap the closures of the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipelining {
    /// Overlap (the default of [`crate::Db::new`]).
    On,
    /// Apply, sync and answer each batch before running the next batch's
    /// closures: the original design, kept for the benchmark's before/after
    /// comparison.
    Off,
}

/// The first durability failure, shared by the committer and the syncer.
#[derive(Default)]
struct Poison(Mutex<Option<DbError>>);

impl Poison {
    fn get(&self) -> Option<DbError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, e: &DbError) {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if p.is_none() {
            tracing::error!("metadata store failed to sync, refusing further writes: {e}");
            *p = Some(e.clone());
        }
    }
}

/// A batch being built: the merged writes of the closures run so far.
#[derive(Default)]
struct Batch {
    pending: PendingMap,
    /// Writers whose closures succeeded, to answer once the batch is done.
    ok: Vec<Completion>,
    jobs: usize,
}

impl Batch {
    /// Runs `job` over the writes already in this batch. A closure that fails
    /// is answered with its own error at once; one that panics is dropped
    /// with its writes, and its writer sees the store as closed.
    fn run(
        &mut self,
        engine: &dyn Engine,
        committing: Option<&PendingMap>,
        job: Job,
        stats: &CommitStats,
    ) {
        self.jobs += 1;
        stats.writes.fetch_add(1, Ordering::Relaxed);
        let mut tx = Tx {
            engine,
            committing,
            batch: &self.pending,
            own: PendingMap::new(),
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut tx))) {
            Ok((true, done)) => {
                let own = tx.own;
                self.pending.extend(own);
                self.ok.push(done);
            }
            Ok((false, done)) => {
                stats.failed_writes.fetch_add(1, Ordering::Relaxed);
                done(Ok(()));
            }
            Err(_) => {
                stats.failed_writes.fetch_add(1, Ordering::Relaxed);
                tracing::error!("a metadata write closure panicked; its writes are dropped");
            }
        }
    }

    fn ops(pending: PendingMap) -> Vec<WriteOp> {
        pending
            .into_iter()
            .map(|((tree, key), value)| WriteOp { tree, key, value })
            .collect()
    }

    fn ops_cloned(pending: &PendingMap) -> Vec<WriteOp> {
        pending
            .iter()
            .map(|((tree, key), value)| WriteOp {
                tree,
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }
}

fn answer(writers: Vec<Completion>, result: Result<()>) {
    for done in writers {
        done(result.clone());
    }
}

/// Marks the engine as applying a batch until dropped
/// ([`crate::Db::applying_for`]); one batch is applied at a time.
struct Applying<'a>(&'a CommitStats);

impl<'a> Applying<'a> {
    fn start(stats: &'a CommitStats) -> Applying<'a> {
        let now = hangar_util::time::now_msec().max(1);
        stats.applying_since_msec.store(now, Ordering::Relaxed);
        Applying(stats)
    }
}

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        self.0.applying_since_msec.store(0, Ordering::Relaxed);
    }
}

/// Everything the committer thread works with.
struct Committer {
    engine: Arc<dyn Engine>,
    opts: DbOptions,
    stats: Arc<CommitStats>,
    poison: Poison,
}

impl Committer {
    /// Applies `batch` (and syncs it when `sync`), then answers its writers.
    fn commit_now(&self, batch: Batch, sync: bool) {
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = self.poison.get() {
            return answer(batch.ok, Err(e));
        }
        if batch.pending.is_empty() {
            return answer(batch.ok, Ok(()));
        }
        if sync {
            self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        }
        let r = {
            let _applying = Applying::start(&self.stats);
            self.engine.apply(Batch::ops(batch.pending), sync)
        };
        if let Err(e) = &r {
            tracing::error!("metadata batch of {} writes failed: {e}", batch.ok.len());
            if sync {
                self.poison.set(e);
            }
        }
        answer(batch.ok, r);
    }

    /// Serial mode: take what waits, commit it, repeat.
    fn run_serial(&self, rx: &mut mpsc::Receiver<Msg>) {
        let max_batch = self.opts.max_batch.max(1);
        while let Some(msg) = rx.blocking_recv() {
            let mut batch = Batch::default();
            let mut next = Some(msg);
            while let Some(msg) = next.take() {
                if let Msg::Job(job) = msg {
                    batch.run(self.engine.as_ref(), None, job, &self.stats);
                }
                if batch.jobs < max_batch {
                    next = rx.try_recv().ok();
                }
            }
            self.commit_now(batch, self.opts.fsync);
        }
    }

    /// Pipelined mode: see the module documentation.
    ///
    /// `wake` reaches this thread's queue without keeping it open, so that
    /// the syncer can report back yet the queue still closes when the last
    /// [`crate::Db`] handle is dropped.
    fn run_pipelined(self: Arc<Self>, rx: &mut mpsc::Receiver<Msg>, wake: mpsc::WeakSender<Msg>) {
        let max_batch = self.opts.max_batch.max(1);
        let (to_syncer, from_committer) = std::sync::mpsc::channel::<Handed>();
        let me = self.clone();
        let syncer = std::thread::Builder::new()
            .name("db-syncer".into())
            .spawn(move || me.sync_loop(from_committer, wake))
            .expect("spawn db syncer thread");

        let engine = self.engine.as_ref();
        let mut building = Batch::default();
        let mut held: VecDeque<Job> = VecDeque::new();
        // The write set of the batch the syncer is committing.
        let mut committing: Option<Arc<PendingMap>> = None;
        loop {
            while building.jobs < max_batch {
                let Some(job) = held.pop_front() else { break };
                building.run(engine, committing.as_deref(), job, &self.stats);
            }
            if committing.is_none() && building.jobs > 0 {
                // Take whatever else is already queued before closing the
                // batch: a lone writer still goes at once.
                while building.jobs < max_batch {
                    match rx.try_recv() {
                        Ok(Msg::Job(job)) => building.run(engine, None, job, &self.stats),
                        Ok(Msg::Synced) | Err(_) => break,
                    }
                }
                committing = self.hand_over(std::mem::take(&mut building), &to_syncer);
                continue;
            }
            match rx.blocking_recv() {
                Some(Msg::Synced) => committing = None,
                Some(Msg::Job(job)) if building.jobs < max_batch => {
                    building.run(engine, committing.as_deref(), job, &self.stats)
                }
                Some(Msg::Job(job)) => held.push_back(job),
                None => break,
            }
        }
        // Every Db handle is gone. Let the syncer finish, then commit what is
        // left in this thread.
        drop(to_syncer);
        let _ = syncer.join();
        for job in held {
            building.run(engine, None, job, &self.stats);
        }
        if building.jobs > 0 {
            self.commit_now(building, true);
        }
    }

    /// Gives `batch` to the syncer; returns its write set while the syncer
    /// has it, or None if it was answered here (empty, or poisoned store).
    fn hand_over(
        &self,
        batch: Batch,
        to_syncer: &std::sync::mpsc::Sender<Handed>,
    ) -> Option<Arc<PendingMap>> {
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = self.poison.get() {
            answer(batch.ok, Err(e));
            return None;
        }
        if batch.pending.is_empty() {
            answer(batch.ok, Ok(()));
            return None;
        }
        let writes = Arc::new(batch.pending);
        match to_syncer.send((writes.clone(), batch.ok)) {
            Ok(()) => Some(writes),
            Err(unsent) => {
                answer(unsent.0.1, Err(DbError::Closed));
                None
            }
        }
    }

    /// The syncer thread: commits each batch handed over with sync, answers
    /// its writers and tells the committer.
    fn sync_loop(&self, batches: std::sync::mpsc::Receiver<Handed>, wake: mpsc::WeakSender<Msg>) {
        while let Ok((writes, writers)) = batches.recv() {
            let result = match self.poison.get() {
                Some(e) => Err(e),
                None => {
                    self.stats.syncs.fetch_add(1, Ordering::Relaxed);
                    let r = {
                        let _applying = Applying::start(&self.stats);
                        self.engine.apply(Batch::ops_cloned(&writes), true)
                    };
                    if let Err(e) = &r {
                        tracing::error!("metadata batch of {} writes failed: {e}", writers.len());
                        self.poison.set(e);
                    }
                    r
                }
            };
            answer(writers, result);
            // No Db handle left means the committer is shutting down and
            // waits for this thread instead.
            if let Some(wake) = wake.upgrade() {
                let _ = wake.blocking_send(Msg::Synced);
            }
        }
    }
}

/// A batch handed to the syncer: its write set and its writers.
type Handed = (Arc<PendingMap>, Vec<Completion>);

/// The committer thread's body.
pub(crate) fn committer(
    engine: Arc<dyn Engine>,
    mut rx: mpsc::Receiver<Msg>,
    wake: mpsc::WeakSender<Msg>,
    opts: DbOptions,
    stats: Arc<CommitStats>,
    pipelining: Pipelining,
) {
    let c = Arc::new(Committer {
        engine,
        opts,
        stats,
        poison: Poison::default(),
    });
    if opts.fsync && opts.max_batch > 1 && pipelining == Pipelining::On {
        c.run_pipelined(&mut rx, wake);
    } else {
        c.run_serial(&mut rx);
    }
}
