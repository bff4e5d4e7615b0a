//! The handle tables and blocks hold: who this node is, which nodes store
//! a partition, which nodes are up, and quorum calls with the cluster's
//! quorums.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hangar_layout::{LayoutHistory, NodeId, Partition, Quorums, WriteSet, partition_of};
use hangar_net::{CallOpts, Endpoint, Mesh, Message};
use hangar_util::Hash;
use hangar_util::config::ConsistencyMode;

use crate::error::ClusterError;
use crate::live_layout::ClusterLayout;
use crate::quorum_call::{self, QuorumError};

/// The nodes that store one partition, in every active layout version
/// (oldest first). Outside transitions there is one version; during one, a
/// write must reach the write quorum of each version's nodes, and is sent to
/// [`StorageNodes::nodes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageNodes {
    pub partition: Partition,
    /// One set per active version with an assignment (a lone node's own
    /// set, version 0, before its first layout: [`Cluster::is_lone`]);
    /// empty while a node of a replicated cluster awaits its first layout.
    pub sets: Vec<WriteSet>,
}

impl StorageNodes {
    /// Every node of every set, each once, sorted: who a write goes to.
    pub fn nodes(&self) -> Vec<NodeId> {
        let mut all: Vec<NodeId> = self.sets.iter().flat_map(|s| s.nodes.clone()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// True when a node of a replicated cluster has no layout with an
    /// assignment yet: nothing can be stored.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The newest layout version these sets were taken from (0 before the
    /// first layout: a lone node's own set).
    pub fn newest_version(&self) -> u64 {
        self.sets.iter().map(|s| s.version).max().unwrap_or(0)
    }
}

/// Least time a quorum read waits for its closest replicas before it asks
/// the others too ([`Cluster::call_read_quorum`]).
pub const READ_HEDGE_MIN: Duration = Duration::from_millis(20);
/// A quorum read asks the other replicas after this many times the ping RTT
/// of the slowest replica it asked first (at least [`READ_HEDGE_MIN`]).
pub const READ_HEDGE_RTT_FACTOR: u32 = 3;
/// Most time a quorum read waits before it asks the other replicas, whatever
/// the RTT (a replica of unknown RTT counts as far).
pub const READ_HEDGE_MAX: Duration = Duration::from_millis(500);

/// A target of a read as [`Cluster::call_read_quorum`] ranks it: live
/// first, then by `rank` (recent answer time, else ping RTT); ordered by
/// its fields in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ReadCandidate {
    down: bool,
    rank: Duration,
    rtt: Duration,
    node: NodeId,
    /// This node, or a peer with a recent answer time: known to be fast
    /// (or slow) now, rather than guessed from its ping RTT.
    known: bool,
}

/// Writes in flight, counted by the newest layout version they were sent
/// under: a node acknowledges version `v` ([`Cluster::writes_before`] = 0)
/// only once no write it sent under an older version is still running, so
/// a write never misses the nodes of a version its sender acknowledged.
#[derive(Default)]
struct WriteCounts(std::sync::Mutex<std::collections::BTreeMap<u64, u64>>);

/// Held by a write while it runs ([`Cluster::track_write`]).
pub struct WriteGuard {
    cluster: Cluster,
    version: u64,
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        let mut m = self.cluster.inner.writes.0.lock().expect("write counts");
        if let Some(n) = m.get_mut(&self.version) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.version);
            }
        }
    }
}

/// This node's view of the cluster. Cheap to clone (an `Arc` inside); every
/// clone sees the same live layout.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    mesh: Mesh,
    layout: ClusterLayout,
    id: NodeId,
    replication_factor: usize,
    consistency_mode: ConsistencyMode,
    quorums: Quorums,
    writes: WriteCounts,
}

