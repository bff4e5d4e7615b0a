//! Tables spread over the cluster by layout partition (objects, versions,
//! multipart uploads): each row is stored on the `replication_factor` nodes
//! of its layout partition, in every active layout version.
//!
//! A [`ShardedTable`] is a [`Table`] (the local replica) plus four typed
//! mesh endpoints per table (doc/replication.md describes the messages):
//!
//! - `hangar/table/<tree>/update`: [`UpdateRows`] → `()`: merge rows (one
//!   local transaction, [`Table::tx_insert`], so the schema's update hook
//!   runs on every replica);
//! - `hangar/table/<tree>/read`: [`ReadRow`] → `Option<bin>`: one stored row;
//! - `hangar/table/<tree>/range`: [`ReadRange`] → [`RangeRows`]: stored rows
//!   of one partition key in a sort-key range;
//! - `hangar/table/<tree>/merkle`: [`MerkleRequest`] → [`MerkleResponse`]:
//!   the Merkle index and rows by key, for anti-entropy
//!   (`crate::sharded_sync`).
//!
//! Placement: the rows of partition key `pk` live in layout partition
//! `Schema::layout_partition(pk)` (by default the first byte of `blake3(pk)`);
//! so all rows of one partition key are on the same nodes and a listing is
//! one quorum range read.
//!
//! What it promises:
//!
//! - [`ShardedTable::insert`] returns once, for every row, the write quorum
//!   of every active layout version's set of the row's partition merged it
//!   (the other nodes get it in the background, or from anti-entropy). It
//!   fails at once, sending nothing, when some set has fewer live nodes
//!   than the write quorum ([`ReplicationError::Quorum`] names the nodes
//!   down).
//! - [`ShardedTable::get`] and [`ShardedTable::range`] ask the closest read
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
//!   `crate::full_table`, and every row is decoded before it is merged.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use hangar_cluster::{Cluster, QuorumError, StorageNodes, WeakClusterLayout};
use hangar_db::Db;
use hangar_layout::Partition;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, NetError, Request, Response};
use hangar_util::NodeId;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::full_table::{
    MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE, MAX_VALUE_LEN, ReadRow, ReplicationError, UpdateRows,
    WireRow, endpoint_path,
};
use crate::merkle::{self, DEPTH};
use crate::{Crdt, Result, Schema, Table, TableError, decode, encode};

/// Bytes of row values one answer or update carries, about: an answer stops
/// adding rows once it holds this many (so it always carries at least one
/// row when there is one), and updates are cut into messages of at most
/// this many bytes of keys and values (or one row), well under the mesh's
/// 16 MiB message limit.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;
/// Calls one endpoint of a sharded table admits at once.
const HANDLER_QUEUE: usize = 256;
/// The node sets of a partition in every active version, (version, sorted
/// nodes), as a map key.
type SetsKey = Vec<(u64, Vec<NodeId>)>;

/// Update messages one insert has in flight at once.
const INSERT_PARALLELISM: usize = 8;
/// Rows read from the store at a time while filling an answer.
const READ_CHUNK: usize = 100;
/// How many times a read is made again when a blocking read repair finds
/// that the partition's read nodes moved under it (a layout this node
/// learnt of on the way).
const READ_ATTEMPTS: usize = 3;

/// A range of one partition key's rows, by sort key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadRange {
    /// The partition key (`Schema::PARTITION_LEN` bytes).
    pub partition: ByteBuf,
    /// Sort-key bounds.
    pub start: Bound<ByteBuf>,
    pub end: Bound<ByteBuf>,
    /// Descending sort-key order when true.
    pub reverse: bool,
    /// At most this many rows (at most [`MAX_ROWS_PER_MESSAGE`]).
    pub limit: u32,
}

/// The answer to a [`ReadRange`]: stored rows in the asked order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RangeRows {
    /// Storage keys and stored values.
    pub rows: Vec<WireRow>,
    /// True when the replica may hold rows of the range after the last one
    /// sent (it sent `limit` rows, or stopped at [`MAX_ANSWER_BYTES`]).
    pub more: bool,
}

/// A question about a replica's Merkle index ([`crate::merkle`]), or its
/// rows by key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MerkleRequest {
    /// The root of each layout partition listed (one byte each).
    Roots { partitions: ByteBuf },
    /// The non-empty children of node `prefix` (shorter than
    /// [`merkle::DEPTH`]) of layout partition `partition`.
    Children { partition: u8, prefix: ByteBuf },
    /// Up to `limit` leaves under `prefix`, after leaf `after` (a key hash).
    Leaves {
        partition: u8,
        prefix: ByteBuf,
        after: Option<ByteBuf>,
        limit: u32,
    },
    /// The stored rows of these storage keys (those it holds).
    Rows { keys: Vec<ByteBuf> },
}

