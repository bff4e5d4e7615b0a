//! Burial and collection of tombstones.
//!
//! A deleted row stays as a tombstone so that a replica that missed the
//! delete cannot bring the row back. Tombstones are removed physically once
//! they are older than a delay (`tombstone_gc_delay_secs`, a day by default,
//! as Garage's), and only if the row is still that same tombstone.
//!
//! **Burial.** Until then a tombstone would sit between live rows, and a
//! listing would read past it: nine rows in ten of a bucket whose objects
//! were mostly deleted. So a table with a [`crate::Schema::BURIED_TREE`]
//! moves each tombstone there, unchanged, once every replica of its
//! partition holds it (`crate::sharded`, `bury_tombstones`; a few seconds
//! after the delete). Reads by key, merges, the Merkle index, anti-entropy
//! and collection still see it where it lies ([`crate::stored`]); ranges do
//! not. Skipping it in a range loses nothing: every replica holds it or a
//! row merged over it, and each keeps merging it into whatever arrives
//! later, so no replica can answer a row older than it.
//!
//! The queues are local trees written in the same transaction as the
//! tombstone (by [`crate::Replica::tx_insert`]), so a crash loses no entry:
//! [`TOMBSTONE_GC_TREE`] for collection, and [`TOMBSTONE_BURIAL_TREE`] for
//! burial (tables that bury). Both:
//!
//! ```text
//! key   : written_msec (u64 BE) ++ tree name ++ 0x00 ++ storage key
//! value : blake3 of the stored row value (format byte included)
//! ```
//!
//! Removing a tombstone is safe only where no other replica holds the row:
//! tables on this node alone, or sharded tables with a replication factor
//! of 1. The caller decides ([`collect_due`] removes what it is given);
//! replicated tables first learn that every replica holds the tombstone,
//! then remove it from all (`crate::sharded`, `collect_tombstones`).

use std::ops::Bound;

use hangar_db::{Db, DbError, Tx};
use hangar_util::Hash;

use crate::Schema;
use crate::stored::RowTrees;

/// A table whose tombstones are collected: its tree, and what removing a
/// row must also update (its Merkle index, for a sharded table).
#[derive(Debug, Clone, Copy)]
pub struct TombstoneTree {
    pub tree: &'static str,
    /// Where its tombstones are buried, if they are.
    pub buried: Option<&'static str>,
    pub partition_len: usize,
    pub merkle: Option<&'static str>,
    /// The layout partition of a partition key (`Schema::layout_partition`).
    pub partition_of: fn(&[u8]) -> hangar_layout::Partition,
}

impl TombstoneTree {
    /// The collected table of schema `S`.
    pub const fn of<S: Schema>() -> TombstoneTree {
        TombstoneTree {
            tree: S::TREE,
            buried: S::BURIED_TREE,
            partition_len: S::PARTITION_LEN,
            merkle: S::MERKLE_TREE,
            partition_of: S::layout_partition,
        }
    }
}

/// The local queue of tombstones to collect.
pub const TOMBSTONE_GC_TREE: &str = "tombstone_gc";

/// The local queue of tombstones to bury.
pub const TOMBSTONE_BURIAL_TREE: &str = "tombstone_burial";

/// One of the two queues of tombstones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// To remove after the tombstone delay ([`TOMBSTONE_GC_TREE`]).
    Collect,
    /// To bury once every replica holds them ([`TOMBSTONE_BURIAL_TREE`]).
    Burial,
}

impl Queue {
    /// The queue's local tree.
    pub fn tree(self) -> &'static str {
        match self {
            Queue::Collect => TOMBSTONE_GC_TREE,
            Queue::Burial => TOMBSTONE_BURIAL_TREE,
        }
    }
}

impl TombstoneTree {
    fn rows(&self) -> RowTrees {
        RowTrees {
            tree: self.tree,
            buried: self.buried,
        }
    }
}

/// Queues the tombstone just written at `key` of table `trees` (value
/// `value`): for collection, and for burial if the table buries.
pub(crate) fn queue(tx: &mut Tx<'_>, trees: RowTrees, key: &[u8], value: &[u8], now: u64) {
    let hash = Hash::of(value).as_bytes().to_vec();
    if trees.buried.is_some() {
        tx.put(
            TOMBSTONE_BURIAL_TREE,
            queue_key(now, trees.tree, key),
            hash.clone(),
        );
    }
    tx.put(TOMBSTONE_GC_TREE, queue_key(now, trees.tree, key), hash);
}

/// The queue key of the tombstone at `key` of `tree`, queued at `now`.
pub(crate) fn queue_key(now: u64, tree: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + tree.len() + 1 + key.len());
    k.extend_from_slice(&now.to_be_bytes());
    k.extend_from_slice(tree.as_bytes());
    k.push(0);
    k.extend_from_slice(key);
    k
}

