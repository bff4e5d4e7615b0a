//! [`Sharded`] replication: tables spread over the cluster by layout
//! partition (objects, versions, multipart uploads, block references): each
//! row is stored on the `replication_factor` nodes of its layout partition,
//! in every active layout version.
//!
//! A [`Table`]`<S, Sharded>` serves these endpoints ([`crate::wire`];
//! doc/replication.md describes the exchanges):
//!
//! - `hangar/table/<tree>/update`: [`UpdateRows`] → `()`: merge rows (one
//!   local transaction, [`crate::Replica::tx_insert`], so the schema's update hook
//!   runs on every replica);
//! - `hangar/table/<tree>/read`: [`ReadRow`] → `Option<bin>`: one stored row;
//! - `hangar/table/<tree>/range`: [`ReadRange`] → [`RangeRows`]: stored rows
//!   of one partition key in a sort-key range;
//! - `hangar/table/<tree>/merkle`: [`MerkleRequest`] → [`MerkleResponse`]:
//!   the Merkle index and rows by key, for anti-entropy
//!   ([`sync`]).
//!
//! Placement: the rows of partition key `pk` live in layout partition
//! `Schema::layout_partition(pk)` (by default the first byte of `blake3(pk)`);
//! so all rows of one partition key are on the same nodes and a listing is
//! one quorum range read.
//!
//! What it promises:
//!
//! - [`Table::insert`] returns once, for every row, the write quorum
//!   of every active layout version's set of the row's partition merged it
//!   (the other nodes get it in the background, or from anti-entropy). It
//!   fails at once, sending nothing, when some set has fewer live nodes
//!   than the write quorum ([`ReplicationError::Quorum`] names the nodes
//!   down).
//! - [`Table::get`] and [`Table::range`] ask the closest read
//!   quorum of the partition's read nodes (the newest synced layout
//!   version's; this node first when it is one), the others only when one
//!   of those fails or does not answer within the hedge delay
//!   ([`Cluster::call_read_quorum`]), and answer from the first read quorum
//!   of answers: with read + write quorum above the replication factor, a
//!   row whose insert returned is seen, whichever replicas answer. Replicas that
//!   answered without the merged row, or with an older one, are sent it in
//!   the background (read repair).
//! - Nothing a peer sends is trusted for size: rows per message, key and
//!   value lengths and limits are bounded by the constants of
//!   [`crate::wire`], and every row is decoded before it is merged.

mod burial;
mod fence;
mod gc;
mod gc_handler;
mod handlers;
pub mod merkle;
mod pages;
mod read;
pub mod sync;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use hangar_cluster::{Cluster, QuorumError, StorageNodes};
use hangar_layout::Partition;
use hangar_net::{CallOpts, Endpoint, NetError};
use hangar_util::NodeId;
use serde_bytes::ByteBuf;

pub use burial::{BURIAL_RETRY_DOWN_MSEC, BURIAL_RETRY_MSEC, BurialReport};
pub use gc::GcReport;

use crate::wire::{
    FenceAnswer, FenceRequest, GcRows, MAX_KEY_LEN, MAX_VALUE_LEN, MerkleRequest, MerkleResponse,
    RangeRows, ReadRange, ReadRow, UpdateRows, WireRow, batches, endpoint_path,
};
use crate::{Replica, Replication, ReplicationError, Result, Schema, Table, TableError, encode};

/// Calls one endpoint of a sharded table admits at once.
const HANDLER_QUEUE: usize = 256;
/// The node sets of a partition in every active version, (version, sorted
/// nodes), as a map key.
type SetsKey = Vec<(u64, Vec<NodeId>)>;

/// Update messages one insert has in flight at once.
const INSERT_PARALLELISM: usize = 8;

/// Sharded replication: each row on the nodes of its layout partition.
/// Its schemas set [`Schema::MERKLE_TREE`] (checked at compile time).
pub struct Sharded;

/// The endpoints of a sharded table.
pub struct Endpoints {
    pub(crate) update: Arc<Endpoint<UpdateRows, ()>>,
    pub(crate) read: Arc<Endpoint<ReadRow, Option<ByteBuf>>>,
    pub(crate) range: Arc<Endpoint<ReadRange, RangeRows>>,
    pub(crate) merkle: Arc<Endpoint<MerkleRequest, MerkleResponse>>,
    pub(crate) gc: Arc<Endpoint<GcRows, Vec<bool>>>,
    /// For tables with [`Schema::FENCE_TREE`] only.
    pub(crate) fence: Option<Arc<Endpoint<FenceRequest, FenceAnswer>>>,
}

