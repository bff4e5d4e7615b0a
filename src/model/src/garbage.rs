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

use hangar_table::tombstones::{self, TombstoneTree};
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};

use crate::block_list::{BlockEntry, VersionTable};
use crate::multipart::{MpuTable, PartTable};
use crate::object::ObjectTable;
use crate::version_parts::VersionPartTable;
use crate::{Model, ModelError, Result, VersionId};

pub use crate::queues::{UPLOAD_TREE, UploadOf, VERSION_GC_TREE, queue_version_gc};

const BATCH: usize = 256;

/// Whether `version`, recorded as an upload of `of`, was published: the row
/// it was to become names it.
async fn was_published(model: &Model, version: &VersionId, of: &UploadOf) -> Result<bool> {
    Ok(match of {
        UploadOf::Object {
            bucket,
            key,
            started_msec,
        } => {
            // A conditional write interrupted after its accept may still be
            // completed by a later round: settle the key first, so that
            // the answer below is final (doc/replication.md §10).
            if let Ok(part) = <[u8; 32]>::try_from(bucket.as_slice()) {
                model.objects().conditional().settle(&part, key).await?;
            }
            model
                .objects()
                .rows()
                .get(bucket, key.as_bytes())
                .await?
                .is_some_and(|o| o.version == *version && !o.is_deleted())
                || published_as_version(model, version, bucket, key, *started_msec).await?
        }
        UploadOf::Part {
            upload_id,
            part_number,
        } => model
            .uploads()
            .part_rows()
            .get(upload_id, &part_number.to_be_bytes())
            .await?
            .is_some_and(|p| p.version == *version && !p.deleted),
    })
}

/// Clock steps back tolerated between an upload's start and its publication.
const CLOCK_MARGIN_MSEC: u64 = 10 * 60 * 1000;

/// Whether `version` is a versioned row of `key` (a versioned bucket's
/// upload): its row is among the versions published since the upload
/// began, which the scan reads newest first and no further.
async fn published_as_version(
    model: &Model,
    version: &VersionId,
    bucket: &[u8],
    key: &str,
    started_msec: u64,
) -> Result<bool> {
    use crate::version_keys::{split_sort_key, versions_older_than, versions_start};
    if started_msec == 0 {
        // Records of older binaries, which wrote object rows only.
        return Ok(false);
    }
    let k = key.as_bytes();
    let end = versions_older_than(k, started_msec.saturating_sub(CLOCK_MARGIN_MSEC))
        .unwrap_or_else(|| crate::version_keys::after_versions(k));
    let mut from = versions_start(k);
    let mut first = true;
    loop {
        let start = if first {
            Bound::Included(from.as_slice())
        } else {
            Bound::Excluded(from.as_slice())
        };
        let rows = model
            .objects()
            .rows()
            .range_within(bucket, start, Bound::Excluded(&end), BATCH)
            .await?;
        let found = rows.iter().any(|(s, o)| {
            split_sort_key(s).1.is_some_and(|(_, id)| id == *version) && !o.is_deleted()
        });
        if found {
            return Ok(true);
        }
        match rows.last() {
            Some((s, _)) if rows.len() == BATCH => {
                from = s.clone();
                first = false;
            }
            _ => return Ok(false),
        }
    }
}

/// Ends every upload left over from before this start (a restart ends all
/// uploads in progress): one that was published before the stop keeps its
/// version; any other is queued for collection. Returns how many were
/// collected. [`stale_uploads`] then [`abandon_uploads`].
pub async fn abandon_stale_uploads(model: &Model) -> Result<u64> {
    let stale = stale_uploads(model).await?;
    abandon_uploads(model, &stale).await
}

/// An upload recorded by an earlier run of this node.
#[derive(Debug, Clone)]
pub struct StaleUpload {
    version: VersionId,
    /// `None` for the empty records of older binaries: never published.
    of: Option<UploadOf>,
}

