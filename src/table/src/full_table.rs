//! Tables replicated to every node of the cluster (keys, buckets).
//!
//! A [`FullTable`] is a [`Table`] plus three typed mesh endpoints per table:
//!
//! - `hangar/table/<tree>/update`: [`UpdateRows`] → `()`: the receiver merges
//!   each row into its own (one local transaction for the batch);
//! - `hangar/table/<tree>/read`: [`ReadRow`] → `Option<bin>`: the receiver's
//!   stored row;
//! - `hangar/table/<tree>/pull`: [`PullRows`] → [`RowPage`]: a page of the
//!   receiver's rows, and the digest of the whole table (anti-entropy,
//!   `crate::full_sync`).
//!
//! What it promises:
//!
//! - A write ([`FullTable::replicate`]) is first merged into the local store
//!   (by the caller's transaction), then sent to every node that has a role
//!   in the layout, in parallel. It succeeds once a majority of those nodes
//!   (this one included; in `dangerous` mode this one alone) hold it, and
//!   lingers up to [`LINGER`] for the remaining live nodes, so that with
//!   every node up a change made through one node is seen through every
//!   node once the call returns. A node that missed it gets it from
//!   anti-entropy. No call waits on a node the failure detector reports
//!   down, and with too few live nodes a write fails at once.
//! - A read is local; a row missing locally is asked of the other nodes
//!   (the read quorum that complements the write quorum), merged, and stored
//!   locally (read repair), so a row written through another node a moment
//!   ago is found.
//!
//! A row travels as stored: the format byte then the MessagePack row
//! (doc/table-rows.md); the receiver decodes it (refusing what does not
//! decode) and merges it, so the wire and the disk never disagree.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hangar_cluster::Cluster;
use hangar_db::{Db, DbError};
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, NetError, Request, Response};
use hangar_util::NodeId;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use tokio::time::Instant;

use crate::{Result, Schema, Table, TableError, decode, encode};

/// How long a write waits, after its quorum, for the other live nodes.
pub const LINGER: Duration = Duration::from_millis(500);
/// Most rows one update or page carries.
pub const MAX_ROWS_PER_MESSAGE: usize = 1000;
/// Largest storage key accepted from a peer.
pub const MAX_KEY_LEN: usize = 4096;
/// Largest row value accepted from a peer.
pub const MAX_VALUE_LEN: usize = 1 << 20;
/// Calls one table endpoint admits at once (more are refused as overloaded).
const HANDLER_QUEUE: usize = 256;

/// One row on the wire: its storage key and its stored value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireRow {
    pub key: ByteBuf,
    pub value: ByteBuf,
}

/// Rows to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateRows {
    pub rows: Vec<WireRow>,
}

/// One row to read, by storage key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadRow {
    pub key: ByteBuf,
}

/// A page of rows after `after` (from the start when `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullRows {
    pub after: Option<ByteBuf>,
    pub limit: u32,
}

/// A page of the table, and the digest of the whole table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowPage {
    pub rows: Vec<WireRow>,
    /// True when rows follow the last one of this page.
    pub more: bool,
    /// [`digest`] of the sender's whole table.
    pub digest: ByteBuf,
}

