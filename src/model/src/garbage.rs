//! Uploads in progress, and the collector of dead versions.
//!
//! An upload registers its version in the `upload` tree before its first
//! block, and removes it in the transaction that publishes the object. A
//! version that is no longer reachable (overwritten, deleted, aborted, or
//! left behind by a crash) is queued in `version_gc`; the collector removes
//! its block rows a batch at a time — each becomes a tombstone and drops its
//! block's reference (the block GC then deletes unreferenced files after
//! their grace delay).

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use hangar_block::remove_ref;
use hangar_db::Tx;
use hangar_table::{Schema, Table, tombstones};
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};

use crate::multipart::{MpuTable, PartTable};
use crate::object::ObjectTable;
use crate::version::VersionTable;
use crate::{Model, ModelError, Result, VersionId};

/// Tree of uploads in progress: version id → empty.
pub const UPLOAD_TREE: &str = "upload";
/// Tree of versions to collect: version id → empty.
pub const VERSION_GC_TREE: &str = "version_gc";

const BATCH: usize = 256;

/// Queues `version` for collection, inside a transaction.
pub fn queue_version_gc(tx: &mut Tx<'_>, version: &VersionId) {
    tx.delete(UPLOAD_TREE, version.to_vec());
    tx.put(VERSION_GC_TREE, version.to_vec(), Vec::new());
}

/// Queues every upload left over from before this start (a restart ends
/// all uploads in progress). Returns how many were found.
pub async fn abandon_stale_uploads(model: &Model) -> Result<u64> {
    let mut n = 0;
    loop {
        let rows = model
            .db()
            .range_async(
                UPLOAD_TREE,
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                BATCH,
            )
            .await?;
        if rows.is_empty() {
            return Ok(n);
        }
        n += rows.len() as u64;
        model
            .db()
            .write(move |tx| {
                for (k, _) in rows {
                    if let Ok(v) = VersionId::try_from(k.as_slice()) {
                        queue_version_gc(tx, &v);
                    }
                }
                Ok::<_, ModelError>(())
            })
            .await?;
    }
}

/// Collects every queued version; returns how many block rows were removed.
pub async fn collect_versions(model: &Model) -> Result<u64> {
    let mut removed = 0;
    loop {
        let queued = model
            .db()
            .range_async(
                VERSION_GC_TREE,
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                64,
            )
            .await?;
        if queued.is_empty() {
            return Ok(removed);
        }
        for (k, _) in queued {
            let Ok(version) = VersionId::try_from(k.as_slice()) else {
                continue;
            };
            removed += collect_one(model, version).await?;
        }
    }
}

async fn collect_one(model: &Model, version: VersionId) -> Result<u64> {
    let table = Table::<VersionTable>::new(model.db().clone());
    let grace = model.block_gc_delay_msec();
    let mut removed = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let rows = table
            .range(&version, start, Bound::Unbounded, false, BATCH)
            .await?;
        let done = rows.len() < BATCH;
        after = rows.last().map(|(k, _)| k.clone());
        let live: Vec<_> = rows.into_iter().filter(|(_, e)| !e.deleted).collect();
        removed += live.len() as u64;
        model
            .db()
            .write(move |tx| {
                let now = now_msec();
                for (idx, entry) in &live {
                    // The entry becomes a tombstone (so no replica brings
                    // it back) and drops its reference, exactly once: a
                    // reference already dropped is not dropped again.
                    let mut tomb = entry.clone();
                    tomb.deleted = true;
                    Table::<VersionTable>::tx_insert(tx, &version, idx, &tomb)?;
                    remove_ref(tx, &entry.hash, &version, now, grace)?;
                }
                if done {
                    tx.delete(VERSION_GC_TREE, version.to_vec());
                }
                Ok::<_, ModelError>(())
            })
            .await?;
        if done {
            return Ok(removed);
        }
    }
}

/// The tables whose tombstones this node collects after the tombstone
/// delay: their rows are stored on this node only, for now.
pub const TOMBSTONE_TREES: &[&str] = &[
    ObjectTable::TREE,
    VersionTable::TREE,
    MpuTable::TREE,
    PartTable::TREE,
];

/// Starts the tombstone collector: every `interval`, tombstones older than
/// `delay` are removed, a batch at a time.
pub fn spawn_tombstone_gc_worker(
    model: Arc<Model>,
    workers: &WorkerRegistry,
    delay: Duration,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("tombstone-gc");
    tokio::spawn(async move {
        loop {
            w.set_state(WorkerState::Busy);
            let mut removed = 0u64;
            let pass = async {
                loop {
                    let (looked, n) = tombstones::collect_due(
                        model.db(),
                        TOMBSTONE_TREES,
                        now_msec(),
                        delay.as_millis() as u64,
                        BATCH,
                    )
                    .await?;
                    removed += n as u64;
                    if looked < BATCH {
                        return tombstones::queued(model.db()).await;
                    }
                }
            };
            match pass.await {
                Ok(waiting) => {
                    w.add_processed(removed);
                    w.set_progress(
                        format!("last pass: {removed} tombstones removed"),
                        Some(waiting),
                    );
                }
                Err(e) => {
                    tracing::error!("tombstone gc: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::time::sleep(interval).await;
        }
    })
}

/// Starts the version collector, woken by [`Model::wake_gc`] and every `interval`.
pub fn spawn_version_gc_worker(
    model: Arc<Model>,
    workers: &WorkerRegistry,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("version-gc");
    tokio::spawn(async move {
        loop {
            w.set_state(WorkerState::Busy);
            match collect_versions(&model).await {
                Ok(n) => {
                    w.add_processed(n);
                    if n > 0 {
                        tracing::debug!("version gc: released {n} block references");
                    }
                    w.set_progress(format!("last pass: {n} block references released"), None);
                }
                Err(e) => {
                    tracing::error!("version gc: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::select! {
                _ = model.gc_wakeup().notified() => {}
                _ = tokio::time::sleep(interval) => {}
            }
        }
    })
}