/// The uploads recorded now (this node's own tree, no remote call): taken
/// at start, before any new upload begins, they are the ones the last stop
/// interrupted.
pub async fn stale_uploads(model: &Model) -> Result<Vec<StaleUpload>> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.clone().map_or(Bound::Unbounded, Bound::Excluded);
        let rows = model
            .db()
            .range_async(UPLOAD_TREE, start, Bound::Unbounded, false, BATCH)
            .await?;
        let Some((last, _)) = rows.last() else {
            return Ok(out);
        };
        after = Some(last.clone());
        out.extend(rows.into_iter().filter_map(|(k, v)| {
            Some(StaleUpload {
                version: VersionId::try_from(k.as_slice()).ok()?,
                of: rmp_serde::from_slice::<UploadOf>(&v).ok(),
            })
        }));
    }
}

/// Ends `stale` uploads (see [`abandon_stale_uploads`]). Whether one was
/// published is read from its object or part row, which in a cluster needs
/// a quorum: this fails while too few peers are up, and may be called
/// again (it is idempotent). Returns how many were queued for collection.
pub async fn abandon_uploads(model: &Model, stale: &[StaleUpload]) -> Result<u64> {
    let mut n = 0;
    for page in stale.chunks(BATCH) {
        let mut published = Vec::new();
        let mut dead = Vec::new();
        for u in page {
            match &u.of {
                Some(of) if was_published(model, &u.version, of).await? => {
                    published.push(u.version)
                }
                _ => dead.push(u.version),
            }
        }
        n += dead.len() as u64;
        model
            .db()
            .write(move |tx| {
                for v in &published {
                    tx.delete(UPLOAD_TREE, v.to_vec());
                }
                for v in &dead {
                    queue_version_gc(tx, v);
                }
                Ok::<_, ModelError>(())
            })
            .await?;
    }
    if n > 0 {
        // The collector may have made its first pass before these were
        // queued; without a wake-up they would wait for its next one.
        model.blocks().wake_collector();
    }
    Ok(n)
}

/// Queued versions read at a time by the collector.
const GC_PAGE: usize = 64;

/// Collects every queued version; returns how many block rows were removed.
pub async fn collect_versions(model: &Model) -> Result<u64> {
    collect_versions_reporting(model, |_, _| {}).await
}

/// [`collect_versions`], calling `on_page(versions, rows)` after each page
/// of queued versions with what that page collected: after a bulk delete
/// a pass lasts minutes, and its progress must show before it ends.
pub async fn collect_versions_reporting(
    model: &Model,
    mut on_page: impl FnMut(u64, u64),
) -> Result<u64> {
    let mut removed = 0;
    loop {
        let queued = model
            .db()
            .range_async(
                VERSION_GC_TREE,
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                GC_PAGE,
            )
            .await?;
        if queued.is_empty() {
            return Ok(removed);
        }
        let page: Vec<VersionId> = queued
            .iter()
            .filter_map(|(k, _)| VersionId::try_from(k.as_slice()).ok())
            .collect();
        let versions = page.len() as u64;
        let rows = collect_page(model, page).await?;
        removed += rows;
        on_page(versions, rows);
    }
}

/// A block entry of a version, with its sort key (the block's index).
type EntryRow = (Vec<u8>, BlockEntry);

/// Versions of a page whose rows are read, or whose references are
/// dropped, at the same time.
const GC_CONCURRENCY: usize = 8;

