//! The reads of a [`Table`]`<S, Sharded>` that callers page, filter or number:
//! range reads longer than one quorum read returns, ranges filtered as they
//! are read (tombstones skipped), tables whose sort key is a big-endian
//! `u32`, and reads of rows that never change once written (but to become
//! tombstones), which may use this node's replica instead of a quorum.

use std::ops::Bound;

use super::Sharded;
use crate::{Replica, Result, Schema, Table};

/// Most rows one quorum range read of these helpers asks for.
const PAGE: usize = 1000;

impl<S: Schema> Table<S, Sharded> {
    /// Merges `row` into row (`partition`, `sort`), running the table's
    /// hook on every replica that merges it.
    pub async fn insert_one(&self, partition: &[u8], sort: &[u8], row: S::Row) -> Result<()> {
        self.insert(vec![(partition.to_vec(), sort.to_vec(), row)])
            .await
    }

    /// Up to `limit` rows of `partition` after `start`, tombstones
    /// included; fewer only when there are no more.
    pub async fn range_from(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        self.range_within(partition, start, Bound::Unbounded, limit)
            .await
    }

    /// Up to `limit` rows of `partition` between `start` and `end`,
    /// tombstones included, in as many quorum reads as it takes.
    pub async fn range_within(
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
            let page = self.range(partition, from, end, false, want).await?;
            let short = page.len() < want;
            out.extend(page);
            if short || out.len() >= limit {
                return Ok(out);
            }
        }
    }

    /// Up to `limit` rows of `partition` after `start` for which `keep`
    /// holds, reading on past the others (tombstones).
    pub async fn range_filtered(
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
            let page = self.range_from(partition, from, page_len).await?;
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

    /// For tables whose sort key is a big-endian `u32`: up to `limit` rows
    /// of `partition` numbered `from` or more.
    pub async fn range_numbered(
        &self,
        partition: &[u8],
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, S::Row)>> {
        let rows = self
            .range_from(partition, Bound::Included(&from.to_be_bytes()), limit)
            .await?;
        Ok(crate::replica::numbered(rows))
    }

    /// This node's replica of `partition`'s rows, if it holds the partition
    /// (in some active layout version) — for reads that may skip the quorum.
    fn local_replica(&self, partition: &[u8]) -> Option<&Replica<S>> {
        self.cluster()
            .stores_partition(S::layout_partition(partition))
            .then_some(self.local())
    }

    /// Row (`partition`, `sort`) of a table whose rows never change once
    /// written but to become tombstones (a version's block entries): this
    /// node's copy when it has one that `usable` accepts (a live entry is
    /// the same on every replica), otherwise a quorum read. Saves a GET the
    /// round trip to another node.
    pub async fn get_local_first(
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

    /// Like [`Table::range_numbered`] for such tables: this node's
    /// rows when `usable` accepts them (the caller checks they are all
    /// there), else a quorum read.
    pub async fn range_numbered_local_first(
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
}
