//! The lifecycle worker: applies the buckets' lifecycle rules
//! ([`crate::lifecycle`]) with the model operations S3's own requests use.
//!
//! Who acts: every node runs the worker, and for each bucket only the
//! first live node, by id, of the bucket's object partition acts; a node
//! without a layout acts on all its buckets. Two nodes act on the same
//! bucket only while they disagree on who is up; then both may write a
//! delete marker for the same expired object (a second, harmless marker)
//! and the removals of versions and uploads are idempotent (a removed
//! version or ended upload is not removed again).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};

use crate::bucket::{BucketRow, Versioning};
use crate::lifecycle::{Removal, VersionFacts, plan_key};
use crate::object::ObjectRow;
use crate::version_keys::{VersionRef, newer_is_null, split_sort_key};
use crate::{Model, ModelError, Result};

/// Rows read at once while walking a bucket.
const PAGE: usize = 1000;

/// Buckets with rules walked since the node started.
pub static BUCKETS_SCANNED: AtomicU64 = AtomicU64::new(0);
/// Current versions expired (deleted or given a delete marker).
pub static OBJECTS_EXPIRED: AtomicU64 = AtomicU64::new(0);
/// Noncurrent versions removed.
pub static NONCURRENT_REMOVED: AtomicU64 = AtomicU64::new(0);
/// Expired object delete markers removed.
pub static MARKERS_REMOVED: AtomicU64 = AtomicU64::new(0);
/// Incomplete multipart uploads aborted.
pub static UPLOADS_ABORTED: AtomicU64 = AtomicU64::new(0);
/// When the last pass ended (ms since the epoch; 0: none yet).
pub static LAST_PASS_MSEC: AtomicU64 = AtomicU64::new(0);

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    pub buckets: u64,
    pub expired: u64,
    pub noncurrent: u64,
    pub markers: u64,
    pub aborted: u64,
}

impl PassReport {
    fn actions(&self) -> u64 {
        self.expired + self.noncurrent + self.markers + self.aborted
    }
}