impl Replication for Sharded {
    type Endpoints = Endpoints;

    fn endpoints<S: Schema>(
        replica: &Replica<S>,
        cluster: &Cluster,
    ) -> std::result::Result<Endpoints, NetError> {
        let index = const { index_of::<S>() };
        let mesh = cluster.mesh();
        let eps = Endpoints {
            update: mesh.endpoint(&endpoint_path::<S>("update"))?,
            read: mesh.endpoint(&endpoint_path::<S>("read"))?,
            range: mesh.endpoint(&endpoint_path::<S>("range"))?,
            merkle: mesh.endpoint(&endpoint_path::<S>("merkle"))?,
            gc: mesh.endpoint(&endpoint_path::<S>("gc"))?,
            fence: match S::FENCE_TREE {
                Some(_) => Some(mesh.endpoint(&endpoint_path::<S>("fence"))?),
                None => None,
            },
        };
        let h = handlers::Handlers::<S> {
            replica: replica.clone(),
            index,
            layout: cluster.layout().downgrade(),
            me: cluster.id(),
        };
        eps.update.set_handler(h.clone(), HANDLER_QUEUE);
        eps.read.set_handler(h.clone(), HANDLER_QUEUE);
        eps.range.set_handler(h.clone(), HANDLER_QUEUE);
        eps.merkle.set_handler(h, HANDLER_QUEUE);
        eps.gc.set_handler(
            gc_handler::GcHandler::<S> {
                replica: replica.clone(),
            },
            HANDLER_QUEUE,
        );
        if let Some(ep) = &eps.fence {
            ep.set_handler(
                crate::fence::FenceHandler::<S> {
                    replica: replica.clone(),
                },
                HANDLER_QUEUE,
            );
        }
        Ok(eps)
    }
}

/// The Merkle index tree of `S` (a sharded schema: checked at compile time).
pub(crate) const fn index_of<S: Schema>() -> &'static str {
    match S::MERKLE_TREE {
        Some(t) => t,
        None => panic!("a sharded table needs Schema::MERKLE_TREE"),
    }
}