impl Cluster {
    /// Starts the live layout on `mesh` from `history` (loaded with
    /// [`crate::layout_file::load_or_create`] before the mesh starts, so
    /// that a node with another replication factor never joins) and wraps
    /// it. `data_dirs` and `metadata_dir` are measured for the node's
    /// self-description and `metadata_dir` holds the layout file.
    pub fn start(
        mesh: Mesh,
        history: LayoutHistory,
        consistency_mode: ConsistencyMode,
        metadata_dir: PathBuf,
        data_dirs: Vec<PathBuf>,
    ) -> Result<Cluster, ClusterError> {
        let layout = ClusterLayout::start(mesh.clone(), history, metadata_dir, data_dirs)?;
        Ok(Cluster::new(mesh, layout, consistency_mode))
    }

    /// Wraps a live layout already running on `mesh`.
    pub fn new(mesh: Mesh, layout: ClusterLayout, consistency_mode: ConsistencyMode) -> Cluster {
        let replication_factor = layout.replication_factor();
        Cluster {
            inner: Arc::new(Inner {
                id: mesh.id(),
                mesh,
                layout,
                replication_factor,
                consistency_mode,
                quorums: Quorums::new(replication_factor, consistency_mode),
                writes: WriteCounts::default(),
            }),
        }
    }

    /// The mesh, to register endpoints and make plain calls.
    pub fn mesh(&self) -> &Mesh {
        &self.inner.mesh
    }