/// Starts the `lifecycle` worker: a pass every `interval`, with days of
/// `day_msec` (86 400 000 but in tests).
pub fn spawn_lifecycle_worker(
    model: Arc<Model>,
    workers: &WorkerRegistry,
    day_msec: u64,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("lifecycle");
    tokio::spawn(async move {
        loop {
            w.set_state(WorkerState::Busy);
            // The queue is the buckets left in the pass under way: the
            // console draws it as the pass's progress.
            match model
                .lifecycle_pass(day_msec, |left| w.set_queue_length(Some(left)))
                .await
            {
                Ok(r) => {
                    w.add_processed(r.actions());
                    let at = now_msec();
                    LAST_PASS_MSEC.store(at, Ordering::Relaxed);
                    w.set_progress(
                        format!(
                            "last pass at {at} ms: {} buckets scanned, {} objects expired, \
                             {} noncurrent versions removed, {} delete markers removed, \
                             {} uploads aborted; since start: {} buckets scanned, {} objects \
                             expired, {} uploads aborted",
                            r.buckets,
                            r.expired,
                            r.noncurrent,
                            r.markers,
                            r.aborted,
                            BUCKETS_SCANNED.load(Ordering::Relaxed),
                            OBJECTS_EXPIRED.load(Ordering::Relaxed),
                            UPLOADS_ABORTED.load(Ordering::Relaxed),
                        ),
                        Some(0),
                    );
                }
                Err(e) => {
                    tracing::error!("lifecycle: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::time::sleep(interval).await;
        }
    })
}

impl Model {
    /// One pass over every bucket with enabled rules that this node acts
    /// for; `left` is told how many buckets are left in the pass before
    /// each one and at its end.
    pub async fn lifecycle_pass(&self, day_msec: u64, left: impl Fn(u64)) -> Result<PassReport> {
        let mut report = PassReport::default();
        let buckets: Vec<BucketRow> = self
            .buckets()
            .list_buckets()
            .await?
            .into_iter()
            .filter(|b| b.lifecycle_rules().iter().any(|r| r.enabled) && self.acts_for_lifecycle(b))
            .collect();
        for (i, bucket) in buckets.iter().enumerate() {
            left((buckets.len() - i) as u64);
            self.lifecycle_bucket(bucket, day_msec, &mut report).await?;
            report.buckets += 1;
            BUCKETS_SCANNED.fetch_add(1, Ordering::Relaxed);
        }
        left(0);
        Ok(report)
    }

    /// Whether this node applies `bucket`'s rules: the first live node, by
    /// id, of the bucket partition's read nodes (a lone node itself); none
    /// awaiting its first layout.
    fn acts_for_lifecycle(&self, bucket: &BucketRow) -> bool {
        let cluster = self.cluster();
        let part = bucket.id_bytes();
        let p = <crate::object::ObjectTable as hangar_table::Schema>::layout_partition(&part);
        let mut nodes = cluster.read_nodes_of_partition(p);
        nodes.sort();
        nodes.into_iter().find(|n| cluster.is_up(*n)) == Some(cluster.id())
    }

    async fn lifecycle_bucket(
        &self,
        bucket: &BucketRow,
        day_msec: u64,
        report: &mut PassReport,
    ) -> Result<()> {
        let part = bucket.id_bytes();
        let mut cursor: Option<Vec<u8>> = None;
        // The rows of the key being gathered: (sort key, row), live only.
        let mut key: Option<Vec<u8>> = None;
        let mut rows: Vec<(Vec<u8>, ObjectRow)> = Vec::new();
        loop {
            let from = cursor.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.objects().rows().range_from(&part, from, PAGE).await?;
            let done = page.len() < PAGE;
            cursor = page.last().map(|(k, _)| k.clone());
            for (sort, row) in page {
                let k = split_sort_key(&sort).0.to_vec();
                if key.as_ref() != Some(&k) {
                    if let Some(prev) = key.take() {
                        self.lifecycle_key(
                            bucket,
                            &prev,
                            std::mem::take(&mut rows),
                            day_msec,
                            report,
                        )
                        .await?;
                    }
                    key = Some(k);
                }
                if !row.is_deleted() {
                    rows.push((sort, row));
                }
            }
            if done {
                break;
            }
        }
        if let Some(prev) = key {
            self.lifecycle_key(bucket, &prev, rows, day_msec, report)
                .await?;
        }
        self.lifecycle_uploads(bucket, day_msec, report).await
    }

    /// Applies the rules to the live rows of one key (its null row first,
    /// then its versions newest first, as they sort).
    async fn lifecycle_key(
        &self,
        bucket: &BucketRow,
        key: &[u8],
        mut rows: Vec<(Vec<u8>, ObjectRow)>,
        day_msec: u64,
        report: &mut PassReport,
    ) -> Result<()> {
        let Ok(key) = std::str::from_utf8(key) else {
            return Ok(());
        };
        // Place the null row among the versions by its timestamp.
        if rows
            .first()
            .is_some_and(|(s, _)| split_sort_key(s).1.is_none())
        {
            let null = rows.remove(0);
            let at = rows
                .iter()
                .position(|(_, v)| newer_is_null(null.1.timestamp_msec, v.timestamp_msec))
                .unwrap_or(rows.len());
            rows.insert(at, null);
        }
        let facts: Vec<VersionFacts<'_>> = rows
            .iter()
            .map(|(_, r)| VersionFacts {
                timestamp_msec: r.timestamp_msec,
                size: r.size,
                tags: &r.tags.value,
                delete_marker: r.is_delete_marker(),
            })
            .collect();
        let versioned = bucket.versioning() != Versioning::Off;
        let plan = plan_key(
            bucket.lifecycle_rules(),
            key,
            &facts,
            versioned,
            now_msec(),
            day_msec,
        );
        for (i, removal) in plan {
            let (sort, row) = &rows[i];
            let v = VersionRef::of_row(sort, &row.version);
            if self.lifecycle_remove(bucket, key, v, removal).await? {
                match removal {
                    Removal::ExpireCurrent => {
                        report.expired += 1;
                        OBJECTS_EXPIRED.fetch_add(1, Ordering::Relaxed);
                    }
                    Removal::RemoveNoncurrent => {
                        report.noncurrent += 1;
                        NONCURRENT_REMOVED.fetch_add(1, Ordering::Relaxed);
                    }
                    Removal::RemoveExpiredMarker => {
                        report.markers += 1;
                        MARKERS_REMOVED.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        Ok(())
    }

    /// The one place where the lifecycle removes a version (version `v` of
    /// `key`, for `removal`), through the operations of S3's DELETE: a
    /// retention check (object lock) belongs here, returning `false` for a
    /// version it keeps. Returns whether something was removed.
    async fn lifecycle_remove(
        &self,
        bucket: &BucketRow,
        key: &str,
        v: VersionRef,
        removal: Removal,
    ) -> Result<bool> {
        let done = match removal {
            // As a DELETE without version id: a delete marker in a
            // versioned bucket, a delete in an unversioned one.
            Removal::ExpireCurrent => self.objects().delete_version(bucket, key, None).await,
            Removal::RemoveNoncurrent | Removal::RemoveExpiredMarker => {
                self.objects().delete_version(bucket, key, Some(v)).await
            }
        };
        match done {
            Ok(done) => Ok(done.existed),
            // A version under Object Lock outlives its rule: S3 never lets
            // lifecycle remove a locked version, and the next pass looks
            // again once the retention has ended.
            Err(ModelError::ObjectLocked) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Aborts the uploads the rules say are stale.
    async fn lifecycle_uploads(
        &self,
        bucket: &BucketRow,
        day_msec: u64,
        report: &mut PassReport,
    ) -> Result<()> {
        let rules = bucket.lifecycle_rules();
        if !rules.iter().any(|r| r.enabled && r.abort_days.is_some()) {
            return Ok(());
        }
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let from = cursor.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.uploads().list(bucket, from, PAGE).await?;
            let done = page.len() < PAGE;
            cursor = page.last().map(|(k, _)| k.clone());
            let now = now_msec();
            for (_, m) in page {
                let stale = rules.iter().any(|r| {
                    r.matches_upload(&m.key)
                        && r.abort_days.is_some_and(|d| {
                            now >= crate::lifecycle::due_msec(m.initiated_msec, d, day_msec)
                        })
                });
                if stale && self.uploads().abort(bucket, &m.key, m.upload_id).await? {
                    report.aborted += 1;
                    UPLOADS_ABORTED.fetch_add(1, Ordering::Relaxed);
                }
            }
            if done {
                return Ok(());
            }
        }
    }
}