/// Why a replicated operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    #[error(
        "a change needs a quorum of {needed} of the {nodes} nodes, and {stored} stored it{}",
        detail(.errors)
    )]
    NoQuorum {
        stored: usize,
        nodes: usize,
        needed: usize,
        errors: Vec<String>,
    },
    /// A sharded table's operation could not reach its quorum
    /// (`crate::sharded`): the quorum error (which quorum, in which layout
    /// version) and the partition's nodes the failure detector reports down.
    #[error(
        "{op} on table {tree} (layout partition {partition}): {source}{}",
        down_nodes(.down)
    )]
    Quorum {
        op: &'static str,
        tree: &'static str,
        partition: u8,
        down: Vec<NodeId>,
        #[source]
        source: Box<hangar_cluster::QuorumError>,
    },
    /// A full table's read that found nothing here could not ask enough of
    /// the other nodes to tell "absent" from "not here yet" (this node may
    /// have been wiped, or be new).
    #[error(
        "a read of table {tree} found nothing on this node, and telling absent from not here yet needs a read quorum: {needed} of the other {others} nodes, and {answered} answered{}",
        detail(.errors)
    )]
    NoReadQuorum {
        tree: &'static str,
        others: usize,
        needed: usize,
        answered: usize,
        errors: Vec<String>,
    },
    /// A full table's read that found nothing on a node that knows no
    /// cluster layout yet and has no peer up to ask, while its replication
    /// factor says it has peers: a node just started to join (or replace a
    /// node of) a cluster must not call a row absent that they hold.
    #[error(
        "this node has no cluster layout yet (replication factor {replication_factor}): it cannot tell where the rows of table {tree} are, or whether one exists, until it has joined the cluster; retry in a moment"
    )]
    NoLayoutYet {
        tree: &'static str,
        replication_factor: usize,
    },
    /// A sharded table's read whose partition moved to other nodes each
    /// time it was made (layouts learnt of while repairing its replicas).
    #[error(
        "{op} on table {tree} (layout partition {partition}): the partition's nodes changed during each of {attempts} reads; retry"
    )]
    LayoutMoving {
        op: &'static str,
        tree: &'static str,
        partition: u8,
        attempts: usize,
    },
    /// A row too large for peers to accept (`MAX_KEY_LEN`, `MAX_VALUE_LEN`).
    #[error(
        "a row of table {tree} is too large to replicate: key {key_len} bytes, value {value_len} bytes"
    )]
    TooLarge {
        tree: &'static str,
        key_len: usize,
        value_len: usize,
    },
}

fn down_nodes(down: &[NodeId]) -> String {
    if down.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = down.iter().map(|n| n.short()).collect();
        format!("; nodes down: {}", names.join(", "))
    }
}

fn detail(errors: &[String]) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!(" ({})", errors.join("; "))
    }
}

/// A table whose rows every node holds.
pub struct FullTable<S: Schema> {
    table: Table<S>,
    cluster: Cluster,
    update: Arc<Endpoint<UpdateRows, ()>>,
    read: Arc<Endpoint<ReadRow, Option<ByteBuf>>>,
    pull: Arc<Endpoint<PullRows, RowPage>>,
}

impl<S: Schema> Clone for FullTable<S> {
    fn clone(&self) -> Self {
        FullTable {
            table: self.table.clone(),
            cluster: self.cluster.clone(),
            update: self.update.clone(),
            read: self.read.clone(),
            pull: self.pull.clone(),
        }
    }
}

/// The endpoint path of operation `op` of table `S`.
pub fn endpoint_path<S: Schema>(op: &str) -> String {
    format!("hangar/table/{}/{op}", S::TREE)
}

impl<S: Schema> FullTable<S> {
    /// The table on `db`, replicated over `cluster`; installs the handlers.
    pub fn new(db: Db, cluster: Cluster) -> std::result::Result<FullTable<S>, NetError> {
        let mesh = cluster.mesh();
        let t = FullTable {
            table: Table::new(db),
            update: mesh.endpoint(&endpoint_path::<S>("update"))?,
            read: mesh.endpoint(&endpoint_path::<S>("read"))?,
            pull: mesh.endpoint(&endpoint_path::<S>("pull"))?,
            cluster,
        };
        let h = Handlers::<S> {
            table: t.table.clone(),
            _s: PhantomData,
        };
        t.update.set_handler(h.clone(), HANDLER_QUEUE);
        t.read.set_handler(h.clone(), HANDLER_QUEUE);
        t.pull.set_handler(h, HANDLER_QUEUE);
        Ok(t)
    }

    /// The local table.
    pub fn local(&self) -> &Table<S> {
        &self.table
    }

    pub(crate) fn pull_endpoint(&self) -> &Arc<Endpoint<PullRows, RowPage>> {
        &self.pull
    }