/// A node summary on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSummary {
    /// XOR digest, 32 bytes.
    pub digest: ByteBuf,
    pub count: u64,
}

/// A leaf on the wire; the receiver recomputes the key hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireLeaf {
    pub key: ByteBuf,
    /// blake3 of the stored value, 32 bytes.
    pub value_hash: ByteBuf,
}

/// The answers to [`MerkleRequest`], variant for variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MerkleResponse {
    Roots(Vec<WireSummary>),
    Children(Vec<(u8, WireSummary)>),
    Leaves { leaves: Vec<WireLeaf>, more: bool },
    Rows(Vec<WireRow>),
}

impl From<merkle::Summary> for WireSummary {
    fn from(s: merkle::Summary) -> Self {
        WireSummary {
            digest: ByteBuf::from(s.digest.to_vec()),
            count: s.count,
        }
    }
}

pub(crate) struct Endpoints {
    pub update: Arc<Endpoint<UpdateRows, ()>>,
    pub read: Arc<Endpoint<ReadRow, Option<ByteBuf>>>,
    pub range: Arc<Endpoint<ReadRange, RangeRows>>,
    pub merkle: Arc<Endpoint<MerkleRequest, MerkleResponse>>,
    pub gc: Arc<Endpoint<crate::gc_rpc::GcRows, Vec<bool>>>,
    /// For tables with [`Schema::FENCE_TREE`] only.
    pub fence: Option<Arc<Endpoint<crate::fence::FenceRequest, crate::fence::FenceAnswer>>>,
}

/// A table whose rows live on the nodes of their layout partition. See the
/// module documentation for what it promises.
pub struct ShardedTable<S: Schema> {
    table: Table<S>,
    cluster: Cluster,
    pub(crate) eps: Arc<Endpoints>,
}

impl<S: Schema> Clone for ShardedTable<S> {
    fn clone(&self) -> Self {
        ShardedTable {
            table: self.table.clone(),
            cluster: self.cluster.clone(),
            eps: self.eps.clone(),
        }
    }
}

/// The Merkle index tree of `S` (a sharded schema: checked at compile time).
pub(crate) const fn index_of<S: Schema>() -> &'static str {
    match S::MERKLE_TREE {
        Some(t) => t,
        None => panic!("a ShardedTable needs Schema::MERKLE_TREE"),
    }
}

impl<S: Schema> ShardedTable<S> {
    /// The table on `db`, spread over `cluster`; installs the handlers of
    /// its endpoints on the cluster's mesh. `S::MERKLE_TREE` must be set
    /// (a compile-time error otherwise).
    pub fn new(db: Db, cluster: Cluster) -> std::result::Result<ShardedTable<S>, NetError> {
        let index = const { index_of::<S>() };
        let mesh = cluster.mesh();
        let eps = Arc::new(Endpoints {
            update: mesh.endpoint(&endpoint_path::<S>("update"))?,
            read: mesh.endpoint(&endpoint_path::<S>("read"))?,
            range: mesh.endpoint(&endpoint_path::<S>("range"))?,
            merkle: mesh.endpoint(&endpoint_path::<S>("merkle"))?,
            gc: mesh.endpoint(&endpoint_path::<S>("gc"))?,
            fence: match S::FENCE_TREE {
                Some(_) => Some(mesh.endpoint(&endpoint_path::<S>("fence"))?),
                None => None,
            },
        });
        let table = Table::new(db);
        let h = Handlers::<S> {
            table: table.clone(),
            index,
            layout: cluster.layout().downgrade(),
            me: cluster.id(),
            _s: PhantomData,
        };
        eps.update.set_handler(h.clone(), HANDLER_QUEUE);
        eps.read.set_handler(h.clone(), HANDLER_QUEUE);
        eps.range.set_handler(h.clone(), HANDLER_QUEUE);
        eps.merkle.set_handler(h, HANDLER_QUEUE);
        eps.gc.set_handler(
            crate::gc_rpc::GcHandler::<S> {
                table: table.clone(),
            },
            HANDLER_QUEUE,
        );
        if let Some(ep) = &eps.fence {
            ep.set_handler(
                crate::fence::FenceHandler::<S> {
                    table: table.clone(),
                },
                HANDLER_QUEUE,
            );
        }
        Ok(ShardedTable {
            table,
            cluster,
            eps,
        })
    }

