//! [`Full`] replication: every node holds every row (keys, buckets,
//! aliases).
//!
//! A [`Table`]`<S, Full>` serves three endpoints ([`crate::wire`]):
//!
//! - `hangar/table/<tree>/update`: [`UpdateRows`] → `()`: the receiver merges
//!   each row into its own (one local transaction for the batch);
//! - `hangar/table/<tree>/read`: [`ReadRow`] → `Option<bin>`: the receiver's
//!   stored row;
//! - `hangar/table/<tree>/pull`: [`PullRows`] → [`RowPage`]: a page of the
//!   receiver's rows, and the digest of the whole table (anti-entropy,
//!   [`sync`]).
//!
//! What it promises:
//!
//! - A write ([`Table::replicate`]) is first merged into the local store
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

mod handlers;
pub mod sync;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hangar_cluster::Cluster;
use hangar_net::{CallOpts, Endpoint, NetError};
use hangar_util::NodeId;
use serde_bytes::ByteBuf;
use tokio::time::Instant;

pub use handlers::digest;

use crate::wire::{
    MAX_ROWS_PER_MESSAGE, PullRows, ReadRow, RowPage, UpdateRows, WireRow, endpoint_path,
};
use crate::{
    Crdt, Replica, Replication, ReplicationError, Result, Schema, Table, TableError, decode, encode,
};

/// How long a write waits, after its quorum, for the other live nodes.
pub const LINGER: Duration = Duration::from_millis(500);
/// Calls one table endpoint admits at once (more are refused as overloaded).
const HANDLER_QUEUE: usize = 256;

/// Full replication: every node holds every row of the table.
pub struct Full;

/// The endpoints of a fully replicated table.
pub struct Endpoints {
    pub(crate) update: Arc<Endpoint<UpdateRows, ()>>,
    pub(crate) read: Arc<Endpoint<ReadRow, Option<ByteBuf>>>,
    pub(crate) pull: Arc<Endpoint<PullRows, RowPage>>,
}

impl Replication for Full {
    type Endpoints = Endpoints;

    fn endpoints<S: Schema>(
        replica: &Replica<S>,
        cluster: &Cluster,
    ) -> std::result::Result<Endpoints, NetError> {
        let mesh = cluster.mesh();
        let eps = Endpoints {
            update: mesh.endpoint(&endpoint_path::<S>("update"))?,
            read: mesh.endpoint(&endpoint_path::<S>("read"))?,
            pull: mesh.endpoint(&endpoint_path::<S>("pull"))?,
        };
        let h = handlers::Handlers::<S> {
            replica: replica.clone(),
        };
        eps.update.set_handler(h.clone(), HANDLER_QUEUE);
        eps.read.set_handler(h.clone(), HANDLER_QUEUE);
        eps.pull.set_handler(h, HANDLER_QUEUE);
        Ok(eps)
    }
}

impl<S: Schema> Table<S, Full> {
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
                    let ep = self.eps.update.clone();
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
        if let Some(r) = self.replica.get(partition, sort).await? {
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
    /// moment ago. Fails like [`Table::get`] with too few nodes.
    pub async fn get_quorum(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let nodes = self.nodes().len();
        // This node is one of the read quorum.
        let needed = self.read_quorum(nodes).saturating_sub(1);
        if needed == 0 {
            return self.replica.get(partition, sort).await;
        }
        self.read_others(partition, sort, needed, true).await?;
        self.replica.get(partition, sort).await
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
                let ep = self.eps.read.clone();
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
                            Some(f) => Crdt::merge(f, &row),
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
            self.replica
                .db()
                .write(move |tx| Replica::<S>::tx_insert(tx, &p, &s, &r).map(|_| ()))
                .await?;
        }
        Ok(found)
    }
}