    pub(crate) fn update_endpoint(&self) -> &Arc<Endpoint<UpdateRows, ()>> {
        &self.update
    }

    /// Every node that holds this table: each node with a role in a kept
    /// layout version, and this one.
    pub fn nodes(&self) -> BTreeSet<NodeId> {
        let mut n = self.cluster.layout().history().all_nodes();
        n.insert(self.cluster.id());
        n
    }

    /// How many nodes (this one included) must hold a write: a majority,
    /// or this node alone in `dangerous` mode.
    fn write_quorum(&self, nodes: usize) -> usize {
        match self.cluster.consistency_mode() {
            hangar_util::config::ConsistencyMode::Dangerous => 1,
            _ => nodes / 2 + 1,
        }
    }

    /// How many nodes must answer a read so that it meets every write.
    fn read_quorum(&self, nodes: usize) -> usize {
        nodes + 1 - self.write_quorum(nodes)
    }

    /// Fails at once if too few nodes are up for a write to reach its
    /// quorum. Callers check before changing the local store, so that a
    /// refused change is, as far as this node can tell, not made at all.
    pub fn check_writable(&self) -> Result<()> {
        let nodes = self.nodes();
        let me = self.cluster.id();
        let needed = self.write_quorum(nodes.len());
        let others = nodes.len() - 1;
        let up = nodes
            .iter()
            .filter(|n| **n != me && self.cluster.is_up(**n))
            .count();
        if up + 1 < needed {
            return Err(TableError::Replication(ReplicationError::NoQuorum {
                stored: 0,
                nodes: nodes.len(),
                needed,
                errors: vec![format!(
                    "{} of the other {others} nodes are down",
                    others - up
                )],
            }));
        }
        Ok(())
    }

    /// Sends rows already merged into the local store (by the caller's
    /// transaction) to every other node; see the module documentation.
    pub async fn replicate(&self, rows: Vec<(Vec<u8>, Vec<u8>, S::Row)>) -> Result<()> {
        let wire: Vec<WireRow> = rows
            .iter()
            .map(|(p, s, r)| WireRow {
                key: ByteBuf::from(crate::storage_key::<S>(p, s)),
                value: ByteBuf::from(encode::<S>(r)),
            })
            .collect();
        let nodes = self.nodes();
        let me = self.cluster.id();
        let needed = self.write_quorum(nodes.len());
        let others: Vec<NodeId> = nodes.iter().copied().filter(|n| *n != me).collect();
        if others.is_empty() {
            return Ok(());
        }
        let up: Vec<NodeId> = others
            .iter()
            .copied()
            .filter(|n| self.cluster.is_up(*n))
            .collect();
        if up.len() + 1 < needed {
            return Err(TableError::Replication(ReplicationError::NoQuorum {
                stored: 1,
                nodes: nodes.len(),
                needed,
                errors: vec![format!(
                    "{} of the other {} nodes are down",
                    others.len() - up.len(),
                    others.len()
                )],
            }));
        }
        let mut calls: FuturesUnordered<_> = wire
            .chunks(MAX_ROWS_PER_MESSAGE)
            .flat_map(|chunk| {
                let msg = UpdateRows {
                    rows: chunk.to_vec(),
                };
                up.iter().map(move |n| {
                    let ep = self.update.clone();
                    let msg = msg.clone();
                    let n = *n;
                    async move { (n, ep.call(n, msg, CallOpts::default()).await) }
                })
            })
            .collect();
        let chunks = wire.len().div_ceil(MAX_ROWS_PER_MESSAGE).max(1);
        // A node counts once all its chunks are stored.
        let mut per_node: std::collections::BTreeMap<NodeId, usize> = Default::default();
        let mut stored = 1usize;
        let mut errors = Vec::new();
        let mut linger_until: Option<Instant> = None;
        loop {
            let next = match linger_until {
                Some(t) => match tokio::time::timeout_at(t, calls.next()).await {
                    Ok(n) => n,
                    Err(_) => break,
                },
                None => calls.next().await,
            };
            let Some((node, r)) = next else { break };
            match r {
                Ok(()) => {
                    let c = per_node.entry(node).or_default();
                    *c += 1;
                    if *c == chunks {
                        stored += 1;
                    }
                }
                Err(e) => errors.push(format!("{}: {e}", node.short())),
            }
            if stored >= needed && linger_until.is_none() {
                linger_until = Some(Instant::now() + LINGER);
            }
        }
        if !calls.is_empty() {
            // The slow nodes still get the write.
            tokio::spawn(async move { while calls.next().await.is_some() {} });
        }
        if stored >= needed {
            Ok(())
        } else {
            Err(TableError::Replication(ReplicationError::NoQuorum {
                stored,
                nodes: nodes.len(),
                needed,
                errors,
            }))
        }
    }

