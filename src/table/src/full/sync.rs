//! Digest anti-entropy, for tables every node holds ([`crate::Full`]).
//!
//! Every [`SYNC_INTERVAL`], and as soon as a peer comes up, each node asks
//! each live peer for the digest of each full table (a blake3 over every
//! stored row, [`super::digest`]). Where the digests differ it
//! pulls the peer's rows a page at a time, merges them, and pushes its own
//! rows back, so both end with the union of what either had. These tables
//! are small (keys, buckets): a whole-table digest is their Merkle root, and
//! a difference moves the table, in pages of
//! [`crate::wire::MAX_ROWS_PER_MESSAGE`] rows, at background priority.

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;
use hangar_net::CallOpts;
use hangar_util::NodeId;
use hangar_util::worker::{WorkerRegistry, WorkerState};
use serde_bytes::ByteBuf;

use super::digest;
use crate::serve::{check_rows, merge_rows};
use crate::wire::{MAX_ROWS_PER_MESSAGE, PullRows, UpdateRows, WireRow};
use crate::{Full, Schema, Table, TableError};

/// Each live peer is compared with at least this often.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(30);
/// How often the peer list is checked for peers that just came up.
const UP_POLL: Duration = Duration::from_secs(1);

/// What one comparison with one peer did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SyncReport {
    /// The digests differed.
    pub differed: bool,
    pub rows_pulled: u64,
    pub rows_pushed: u64,
}

/// One full table, seen by the sync worker.
#[async_trait]
pub trait Syncable: Send + Sync {
    fn tree(&self) -> &'static str;
    /// How many rows this node stores (a count over the table: full tables
    /// hold keys and buckets, which are few).
    async fn rows(&self) -> Result<u64, TableError>;
    /// Compares this node's table with `peer`'s and repairs both.
    async fn sync_with(&self, peer: NodeId) -> Result<SyncReport, TableError>;
}

#[async_trait]
impl<S: Schema> Syncable for Table<S, Full> {
    fn tree(&self) -> &'static str {
        S::TREE
    }

    async fn rows(&self) -> Result<u64, TableError> {
        let db = self.local().db();
        let (mut n, mut after) = (0u64, None::<Vec<u8>>);
        loop {
            let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let page = db
                .range_async(S::TREE, start, std::ops::Bound::Unbounded, false, 1024)
                .await?;
            n += page.len() as u64;
            if page.len() < 1024 {
                return Ok(n);
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    async fn sync_with(&self, peer: NodeId) -> Result<SyncReport, TableError> {
        let opts = CallOpts::background();
        let db = self.local().db().clone();
        let theirs = self
            .eps
            .pull
            .call(
                peer,
                PullRows {
                    after: None,
                    limit: 0,
                },
                opts,
            )
            .await?;
        let ours = digest::<S>(&db).await?;
        if theirs.digest.as_slice() == ours.as_slice() {
            return Ok(SyncReport::default());
        }
        let mut report = SyncReport {
            differed: true,
            ..Default::default()
        };
        let mut after: Option<ByteBuf> = None;
        loop {
            let page = self
                .eps
                .pull
                .call(
                    peer,
                    PullRows {
                        after: after.clone(),
                        limit: MAX_ROWS_PER_MESSAGE as u32,
                    },
                    opts,
                )
                .await?;
            after = page.rows.last().map(|r| r.key.clone());
            report.rows_pulled += page.rows.len() as u64;
            let rows = check_rows::<S>(page.rows).map_err(|message| TableError::Decode {
                tree: S::TREE,
                message,
            })?;
            merge_rows(self.local(), rows).await?;
            if !page.more {
                break;
            }
        }
        let mut from: Option<Vec<u8>> = None;
        loop {
            let start = from.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let page = db
                .range_async(
                    S::TREE,
                    start,
                    std::ops::Bound::Unbounded,
                    false,
                    MAX_ROWS_PER_MESSAGE,
                )
                .await?;
            from = page.last().map(|(k, _)| k.clone());
            let full = page.len() == MAX_ROWS_PER_MESSAGE;
            report.rows_pushed += page.len() as u64;
            let rows = page
                .into_iter()
                .map(|(k, v)| WireRow {
                    key: ByteBuf::from(k),
                    value: ByteBuf::from(v),
                })
                .collect();
            self.eps
                .update
                .call(peer, UpdateRows { rows }, opts)
                .await?;
            if !full {
                break;
            }
        }
        Ok(report)
    }
}

/// Starts the anti-entropy worker of `tables` (all on one cluster).
pub fn spawn_full_sync_worker(
    cluster: hangar_cluster::Cluster,
    tables: Vec<Box<dyn Syncable>>,
    workers: &WorkerRegistry,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("table-sync");
    tokio::spawn(async move {
        let me = cluster.id();
        let mut was_up: BTreeSet<NodeId> = BTreeSet::new();
        let mut next_full = tokio::time::Instant::now();
        let (mut pulled, mut pushed) = (0u64, 0u64);
        loop {
            let up: BTreeSet<NodeId> = cluster
                .mesh()
                .up_nodes()
                .into_iter()
                .filter(|n| *n != me)
                .collect();
            let due_all = tokio::time::Instant::now() >= next_full;
            let peers: Vec<NodeId> = if due_all {
                next_full = tokio::time::Instant::now() + SYNC_INTERVAL;
                up.iter().copied().collect()
            } else {
                up.difference(&was_up).copied().collect()
            };
            was_up = up;
            if !peers.is_empty() {
                w.set_state(WorkerState::Busy);
                for peer in &peers {
                    for t in &tables {
                        match t.sync_with(*peer).await {
                            Ok(r) => {
                                pulled += r.rows_pulled;
                                pushed += r.rows_pushed;
                                w.add_processed(r.rows_pulled + r.rows_pushed);
                                if r.differed {
                                    tracing::info!(
                                        "table {}: synced with {}: {} rows pulled, {} pushed",
                                        t.tree(),
                                        peer.short(),
                                        r.rows_pulled,
                                        r.rows_pushed
                                    );
                                }
                            }
                            Err(e) => {
                                tracing::debug!(
                                    "table {}: sync with {}: {e}",
                                    t.tree(),
                                    peer.short()
                                );
                                w.record_error(format!("{} with {}: {e}", t.tree(), peer.short()));
                            }
                        }
                    }
                }
                w.set_progress(
                    format!(
                        "{} peers compared last; {pulled} rows pulled, {pushed} pushed in all",
                        peers.len()
                    ),
                    None,
                );
                w.set_state(WorkerState::Idle);
            }
            tokio::time::sleep(UP_POLL).await;
        }
    })
}
