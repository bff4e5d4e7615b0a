//! Blocks replicated over the cluster: the client side of the block
//! endpoints ([`crate::rpc`]), for the S3 layer and the version collector.
//!
//! What [`ReplicatedBlocks`] promises:
//!
//! - [`ReplicatedBlocks::put`] compresses a block once (off the async
//!   workers), sends the stored form to every node of the block's partition
//!   in every active layout version (this node through the mesh's local
//!   call), and returns once the write quorum of every version acknowledged.
//!   The other copies finish in the background, within bounds
//!   ([`crate::stragglers`]: a quarter of the budget per node, 30 s), past
//!   which they are abandoned to the replica's resync. Every byte being sent,
//!   foreground or background, holds its share of a RAM budget
//!   (`block_ram_buffer_max`) until its last copy ended, so memory stays
//!   bounded however slow a replica is; when the budget is spent a put waits,
//!   and past [`ReplicatedConfig::budget_wait`] fails with
//!   [`BlockError::Overloaded`] (S3: 503 SlowDown). With too few live nodes
//!   it fails at once, before compressing ([`BlockError::Quorum`]).
//! - A copy that failed, timed out, or was not sent because its node was
//!   down is not retried here: the node lacks the block's reference row
//!   too, which the anti-entropy of the `block_refs` table brings it; its
//!   table hook queues the block, and its resync worker fetches it.
//!   Every node serves this table's sync endpoints ([`Self::ref_table`]).
//! - [`ReplicatedBlocks::get`] reads the local file when it is there and
//!   checks out, else asks the replicas closest first (by ping RTT); when
//!   one does not answer within its hedge delay (max(factor × RTT,
//!   minimum)), the next is asked in parallel, and the first good copy wins.
//!   A copy that fails its blake3 check is skipped and counted; a corrupt
//!   copy here is quarantined and queued for resync, one on another node
//!   is reported to that node (`check`), which does the same. A block
//!   missing here although this node stores its partition is queued for
//!   resync.
//! - [`ReplicatedBlocks::unref`] removes a reference on every node of the
//!   partition (a tombstone row), done at the write quorum; a node that
//!   missed it gets the tombstone through the table's anti-entropy.
//!
//! There is no limit on the number of puts in flight: only bytes are
//! bounded.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hangar_cluster::{Cluster, QuorumError, StorageNodes, call_quorum_per_version_with};
use hangar_net::{Body, CallOpts, NetError};
use hangar_util::config::Config;
use hangar_util::last_event::LastEvent;
use hangar_util::{Hash, NodeId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::files::EncodedBlock;
use crate::manager::BlockManager;
use crate::refcount::BlockRefTable;
use crate::resync::{DEFAULT_SERVE_MAX, Resync, ResyncSettings};
use crate::rpc::{BlockEndpoints, BlockLimits, GetBlock, PutBlock, UnrefBlock};
use crate::stragglers::{STRAGGLER_DEADLINE, Stragglers};
use crate::{BlockError, Result};
use hangar_table::Table;

/// Default longest wait for room in the RAM budget.
pub const DEFAULT_BUDGET_WAIT: Duration = Duration::from_secs(5);
/// Default shortest hedge delay.
pub const DEFAULT_HEDGE_MIN: Duration = Duration::from_millis(20);
/// Default hedge delay as a multiple of the replica's RTT.
pub const DEFAULT_HEDGE_RTT_FACTOR: u32 = 3;

/// Settings of [`ReplicatedBlocks`].
#[derive(Debug, Clone)]
pub struct ReplicatedConfig {
    /// Bytes of stored blocks that may be in flight (`block_ram_buffer_max`).
    pub ram_budget: u64,
    /// How long a put waits for room in the budget before it fails with
    /// [`BlockError::Overloaded`].
    pub budget_wait: Duration,
    /// Largest plain block accepted (`block_size`).
    pub max_block_len: u64,
    /// Shortest delay before a read asks a further replica.
    pub hedge_min: Duration,
    /// The hedge delay of a replica is this many times its RTT (at least
    /// `hedge_min`).
    pub hedge_rtt_factor: u32,
    /// Deadline of one copy of a put (`None`: the mesh's `rpc_timeout`).
    /// A copy still running holds its budget until then.
    pub put_timeout: Option<Duration>,
    /// Deadline of one replica's answer to a read (`None`: `rpc_timeout`).
    pub get_timeout: Option<Duration>,
    /// Resync transfers served as a source, and accepted as a target, at
    /// once (`resync_serve_max`); more are refused as busy.
    pub resync_serve_max: usize,
}

impl ReplicatedConfig {
    /// The settings of a node's configuration file.
    pub fn from_config(cfg: &Config) -> ReplicatedConfig {
        ReplicatedConfig {
            resync_serve_max: cfg.resync_serve_max.max(1),
            ..ReplicatedConfig::new(
                cfg.block_ram_buffer_max.0,
                cfg.block_size.0 + crate::BLOCK_ENVELOPE_MAX,
            )
        }
    }

    /// Defaults for a budget and a block size.
    pub fn new(ram_budget: u64, max_block_len: u64) -> ReplicatedConfig {
        ReplicatedConfig {
            ram_budget,
            budget_wait: DEFAULT_BUDGET_WAIT,
            max_block_len,
            hedge_min: DEFAULT_HEDGE_MIN,
            hedge_rtt_factor: DEFAULT_HEDGE_RTT_FACTOR,
            put_timeout: None,
            get_timeout: None,
            resync_serve_max: DEFAULT_SERVE_MAX,
        }
    }

    fn limits(&self) -> BlockLimits {
        BlockLimits {
            max_plain_len: self.max_block_len,
        }
    }
}

/// The blocks of the cluster, as seen from this node.
pub struct ReplicatedBlocks {
    mgr: Arc<BlockManager>,
    cluster: Cluster,
    cfg: ReplicatedConfig,
    endpoints: BlockEndpoints,
    /// One permit per byte of stored block in flight.
    budget: Arc<Semaphore>,
    refs: Table<BlockRefTable>,
    resync: Arc<Resync>,
    /// When a put last failed for overload ([`BlockError::is_overload`]).
    overloaded: LastEvent,
    /// Copies running on after their put's quorum, bounded per node.
    stragglers: Arc<Stragglers>,
}

/// The budget share of one put, released when its last copy ended.
struct InFlight {
    _permit: OwnedSemaphorePermit,
    len: u64,
    mgr: Arc<BlockManager>,
    /// Set when the put returned with copies still running.
    background: AtomicBool,
    /// Turns true when the put reached its write quorum: the copies still
    /// running become stragglers.
    quorum: watch::Sender<bool>,
}

impl InFlight {
    fn mark_background(&self) {
        self.quorum.send_replace(true);
        if !self.background.swap(true, Ordering::AcqRel) {
            let s = self.mgr.stats();
            s.background_pending_bytes
                .fetch_add(self.len, Ordering::Relaxed);
            s.background_copies_pending.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let s = self.mgr.stats();
        s.ram_in_use_bytes.fetch_sub(self.len, Ordering::Relaxed);
        if *self.background.get_mut() {
            s.background_pending_bytes
                .fetch_sub(self.len, Ordering::Relaxed);
            s.background_copies_pending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Why one replica could not give a block.
enum FetchError {
    NotFound,
    Corrupt(String),
    Failed(String),
}

impl ReplicatedBlocks {
    /// The replicated blocks of this node: installs the block endpoints'
    /// handlers (serving `mgr`) and those of the block reference table on
    /// the cluster's mesh, and makes the resync worker (run it with
    /// [`Resync::run`]). Fails when the budget cannot hold one block
    /// (nothing could ever be sent).
    pub fn new(
        mgr: Arc<BlockManager>,
        cluster: Cluster,
        cfg: ReplicatedConfig,
        resync: Arc<ResyncSettings>,
    ) -> Result<Arc<ReplicatedBlocks>> {
        let limits = cfg.limits();
        if cfg.ram_budget < limits.max_stored() {
            return Err(BlockError::Config(format!(
                "block_ram_buffer_max ({} bytes) must hold at least one block of block_size ({} bytes, up to {} stored)",
                cfg.ram_budget,
                cfg.max_block_len,
                limits.max_stored()
            )));
        }
        let endpoints = BlockEndpoints::of(cluster.mesh())?;
        // Received copies are held in memory until written: as many as the
        // budget holds, so a node receives what it could send.
        let queue = (cfg.ram_budget / limits.max_stored()).max(4) as usize;
        endpoints.serve(
            cluster.id(),
            &mgr,
            limits,
            queue,
            cfg.resync_serve_max,
            resync.clone(),
        );
        let permits = usize::try_from(cfg.ram_budget)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        let refs = Table::new(mgr.metadata().clone(), cluster.clone())?;
        let stragglers = Stragglers::new(
            (cfg.ram_budget / 4).max(limits.max_stored()),
            STRAGGLER_DEADLINE,
        );
        let resync = Resync::new(
            mgr.clone(),
            cluster.clone(),
            endpoints.clone(),
            limits,
            resync,
        );
        Ok(Arc::new(ReplicatedBlocks {
            mgr,
            cluster,
            cfg,
            endpoints,
            budget: Arc::new(Semaphore::new(permits)),
            refs,
            resync,
            overloaded: LastEvent::default(),
            stragglers,
        }))
    }

    /// Whether a put failed for overload within the last `window`: the
    /// copies already in flight fill this node's budget or its replicas'
    /// queues, so a new upload would most likely wait and then be refused
    /// too. The S3 layer refuses new uploads on arrival while this holds.
    pub fn overloaded_within(&self, window: Duration) -> bool {
        self.overloaded.within(window)
    }

    /// The block reference table, for the sharded tables' anti-entropy.
    pub fn ref_table(&self) -> &Table<BlockRefTable> {
        &self.refs
    }

    /// This node's resync worker.
    pub fn resync(&self) -> &Arc<Resync> {
        &self.resync
    }

    /// This node's block manager.
    pub fn manager(&self) -> &Arc<BlockManager> {
        &self.mgr
    }

    /// Bytes of the RAM budget free now.
    pub fn budget_available(&self) -> u64 {
        self.budget.available_permits() as u64
    }

    /// Nodes of `nodes` the failure detector reports down, and the error
    /// when some version's set has fewer live nodes than the write quorum.
    fn down_nodes(&self, hash: Hash, nodes: &StorageNodes) -> Result<BTreeSet<NodeId>> {
        if nodes.is_empty() {
            return Err(BlockError::Quorum {
                hash,
                source: QuorumError::NoLayout,
            });
        }
        let down: BTreeSet<NodeId> = nodes
            .nodes()
            .into_iter()
            .filter(|n| !self.cluster.is_up(*n))
            .collect();
        let needed = self.cluster.quorums().write;
        for s in &nodes.sets {
            let mut set = s.nodes.clone();
            set.sort();
            set.dedup();
            let up = set.iter().filter(|n| !down.contains(n)).count();
            if up < needed {
                return Err(BlockError::Quorum {
                    hash,
                    source: QuorumError::NotEnoughNodes {
                        needed,
                        up,
                        targets: set.len(),
                        version: Some(s.version),
                    },
                });
            }
        }
        Ok(down)
    }

    /// Stores block `hash` (`plain`, whose blake3 hash it is) on its
    /// partition's nodes as used by `version`. See the module documentation.
    pub async fn put(&self, hash: Hash, plain: Bytes, version: [u8; 16]) -> Result<()> {
        self.put_as(hash, plain, version, true).await
    }

    /// Like [`Self::put`] for data that does not compress (sealed SSE-C
    /// blocks): sent and stored as given, never compressed.
    pub async fn put_incompressible(
        &self,
        hash: Hash,
        data: Bytes,
        version: [u8; 16],
    ) -> Result<()> {
        self.put_as(hash, data, version, false).await
    }

    async fn put_as(
        &self,
        hash: Hash,
        plain: Bytes,
        version: [u8; 16],
        compress: bool,
    ) -> Result<()> {
        let r = self.put_copies(hash, plain, version, compress).await;
        if r.as_ref().is_err_and(BlockError::is_overload) {
            self.overloaded.record();
        }
        r
    }

    async fn put_copies(
        &self,
        hash: Hash,
        plain: Bytes,
        version: [u8; 16],
        compress: bool,
    ) -> Result<()> {
        if plain.len() as u64 > self.cfg.max_block_len {
            return Err(BlockError::TooLarge {
                hash,
                len: plain.len() as u64,
                max: self.cfg.max_block_len,
            });
        }
        let nodes = self.cluster.storage_nodes_of(&hash);
        // Checked before compressing and waiting for the budget, so that a
        // put that cannot succeed fails at once.
        let down = self.down_nodes(hash, &nodes)?;
        let files = self.mgr.block_files().clone();
        let enc = tokio::task::spawn_blocking(move || files.encode_as(plain, compress))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?;
        let flight = Arc::new(self.reserve(enc.data.len() as u64).await?);
        let msg = PutBlock {
            hash,
            version,
            compressed: enc.compressed,
            plain_len: enc.plain_len,
        };
        let opts = CallOpts {
            timeout: self.cfg.put_timeout,
            ..CallOpts::default()
        };
        let me = self.cluster.id();
        let call = |node: NodeId| {
            let (ep, mgr, flight) = (self.endpoints.put.clone(), self.mgr.clone(), flight.clone());
            let (msg, data) = (msg.clone(), enc.data.clone());
            let (mut reached, stragglers) = (flight.quorum.subscribe(), self.stragglers.clone());
            async move {
                let len = data.len() as u64;
                let rpc = ep.call_with_body(node, msg, Some(Body::from_bytes(data)), opts);
                tokio::pin!(rpc);
                let outcome = tokio::select! {
                    biased;
                    r = &mut rpc => Some(r),
                    // The put returned without this copy: it may run on
                    // only as a bounded straggler.
                    _ = async { reached.wait_for(|q| *q).await.map(|_| ()) } => {
                        match stragglers.admit(node, len) {
                            Some(_admitted) => {
                                tokio::time::timeout(stragglers.deadline(), rpc).await.ok()
                            }
                            None => None,
                        }
                    }
                };
                let Some(r) = outcome else {
                    mgr.stats()
                        .background_copies_abandoned
                        .fetch_add(1, Ordering::Relaxed);
                    debug!(
                        node = %node.short(),
                        "block {hash}: copy abandoned after the write quorum (slow replica); \
                         its resync brings it the block"
                    );
                    return Err(NetError::Overloaded(
                        "block copy abandoned after the write quorum".into(),
                    ));
                };
                let r = r.map(|r| r.msg);
                let s = mgr.stats();
                match &r {
                    Ok(_) if node != me => {
                        s.remote_puts.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        s.remote_put_errors.fetch_add(1, Ordering::Relaxed);
                        warn!(node = %node.short(), "block {hash}: copy failed: {e}");
                    }
                }
                // The budget share goes with the last copy.
                drop(flight);
                r
            }
        };
        let quorum = self.cluster.quorums().write;
        let _write = self.cluster.track_write(&nodes);
        let res =
            call_quorum_per_version_with(&nodes.sets, quorum, |n| !down.contains(&n), call).await;
        match res {
            Ok(_) => {
                let running = Arc::strong_count(&flight) - 1;
                if running > 0 {
                    debug!(
                        "block {hash}: stored at quorum, {running} copies go on in the background"
                    );
                    flight.mark_background();
                }
                Ok(())
            }
            Err(source) => Err(BlockError::Quorum { hash, source }),
        }
    }

    /// Takes `len` bytes of the budget, waiting at most `budget_wait`.
    async fn reserve(&self, len: u64) -> Result<InFlight> {
        let n = u32::try_from(len).map_err(|_| BlockError::Config(format!("{len} bytes")))?;
        let start = Instant::now();
        match tokio::time::timeout(
            self.cfg.budget_wait,
            self.budget.clone().acquire_many_owned(n),
        )
        .await
        {
            Ok(Ok(permit)) => {
                self.mgr
                    .stats()
                    .ram_in_use_bytes
                    .fetch_add(len, Ordering::Relaxed);
                Ok(InFlight {
                    _permit: permit,
                    len,
                    mgr: self.mgr.clone(),
                    background: AtomicBool::new(false),
                    quorum: watch::Sender::new(false),
                })
            }
            Ok(Err(_closed)) => Err(BlockError::Task("block RAM budget closed".into())),
            Err(_) => {
                self.mgr
                    .stats()
                    .puts_overloaded
                    .fetch_add(1, Ordering::Relaxed);
                Err(BlockError::Overloaded {
                    needed: len,
                    budget: self.cfg.ram_budget,
                    waited: start.elapsed(),
                })
            }
        }
    }

    /// The plain content of block `hash`. See the module documentation.
    pub async fn get(&self, hash: Hash) -> Result<Bytes> {
        let me = self.cluster.id();
        let mut errors = Vec::new();
        let mut missing_here = false;
        match self.mgr.read(hash).await {
            Ok(b) => return Ok(b),
            Err(BlockError::Missing(_)) => missing_here = true,
            // Quarantined and queued by the read.
            Err(e @ BlockError::Corrupt { .. }) => {
                self.mgr
                    .stats()
                    .corrupt_replicas
                    .fetch_add(1, Ordering::Relaxed);
                errors.push(format!("{}: {e}", me.short()));
            }
            // An I/O error here does not make the replicas' copies worse.
            Err(e) => errors.push(format!("{}: {e}", me.short())),
        }
        let read_nodes = self.cluster.read_nodes_of(&hash);
        // Whether this node should have had the block is only known once a
        // replica shows the block exists (a get of a deleted block is no
        // repair to make).
        let lacking = if missing_here && read_nodes.contains(&me) {
            vec![me]
        } else {
            Vec::new()
        };
        let candidates = self.by_distance(read_nodes.into_iter().filter(|n| *n != me));
        self.hedged_get(hash, candidates, errors, lacking).await
    }

    /// `nodes` closest first: live nodes by RTT (unknown RTT after known),
    /// then nodes reported down.
    fn by_distance(&self, nodes: impl Iterator<Item = NodeId>) -> Vec<NodeId> {
        let mut v: Vec<(bool, Duration, NodeId)> = nodes
            .map(|n| {
                (
                    !self.cluster.is_up(n),
                    self.cluster.rtt(n).unwrap_or(Duration::MAX),
                    n,
                )
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, _, n)| n).collect()
    }

    /// How long to wait for `node` before asking the next replica too.
    fn hedge_delay(&self, node: NodeId) -> Duration {
        let rtt = self.cluster.rtt(node).unwrap_or_default();
        rtt.saturating_mul(self.cfg.hedge_rtt_factor)
            .max(self.cfg.hedge_min)
    }

    async fn hedged_get(
        &self,
        hash: Hash,
        candidates: Vec<NodeId>,
        mut errors: Vec<String>,
        mut lacking: Vec<NodeId>,
    ) -> Result<Bytes> {
        let mut pending = FuturesUnordered::new();
        let mut next = 0;
        let mut not_found = 0;
        let mut deadline = Instant::now();
        loop {
            if pending.is_empty() {
                if next == candidates.len() {
                    break;
                }
                let n = candidates[next];
                next += 1;
                deadline = Instant::now() + self.hedge_delay(n);
                pending.push(self.fetch(hash, n));
            }
            let hedge = next < candidates.len();
            tokio::select! {
                Some((node, r)) = pending.next() => {
                    let s = self.mgr.stats();
                    match r {
                        Ok(plain) => {
                            s.remote_gets.fetch_add(1, Ordering::Relaxed);
                            if lacking.contains(&self.cluster.id()) {
                                let r = self.resync.clone();
                                tokio::spawn(async move {
                                    if let Err(e) = r.queue_now(vec![hash]).await {
                                        warn!("block {hash}: cannot queue for resync: {e}");
                                    }
                                });
                            }
                            return Ok(plain);
                        }
                        Err(FetchError::NotFound) => {
                            not_found += 1;
                            s.remote_get_errors.fetch_add(1, Ordering::Relaxed);
                            lacking.push(node);
                            errors.push(format!("{}: not found", node.short()));
                        }
                        Err(FetchError::Corrupt(why)) => {
                            s.corrupt_replicas.fetch_add(1, Ordering::Relaxed);
                            warn!(node = %node.short(), "block {hash}: corrupt replica: {why}");
                            let ep = self.endpoints.check.clone();
                            tokio::spawn(async move {
                                let _ = ep.call(node, GetBlock { hash }, CallOpts::background()).await;
                            });
                            errors.push(format!("{}: {why}", node.short()));
                        }
                        Err(FetchError::Failed(why)) => {
                            s.remote_get_errors.fetch_add(1, Ordering::Relaxed);
                            debug!(node = %node.short(), "block {hash}: read failed: {why}");
                            errors.push(format!("{}: {why}", node.short()));
                        }
                    }
                    // A failed replica is replaced at once, not after its
                    // hedge delay.
                    if next < candidates.len() {
                        let n = candidates[next];
                        next += 1;
                        deadline = Instant::now() + self.hedge_delay(n);
                        pending.push(self.fetch(hash, n));
                    }
                }
                _ = tokio::time::sleep_until(deadline), if hedge => {
                    self.mgr.stats().hedged_reads.fetch_add(1, Ordering::Relaxed);
                    let n = candidates[next];
                    next += 1;
                    deadline = Instant::now() + self.hedge_delay(n);
                    pending.push(self.fetch(hash, n));
                }
            }
        }
        if errors.is_empty() || (not_found == candidates.len() && errors.len() == not_found) {
            return Err(BlockError::Missing(hash));
        }
        Err(BlockError::Unavailable { hash, errors })
    }

    /// Block `hash` from `node`, checked.
    fn fetch(
        &self,
        hash: Hash,
        node: NodeId,
    ) -> impl std::future::Future<Output = (NodeId, std::result::Result<Bytes, FetchError>)> + use<>
    {
        let ep = self.endpoints.get.clone();
        let max_plain = self.cfg.max_block_len;
        let opts = CallOpts {
            timeout: self.cfg.get_timeout,
            ..CallOpts::default()
        };
        async move {
            let failed = |e: NetError| FetchError::Failed(e.to_string());
            let r = async {
                let resp = ep
                    .call_with_body(node, GetBlock { hash }, None, opts)
                    .await
                    .map_err(failed)?;
                let Some(form) = resp.msg.found else {
                    return Err(FetchError::NotFound);
                };
                if form.plain_len > max_plain {
                    return Err(FetchError::Corrupt(format!(
                        "announced {} plain bytes, more than a block",
                        form.plain_len
                    )));
                }
                let limit = BlockLimits::max_stored_len(form.plain_len, form.compressed);
                let body = resp
                    .body
                    .ok_or_else(|| FetchError::Failed("answer without a body".into()))?;
                let data = body.collect(limit as usize).await.map_err(|e| match e {
                    NetError::BodyTooLarge(_) => {
                        FetchError::Corrupt(format!("body longer than {limit} bytes"))
                    }
                    e => failed(e),
                })?;
                let enc = EncodedBlock {
                    data,
                    compressed: form.compressed,
                    plain_len: form.plain_len,
                };
                tokio::task::spawn_blocking(move || enc.decode(&hash))
                    .await
                    .map_err(|e| FetchError::Failed(e.to_string()))?
                    .map_err(|e| FetchError::Corrupt(e.to_string()))
            }
            .await;
            (node, r)
        }
    }

    /// Adds the reference of `version` to block `hash`, already stored, on
    /// every node of its partition that has it; done at the write quorum of
    /// every active version. Returns false when the block is gone (too few
    /// nodes still have it: its last reference was dropped and its grace
    /// delay passed), so the caller can refuse what needed it.
    pub async fn add_ref(&self, hash: Hash, version: [u8; 16]) -> Result<bool> {
        let nodes = self.cluster.storage_nodes_of(&hash);
        let down = self.down_nodes(hash, &nodes)?;
        let absent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let call = |node: NodeId| {
            let ep = self.endpoints.add_ref.clone();
            let absent = absent.clone();
            async move {
                match ep
                    .call(node, UnrefBlock { hash, version }, CallOpts::default())
                    .await
                {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        absent.fetch_add(1, Ordering::Relaxed);
                        Err(NetError::Remote {
                            endpoint: crate::rpc::REF_PATH.to_owned(),
                            message: format!("block {hash} is not stored here"),
                        })
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let quorum = self.cluster.quorums().write;
        let _write = self.cluster.track_write(&nodes);
        match call_quorum_per_version_with(&nodes.sets, quorum, |n| !down.contains(&n), call).await
        {
            Ok(_) => Ok(true),
            Err(_) if absent.load(Ordering::Relaxed) > 0 => Ok(false),
            Err(source) => Err(BlockError::Quorum { hash, source }),
        }
    }

    /// Removes the reference of `version` to block `hash` on every node of
    /// its partition; done at the write quorum of every active version.
    /// Nodes that did not acknowledge are recorded for retry.
    pub async fn unref(&self, hash: Hash, version: [u8; 16]) -> Result<()> {
        let nodes = self.cluster.storage_nodes_of(&hash);
        let down = self.down_nodes(hash, &nodes)?;
        let call = |node: NodeId| {
            let ep = self.endpoints.unref.clone();
            async move {
                ep.call(node, UnrefBlock { hash, version }, CallOpts::default())
                    .await
            }
        };
        let quorum = self.cluster.quorums().write;
        let _write = self.cluster.track_write(&nodes);
        let res =
            call_quorum_per_version_with(&nodes.sets, quorum, |n| !down.contains(&n), call).await;
        res.map(drop)
            .map_err(|source| BlockError::Quorum { hash, source })
    }
}