    /// This node's replica (what it stores; no remote call).
    pub fn local(&self) -> &Table<S> {
        &self.table
    }

    /// The cluster the table is spread over.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The local tree of the table's Merkle index.
    pub fn index_tree(&self) -> &'static str {
        const { index_of::<S>() }
    }

    /// The root of this node's Merkle index of layout partition `p`.
    pub async fn merkle_root(&self, p: Partition) -> Result<merkle::Summary> {
        Ok(merkle::root(self.table.db(), self.index_tree(), p).await?)
    }

    /// Makes this node's Merkle index match its rows
    /// ([`merkle::repair_index`]): to run once on a table that becomes
    /// sharded with rows already stored, before its anti-entropy starts.
    pub async fn repair_index(&self) -> Result<merkle::IndexRepair> {
        Ok(merkle::repair_index(
            self.table.db(),
            S::TREE,
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
    /// of at most [`MAX_ROWS_PER_MESSAGE`] rows and about
    /// [`MAX_ANSWER_BYTES`], a few at once. Returns once every message
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
            return crate::full_table::merge_written(&self.table, keyed).await;
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

    /// The read nodes of layout partition `p` (the read orders them).
    fn read_nodes(&self, p: Partition) -> Vec<NodeId> {
        self.cluster.read_nodes_of_partition(p)
    }

    /// Reads row (`partition`, `sort`) from a read quorum of its nodes (the
    /// closest first, the others only if those fail or are slow:
    /// [`Cluster::call_read_quorum`]) and returns the merge of their answers
    /// (`None` when none holds it). Replicas that answered without it or
    /// with an older row are repaired ([`Self::read_repair`]: before the
    /// answer when fewer than a write quorum held what it returns).
    pub async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let p = S::layout_partition(partition);
        let key = crate::storage_key::<S>(partition, sort);
        for _ in 0..READ_ATTEMPTS {
            let targets = self.read_nodes(p);
            if targets.is_empty() {
                return Err(self.quorum_error("get", p, &[], QuorumError::NoLayout));
            }
            // A partition whose one read node is this one (a lone node, or
            // replication factor 1): the row is this node's, read in the
            // caller's task. Through the quorum call it cost a lone node's
            // GET of 4 KiB 9 % more instructions (script/profile-requests).
            if let [only] = targets[..]
                && only == self.cluster.id()
            {
                return self.table.get(partition, sort).await;
            }
            let answers = self
                .cluster
                .call_read_quorum(
                    &self.eps.read,
                    &targets,
                    ReadRow {
                        key: ByteBuf::from(key.clone()),
                    },
                    CallOpts::default(),
                )
                .await
                .map_err(|e| self.quorum_error("get", p, &targets, e))?;
            let mut merged: Option<S::Row> = None;
            for (node, v) in &answers {
                let Some(v) = v else { continue };
                match decode::<S>(v) {
                    Ok(row) => match &mut merged {
                        Some(m) => m.merge(&row),
                        None => merged = Some(row),
                    },
                    Err(e) => tracing::warn!("{}: row from {}: {e}", S::TREE, node.short()),
                }
            }
            let Some(m) = merged else { return Ok(None) };
            let value = encode::<S>(&m);
            let stale: Vec<NodeId> = answers
                .iter()
                .filter(|(_, v)| v.as_deref().map(|v| v.as_slice()) != Some(value.as_slice()))
                .map(|(n, _)| *n)
                .collect();
            // The usual case, replicas in agreement: nothing more to build.
            if stale.is_empty() {
                return Ok(Some(m));
            }
            let held = BTreeMap::from([(key.clone(), answers.len() - stale.len())]);
            let row = WireRow {
                key: ByteBuf::from(key.clone()),
                value: ByteBuf::from(value),
            };
            let answered = answers.iter().map(|(n, _)| *n).collect();
            let repairs = stale.into_iter().map(|n| (n, vec![row.clone()])).collect();
            match self
                .read_repair("get", p, &targets, &answered, repairs, held)
                .await?
            {
                Repaired::Done => return Ok(Some(m)),
                Repaired::LayoutMoved => continue,
            }
        }
        Err(self.layout_moving("get", p))
    }

    /// Read repair: `repairs` are the rows each replica that answered a
    /// read of partition `p` from `targets` lacked or held older, `held`
    /// how many of them answered with each of those rows (by storage
    /// key). When every such row was held by a write quorum, the
    /// repairs go in the background. Otherwise they are written before the
    /// read answers: a row that a write put on one replica only (the others
    /// crashed, or its coordinator did, before it reached them) would be
    /// seen by a read whose quorum holds that replica and missed by the
    /// next, whose quorum does not — reads would go back in time. Once the
    /// row is on a write quorum, every later read quorum meets it. The
    /// blocking repair goes to the stale replicas that answered and to the
    /// read nodes that were not asked (`targets` not in `answered`), and
    /// returns as soon as every short row is on a write quorum, so a stale
    /// replica slow to write does not hold the read when another replica
    /// can take the row. Fails when it could not be put on one.
    ///
    /// A node repairs a replica only once it exchanged layouts with it
    /// since it started: a node that was away may read under a layout the
    /// others retired, and its "merged" row be one they deleted and
    /// collected since. A blocking repair exchanges first (a few seconds
    /// at most, once per peer); if that moved the partition's read nodes,
    /// the read was made under an old layout and must be made again
    /// ([`Repaired::LayoutMoved`]).
    async fn read_repair(
        &self,
        op: &'static str,
        p: Partition,
        targets: &[NodeId],
        answered: &BTreeSet<NodeId>,
        repairs: BTreeMap<NodeId, Vec<WireRow>>,
        held: BTreeMap<Vec<u8>, usize>,
    ) -> Result<Repaired> {
        let needed = self.cluster.quorums().write;
        let short: Vec<(&Vec<u8>, usize)> = held
            .iter()
            .filter(|(_, h)| **h < needed)
            .map(|(k, h)| (k, *h))
            .collect();
        if repairs.is_empty() || short.is_empty() {
            for (node, rows) in repairs {
                self.repair_soon(node, rows);
            }
            return Ok(Repaired::Done);
        }
        let layout = self.cluster.layout();
        let strangers: Vec<NodeId> = repairs
            .keys()
            .copied()
            .filter(|n| !layout.has_exchanged_with(*n))
            .collect();
        if !strangers.is_empty() {
            layout.exchange_with(&strangers).await;
            if self.read_nodes(p) != targets {
                return Ok(Repaired::LayoutMoved);
            }
        }
        // The read nodes that did not answer take the short rows too: a
        // stale replica that is slow to write must not hold the read when
        // another can give the row its quorum. Each repair runs in its own
        // task, so that those still running when the quorum is reached
        // finish in the background.
        let short_rows: Vec<WireRow> = {
            let mut by_key: BTreeMap<&[u8], &WireRow> = BTreeMap::new();
            for rows in repairs.values() {
                for w in rows {
                    by_key.entry(w.key.as_slice()).or_insert(w);
                }
            }
            short
                .iter()
                .filter_map(|(k, _)| by_key.get(k.as_slice()).map(|w| (*w).clone()))
                .collect()
        };
        let mut repairs = repairs;
        for n in targets {
            if !answered.contains(n) && !short_rows.is_empty() {
                repairs.entry(*n).or_insert_with(|| short_rows.clone());
            }
        }
        let mut calls: futures::stream::FuturesUnordered<_> = repairs
            .into_iter()
            .map(|(node, rows)| {
                let ep = self.eps.update.clone();
                let exchanged = layout.has_exchanged_with(node);
                tokio::spawn(async move {
                    if !exchanged {
                        // A node this one could not exchange layouts with.
                        return (node, rows, Err(NetError::NotConnected(node)));
                    }
                    for batch in batches(rows.clone()) {
                        let msg = UpdateRows { rows: batch };
                        if let Err(e) = ep.call(node, msg, CallOpts::default()).await {
                            return (node, rows, Err(e));
                        }
                    }
                    (node, rows, Ok(()))
                })
            })
            .collect();
        let mut counts: Vec<usize> = short.iter().map(|(_, h)| *h).collect();
        let mut errors = Vec::new();
        while let Some(done) = calls.next().await {
            let Ok((node, rows, r)) = done else { continue };
            match r {
                Ok(()) => {
                    for ((key, _), c) in short.iter().zip(counts.iter_mut()) {
                        if rows.iter().any(|w| w.key.as_slice() == key.as_slice()) {
                            *c += 1;
                        }
                    }
                }
                Err(e) => errors.push((node, e)),
            }
            if counts.iter().all(|c| *c >= needed) {
                return Ok(Repaired::Done);
            }
        }
        let worst = counts.iter().copied().min().unwrap_or(0);
        let failed = QuorumError::Failed {
            needed,
            ok: worst,
            down: targets.iter().filter(|n| !self.cluster.is_up(**n)).count(),
            targets: targets.len(),
            version: None,
            errors,
        };
        Err(self.quorum_error(op, p, targets, failed))
    }

    /// The error of a read that saw the partition's read nodes move under
    /// it [`READ_ATTEMPTS`] times.
    fn layout_moving(&self, op: &'static str, p: Partition) -> TableError {
        TableError::Replication(ReplicationError::LayoutMoving {
            op,
            tree: S::TREE,
            partition: p,
            attempts: READ_ATTEMPTS,
        })
    }

    /// Sends `rows` to `node` in the background (read repair of rows a
    /// write quorum holds already), if this node exchanged layouts with it
    /// ([`Self::read_repair`] says why).
    fn repair_soon(&self, node: NodeId, rows: Vec<WireRow>) {
        if !self.cluster.layout().has_exchanged_with(node) {
            tracing::debug!(
                "{}: no read repair of {} before a layout exchange with it",
                S::TREE,
                node.short()
            );
            return;
        }
        let ep = self.eps.update.clone();
        tokio::spawn(async move {
            let n = rows.len();
            for rows in batches(rows) {
                let msg = UpdateRows { rows };
                if let Err(e) = ep.call(node, msg, CallOpts::background()).await {
                    tracing::debug!("{}: read repair of {}: {e}", S::TREE, node.short());
                    return;
                }
            }
            tracing::debug!("{}: read repair sent {n} rows to {}", S::TREE, node.short());
        });
    }

    /// Reads up to `limit` (at most [`MAX_ROWS_PER_MESSAGE`]) rows of
    /// `partition` whose sort key is within (`start`, `end`), in sort-key
    /// order (descending when `reverse`), from a read quorum of the
    /// partition's nodes: each replica answers its first rows, the answers
    /// are merged by key, and the first `limit` keys are returned. A key
    /// among the true first `limit` is among the first `limit` of every
    /// replica holding it, so none is missed; fewer than `limit` rows means
    /// the range holds no more. Tombstones are returned like other rows.
    /// Replicas found lacking a returned row, or holding an older one, are
    /// repaired as [`Self::get`]'s are.
    pub async fn range(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        assert_eq!(
            partition.len(),
            S::PARTITION_LEN,
            "partition key of {}",
            S::TREE
        );
        let limit = limit.min(MAX_ROWS_PER_MESSAGE);
        let owned = |b: Bound<&[u8]>| b.map(|s| ByteBuf::from(s.to_vec()));
        let (mut start, mut end) = (owned(start), owned(end));
        let mut out = Vec::new();
        while out.len() < limit {
            let mut page = None;
            for _ in 0..READ_ATTEMPTS {
                page = self
                    .range_once(
                        partition,
                        start.clone(),
                        end.clone(),
                        reverse,
                        limit - out.len(),
                    )
                    .await?;
                if page.is_some() {
                    break;
                }
            }
            let Some(page) = page else {
                return Err(self.layout_moving("range", S::layout_partition(partition)));
            };
            let cut = page.cut;
            out.extend(page.rows);
            match cut {
                // A replica stopped at its byte budget before the limit:
                // go on after the last key every answer covered.
                Some(k) if out.len() < limit => {
                    // The cut is a storage key; bounds are sort keys.
                    let next = Bound::Excluded(ByteBuf::from(k[S::PARTITION_LEN..].to_vec()));
                    if reverse {
                        end = next;
                    } else {
                        start = next;
                    }
                }
                _ => break,
            }
        }
        Ok(out)
    }

    async fn range_once(
        &self,
        partition: &[u8],
        start: Bound<ByteBuf>,
        end: Bound<ByteBuf>,
        reverse: bool,
        limit: usize,
    ) -> Result<Option<RangePage<S>>> {
        let p = S::layout_partition(partition);
        let targets = self.read_nodes(p);
        if targets.is_empty() {
            return Err(self.quorum_error("range", p, &[], QuorumError::NoLayout));
        }
        let msg = ReadRange {
            partition: ByteBuf::from(partition.to_vec()),
            start,
            end,
            reverse,
            limit: limit as u32,
        };
        let answers = self
            .cluster
            .call_read_quorum(&self.eps.range, &targets, msg, CallOpts::default())
            .await
            .map_err(|e| self.quorum_error("range", p, &targets, e))?;
        let bad = |message: String| TableError::BadAnswer {
            tree: S::TREE,
            message,
        };
        // Per key: the merged row and what each replica sent.
        let mut union: BTreeMap<Vec<u8>, Merging<S>> = BTreeMap::new();
        // Per replica with more rows: the last key it covered.
        let mut lasts: Vec<(NodeId, Option<Vec<u8>>)> = Vec::new();
        let mut cut: Option<Vec<u8>> = None;
        for (node, a) in answers {
            if a.rows.len() > limit || (a.more && a.rows.is_empty()) {
                return Err(bad(format!("{} rows from {}", a.rows.len(), node.short())));
            }
            let last = a.rows.last().map(|r| r.key.to_vec());
            if a.more
                && let Some(l) = &last
            {
                let nearer = match &cut {
                    None => true,
                    Some(c) => (l < c) != reverse,
                };
                if nearer {
                    cut = Some(l.clone());
                }
            }
            lasts.push((node, if a.more { last } else { None }));
            for w in a.rows {
                if w.key.len() > MAX_KEY_LEN || !w.key.starts_with(partition) {
                    return Err(bad(format!(
                        "a key of another partition from {}",
                        node.short()
                    )));
                }
                let entry = union.entry(w.key.to_vec()).or_default();
                match decode::<S>(&w.value) {
                    Ok(row) => match &mut entry.0 {
                        Some(m) => m.merge(&row),
                        None => entry.0 = Some(row),
                    },
                    Err(e) => tracing::warn!("{}: row from {}: {e}", S::TREE, node.short()),
                }
                entry.1.insert(node, w.value.into_vec());
            }
        }
        let covered = |node: NodeId, key: &[u8]| match lasts.iter().find(|(n, _)| *n == node) {
            Some((_, Some(last))) => (key <= last.as_slice()) != reverse || key == last.as_slice(),
            _ => true,
        };
        let in_order: Box<dyn Iterator<Item = _>> = if reverse {
            Box::new(union.into_iter().rev())
        } else {
            Box::new(union.into_iter())
        };
        let mut rows = Vec::new();
        let mut repairs: BTreeMap<NodeId, Vec<WireRow>> = BTreeMap::new();
        let mut held: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for (key, (row, sent)) in in_order {
            if rows.len() == limit {
                break;
            }
            if let Some(c) = &cut
                && (key.as_slice() > c.as_slice()) != reverse
                && key != *c
            {
                break;
            }
            let Some(row) = row else { continue };
            let value = encode::<S>(&row);
            let mut holders = 0;
            let mut lacking = false;
            for (node, _) in &lasts {
                if !covered(*node, &key) {
                    continue;
                }
                if sent.get(node) == Some(&value) {
                    holders += 1;
                } else {
                    lacking = true;
                    repairs.entry(*node).or_default().push(WireRow {
                        key: ByteBuf::from(key.clone()),
                        value: ByteBuf::from(value.clone()),
                    });
                }
            }
            // Only rows some replica lacked can need a blocking repair.
            if lacking {
                held.insert(key.clone(), holders);
            }
            rows.push((key[S::PARTITION_LEN..].to_vec(), row));
        }
        if !repairs.is_empty() {
            let answered = lasts.iter().map(|(n, _)| *n).collect();
            match self
                .read_repair("range", p, &targets, &answered, repairs, held)
                .await?
            {
                Repaired::Done => {}
                Repaired::LayoutMoved => return Ok(None),
            }
        }
        let cut = if rows.len() < limit { cut } else { None };
        Ok(Some(RangePage { rows, cut }))
    }
}

/// Cuts `rows` into messages of at most [`MAX_ROWS_PER_MESSAGE`] rows and
/// about [`MAX_ANSWER_BYTES`] bytes, in order.
pub(crate) fn batches(rows: Vec<WireRow>) -> Vec<Vec<WireRow>> {
    let mut out: Vec<Vec<WireRow>> = Vec::new();
    let mut bytes = 0usize;
    for r in rows {
        let len = r.key.len() + r.value.len();
        match out.last_mut() {
            Some(b) if b.len() < MAX_ROWS_PER_MESSAGE && bytes + len <= MAX_ANSWER_BYTES => {
                bytes += len;
                b.push(r);
            }
            _ => {
                bytes = len;
                out.push(vec![r]);
            }
        }
    }
    out
}

/// Whether some replica refused a write because of a fence
/// ([`crate::fence`]): the write failed because of it, whatever else went
/// wrong, and the caller should say so.
fn fenced(e: &QuorumError) -> bool {
    matches!(e, QuorumError::Failed { errors, .. } if errors.iter().any(|(_, e)| {
        matches!(e, NetError::Remote { message, .. } if message.contains(crate::fence::FENCED))
    }))
}

/// A key of a range read being merged: the merge of the rows decoded so
/// far, and the value each replica sent.
type Merging<S> = (Option<<S as Schema>::Row>, BTreeMap<NodeId, Vec<u8>>);

/// How a read repair ended ([`ShardedTable::read_repair`]).
enum Repaired {
    /// The repairs were written, or sent in the background where a write
    /// quorum held the rows already: the read may answer.
    Done,
    /// The partition's read nodes moved under the read: read again.
    LayoutMoved,
}

/// One quorum range read: the rows, and where to go on when a replica's
/// answer was cut by its byte budget.
struct RangePage<S: Schema> {
    rows: Vec<(Vec<u8>, S::Row)>,
    cut: Option<Vec<u8>>,
}

/// The handlers of a sharded table's endpoints.
struct Handlers<S: Schema> {
    table: Table<S>,
    index: &'static str,
    /// This node's layout, to refuse rows of partitions it does not hold.
    layout: WeakClusterLayout,
    me: NodeId,
    _s: PhantomData<S>,
}

impl<S: Schema> Clone for Handlers<S> {
    fn clone(&self) -> Self {
        Handlers {
            table: self.table.clone(),
            index: self.index,
            layout: self.layout.clone(),
            me: self.me,
            _s: PhantomData,
        }
    }
}

impl<S: Schema> Handlers<S> {
    /// Refuses `rows` when one of them belongs to a layout partition that
    /// no active layout version of this node assigns to it and that it
    /// never held (no `held` mark, [`merkle::held_marks`]), once some
    /// version assigns partitions at all: only a node holding a stale
    /// layout, its own or this one's, sends such rows, and merging them
    /// would keep rows nobody syncs or collects. The two nodes exchange
    /// layouts at once, so the stale one catches up. Rows of a partition
    /// this node held in a retired version are still merged (a coordinator
    /// that has not yet learnt of the retirement writes to the old set too)
    /// and leave again with the next sync pass's drop.
    async fn check_held(
        &self,
        from: NodeId,
        rows: &[WireRow],
    ) -> std::result::Result<(), HandlerError> {
        let Some(layout) = self.layout.upgrade() else {
            return Err(HandlerError::new("node is stopping"));
        };
        let h = layout.history();
        if !h.versions.iter().any(|v| v.is_assigned()) {
            return Ok(());
        }
        let partitions: BTreeSet<Partition> = rows
            .iter()
            .map(|r| S::layout_partition(&r.key[..S::PARTITION_LEN.min(r.key.len())]))
            .collect();
        for p in partitions {
            if h.versions
                .iter()
                .any(|v| v.nodes_of_partition(p).contains(&self.me))
                || merkle::is_marked_held(self.table.db(), self.index, p)
                    .await
                    .map_err(HandlerError::new)?
            {
                continue;
            }
            layout.exchange_soon(from);
            return Err(HandlerError::new(format!(
                "{}: rows of layout partition {p}, which node {} never held and holds in no active layout version (current {}): the sender's layout or this node's is stale",
                S::TREE,
                self.me.short(),
                h.current().version
            )));
        }
        Ok(())
    }
}

fn check_bound(b: &Bound<ByteBuf>) -> std::result::Result<(), HandlerError> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_LEN => {
            Err(HandlerError::new(format!("bound of {} bytes", k.len())))
        }
        _ => Ok(()),
    }
}

