//! Burial of the tombstones of sharded tables ([`crate::tombstones`],
//! "Burial"): a node buries its own copy of a tombstone, queued in its
//! burial queue when the tombstone was merged here, once every node of the
//! row's partition in every active layout version stores exactly that row
//! (the check of `hangar/table/<tree>/gc`, `commit = false`, which counts
//! buried rows too). Each replica buries its own copy from its own queue:
//! nothing is asked of another node but the check, once per message of
//! rows that the same nodes store (all of a pass's rows, in a cluster
//! whose every partition has the same replicas).
//!
//! One transaction per pass moves each confirmed tombstone to the buried
//! tree and ends its queue entry, so a crash leaves each entry either done
//! or still queued. An entry whose row changed here since (written again)
//! is ended; one that some replica lacks, or that could not be checked, is
//! queued again [`BURIAL_RETRY_MSEC`] later (anti-entropy gives the
//! replica the tombstone meanwhile), or [`BURIAL_RETRY_DOWN_MSEC`] later
//! when a node of the partition is down; behind the others either way.

use hangar_db::DbError;

use super::Sharded;
use crate::stored::RowTrees;
use crate::tombstones::{DueTombstone, TOMBSTONE_BURIAL_TREE, queue_key};
use crate::{Result, Schema, Table};

/// How much later than the burial delay an entry that a replica lacked
/// comes back: the replica gets the tombstone from anti-entropy, whose
/// passes are a minute or more apart.
pub const BURIAL_RETRY_MSEC: u64 = 60_000;

/// How much later an entry comes back when a node of its partition was
/// down: a node is usually down for minutes, and each try rewrites the
/// entry, so a node down for hours costs a rewrite of every pending
/// tombstone every 10 minutes, not every minute.
pub const BURIAL_RETRY_DOWN_MSEC: u64 = 600_000;

/// What one pass of [`Table::bury_tombstones`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BurialReport {
    /// Tombstones moved to the buried tree.
    pub buried: usize,
    /// Tombstones some replica lacked (or was down for): tried again later.
    pub deferred: usize,
    /// Queue entries whose row had changed since: dropped.
    pub stale: usize,
}

impl<S: Schema> Table<S, Sharded> {
    /// Buries the due tombstones `due` of this table (entries of the local
    /// burial queue), as the module documentation says. Before the first
    /// layout of a replicated cluster nothing is buried: the replicas are
    /// unknown.
    pub async fn bury_tombstones(&self, due: Vec<DueTombstone>) -> Result<BurialReport> {
        if self.cluster().awaits_layout() || S::BURIED_TREE.is_none() {
            return Ok(BurialReport::default());
        }
        // Each group of replicas is asked once per message of rows; then
        // one transaction settles every entry, whatever its partition.
        let mut checked = Vec::with_capacity(due.len());
        for (nodes, batch) in self.batches_by_replicas(due) {
            let rows = super::gc::gc_rows(&batch);
            let (held, later) = match self.held_by_others(&nodes, &rows).await {
                Some(held) => (held, BURIAL_RETRY_MSEC),
                None => (vec![false; rows.len()], BURIAL_RETRY_DOWN_MSEC),
            };
            checked.extend(batch.into_iter().zip(held).map(|(d, h)| (d, h, later)));
        }
        if checked.is_empty() {
            return Ok(BurialReport::default());
        }
        let report = self
            .local()
            .db()
            .write(move |tx| {
                let trees = RowTrees::of::<S>();
                let now = hangar_util::time::now_msec();
                let mut report = BurialReport::default();
                for (d, held, later) in &checked {
                    tx.delete(TOMBSTONE_BURIAL_TREE, d.queue_key.clone());
                    // One read: still the queued tombstone here, or changed
                    // since (stale).
                    match trees.tx_queued(tx, &d.key, &d.hash)? {
                        None => report.stale += 1,
                        Some(v) if *held => {
                            trees.tx_move_to_buried(tx, &d.key, v);
                            report.buried += 1;
                        }
                        Some(_) => {
                            report.deferred += 1;
                            tx.put(
                                TOMBSTONE_BURIAL_TREE,
                                queue_key(now.saturating_add(*later), d.tree, &d.key),
                                d.hash.to_vec(),
                            );
                        }
                    }
                }
                Ok::<_, DbError>(report)
            })
            .await?;
        if report.deferred > 0 {
            tracing::debug!(
                "{}: {} tombstones not buried yet (a replica lacks them or is down)",
                S::TREE,
                report.deferred
            );
        }
        Ok(report)
    }
}