/// Removes every tombstone of `trees` queued at least `delay_msec` before
/// `now`, up to `limit` queue entries; returns (entries looked at, rows
/// removed). A row that changed since it was queued (it was written again,
/// by a newer write or a newer tombstone with its own entry) is left alone.
pub async fn collect_due(
    db: &Db,
    trees: &'static [TombstoneTree],
    now: u64,
    delay_msec: u64,
    limit: usize,
) -> Result<(usize, usize), DbError> {
    let end = now.saturating_sub(delay_msec).to_be_bytes().to_vec();
    let due = db
        .range_async(
            TOMBSTONE_GC_TREE,
            Bound::Unbounded,
            Bound::Excluded(end),
            false,
            limit,
        )
        .await?;
    if due.is_empty() {
        return Ok((0, 0));
    }
    let looked = due.len();
    let removed = db
        .write(move |tx| {
            let mut removed = 0;
            for (qk, expected) in due {
                tx.delete(TOMBSTONE_GC_TREE, qk.clone());
                let Some((t, key)) = parse(&qk, trees) else {
                    continue;
                };
                if let Some(stored) = t.rows().tx_get(tx, key)?
                    && Hash::of(&stored.value).as_bytes().as_slice() == expected.as_slice()
                {
                    if let Some(index) = t.merkle
                        && key.len() >= t.partition_len
                    {
                        let p = (t.partition_of)(&key[..t.partition_len]);
                        crate::merkle::tx_update(tx, index, p, key, Some(&stored.value), None)?;
                    }
                    t.rows().tx_delete(tx, key);
                    removed += 1;
                }
            }
            Ok::<_, DbError>(removed)
        })
        .await?;
    Ok((looked, removed))
}

/// A due entry of the queue, for a table collected by its replicas
/// together ([`crate::sharded`], `collect_tombstones`).
#[derive(Debug, Clone)]
pub struct DueTombstone {
    pub queue_key: Vec<u8>,
    pub tree: &'static str,
    /// The row's storage key.
    pub key: Vec<u8>,
    /// blake3 of the row value the tombstone was written with.
    pub hash: [u8; 32],
}

/// Up to `limit` entries of `queue` for `trees` written at least
/// `delay_msec` before `now` (entries of other trees are skipped).
pub async fn due(
    db: &Db,
    queue: Queue,
    trees: &'static [TombstoneTree],
    now: u64,
    delay_msec: u64,
    limit: usize,
) -> Result<Vec<DueTombstone>, DbError> {
    let end = now.saturating_sub(delay_msec).to_be_bytes().to_vec();
    let rows = db
        .range_async(
            queue.tree(),
            Bound::Unbounded,
            Bound::Excluded(end),
            false,
            limit,
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(qk, v)| {
            let (t, key) = parse(&qk, trees)?;
            Some(DueTombstone {
                tree: t.tree,
                key: key.to_vec(),
                hash: v.as_slice().try_into().ok()?,
                queue_key: qk,
            })
        })
        .collect())
}

/// Ends the entries `ended` of `queue`, and queues `again` anew as
/// written `later_msec` from now (so that they come back after the delay
/// and that much more, behind the others).
pub async fn settle(
    db: &Db,
    queue: Queue,
    ended: Vec<Vec<u8>>,
    again: Vec<DueTombstone>,
    later_msec: u64,
) -> Result<(), DbError> {
    if ended.is_empty() && again.is_empty() {
        return Ok(());
    }
    db.write(move |tx| {
        let at = hangar_util::time::now_msec().saturating_add(later_msec);
        for qk in ended {
            tx.delete(queue.tree(), qk);
        }
        for d in again {
            tx.delete(queue.tree(), d.queue_key);
            tx.put(queue.tree(), queue_key(at, d.tree, &d.key), d.hash.to_vec());
        }
        Ok::<_, DbError>(())
    })
    .await
}

/// How many tombstones wait in `queue` (a full count, for progress).
pub async fn queued(db: &Db, queue: Queue) -> Result<u64, DbError> {
    let mut n = 0u64;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(queue.tree(), start, Bound::Unbounded, false, 4096)
            .await?;
        n += page.len() as u64;
        if page.len() < 4096 {
            return Ok(n);
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}

fn parse<'k>(
    qk: &'k [u8],
    trees: &'static [TombstoneTree],
) -> Option<(&'static TombstoneTree, &'k [u8])> {
    let rest = qk.get(8..)?;
    let nul = rest.iter().position(|&b| b == 0)?;
    let name = &rest[..nul];
    let tree = trees.iter().find(|t| t.tree.as_bytes() == name)?;
    Some((tree, &rest[nul + 1..]))
}