    /// Reads row (`partition`, `sort`): locally, or, when this node does not
    /// have it, from the other nodes (read repair stores what they had).
    /// "Absent" is only answered once a read quorum (this node included)
    /// said so; with too few of the others reachable the read fails
    /// ([`ReplicationError::NoReadQuorum`], S3: 503), so a node that lost
    /// its rows never denies a key or a bucket that exists.
    pub async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        if let Some(r) = self.table.get(partition, sort).await? {
            return Ok(Some(r));
        }
        let nodes = self.nodes().len();
        let needed = self.read_quorum(nodes).saturating_sub(1).max(1);
        self.read_others(partition, sort, needed, false).await
    }

    /// Reads row (`partition`, `sort`) from this node and from a read
    /// quorum of the others, asked even when this node has the row, and
    /// returns their merge (stored here too). It meets every write that
    /// reached its write quorum, so a node deciding on a row (the
    /// coordinator of a bucket creation) sees what another node wrote a
    /// moment ago. Fails like [`FullTable::get`] with too few nodes.
    pub async fn get_quorum(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let nodes = self.nodes().len();
        // This node is one of the read quorum.
        let needed = self.read_quorum(nodes).saturating_sub(1);
        if needed == 0 {
            return self.table.get(partition, sort).await;
        }
        self.read_others(partition, sort, needed, true).await?;
        self.table.get(partition, sort).await
    }

    /// Asks the other live nodes for a row until `needed` of them answered,
    /// merges what they hold into this node's row (read repair) and
    /// returns what they held (`None` when no one did). Fewer answers fail
    /// the read, unless one of them held the row and `strict` is false.
    async fn read_others(
        &self,
        partition: &[u8],
        sort: &[u8],
        needed: usize,
        strict: bool,
    ) -> Result<Option<S::Row>> {
        let nodes = self.nodes();
        let me = self.cluster.id();
        let laid_out_others = nodes.iter().filter(|n| **n != me).count();
        // (the others to ask now, how many others there are, answers needed)
        let (others, all_others, needed): (Vec<NodeId>, usize, usize) = if laid_out_others > 0 {
            let up = nodes
                .iter()
                .copied()
                .filter(|n| *n != me && self.cluster.is_up(*n))
                .collect();
            (up, laid_out_others, needed.min(laid_out_others))
        } else if self.cluster.is_laid_out() {
            // Alone by its layout: absent here is absent.
            return Ok(None);
        } else {
            // No layout yet. A node just started to join or replace a node
            // of a cluster holds none of its rows, so it asks every peer
            // the mesh has up and waits for all of them (on a new cluster
            // they answer absent too). Alone, it answers absent only if
            // its replication factor promises no peers.
            let up: Vec<NodeId> = self
                .cluster
                .mesh()
                .up_nodes()
                .into_iter()
                .filter(|n| *n != me)
                .collect();
            let rf = self.cluster.replication_factor();
            if up.is_empty() {
                if rf > 1 {
                    return Err(TableError::Replication(ReplicationError::NoLayoutYet {
                        tree: S::TREE,
                        replication_factor: rf,
                    }));
                }
                return Ok(None);
            }
            let n = up.len();
            (up, n, n)
        };
        let no_quorum = |answered: usize, errors: Vec<String>| {
            TableError::Replication(ReplicationError::NoReadQuorum {
                tree: S::TREE,
                others: all_others,
                needed,
                answered,
                errors,
            })
        };
        if others.len() < needed {
            return Err(no_quorum(
                0,
                vec![format!(
                    "{} of the other nodes are down",
                    all_others - others.len()
                )],
            ));
        }
        let key = ByteBuf::from(crate::storage_key::<S>(partition, sort));
        let mut calls: FuturesUnordered<_> = others
            .iter()
            .map(|n| {
                let ep = self.read.clone();
                let msg = ReadRow { key: key.clone() };
                let n = *n;
                async move { (n, ep.call(n, msg, CallOpts::default()).await) }
            })
            .collect();
        let mut answers = 0;
        let mut errors = Vec::new();
        let mut found: Option<S::Row> = None;
        while let Some((node, r)) = calls.next().await {
            match r {
                Ok(Some(v)) => match decode::<S>(&v) {
                    Ok(row) => {
                        answers += 1;
                        match &mut found {
                            Some(f) => crate::Crdt::merge(f, &row),
                            None => found = Some(row),
                        }
                    }
                    Err(e) => tracing::warn!("{}: row from {}: {e}", S::TREE, node.short()),
                },
                Ok(None) => answers += 1,
                Err(e) => {
                    tracing::debug!("{}: read from {}: {e}", S::TREE, node.short());
                    errors.push(format!("{}: {e}", node.short()));
                }
            }
            if answers >= needed {
                break;
            }
        }
        if (strict || found.is_none()) && answers < needed {
            return Err(no_quorum(answers, errors));
        }
        if let Some(row) = &found {
            let (p, s, r) = (partition.to_vec(), sort.to_vec(), row.clone());
            self.table
                .db()
                .write(move |tx| Table::<S>::tx_insert(tx, &p, &s, &r).map(|_| ()))
                .await?;
        }
        Ok(found)
    }
}

