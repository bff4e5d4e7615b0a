//! Collection of the tombstones of sharded tables: a tombstone is removed
//! only once every replica holds it, and then from every replica.
//!
//! Endpoint `hangar/table/<tree>/gc`: [`GcRows`] → `Vec<bool>`, one answer
//! per row:
//!
//! - `commit = false`: whether the receiver stores exactly that row value
//!   (its blake3 is the one sent);
//! - `commit = true`: the receiver removes each row it stores with exactly
//!   that value (with its Merkle leaf, in one transaction), and says which.
//!
//! A node collects a due tombstone of its queue ([`crate::tombstones`]) in
//! two rounds over every node of the row's partition in every active
//! layout version: first all must hold the same tombstone (else it tries
//! again a delay later: a replica missing it gets it from anti-entropy
//! meanwhile); then all remove it. A row written again between the rounds
//! differs, so that replica keeps its newer row, which anti-entropy then
//! gives the others. No replica is asked while one of them is down, so a
//! node that was away cannot bring a removed row back.

use std::collections::BTreeMap;

use hangar_layout::Partition;
use hangar_net::CallOpts;
use hangar_util::NodeId;
use serde_bytes::ByteBuf;

use super::Sharded;
use crate::tombstones::DueTombstone;
use crate::wire::{GcRow, GcRows, MAX_ROWS_PER_MESSAGE};
use crate::{Result, Schema, Table};

/// What one pass of [`Table::collect_tombstones`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GcReport {
    /// Tombstones removed from every replica.
    pub removed: usize,
    /// Tombstones some replica lacked (or was down for): tried again later.
    pub deferred: usize,
    /// Queue entries whose row had changed since: dropped.
    pub stale: usize,
}

impl<S: Schema> Table<S, Sharded> {
    /// Collects the due tombstones `due` of this table (entries of the
    /// local queue), as the module documentation says; entries are ended
    /// or re-queued in the local queue. Before the first layout of a
    /// replicated cluster nothing is collected: the replicas are unknown.
    pub async fn collect_tombstones(&self, due: Vec<DueTombstone>) -> Result<GcReport> {
        if self.cluster().awaits_layout() {
            return Ok(GcReport::default());
        }
        let mut report = GcReport::default();
        let mut by_partition: BTreeMap<Partition, Vec<DueTombstone>> = BTreeMap::new();
        for d in due {
            if d.key.len() < S::PARTITION_LEN {
                continue;
            }
            by_partition
                .entry(S::layout_partition(&d.key[..S::PARTITION_LEN]))
                .or_default()
                .push(d);
        }
        for (p, entries) in by_partition {
            for chunk in entries.chunks(MAX_ROWS_PER_MESSAGE) {
                let r = self.collect_partition(p, chunk).await?;
                report.removed += r.removed;
                report.deferred += r.deferred;
                report.stale += r.stale;
            }
        }
        Ok(report)
    }

    async fn collect_partition(&self, p: Partition, due: &[DueTombstone]) -> Result<GcReport> {
        let mut report = GcReport::default();
        let nodes = self.cluster().storage_nodes_of_partition(p).nodes();
        let me = self.cluster().id();
        let rows: Vec<GcRow> = due
            .iter()
            .map(|d| GcRow {
                key: ByteBuf::from(d.key.clone()),
                hash: ByteBuf::from(d.hash.to_vec()),
            })
            .collect();
        // This node first: an entry whose row changed here is stale.
        let mine = self.gc_call(me, &rows, false).await?;
        let all_up = !nodes.is_empty() && nodes.iter().all(|n| self.cluster().is_up(*n));
        let mut held = mine.clone();
        if all_up {
            for n in nodes.iter().filter(|n| **n != me) {
                match self.gc_call(*n, &rows, false).await {
                    Ok(answers) => {
                        for (h, a) in held.iter_mut().zip(answers) {
                            *h &= a;
                        }
                    }
                    Err(e) => {
                        tracing::debug!("{}: tombstone check on {}: {e}", S::TREE, n.short());
                        held.iter_mut().for_each(|h| *h = false);
                    }
                }
            }
        } else {
            held.iter_mut().for_each(|h| *h = false);
        }
        let confirmed: Vec<GcRow> = rows
            .iter()
            .zip(&held)
            .filter(|(_, h)| **h)
            .map(|(r, _)| r.clone())
            .collect();
        if !confirmed.is_empty() {
            // The others first, then this node: a crash in between leaves
            // the tombstone here, with its queue entry, to try again.
            for n in nodes.iter().filter(|n| **n != me) {
                if let Err(e) = self.gc_call(*n, &confirmed, true).await {
                    tracing::debug!("{}: tombstone removal on {}: {e}", S::TREE, n.short());
                }
            }
            self.gc_call(me, &confirmed, true).await?;
        }
        let mut ended = Vec::new();
        let mut again = Vec::new();
        for ((d, m), h) in due.iter().zip(&mine).zip(&held) {
            if *h {
                report.removed += 1;
                ended.push(d.queue_key.clone());
            } else if !*m {
                report.stale += 1;
                ended.push(d.queue_key.clone());
            } else {
                report.deferred += 1;
                again.push(d.clone());
            }
        }
        crate::tombstones::settle(self.local().db(), ended, again).await?;
        Ok(report)
    }

    async fn gc_call(&self, node: NodeId, rows: &[GcRow], commit: bool) -> Result<Vec<bool>> {
        let msg = GcRows {
            rows: rows.to_vec(),
            commit,
        };
        let answers = self.eps.gc.call(node, msg, CallOpts::background()).await?;
        if answers.len() != rows.len() {
            return Err(crate::TableError::BadAnswer {
                tree: S::TREE,
                message: format!("{} answers to {} rows", answers.len(), rows.len()),
            });
        }
        Ok(answers)
    }
}