impl<S: Schema> Table<S, Sharded> {
    /// The local tree of the table's Merkle index.
    pub fn index_tree(&self) -> &'static str {
        const { index_of::<S>() }
    }

    /// The root of this node's Merkle index of layout partition `p`.
    pub async fn merkle_root(&self, p: Partition) -> Result<merkle::Summary> {
        Ok(merkle::root(self.replica.db(), self.index_tree(), p).await?)
    }

    /// Makes this node's Merkle index match its rows
    /// ([`merkle::repair_index`]): to run once on a table that becomes
    /// sharded with rows already stored, before its anti-entropy starts.
    pub async fn repair_index(&self) -> Result<merkle::IndexRepair> {
        Ok(merkle::repair_index(
            self.replica.db(),
            crate::RowTrees::of::<S>(),
            self.index_tree(),
            S::PARTITION_LEN,
            S::layout_partition,
        )
        .await?)
    }

    pub(crate) fn quorum_error(
        &self,
        op: &'static str,
        p: Partition,
        nodes: &[NodeId],
        e: QuorumError,
    ) -> TableError {
        if matches!(e, QuorumError::NoLayout) {
            // A node of a replicated cluster before its layout: its own
            // store holds none of the cluster's rows (doc/replication.md §1).
            return TableError::Replication(ReplicationError::NoLayoutYet {
                tree: S::TREE,
                replication_factor: self.cluster.replication_factor(),
            });
        }
        let down = nodes
            .iter()
            .copied()
            .filter(|n| !self.cluster.is_up(*n))
            .collect();
        TableError::Replication(ReplicationError::Quorum {
            op,
            tree: S::TREE,
            partition: p,
            down,
            source: Box::new(e),
        })
    }

    /// Fails when some active version's set of `nodes` has fewer live nodes
    /// than the write quorum.
    fn check_writable(&self, nodes: &StorageNodes) -> Result<()> {
        let needed = self.cluster.quorums().write;
        if nodes.is_empty() {
            return Err(self.quorum_error("insert", nodes.partition, &[], QuorumError::NoLayout));
        }
        for s in &nodes.sets {
            let up = s.nodes.iter().filter(|n| self.cluster.is_up(**n)).count();
            if up < needed {
                return Err(self.quorum_error(
                    "insert",
                    nodes.partition,
                    &s.nodes,
                    QuorumError::NotEnoughNodes {
                        needed,
                        up,
                        targets: s.nodes.len(),
                        version: Some(s.version),
                    },
                ));
            }
        }
        Ok(())
    }

    /// Inserts (merges) rows given as (partition key, sort key, row): each
    /// layout partition's rows are sent to its nodes in every active
    /// version (partitions on the same nodes share messages), in messages
    /// of at most [`crate::wire::MAX_ROWS_PER_MESSAGE`] rows and about
    /// [`crate::wire::MAX_ANSWER_BYTES`], a few at once. Returns once every message
    /// reached the write quorum of every version. Before sending anything, fails if a row is too large
    /// for a peer to accept or a partition lacks live nodes for its quorum;
    /// a failure after that (a quorum lost while sending) may leave some
    /// rows stored, which is harmless for CRDT rows (retry the insert).
    pub async fn insert(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_partition: BTreeMap<Partition, Vec<WireRow>> = BTreeMap::new();
        for (p, s, r) in &rows {
            let key = crate::storage_key::<S>(p, s);
            let value = encode::<S>(r);
            if key.len() > MAX_KEY_LEN || value.len() > MAX_VALUE_LEN {
                return Err(TableError::Replication(ReplicationError::TooLarge {
                    tree: S::TREE,
                    key_len: key.len(),
                    value_len: value.len(),
                }));
            }
            by_partition
                .entry(S::layout_partition(p))
                .or_default()
                .push(WireRow {
                    key: ByteBuf::from(key),
                    value: ByteBuf::from(value),
                });
        }
        // Partitions stored on the same nodes in every active version share
        // their messages: the quorum of each set is the same for all of
        // them (with 3 nodes and rf 3, one message for the whole insert).
        let mut groups: BTreeMap<SetsKey, (StorageNodes, Vec<WireRow>)> = BTreeMap::new();
        for (lp, rows) in by_partition {
            let nodes = self.cluster.storage_nodes_of_partition(lp);
            self.check_writable(&nodes)?;
            let key = nodes
                .sets
                .iter()
                .map(|s| {
                    let mut n = s.nodes.clone();
                    n.sort();
                    (s.version, n)
                })
                .collect();
            groups
                .entry(key)
                .or_insert((nodes, Vec::new()))
                .1
                .extend(rows);
        }
        // Rows whose every set is this node alone (a lone node, or
        // replication factor 1): merged here, in the caller's task, as
        // the update handler would merge them, without encoding them for
        // the quorum call and decoding them again (a lone node's PUT of
        // 4 KiB makes two such inserts: script/profile-requests).
        let me = self.cluster.id();
        if groups
            .values()
            .all(|(nodes, _)| nodes.sets.iter().all(|s| s.nodes == [me]))
        {
            let keyed = rows
                .into_iter()
                .map(|(p, s, r)| (crate::storage_key::<S>(&p, &s), r))
                .collect();
            return crate::serve::merge_written(&self.replica, keyed).await;
        }
        let sends: Vec<(StorageNodes, Vec<WireRow>)> = groups
            .into_values()
            .flat_map(|(nodes, rows)| batches(rows).into_iter().map(move |b| (nodes.clone(), b)))
            .collect();
        // A bounded number of messages in flight, so that one large insert
        // does not fill the receivers' handler queues.
        let mut calls = futures::stream::iter(sends.into_iter().map(|(nodes, rows)| async move {
            self.cluster
                .call_write_quorum(
                    &self.eps.update,
                    &nodes,
                    UpdateRows { rows },
                    CallOpts::default(),
                )
                .await
                .map_err(|e| {
                    if fenced(&e) {
                        TableError::Fenced { tree: S::TREE }
                    } else {
                        self.quorum_error("insert", nodes.partition, &nodes.nodes(), e)
                    }
                })
        }))
        .buffer_unordered(INSERT_PARALLELISM);
        while let Some(r) = calls.next().await {
            r?;
        }
        Ok(())
    }
}

/// Whether some replica refused a write because of a fence
/// ([`crate::fence`]): the write failed because of it, whatever else went
/// wrong, and the caller should say so.
fn fenced(e: &QuorumError) -> bool {
    matches!(e, QuorumError::Failed { errors, .. } if errors.iter().any(|(_, e)| {
        matches!(e, NetError::Remote { message, .. } if message.contains(crate::fence::FENCED))
    }))
}