#[async_trait]
impl<S: Schema> Handler<UpdateRows, ()> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<UpdateRows>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        self.check_held(req.from, &req.msg.rows).await?;
        crate::full_table::serve_update(&self.table, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRow, Option<ByteBuf>> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRow>,
    ) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
        crate::full_table::serve_read(&self.table, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRange, RangeRows> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRange>,
    ) -> std::result::Result<Response<RangeRows>, HandlerError> {
        let m = req.msg;
        if m.partition.len() != S::PARTITION_LEN {
            return Err(HandlerError::new(format!(
                "partition key of {} bytes",
                m.partition.len()
            )));
        }
        check_bound(&m.start)?;
        check_bound(&m.end)?;
        let limit = (m.limit as usize).min(MAX_ROWS_PER_MESSAGE);
        let mut rows: Vec<WireRow> = Vec::new();
        let mut bytes = 0usize;
        let (mut start, mut end) = (m.start, m.end);
        let mut more = false;
        // Read in chunks so that a page of large rows stops at the byte
        // budget without loading the whole limit first.
        while rows.len() < limit {
            let want = (limit - rows.len()).min(READ_CHUNK);
            let as_slice = |b: &Bound<ByteBuf>| match b {
                Bound::Included(k) => Bound::Included(k.to_vec()),
                Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
                Bound::Unbounded => Bound::Unbounded,
            };
            let (s, e) = (as_slice(&start), as_slice(&end));
            let chunk = self
                .table
                .range_raw(&m.partition, s, e, m.reverse, want)
                .await
                .map_err(HandlerError::new)?;
            let got = chunk.len();
            for (k, v) in chunk {
                if bytes >= MAX_ANSWER_BYTES {
                    more = true;
                    break;
                }
                bytes += v.len();
                let next = Bound::Excluded(ByteBuf::from(k[S::PARTITION_LEN..].to_vec()));
                if m.reverse {
                    end = next;
                } else {
                    start = next;
                }
                rows.push(WireRow {
                    key: ByteBuf::from(k),
                    value: ByteBuf::from(v),
                });
            }
            if more || got < want {
                break;
            }
        }
        if rows.len() == limit {
            more = true;
        }
        Ok(Response::new(RangeRows { rows, more }))
    }
}