/// The handlers of a full table's endpoints.
struct Handlers<S: Schema> {
    table: Table<S>,
    _s: PhantomData<S>,
}

impl<S: Schema> Clone for Handlers<S> {
    fn clone(&self) -> Self {
        Handlers {
            table: self.table.clone(),
            _s: PhantomData,
        }
    }
}

/// Rows by storage key, decoded.
pub(crate) type KeyedRows<S> = Vec<(Vec<u8>, <S as Schema>::Row)>;

/// Decodes and checks rows from a peer: bounded sizes, keys of the table's
/// shape, values that decode.
pub(crate) fn check_rows<S: Schema>(
    rows: Vec<WireRow>,
) -> std::result::Result<KeyedRows<S>, String> {
    if rows.len() > MAX_ROWS_PER_MESSAGE {
        return Err(format!(
            "{} rows in one message, at most {MAX_ROWS_PER_MESSAGE}",
            rows.len()
        ));
    }
    rows.into_iter()
        .map(|w| {
            if w.key.len() > MAX_KEY_LEN || w.key.len() < S::PARTITION_LEN {
                return Err(format!("bad key length {}", w.key.len()));
            }
            if w.value.len() > MAX_VALUE_LEN {
                return Err(format!("row of {} bytes", w.value.len()));
            }
            let row = decode::<S>(&w.value).map_err(|e| e.to_string())?;
            Ok((w.key.into_vec(), row))
        })
        .collect()
}

/// Merges decoded rows into the local table in one transaction.
pub(crate) async fn merge_rows<S: Schema>(
    table: &Table<S>,
    rows: KeyedRows<S>,
) -> std::result::Result<(), DbError> {
    table
        .db()
        .write(move |tx| {
            for (k, row) in &rows {
                let (p, s) = k.split_at(S::PARTITION_LEN);
                Table::<S>::tx_insert(tx, p, s, row).map_err(DbError::from)?;
            }
            Ok::<_, DbError>(())
        })
        .await
}