/// Collects a page of queued versions together, each step for all of them
/// at once and in the order [`collect_one`] keeps for one: references
/// dropped, then block rows made tombstones (one write per batch of rows),
/// then part boundaries, then queue entries (one transaction). A crash at
/// any point leaves the page's versions queued, and the next pass repeats
/// what was done (every step is idempotent). Compared with one version
/// after the other, a page of small objects costs a few round trips and
/// commits instead of five per version: after a bulk delete in a cluster
/// the collector otherwise ran for minutes beside the clients' requests.
/// A version with a batch of rows or more is collected alone, a batch at
/// a time. Returns how many block rows were removed.
async fn collect_page(model: &Model, page: Vec<VersionId>) -> Result<u64> {
    use futures::{StreamExt, TryStreamExt};
    let blocks = model.blocks();
    let firsts: Vec<(VersionId, Vec<EntryRow>)> = futures::stream::iter(page)
        .map(|v| async move {
            let rows = blocks
                .rows()
                .range_from(&v, Bound::Unbounded, BATCH)
                .await?;
            Ok::<_, ModelError>((v, rows))
        })
        .buffered(GC_CONCURRENCY)
        .try_collect()
        .await?;
    let mut removed = 0;
    let mut small = Vec::with_capacity(firsts.len());
    for (v, rows) in firsts {
        if rows.len() >= BATCH {
            removed += collect_one(model, v).await?;
        } else {
            small.push((v, rows));
        }
    }
    let done: Vec<VersionId> = small.iter().map(|(v, _)| *v).collect();
    let mut refs = Vec::with_capacity(small.len());
    let mut tombs = Vec::new();
    for (v, rows) in small {
        let live: Vec<_> = rows.into_iter().filter(|(_, e)| !e.deleted).collect();
        removed += live.len() as u64;
        refs.push((v, live.iter().map(|(_, e)| e.hash).collect::<Vec<_>>()));
        tombs.extend(live.into_iter().map(|(idx, mut e)| {
            e.deleted = true;
            (v.to_vec(), idx, e)
        }));
    }
    futures::stream::iter(refs)
        .filter(|(_, hashes)| std::future::ready(!hashes.is_empty()))
        .map(|(v, hashes)| blocks.drop_refs(v, hashes))
        .buffer_unordered(GC_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    // In messages of at most a batch of rows, as one version's were.
    while !tombs.is_empty() {
        let rest = tombs.split_off(tombs.len().min(BATCH));
        blocks
            .rows()
            .insert(std::mem::replace(&mut tombs, rest))
            .await?;
    }
    futures::stream::iter(done.clone())
        .map(|v| blocks.drop_parts(v))
        .buffer_unordered(GC_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    model
        .db()
        .write(move |tx| {
            for v in &done {
                tx.delete(VERSION_GC_TREE, v.to_vec());
            }
            Ok::<_, ModelError>(())
        })
        .await?;
    Ok(removed)
}

async fn collect_one(model: &Model, version: VersionId) -> Result<u64> {
    let mut removed = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let rows = model
            .blocks()
            .rows()
            .range_from(&version, start, BATCH)
            .await?;
        let done = rows.len() < BATCH;
        after = rows.last().map(|(k, _)| k.clone());
        let live: Vec<_> = rows.into_iter().filter(|(_, e)| !e.deleted).collect();
        removed += live.len() as u64;
        // References are dropped first, entries become tombstones after: a
        // crash between the two leaves live entries, whose references are
        // dropped again at the next pass (a reference already dropped is
        // not dropped twice), never a tombstone whose block is still held.
        let refs: Vec<_> = live.iter().map(|(_, e)| e.hash).collect();
        model.blocks().drop_refs(version, refs).await?;
        let tombs = live
            .into_iter()
            .map(|(idx, mut e)| {
                e.deleted = true;
                (version.to_vec(), idx, e)
            })
            .collect();
        model.blocks().rows().insert(tombs).await?;
        if done {
            // The part boundaries go last: they hold no block, and until
            // the queue entry is removed a crash repeats the pass.
            model.blocks().drop_parts(version).await?;
            model
                .db()
                .write(move |tx| {
                    tx.delete(VERSION_GC_TREE, version.to_vec());
                    Ok::<_, ModelError>(())
                })
                .await?;
            return Ok(removed);
        }
    }
}

/// The tables whose tombstones this node collects after the tombstone
/// delay, where that is safe ([`crate::Tables::tombstones_collectable`]).
pub const TOMBSTONE_TREES: &[TombstoneTree] = &[
    TombstoneTree::of::<ObjectTable>(),
    TombstoneTree::of::<VersionTable>(),
    TombstoneTree::of::<VersionPartTable>(),
    TombstoneTree::of::<MpuTable>(),
    TombstoneTree::of::<PartTable>(),
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
            let delay_msec = delay.as_millis() as u64;
            let pass = if model.tables().tombstones_collectable() {
                collect_alone(&model, delay_msec).await
            } else {
                model
                    .tables()
                    .collect_replicated_tombstones(delay_msec)
                    .await
            };
            match pass {
                Ok((removed, deferred)) => {
                    w.add_processed(removed);
                    let waiting = tombstones::queued(model.db(), tombstones::Queue::Collect)
                        .await
                        .ok();
                    w.set_progress(
                        format!(
                            "last pass: {removed} tombstones removed, {deferred} kept until every replica holds them"
                        ),
                        waiting,
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

/// How long a tombstone waits before its burial is tried
/// (`hangar_table::tombstones`, "Burial"): long enough for the replicas
/// outside a delete's write quorum to have it too, so that most are buried
/// at the first try; short enough that listings soon stop reading past it.
pub const TOMBSTONE_BURIAL_DELAY: Duration = Duration::from_secs(10);

/// Queue entries one burial transaction takes: few enough that a client's
/// write committed in the same group does not wait long behind it (a lone
/// node's PUT 4 KiB ×1 during burial peaked at 18–22 ms with 1 000, 11–14
/// ms with 128: doc/replication.md); the other replicas are asked once
/// per batch either way.
const BURIAL_BATCH: usize = 128;

/// Starts the tombstone burial worker: every `interval`, the tombstones
/// queued at least `delay` ago that every replica of their partition holds
/// are moved out of the way of listings, a batch at a time until none is
/// due. Those a replica lacks are tried again 70 s after they were tried,
/// those of a partition with a node down 10 minutes after.
pub fn spawn_tombstone_burial_worker(
    model: Arc<Model>,
    workers: &WorkerRegistry,
    delay: Duration,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("tombstone-burial");
    tokio::spawn(async move {
        let delay_msec = delay.as_millis() as u64;
        loop {
            w.set_state(WorkerState::Busy);
            let (mut buried, mut deferred) = (0u64, 0u64);
            let pass = loop {
                match model
                    .tables()
                    .bury_tombstones(delay_msec, BURIAL_BATCH)
                    .await
                {
                    // Every entry of a batch leaves the due range (buried,
                    // queued again later, or ended as stale), so the pass
                    // ends; a batch of stale entries alone ends it early,
                    // and the next pass goes on.
                    Ok((0, 0)) => break Ok(()),
                    Ok((b, d)) => {
                        buried += b;
                        deferred += d;
                        w.add_processed(b);
                    }
                    Err(e) => break Err(e),
                }
            };
            match pass {
                Ok(()) => {
                    if buried > 0 {
                        tracing::debug!("tombstone burial: {buried} buried, {deferred} deferred");
                    }
                    w.set_progress(
                        format!(
                            "last pass: {buried} tombstones buried, {deferred} kept until every replica holds them"
                        ),
                        None,
                    );
                }
                Err(e) => {
                    tracing::error!("tombstone burial: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::time::sleep(interval).await;
        }
    })
}

/// Removes the due tombstones of a node whose rows no other node holds.
async fn collect_alone(model: &Model, delay_msec: u64) -> Result<(u64, u64)> {
    let mut removed = 0u64;
    loop {
        let (looked, n) =
            tombstones::collect_due(model.db(), TOMBSTONE_TREES, now_msec(), delay_msec, BATCH)
                .await?;
        removed += n as u64;
        if looked < BATCH {
            return Ok((removed, 0));
        }
    }
}

/// Starts the version collector, woken by [`crate::Blocks::wake_collector`] and every `interval`.
pub fn spawn_version_gc_worker(
    model: Arc<Model>,
    workers: &WorkerRegistry,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("version-gc");
    tokio::spawn(async move {
        loop {
            w.set_state(WorkerState::Busy);
            let mut versions = 0u64;
            let pass = collect_versions_reporting(&model, |v, rows| {
                versions += v;
                w.add_processed(rows);
                w.set_progress(
                    format!("this pass so far: {versions} versions collected"),
                    None,
                );
            })
            .await;
            match pass {
                Ok(n) => {
                    if n > 0 {
                        tracing::debug!(
                            "version gc: {versions} versions collected, {n} block references released"
                        );
                    }
                    w.set_progress(
                        format!(
                            "last pass: {versions} versions collected, {n} block references released"
                        ),
                        None,
                    );
                }
                Err(e) => {
                    tracing::error!("version gc: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::select! {
                _ = model.blocks().collector_wakeup().notified() => {}
                _ = tokio::time::sleep(interval) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::test_model;
    use crate::version_parts::VersionPart;

    #[tokio::test]
    async fn a_collected_version_takes_its_parts_and_leaves_the_others() {
        let (_d, model) = test_model().await;
        let blocks = model.blocks();
        let part = VersionPart {
            deleted: false,
            size: 5,
            offset: 0,
            checksum: None,
        };
        let (dead, live) = ([7u8; 16], [8u8; 16]);
        for v in [dead, live] {
            blocks.put_parts(v, vec![(1, part.clone())]).await.unwrap();
        }
        model
            .db()
            .write(move |tx| {
                queue_version_gc(tx, &dead);
                Ok::<_, ModelError>(())
            })
            .await
            .unwrap();
        collect_versions(&model).await.unwrap();
        assert_eq!(blocks.parts(&dead, 0, 10).await.unwrap(), Vec::new());
        assert_eq!(blocks.parts(&live, 0, 10).await.unwrap(), vec![(1, part)]);
        let queued = model
            .db()
            .get_async(VERSION_GC_TREE, dead.to_vec())
            .await
            .unwrap();
        assert_eq!(queued, None, "the pass ended with the parts");
    }

    #[tokio::test]
    async fn a_page_of_small_versions_costs_a_write_per_block_and_two_more() {
        let (_d, model) = test_model().await;
        let n = GC_PAGE;
        let versions: Vec<VersionId> = (0..n).map(|i| (1000 + i as u128).to_be_bytes()).collect();
        for (i, v) in versions.iter().enumerate() {
            let data = bytes::Bytes::from(format!("block {i}"));
            model.blocks().store(*v, 0, 0, data).await.unwrap();
        }
        let queued = versions.clone();
        model
            .db()
            .write(move |tx| {
                for v in &queued {
                    queue_version_gc(tx, v);
                }
                Ok::<_, ModelError>(())
            })
            .await
            .unwrap();
        let writes = || {
            model
                .db()
                .stats()
                .writes
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let before = writes();
        assert_eq!(collect_versions(&model).await.unwrap(), n as u64);
        // Each block's reference is dropped by a write of its own (as an
        // upload adds it); the page's tombstones and queue entries are one
        // write each. One version after the other was three per version.
        let spent = writes() - before;
        assert!(spent <= n as u64 + 2, "{spent} writes for {n} versions");
        for v in &versions {
            let live = model.blocks().list(v, 0, 10).await.unwrap();
            assert!(live.iter().all(|(_, e)| e.deleted), "{live:?}");
        }
        for v in &versions {
            let queued = model.db().get_async(VERSION_GC_TREE, v.to_vec()).await;
            assert_eq!(queued.unwrap(), None, "every queue entry is gone");
        }
    }

    #[tokio::test]
    async fn a_pass_reports_each_page_as_it_goes() {
        let (_d, model) = test_model().await;
        let n = 2 * GC_PAGE + 5;
        model
            .db()
            .write(move |tx| {
                for i in 0..n {
                    queue_version_gc(tx, &(i as u128).to_be_bytes());
                }
                Ok::<_, ModelError>(())
            })
            .await
            .unwrap();
        let mut pages = Vec::new();
        collect_versions_reporting(&model, |v, rows| pages.push((v, rows)))
            .await
            .unwrap();
        assert_eq!(
            pages,
            vec![(GC_PAGE as u64, 0), (GC_PAGE as u64, 0), (5, 0)],
            "one report per page, before the pass ends"
        );
    }
}
