//! Collection of the tombstones of sharded tables: a tombstone is removed
//! only once every replica holds it, and then from every replica.
//!
//! Endpoint `hangar/table/<tree>/gc`: [`GcRows`] → `Vec<bool>`, one answer
//! per row:
//!
//! - `commit = false`: whether the receiver stores exactly that row value
//!   (its blake3 is the one sent), buried or not (also the check of a
//!   burial, [`super::burial`]);
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
use crate::tombstones::{DueTombstone, Queue};
use crate::wire::{GcRow, GcRows, MAX_ROWS_PER_MESSAGE};
use crate::{Result, Schema, Table};

/// The rows of a check or removal message for `due` (key and value hash).
pub(super) fn gc_rows(due: &[DueTombstone]) -> Vec<GcRow> {
    due.iter()
        .map(|d| GcRow {
            key: ByteBuf::from(d.key.clone()),
            hash: ByteBuf::from(d.hash.to_vec()),
        })
        .collect()
}

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
        for (nodes, batch) in self.batches_by_replicas(due) {
            let r = self.collect_batch(&nodes, &batch).await?;
            report.removed += r.removed;
            report.deferred += r.deferred;
            report.stale += r.stale;
        }
        Ok(report)
    }

    /// One pass of `queue` over its due entries `due`: collection
    /// ([`Table::collect_tombstones`]) or burial
    /// ([`Table::bury_tombstones`]). Returns (tombstones removed or buried,
    /// tombstones some replica lacked).
    pub async fn tombstone_pass(
        &self,
        queue: Queue,
        due: Vec<DueTombstone>,
    ) -> Result<(usize, usize)> {
        Ok(match queue {
            Queue::Collect => {
                let r = self.collect_tombstones(due).await?;
                (r.removed, r.deferred)
            }
            Queue::Burial => {
                let r = self.bury_tombstones(due).await?;
                (r.buried, r.deferred)
            }
        })
    }

    /// Due queue entries grouped by the nodes that store their rows (every
    /// node of the row's partition in every active layout version), in
    /// batches of at most [`MAX_ROWS_PER_MESSAGE`]: one message to each
    /// replica per batch. A cluster of three nodes and a replication factor
    /// of three has one group, whatever the partitions; a check per layout
    /// partition instead cost one round trip and one transaction per few
    /// tombstones.
    pub(super) fn batches_by_replicas(
        &self,
        due: Vec<DueTombstone>,
    ) -> Vec<(Vec<NodeId>, Vec<DueTombstone>)> {
        let mut by_partition: BTreeMap<Partition, Vec<DueTombstone>> = BTreeMap::new();
        for d in due {
            if d.key.len() >= S::PARTITION_LEN {
                let p = S::layout_partition(&d.key[..S::PARTITION_LEN]);
                by_partition.entry(p).or_default().push(d);
            }
        }
        // The layout is asked once per partition, not once per entry.
        let mut by_nodes: BTreeMap<Vec<NodeId>, Vec<DueTombstone>> = BTreeMap::new();
        for (p, entries) in by_partition {
            let nodes = self.cluster().storage_nodes_of_partition(p).nodes();
            by_nodes.entry(nodes).or_default().extend(entries);
        }
        by_nodes
            .into_iter()
            .flat_map(|(nodes, entries)| {
                entries
                    .chunks(MAX_ROWS_PER_MESSAGE)
                    .map(|c| (nodes.clone(), c.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    async fn collect_batch(&self, nodes: &[NodeId], due: &[DueTombstone]) -> Result<GcReport> {
        let mut report = GcReport::default();
        let me = self.cluster().id();
        let rows = gc_rows(due);
        // This node first: an entry whose row changed here is stale.
        let mine = self.gc_call(me, &rows, false).await?;
        let mut held = self
            .held_by_others(nodes, &rows)
            .await
            .unwrap_or_else(|| vec![false; rows.len()]);
        for (h, m) in held.iter_mut().zip(&mine) {
            *h &= *m;
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
        crate::tombstones::settle(self.local().db(), Queue::Collect, ended, again, 0).await?;
        Ok(report)
    }

    /// For each of `rows`, whether every node of `nodes` but this one
    /// stores exactly that value (in its table's tree or buried): all
    /// `false` when one of them fails to answer; `None`, asking nothing,
    /// when one of them is down (or there are none).
    pub(super) async fn held_by_others(
        &self,
        nodes: &[NodeId],
        rows: &[GcRow],
    ) -> Option<Vec<bool>> {
        let me = self.cluster().id();
        if nodes.is_empty() || !nodes.iter().all(|n| self.cluster().is_up(*n)) {
            return None;
        }
        let mut held = vec![true; rows.len()];
        for n in nodes.iter().filter(|n| **n != me) {
            match self.gc_call(*n, rows, false).await {
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
        Some(held)
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