/// Merges a writer's rows (not anti-entropy's) in one transaction, with
/// [`Table::tx_insert_admitted`]: nothing is stored when one is refused by
/// a fence.
pub(crate) async fn merge_written<S: Schema>(table: &Table<S>, rows: KeyedRows<S>) -> Result<()> {
    table
        .db()
        .write(move |tx| {
            for (k, row) in &rows {
                let (p, s) = k.split_at(S::PARTITION_LEN);
                Table::<S>::tx_insert_admitted(tx, p, s, row)?;
            }
            Ok::<_, TableError>(())
        })
        .await
}

/// Serves an update: checks the rows a peer sent and merges them (a live
/// row of a fenced partition key is refused, `crate::fence`).
pub(crate) async fn serve_update<S: Schema>(
    table: &Table<S>,
    req: Request<UpdateRows>,
) -> std::result::Result<Response<()>, HandlerError> {
    let rows = check_rows::<S>(req.msg.rows).map_err(HandlerError::new)?;
    merge_written(table, rows)
        .await
        .map_err(HandlerError::new)?;
    Ok(Response::new(()))
}

/// Serves a read of one stored row, by storage key.
pub(crate) async fn serve_read<S: Schema>(
    table: &Table<S>,
    req: Request<ReadRow>,
) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
    let key = req.msg.key.into_vec();
    if key.len() > MAX_KEY_LEN || key.len() < S::PARTITION_LEN {
        return Err(HandlerError::new(format!("bad key length {}", key.len())));
    }
    let v = table
        .db()
        .get_async(S::TREE, key)
        .await
        .map_err(HandlerError::new)?;
    Ok(Response::new(v.map(ByteBuf::from)))
}

#[async_trait]
impl<S: Schema> Handler<UpdateRows, ()> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<UpdateRows>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        serve_update(&self.table, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRow, Option<ByteBuf>> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRow>,
    ) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
        serve_read(&self.table, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<PullRows, RowPage> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<PullRows>,
    ) -> std::result::Result<Response<RowPage>, HandlerError> {
        // A limit of 0 asks for the digest alone.
        let limit = (req.msg.limit as usize).min(MAX_ROWS_PER_MESSAGE);
        let start = match &req.msg.after {
            Some(k) => std::ops::Bound::Excluded(k.to_vec()),
            None => std::ops::Bound::Unbounded,
        };
        let db = self.table.db();
        let rows = if limit == 0 {
            Vec::new()
        } else {
            db.range_async(S::TREE, start, std::ops::Bound::Unbounded, false, limit + 1)
                .await
                .map_err(HandlerError::new)?
        };
        let more = rows.len() > limit;
        let rows = rows
            .into_iter()
            .take(limit)
            .map(|(k, v)| WireRow {
                key: ByteBuf::from(k),
                value: ByteBuf::from(v),
            })
            .collect();
        let digest = digest::<S>(db).await.map_err(HandlerError::new)?;
        Ok(Response::new(RowPage {
            rows,
            more,
            digest: ByteBuf::from(digest.to_vec()),
        }))
    }
}

/// The digest of a whole table: blake3 over every (key, value) in key
/// order, each length-prefixed. Two nodes whose digests agree hold the
/// same rows, byte for byte.
pub async fn digest<S: Schema>(db: &Db) -> std::result::Result<[u8; 32], DbError> {
    let mut h = blake3::Hasher::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let page = db
            .range_async(S::TREE, start, std::ops::Bound::Unbounded, false, 1024)
            .await?;
        for (k, v) in &page {
            h.update(&(k.len() as u64).to_be_bytes());
            h.update(k);
            h.update(&(v.len() as u64).to_be_bytes());
            h.update(v);
        }
        if page.len() < 1024 {
            return Ok(*h.finalize().as_bytes());
        }
        after = page.last().map(|(k, _)| k.clone());
    }
}
