//! The object, version and multipart tables as the model uses them: one
//! row at a time, read or merged, never a transaction spanning tables.
//!
//! Every effect of a change on another table comes from the table's update
//! hook ([`hangar_table::Schema::updated`]) on whichever node merges the
//! row, and the model orders its steps so that a crash between two of them
//! leaves nothing that the version collector or the start-up scan cannot
//! finish (doc/table-rows.md, "Life of an object version").
//!
//! Where the rows are: on the nodes of the row's layout partition
//! ([`hangar_table::sharded::ShardedTable`]: quorum writes and reads), which
//! the cluster names — this node alone on a lone node before its first
//! layout ([`hangar_cluster::Cluster::is_lone`]). A node of a cluster with a
//! larger replication factor that has no layout yet (joining, or replacing
//! a node) refuses to read or write rows (`NoLayoutYet`): its store holds
//! none of the cluster's, so a read would call them absent (an admin's
//! DeleteBucket would find a full bucket empty) and a write would go where
//! no replica looks.

use std::ops::Bound;

use hangar_table::fence::{FenceAnswer, FenceOp};
use hangar_table::sharded::ShardedTable;
use hangar_table::{Schema, Table};

use crate::Result;

/// Most rows one sharded range read returns; longer reads are paged.
const PAGE: usize = 1000;

/// One table's rows, read and merged a row (or a batch of rows) at a time.
pub(crate) struct Rows<S: Schema> {
    local: Table<S>,
    sharded: ShardedTable<S>,
}

impl<S: Schema> Clone for Rows<S> {
    fn clone(&self) -> Self {
        Rows {
            local: self.local.clone(),
            sharded: self.sharded.clone(),
        }
    }
}

impl<S: Schema> Rows<S> {
    /// The rows of `table`, on the nodes of their partitions.
    pub(crate) fn new(table: ShardedTable<S>) -> Rows<S> {
        Rows {
            local: table.local().clone(),
            sharded: table,
        }
    }

    /// The sharded table, for the anti-entropy worker.
    pub(crate) fn sharded_table(&self) -> &ShardedTable<S> {
        &self.sharded
    }

    /// Collects due tombstones with every replica (a no-op report before
    /// the first layout: nothing is collected until the replicas are known).
    pub(crate) async fn collect_tombstones(
        &self,
        due: Vec<hangar_table::tombstones::DueTombstone>,
    ) -> Result<hangar_table::sharded_gc::GcReport> {
        if self.sharded.cluster().awaits_layout() {
            return Ok(Default::default());
        }
        Ok(self.sharded.collect_tombstones(due).await?)
    }

    pub(crate) async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        Ok(self.sharded.get(partition, sort).await?)
    }

    /// Merges `row` into row (`partition`, `sort`), running the table's hook.
    pub(crate) async fn insert(&self, partition: &[u8], sort: &[u8], row: S::Row) -> Result<()> {
        self.insert_many(vec![(partition.to_vec(), sort.to_vec(), row)])
            .await
    }

    /// Merges several rows, each with the table's hook (on every replica).
    pub(crate) async fn insert_many(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        Ok(self.sharded.insert(rows).await?)
    }

    /// Applies a fence operation to `partition` ([`hangar_table::fence`])
    /// on a write quorum of its nodes.
    pub(crate) async fn fence(
        &self,
        partition: &[u8],
        token: u64,
        op: FenceOp,
    ) -> Result<FenceAnswer> {
        Ok(self.sharded.fence(partition, token, op).await?)
    }

    /// Up to `limit` rows of `partition` after `start`, tombstones included.
    pub(crate) async fn range(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        self.range_within(partition, start, Bound::Unbounded, limit)
            .await
    }

    /// Up to `limit` rows of `partition` between `start` and `end`,
    /// tombstones included.
    pub(crate) async fn range_within(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        let mut out: Vec<(Vec<u8>, S::Row)> = Vec::new();
        loop {
            let want = (limit - out.len()).min(PAGE);
            let from = match out.last() {
                Some((k, _)) => Bound::Excluded(k.as_slice()),
                None => start,
            };
            let page = self
                .sharded
                .range(partition, from, end, false, want)
                .await?;
            let short = page.len() < want;
            out.extend(page);
            if short || out.len() >= limit {
                return Ok(out);
            }
        }
    }

    /// Up to `limit` rows of `partition` after `start` for which `keep`
    /// holds, reading on past the others (tombstones).
    pub(crate) async fn range_filtered(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        limit: usize,
        keep: impl Fn(&S::Row) -> bool,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        let mut out = Vec::new();
        let mut cursor: Option<Vec<u8>> = None;
        let page_len = limit.saturating_add(16).min(PAGE);
        loop {
            let from = cursor.as_deref().map_or(start, Bound::Excluded);
            let page = self.range(partition, from, page_len).await?;
            let exhausted = page.len() < page_len;
            cursor = page.last().map(|(k, _)| k.clone());
            for (k, row) in page {
                if out.len() == limit {
                    return Ok(out);
                }
                if keep(&row) {
                    out.push((k, row));
                }
            }
            if exhausted || out.len() == limit {
                return Ok(out);
            }
        }
    }

    /// This node's replica of `partition`'s rows, if it holds the partition
    /// (in some active layout version) — for reads that may skip the quorum.
    fn local_replica(&self, partition: &[u8]) -> Option<&Table<S>> {
        self.sharded
            .cluster()
            .stores_partition(S::layout_partition(partition))
            .then_some(&self.local)
    }

    /// Row (`partition`, `sort`) of a table whose rows never change once
    /// written but to become tombstones (a version's block entries): this
    /// node's copy when it has one that `usable` accepts (a live entry is
    /// the same on every replica), otherwise a quorum read. Saves a GET the
    /// round trip to another node.
    pub(crate) async fn get_local_first(
        &self,
        partition: &[u8],
        sort: &[u8],
        usable: impl Fn(&S::Row) -> bool,
    ) -> Result<Option<S::Row>> {
        if let Some(local) = self.local_replica(partition)
            && let Some(r) = local.get(partition, sort).await?
            && usable(&r)
        {
            return Ok(Some(r));
        }
        self.get(partition, sort).await
    }

    /// Like [`Rows::range_numbered`] for such tables: this node's rows when
    /// `usable` accepts them (the caller checks they are all there), else a
    /// quorum read.
    pub(crate) async fn range_numbered_local_first(
        &self,
        partition: &[u8],
        from: u32,
        limit: usize,
        usable: impl Fn(&[(u32, S::Row)]) -> bool,
    ) -> Result<Vec<(u32, S::Row)>> {
        if let Some(local) = self.local_replica(partition) {
            let rows = local.range_numbered(partition, from, limit).await?;
            if usable(&rows) {
                return Ok(rows);
            }
        }
        self.range_numbered(partition, from, limit).await
    }

    /// For tables whose sort key is a big-endian `u32`: up to `limit` rows
    /// of `partition` numbered `from` or more.
    pub(crate) async fn range_numbered(
        &self,
        partition: &[u8],
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, S::Row)>> {
        let rows = self
            .range(partition, Bound::Included(&from.to_be_bytes()), limit)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(k, r)| Some((u32::from_be_bytes(k.try_into().ok()?), r)))
            .collect())
    }
}