#[async_trait]
impl<S: Schema> Handler<MerkleRequest, MerkleResponse> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<MerkleRequest>,
    ) -> std::result::Result<Response<MerkleResponse>, HandlerError> {
        let db = self.table.db();
        let resp = match req.msg {
            MerkleRequest::Roots { partitions } => {
                // At most one per partition (256).
                let ps: BTreeSet<u8> = partitions.iter().copied().collect();
                if ps.len() != partitions.len() {
                    return Err(HandlerError::new("a partition listed twice"));
                }
                let roots = merkle::roots(db, self.index, partitions.into_vec())
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Roots(roots.into_iter().map(WireSummary::from).collect())
            }
            MerkleRequest::Children { partition, prefix } => {
                if prefix.len() >= DEPTH {
                    return Err(HandlerError::new(format!(
                        "prefix of {} bytes",
                        prefix.len()
                    )));
                }
                let kids = merkle::children(db, self.index, partition, &prefix)
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Children(kids.into_iter().map(|(b, s)| (b, s.into())).collect())
            }
            MerkleRequest::Leaves {
                partition,
                prefix,
                after,
                limit,
            } => {
                if prefix.len() > 32 {
                    return Err(HandlerError::new(format!(
                        "prefix of {} bytes",
                        prefix.len()
                    )));
                }
                let after = match after {
                    Some(a) => Some(
                        <[u8; 32]>::try_from(a.as_slice())
                            .map_err(|_| HandlerError::new("bad after"))?,
                    ),
                    None => None,
                };
                let limit = (limit as usize).min(MAX_ROWS_PER_MESSAGE);
                let leaves = merkle::leaves(db, self.index, partition, &prefix, after, limit)
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Leaves {
                    more: leaves.len() == limit,
                    leaves: leaves
                        .into_iter()
                        .map(|l| WireLeaf {
                            key: ByteBuf::from(l.key),
                            value_hash: ByteBuf::from(l.vh.to_vec()),
                        })
                        .collect(),
                }
            }
            MerkleRequest::Rows { keys } => {
                if keys.len() > MAX_ROWS_PER_MESSAGE
                    || keys
                        .iter()
                        .any(|k| k.len() > MAX_KEY_LEN || k.len() < S::PARTITION_LEN)
                {
                    return Err(HandlerError::new("bad row keys"));
                }
                let rows = read_rows::<S>(db, keys.into_iter().map(|k| k.into_vec()).collect())
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Rows(rows)
            }
        };
        Ok(Response::new(resp))
    }
}

/// The stored rows of `keys` that this node holds, up to
/// [`MAX_ANSWER_BYTES`] of values (at least one), read in one task of the
/// blocking pool.
pub(crate) async fn read_rows<S: Schema>(
    db: &Db,
    keys: Vec<Vec<u8>>,
) -> std::result::Result<Vec<WireRow>, hangar_db::DbError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for k in keys {
            if bytes >= MAX_ANSWER_BYTES {
                break;
            }
            if let Some(v) = db.get(S::TREE, &k)? {
                bytes += v.len();
                out.push(WireRow {
                    key: ByteBuf::from(k),
                    value: ByteBuf::from(v),
                });
            }
        }
        Ok(out)
    })
    .await
    .map_err(|e| hangar_db::DbError::Engine {
        engine: "blocking pool",
        message: e.to_string(),
    })?
}