    /// The live layout (operator changes, peers' self-descriptions).
    pub fn layout(&self) -> &ClusterLayout {
        &self.inner.layout
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Copies per partition.
    pub fn replication_factor(&self) -> usize {
        self.inner.replication_factor
    }

    pub fn consistency_mode(&self) -> ConsistencyMode {
        self.inner.consistency_mode
    }

    /// Counts a write sent to `nodes` until the guard is dropped. Every
    /// write to a partition's storage nodes holds one while it runs.
    pub fn track_write(&self, nodes: &StorageNodes) -> WriteGuard {
        let version = nodes.newest_version();
        *self
            .inner
            .writes
            .0
            .lock()
            .expect("write counts")
            .entry(version)
            .or_default() += 1;
        WriteGuard {
            cluster: self.clone(),
            version,
        }
    }

    /// How many writes sent under a layout version older than `v` are
    /// still running.
    pub fn writes_before(&self, v: u64) -> u64 {
        self.inner
            .writes
            .0
            .lock()
            .expect("write counts")
            .range(..v)
            .map(|(_, n)| n)
            .sum()
    }

    /// The read and write quorums of the replication factor and the
    /// consistency mode.
    pub fn quorums(&self) -> Quorums {
        self.inner.quorums
    }

    /// The nodes of `hash`'s partition in every active layout version.
    pub fn storage_nodes_of(&self, hash: &Hash) -> StorageNodes {
        self.storage_nodes_of_partition(partition_of(hash))
    }

    /// The nodes of partition `p` in every active layout version; a lone
    /// node's own set before its first layout ([`Cluster::is_lone`]), and
    /// no set while a node of a replicated cluster awaits its layout.
    pub fn storage_nodes_of_partition(&self, p: Partition) -> StorageNodes {
        let sets = self.inner.layout.history().write_sets_of_partition(p);
        let sets = if sets.is_empty() && self.is_lone() {
            vec![WriteSet {
                version: 0,
                nodes: vec![self.id()],
            }]
        } else {
            sets
        };
        StorageNodes { partition: p, sets }
    }

    /// Whether this node stores every partition itself for want of a
    /// layout: a node of replication factor 1 before its first layout (the
    /// Docker image's node, a `hangar server` not laid out yet). Its rows
    /// and blocks then go through the same quorum calls as in any layout,
    /// to itself alone (layout version 0), so no layer above this one asks
    /// whether there is a cluster; once a layout is applied, it places them.
    pub fn is_lone(&self) -> bool {
        self.replication_factor() <= 1 && !self.is_laid_out()
    }

    /// Whether some active layout version assigns partitions to nodes
    /// (`storage_nodes_of_partition(p)` is then never empty), without
    /// building any set.
    pub fn is_laid_out(&self) -> bool {
        self.inner
            .layout
            .history()
            .versions
            .iter()
            .any(|v| v.is_assigned())
    }

    /// Whether this node waits for its first layout while its replication
    /// factor promises peers that hold the rows and blocks: it then holds
    /// none of them and must not answer for them from its own store
    /// (doc/replication.md §1).
    pub fn awaits_layout(&self) -> bool {
        self.replication_factor() > 1 && !self.is_laid_out()
    }

    /// Whether this node is one of the nodes of partition `p` in some
    /// active layout version (it then holds a replica of the partition's
    /// data).
    pub fn stores_partition(&self, p: Partition) -> bool {
        let me = self.id();
        self.is_lone()
            || self
                .inner
                .layout
                .history()
                .versions
                .iter()
                .any(|v| v.nodes_of_partition(p).contains(&me))
    }

    /// The nodes a read of partition `p` goes to: its nodes in the newest
    /// fully synced version (doc/layout.md §7).
    pub fn read_nodes_of_partition(&self, p: Partition) -> Vec<NodeId> {
        if self.is_lone() {
            return vec![self.id()];
        }
        self.inner.layout.read_version().nodes_of_partition(p)
    }

    /// The nodes a read of `hash` goes to (see
    /// [`Cluster::read_nodes_of_partition`]).
    pub fn read_nodes_of(&self, hash: &Hash) -> Vec<NodeId> {
        self.read_nodes_of_partition(partition_of(hash))
    }

    /// Every storage node of every active layout version: who may hold data.
    pub fn all_storage_nodes(&self) -> BTreeSet<NodeId> {
        self.inner.layout.history().storage_nodes()
    }

    /// Whether `node` answers pings now, per the mesh's failure detector
    /// (always true for this node).
    pub fn is_up(&self, node: NodeId) -> bool {
        self.inner.mesh.is_up(node)
    }

    /// The average ping round-trip time to `node` (zero for this node;
    /// `None` before the first pong), to pick the closest replica.
    pub fn rtt(&self, node: NodeId) -> Option<Duration> {
        self.inner.mesh.rtt(node)
    }

    /// [`quorum_call::call_quorum`] on this node's mesh: `msg` to every
    /// node of `targets`, done when `quorum` succeeded.
    pub async fn call_quorum<Req, Resp>(
        &self,
        endpoint: &Arc<Endpoint<Req, Resp>>,
        targets: &[NodeId],
        msg: Req,
        quorum: usize,
        opts: CallOpts,
    ) -> Result<Vec<(NodeId, Resp)>, QuorumError>
    where
        Req: Message + Clone,
        Resp: Message,
    {
        quorum_call::call_quorum(&self.inner.mesh, endpoint, targets, msg, quorum, opts).await
    }

    /// A read: `msg` to the read-quorum nodes of `targets` that answer
    /// fastest now (this node first, then by recent answer time,
    /// [`hangar_net::answer_time`], or ping RTT for a peer not called
    /// lately), done when the cluster's read quorum succeeded; the other
    /// targets are called only when one of those fails or after
    /// [`READ_HEDGE_RTT_FACTOR`] × the slowest one's ping RTT, at least
    /// [`READ_HEDGE_MIN`] and at most [`READ_HEDGE_MAX`]
    /// ([`quorum_call::call_quorum_hedged`]). A peer slowed by other work (a
    /// resync it receives or serves, a burst of clients) keeps a small ping
    /// RTT, so its answer time, not its RTT, decides.
    ///
    /// A peer not called lately is not known to be fast: when enough peers
    /// are (with this node, a quorum of them), the read goes to those, and
    /// a peer whose estimate went stale but whose ping RTT ranks it among
    /// them is called beside them — a probe, whose answer counts if it
    /// comes first and renews its estimate either way — rather than in
    /// place of one, so that finding out whether it is still slow costs the
    /// read nothing. One read probes a stale peer; reads meanwhile leave it
    /// out ([`Mesh::claim_probe`]).
    pub async fn call_read_quorum<Req, Resp>(
        &self,
        endpoint: &Arc<Endpoint<Req, Resp>>,
        targets: &[NodeId],
        msg: Req,
        opts: CallOpts,
    ) -> Result<Vec<(NodeId, Resp)>, QuorumError>
    where
        Req: Message + Clone,
        Resp: Message,
    {
        let quorum = self.inner.quorums.read;
        let me = self.id();
        let mut ranked: Vec<ReadCandidate> = targets
            .iter()
            .map(|&node| {
                let s = self.inner.mesh.standing(node);
                let rtt = s.rtt.unwrap_or(Duration::MAX);
                ReadCandidate {
                    down: !s.up,
                    rank: s.answer_time.unwrap_or(rtt),
                    rtt,
                    node,
                    known: node == me || s.answer_time.is_some(),
                }
            })
            .collect();
        ranked.sort();
        let known_up = ranked.iter().filter(|c| !c.down && c.known).count();
        let mut first = Vec::with_capacity(quorum);
        let mut probes = Vec::new();
        let mut rest = Vec::new();
        for c in ranked {
            if first.len() == quorum {
                rest.push(c);
            } else if known_up >= quorum && !c.down && !c.known {
                // One probe per stale peer, not one per read until it
                // answers; the others keep it for their hedge.
                if self.inner.mesh.claim_probe(c.node) {
                    probes.push(c);
                } else {
                    rest.push(c);
                }
            } else {
                first.push(c);
            }
        }
        let slowest = first.iter().map(|c| c.rtt).max().unwrap_or_default();
        let hedge = slowest
            .saturating_mul(READ_HEDGE_RTT_FACTOR)
            .max(READ_HEDGE_MIN)
            .min(READ_HEDGE_MAX);
        let at_once = first.len() + probes.len();
        let order: Vec<NodeId> = first
            .into_iter()
            .chain(probes)
            .chain(rest)
            .map(|c| c.node)
            .collect();
        let how = quorum_call::Hedging {
            quorum,
            at_once,
            hedge,
        };
        quorum_call::call_quorum_hedged(&self.inner.mesh, endpoint, &order, msg, how, opts).await
    }

    /// A write: `msg` to every node of `nodes`, done when the cluster's
    /// write quorum of every active version's set succeeded
    /// ([`quorum_call::call_quorum_per_version`]).
    pub async fn call_write_quorum<Req, Resp>(
        &self,
        endpoint: &Arc<Endpoint<Req, Resp>>,
        nodes: &StorageNodes,
        msg: Req,
        opts: CallOpts,
    ) -> Result<Vec<(NodeId, Resp)>, QuorumError>
    where
        Req: Message + Clone,
        Resp: Message,
    {
        let _write = self.track_write(nodes);
        quorum_call::call_quorum_per_version(
            &self.inner.mesh,
            endpoint,
            &nodes.sets,
            msg,
            self.inner.quorums.write,
            opts,
        )
        .await
    }

    /// A write made of per-node calls (bodies, or extra work when a call
    /// ends): `call(node)` for every live node of `nodes`, done when the
    /// cluster's write quorum of every active version's set succeeded
    /// ([`quorum_call::call_quorum_per_version_with`]). Nodes the failure
    /// detector reports down are not called.
    pub async fn call_write_quorum_with<Resp, F, Fut>(
        &self,
        nodes: &StorageNodes,
        call: F,
    ) -> Result<Vec<(NodeId, Resp)>, QuorumError>
    where
        Resp: Send + 'static,
        F: Fn(NodeId) -> Fut,
        Fut: std::future::Future<Output = Result<Resp, hangar_net::NetError>> + Send + 'static,
    {
        let mesh = &self.inner.mesh;
        let _write = self.track_write(nodes);
        quorum_call::call_quorum_per_version_with(
            &nodes.sets,
            self.inner.quorums.write,
            |n| mesh.is_up(n),
            call,
        )
        .await
    }
}
