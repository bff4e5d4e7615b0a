//! The resync worker: makes this node's block files agree with what it
//! should hold (doc/block-files.md, "Resync").
//!
//! It reads the queue ([`crate::resync_queue`]) in due order, a page at a
//! time, and for each block decides from the local state alone:
//!
//! - referenced here, this node stores the block's partition (in some
//!   active layout version) and the file is missing → **fetch** it from the
//!   other nodes of the partition, the one with the fewest of this worker's
//!   fetches running first (then the closest), as stored (no
//!   recompression; checked against its blake3 name on arrival); a source
//!   serving its own clients defers to the others, and serves only when no
//!   other source can;
//! - the file is here, still referenced, but this node no longer stores the
//!   partition in any active version → **hand it over**: every node that
//!   stores it now is asked whether it has the file and a reference
//!   (`need`); those without the file are sent it (`hand_over`); once every
//!   one has both, the local file is deleted. A node that has the file but
//!   not yet the reference (its table sync is behind) makes the worker come
//!   back later, never delete early;
//! - anything else → nothing to do (an unreferenced file is the GC's).
//!
//! Transfers run in a window of `resync_chunks_in_flight` (a chunk is one
//! block, at most `block_size`; `auto`, the default, sizes it from what the
//! transfers take, [`crate::resync_window`]): the next block's transfer starts as soon
//! as a slot frees, while the others are still arriving, so the pipeline
//! never drains at a block boundary. Checks that need no transfer do not
//! take a slot. Outcomes are committed in batches (one transaction for many
//! blocks). A failure reschedules the block with exponential backoff
//! ([`resync_queue::tx_failed`]); a busy source (its `resync_get` handler
//! bound is full) is not an error: the block comes back a moment later.
//!
//! Limits, changeable at runtime ([`ResyncSettings`], `hangar worker set`):
//! the window, a total byte rate (`resync_max_bytes_per_sec`, 0 = none),
//! and a tranquility (after each transfer, the worker idles `tranquility ×`
//! the transfer's time, spread over the window). Every transfer is a
//! background-priority call.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use hangar_cluster::Cluster;
use hangar_db::DbError;
use hangar_net::{Body, CallOpts, NetError};
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerHandle, WorkerState};
use hangar_util::{Hash, NodeId};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::files::EncodedBlock;
use crate::manager::BlockManager;
use crate::refcount::RC_TREE;
use crate::resync_queue::{self, Queued};
use crate::resync_sources::SourceOrder;
use crate::rpc::{BlockEndpoints, BlockLimits, GetBlock, HandOver, ResyncGet};
use crate::{BlockError, Result};

pub use crate::resync_settings::{MAX_CHUNKS_IN_FLIGHT, MAX_YIELD_MSEC, ResyncSettings};
use crate::resync_window::AutoWindow;
/// Default bound on resync transfers a node serves as a source and accepts
/// as a target, each.
pub const DEFAULT_SERVE_MAX: usize = 8;
/// Queue entries read at once.
const PAGE: usize = 256;
/// Outcomes committed in one transaction.
const COMMIT_BATCH: usize = 128;
/// How long an idle worker sleeps before looking at the queue again
/// (it is woken earlier when something is queued through it).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// When to come back to a block whose source was busy or whose new holder
/// lacks the reference yet.
const LATER: Duration = Duration::from_secs(2);
/// How long a source that deferred to the others (its clients were being
/// served) is asked only after them: one wasted round trip per source and
/// period, not per block.
const DEFER_HOLD: Duration = Duration::from_secs(1);
/// How far ahead of now the limiter's virtual clock may run before the
/// next transfer waits: the burst a rate limit allows.
const PACE_BURST: Duration = Duration::from_millis(200);

/// What the worker did since the node started.
#[derive(Debug, Default)]
pub struct ResyncStats {
    pub checked: AtomicU64,
    pub blocks_fetched: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub blocks_handed_over: AtomicU64,
    pub bytes_handed_over: AtomicU64,
    pub errors: AtomicU64,
    /// Transfers running now.
    pub in_flight: AtomicU64,
}

/// What a queued block needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Nothing,
    Fetch,
    HandOver,
}

/// How handling a block ended.
enum Outcome {
    Done,
    Failed(String),
    Later(String),
}

/// What a source answered to `resync_get`.
enum Fetched {
    Block(EncodedBlock),
    NotFound,
    /// Its clients are being served: ask the others first.
    Deferred,
}

/// The resync worker of one node.
pub struct Resync {
    mgr: Arc<BlockManager>,
    /// The cluster and its block endpoints.
    cluster: Cluster,
    eps: BlockEndpoints,
    limits: BlockLimits,
    settings: Arc<ResyncSettings>,
    stats: ResyncStats,
    wake: Notify,
    /// The earliest time the next transfer may start (rate and tranquility).
    next_slot: std::sync::Mutex<Instant>,
    /// Fetches running now, per source: the next fetch asks the least
    /// busy source first, so a refill spreads over every replica instead of
    /// loading the closest one alone.
    per_source: std::sync::Mutex<std::collections::HashMap<NodeId, usize>>,
    /// Sources that answered `deferred`, until when they are asked last.
    deferring: std::sync::Mutex<std::collections::HashMap<NodeId, Instant>>,
    /// The window when `resync_chunks_in_flight` is `auto`.
    auto: std::sync::Mutex<AutoWindow>,
}

impl Resync {
    pub fn new(
        mgr: Arc<BlockManager>,
        cluster: Cluster,
        eps: BlockEndpoints,
        limits: BlockLimits,
        settings: Arc<ResyncSettings>,
    ) -> Arc<Resync> {
        Arc::new(Resync {
            mgr,
            cluster,
            eps,
            limits,
            settings,
            stats: ResyncStats::default(),
            wake: Notify::new(),
            next_slot: std::sync::Mutex::new(Instant::now()),
            per_source: Default::default(),
            deferring: Default::default(),
            auto: std::sync::Mutex::new(AutoWindow::new(Instant::now(), MAX_CHUNKS_IN_FLIGHT)),
        })
    }

    /// A source refused a transfer (its bound is full): the `auto` window
    /// halves (once per round).
    fn source_busy(&self) {
        if self.settings.fixed_window().is_none() {
            self.auto.lock().expect("auto window").back_off();
        }
    }

    /// Transfers to keep in flight now: the operator's number, or the
    /// `auto` window's.
    pub fn window(&self) -> usize {
        self.settings
            .fixed_window()
            .unwrap_or_else(|| self.auto.lock().expect("auto window").current())
    }

    pub fn settings(&self) -> &Arc<ResyncSettings> {
        &self.settings
    }

    pub fn stats(&self) -> &ResyncStats {
        &self.stats
    }

    /// Queues `hashes` to be looked at now and wakes the worker.
    pub async fn queue_now(&self, hashes: Vec<Hash>) -> Result<()> {
        resync_queue::enqueue(self.mgr.metadata(), hashes, now_msec()).await?;
        self.wake.notify_one();
        Ok(())
    }

    /// Wakes the worker (something was queued behind its back).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Whether this node stores `hash`'s partition (always while it awaits
    /// its first layout: nothing is handed over before one).
    fn holds(&self, hash: &Hash) -> bool {
        let c = &self.cluster;
        let nodes = c.storage_nodes_of(hash);
        nodes.is_empty() || nodes.nodes().contains(&c.id())
    }

    /// The decisions for a page, from the local state (blocking reads).
    async fn decide(&self, page: &[Queued]) -> Result<Vec<Action>> {
        let holds: Vec<bool> = page.iter().map(|q| self.holds(&q.hash)).collect();
        let hashes: Vec<Hash> = page.iter().map(|q| q.hash).collect();
        let (db, files) = (self.mgr.metadata().clone(), self.mgr.files().clone());
        tokio::task::spawn_blocking(move || {
            hashes
                .iter()
                .zip(holds)
                .map(|(h, holds)| {
                    let referenced = db
                        .get(RC_TREE, h.as_bytes())?
                        .map(|v| crate::refcount::RcRow::decode(&v))
                        .transpose()?
                        .is_some_and(|r| r.count > 0);
                    let file = files.exists(h);
                    Ok(match (referenced, file, holds) {
                        (true, false, true) => Action::Fetch,
                        (true, true, false) => Action::HandOver,
                        _ => Action::Nothing,
                    })
                })
                .collect::<std::result::Result<Vec<_>, DbError>>()
        })
        .await
        .map_err(|e| BlockError::Task(e.to_string()))?
        .map_err(BlockError::from)
    }

    /// Waits for the rate limit and the tranquility: a transfer may start
    /// once the time its predecessors' bytes and idling earned is at most
    /// [`PACE_BURST`] ahead of now (a virtual-clock limiter, GCRA), so the
    /// transfers of a window overlap instead of each waiting for the one
    /// before to be paid for.
    async fn pace(&self) {
        let at = *self.next_slot.lock().expect("slot lock");
        if let Some(start) = at.checked_sub(PACE_BURST)
            && start > Instant::now()
        {
            tokio::time::sleep_until(start).await;
        }
    }

    /// Accounts for a transfer of `bytes` that took `took`.
    fn spent(&self, bytes: u64, took: Duration) {
        let rate = self.settings.max_bytes_per_sec();
        let tranq = self.settings.tranquility();
        let window = self.window().max(1) as u32;
        let mut slot = self.next_slot.lock().expect("slot lock");
        let base = (*slot).max(Instant::now());
        let mut d = Duration::ZERO;
        if rate > 0 {
            d += Duration::from_secs_f64(bytes as f64 / rate as f64);
        }
        if tranq > 0 {
            d += took.saturating_mul(tranq) / window;
        }
        // A limit only delays; without one the slot stays in the past.
        if !d.is_zero() {
            *slot = base + d;
        }
    }

    /// Runs the worker forever, reporting as `w`.
    pub async fn run(self: Arc<Self>, w: WorkerHandle) {
        let db = self.mgr.metadata().clone();
        let mut inflight = FuturesUnordered::new();
        let mut outcomes: Vec<(Queued, Outcome)> = Vec::new();
        // Blocks in flight or with an outcome not yet committed: a page
        // read meanwhile must not start them again.
        let mut pending: HashSet<Hash> = HashSet::new();
        let mut after: Option<Queued> = None;
        let started = Instant::now();
        // Files lost while the node was down (a disk replaced, a data
        // directory wiped) changed no count: look for them once at start.
        let me = self.clone();
        tokio::spawn(async move {
            match me.count_missing().await {
                Ok(0) => {}
                Ok(n) => info!("resync: {n} referenced blocks missing from disk at start, queued"),
                Err(e) => warn!("resync: cannot check the blocks on disk: {e}"),
            }
        });
        loop {
            let page = match resync_queue::due(&db, now_msec(), after, PAGE).await {
                Ok(p) => p,
                Err(e) => {
                    w.record_error(&e);
                    warn!("resync: cannot read the queue: {e}");
                    tokio::time::sleep(IDLE_POLL).await;
                    continue;
                }
            };
            let page: Vec<Queued> = page
                .into_iter()
                .filter(|q| !pending.contains(&q.hash))
                .collect();
            if page.is_empty() {
                // The end of what is due: finish the transfers, commit,
                // and wait for more.
                while let Some(o) = inflight.next().await {
                    outcomes.push(o);
                }
                self.commit(&mut outcomes, &mut pending, &w).await;
                self.report(&w, started).await;
                after = None;
                w.set_state(WorkerState::Idle);
                let _ = tokio::time::timeout(IDLE_POLL, self.wake.notified()).await;
                continue;
            }
            w.set_state(WorkerState::Busy);
            after = page.last().copied();
            let actions = match self.decide(&page).await {
                Ok(a) => a,
                Err(e) => {
                    w.record_error(&e);
                    warn!("resync: {e}");
                    tokio::time::sleep(IDLE_POLL).await;
                    continue;
                }
            };
            for (q, action) in page.into_iter().zip(actions) {
                self.stats.checked.fetch_add(1, Ordering::Relaxed);
                pending.insert(q.hash);
                if action == Action::Nothing {
                    outcomes.push((q, Outcome::Done));
                } else {
                    while inflight.len() >= self.window() {
                        if let Some(o) = inflight.next().await {
                            outcomes.push(o);
                        }
                    }
                    self.pace().await;
                    let me = self.clone();
                    inflight.push(async move { (q, me.transfer(q.hash, action).await) });
                }
                while let Some(Some(o)) = inflight.next().now_or_never() {
                    outcomes.push(o);
                }
                if outcomes.len() >= COMMIT_BATCH {
                    self.commit(&mut outcomes, &mut pending, &w).await;
                    self.report(&w, started).await;
                }
            }
        }
    }

    /// Writes the outcomes to the queue in one transaction.
    async fn commit(
        &self,
        outcomes: &mut Vec<(Queued, Outcome)>,
        pending: &mut HashSet<Hash>,
        w: &WorkerHandle,
    ) {
        if outcomes.is_empty() {
            return;
        }
        let batch = std::mem::take(outcomes);
        let mut done = 0;
        for (q, o) in &batch {
            pending.remove(&q.hash);
            match o {
                Outcome::Done => done += 1,
                Outcome::Failed(e) => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    w.record_error(format!("block {}: {e}", q.hash));
                    debug!("resync: block {}: {e}", q.hash);
                }
                Outcome::Later(why) => debug!("resync: block {} later: {why}", q.hash),
            }
        }
        w.add_processed(done);
        let r = self
            .mgr
            .metadata()
            .write(move |tx| {
                for (q, o) in &batch {
                    match o {
                        Outcome::Done => resync_queue::tx_done(tx, q)?,
                        Outcome::Failed(e) => drop(resync_queue::tx_failed(tx, q, e.clone())?),
                        Outcome::Later(_) => resync_queue::tx_later(tx, q, LATER)?,
                    }
                }
                Ok::<_, DbError>(())
            })
            .await;
        if let Err(e) = r {
            warn!("resync: cannot record outcomes: {e}");
            w.record_error(&e);
        }
    }

    async fn report(&self, w: &WorkerHandle, started: Instant) {
        let len = resync_queue::len(self.mgr.metadata()).await.unwrap_or(0);
        let s = &self.stats;
        let bytes =
            s.bytes_fetched.load(Ordering::Relaxed) + s.bytes_handed_over.load(Ordering::Relaxed);
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let done =
            s.blocks_fetched.load(Ordering::Relaxed) + s.blocks_handed_over.load(Ordering::Relaxed);
        let eta = if done > 0 && len > 0 {
            format!(", about {:.0} s left", len as f64 * secs / done as f64)
        } else {
            String::new()
        };
        w.set_progress(
            format!(
                "{len} queued; {} fetched, {} handed over, {} MiB moved ({:.1} MiB/s since start); {} errors; window {}{}{eta}",
                s.blocks_fetched.load(Ordering::Relaxed),
                s.blocks_handed_over.load(Ordering::Relaxed),
                bytes >> 20,
                bytes as f64 / secs / 1048576.0,
                s.errors.load(Ordering::Relaxed),
                self.window(),
                if self.settings.fixed_window().is_none() { " (auto)" } else { "" },
            ),
            Some(len),
        );
    }

    /// One transfer (fetch or hand-over), accounted for in the stats and
    /// the pacing.
    async fn transfer(&self, hash: Hash, action: Action) -> Outcome {
        let start = Instant::now();
        self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let (outcome, bytes) = match action {
            Action::Fetch => self.fetch(hash).await,
            Action::HandOver => self.hand_over(hash).await,
            Action::Nothing => (Outcome::Done, 0),
        };
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        let took = start.elapsed();
        self.spent(bytes, took);
        if self.settings.fixed_window().is_none() {
            let mut auto = self.auto.lock().expect("auto window");
            match &outcome {
                // Only transfers that moved a block say what the path costs.
                Outcome::Done if bytes > 0 => auto.completed(Instant::now(), took),
                Outcome::Done => {}
                Outcome::Failed(_) | Outcome::Later(_) => auto.back_off(),
            }
        }
        outcome
    }

    /// Fetches `hash` from the other nodes of its partition; returns the
    /// outcome and the bytes received.
    ///
    /// Sources are asked in the order [`SourceOrder`] gives: with
    /// `defer_if_busy` first, a source serving its own clients answering
    /// `deferred` and being asked again without the option only after every
    /// other source, and not at all when another source refused the
    /// transfer as busy (it serves the refill; the block waits for it). So a
    /// refill is served by the replicas that are not serving clients, and
    /// still goes on when all are. A source that deferred is asked without
    /// the option directly, after the others, for the next `DEFER_HOLD`.
    async fn fetch(&self, hash: Hash) -> (Outcome, u64) {
        let (cluster, eps) = (&self.cluster, &self.eps);
        let me = cluster.id();
        let now = Instant::now();
        let busy_now = self.per_source.lock().expect("source counts").clone();
        let deferring: HashSet<NodeId> = {
            let mut d = self.deferring.lock().expect("deferring sources");
            d.retain(|_, until| *until > now);
            d.keys().copied().collect()
        };
        let mut candidates: Vec<(bool, bool, usize, Duration, NodeId)> = cluster
            .storage_nodes_of(&hash)
            .nodes()
            .into_iter()
            .filter(|n| *n != me)
            .map(|n| {
                (
                    !cluster.is_up(n),
                    deferring.contains(&n),
                    busy_now.get(&n).copied().unwrap_or(0),
                    cluster.rtt(n).unwrap_or(Duration::MAX),
                    n,
                )
            })
            .collect();
        candidates.sort();
        candidates.dedup_by_key(|c| c.4);
        let mut errors = Vec::new();
        // Sources busy or not reachable (a node just started does not see
        // its peers up for a moment): not a failure of the block, which
        // comes back after `LATER` rather than after a growing backoff.
        let mut busy = 0;
        let mut up = Vec::new();
        for (down, _, _, _, node) in candidates {
            if down {
                busy += 1;
                errors.push(format!("{}: down", node.short()));
            } else {
                up.push(node);
            }
        }
        let mut order = SourceOrder::new(up, &deferring);
        while let Some((node, defer_if_busy)) = order.next() {
            *self
                .per_source
                .lock()
                .expect("source counts")
                .entry(node)
                .or_default() += 1;
            let got = self.fetch_from(eps, node, hash, defer_if_busy).await;
            if let Some(n) = self
                .per_source
                .lock()
                .expect("source counts")
                .get_mut(&node)
            {
                *n -= 1;
            }
            match got {
                Ok(Fetched::Block(enc)) => {
                    let len = enc.data.len() as u64;
                    match self.mgr.store_fetched(hash, enc).await {
                        Ok(_) => {
                            if !defer_if_busy || !errors.is_empty() {
                                debug!(
                                    "resync: block {hash} fetched from {} (deferral allowed: \
                                     {defer_if_busy}) after: {}",
                                    node.short(),
                                    errors.join("; ")
                                );
                            }
                            self.stats.blocks_fetched.fetch_add(1, Ordering::Relaxed);
                            self.stats.bytes_fetched.fetch_add(len, Ordering::Relaxed);
                            return (Outcome::Done, len);
                        }
                        Err(e @ BlockError::Corrupt { .. }) => {
                            warn!(node = %node.short(), "block {hash}: corrupt copy: {e}");
                            let _ = eps
                                .check
                                .call(node, GetBlock { hash }, CallOpts::background())
                                .await;
                            errors.push(format!("{}: {e}", node.short()));
                        }
                        Err(e) => return (Outcome::Failed(format!("storing: {e}")), len),
                    }
                }
                Ok(Fetched::Deferred) => {
                    self.deferring
                        .lock()
                        .expect("deferring sources")
                        .insert(node, Instant::now() + DEFER_HOLD);
                    order.deferred(node);
                }
                Ok(Fetched::NotFound) => errors.push(format!("{}: not found", node.short())),
                Err(NetError::Overloaded(_)) => {
                    // The source serves as many transfers as it takes: more
                    // in flight would only be refused (a source that
                    // deferred for its clients is spared them).
                    self.source_busy();
                    order.busy();
                    busy += 1;
                    errors.push(format!("{}: busy", node.short()));
                }
                // A node older than `defer_if_busy` cannot decode the
                // option: ask it again without.
                Err(NetError::Remote { .. }) if defer_if_busy => {
                    order.retry_plain(node);
                }
                // A source that answered with an error is a failure of this
                // block there; one that could not be reached (a connection
                // being re-made after a restart, a timeout) is not.
                Err(e @ NetError::Remote { .. }) => errors.push(format!("{}: {e}", node.short())),
                Err(e) => {
                    busy += 1;
                    errors.push(format!("{}: {e}", node.short()));
                }
            }
        }
        for node in order.spared() {
            busy += 1;
            errors.push(format!("{}: serving its clients", node.short()));
        }
        let why = if errors.is_empty() {
            "no other node stores its partition".to_owned()
        } else {
            errors.join("; ")
        };
        if busy > 0 && busy == errors.len() {
            (Outcome::Later(why), 0)
        } else {
            (Outcome::Failed(format!("no copy found ({why})")), 0)
        }
    }

    async fn fetch_from(
        &self,
        eps: &BlockEndpoints,
        node: NodeId,
        hash: Hash,
        defer_if_busy: bool,
    ) -> std::result::Result<Fetched, NetError> {
        let resp = eps
            .resync_get
            .call_with_body(
                node,
                ResyncGet {
                    hash,
                    defer_if_busy,
                },
                None,
                CallOpts::background(),
            )
            .await?;
        if resp.msg.deferred {
            return Ok(Fetched::Deferred);
        }
        let Some(form) = resp.msg.found else {
            return Ok(Fetched::NotFound);
        };
        crate::rpc::collect_block(
            hash,
            form.compressed,
            form.plain_len,
            self.limits,
            resp.body,
        )
        .await
        .map(Fetched::Block)
        .map_err(|e| match e {
            BlockError::Net(n) => n,
            e => NetError::Remote {
                endpoint: crate::rpc::RESYNC_GET_PATH.into(),
                message: e.to_string(),
            },
        })
    }

    /// Hands `hash` over to the nodes that store its partition now, and
    /// deletes the local file once every one of them holds it.
    async fn hand_over(&self, hash: Hash) -> (Outcome, u64) {
        let (cluster, eps) = (&self.cluster, &self.eps);
        let me = cluster.id();
        let mut targets = cluster.storage_nodes_of(&hash).nodes();
        targets.sort();
        targets.dedup();
        if targets.is_empty() || targets.contains(&me) {
            return (Outcome::Done, 0);
        }
        let mut sent = 0u64;
        let mut enc: Option<EncodedBlock> = None;
        let mut waiting = Vec::new();
        for node in targets {
            let have = match eps
                .need
                .call(node, GetBlock { hash }, CallOpts::background())
                .await
            {
                Ok(h) => h,
                Err(e) => return (Outcome::Failed(format!("{}: {e}", node.short())), sent),
            };
            let have = if have.file {
                have
            } else {
                if enc.is_none() {
                    match self.mgr.read_encoded_in_background(hash).await {
                        Ok(e) => enc = Some(e),
                        Err(BlockError::Missing(_)) => return (Outcome::Done, sent),
                        Err(e) => return (Outcome::Failed(format!("reading: {e}")), sent),
                    }
                }
                let e = enc.as_ref().expect("read above");
                let msg = HandOver {
                    hash,
                    compressed: e.compressed,
                    plain_len: e.plain_len,
                };
                match eps
                    .hand_over
                    .call_with_body(
                        node,
                        msg,
                        Some(Body::from_bytes(e.data.clone())),
                        CallOpts::background(),
                    )
                    .await
                {
                    Ok(r) => {
                        sent += e.data.len() as u64;
                        r.msg
                    }
                    Err(NetError::Overloaded(_)) => {
                        return (Outcome::Later(format!("{} busy", node.short())), sent);
                    }
                    Err(e) => return (Outcome::Failed(format!("{}: {e}", node.short())), sent),
                }
            };
            if !(have.file && have.referenced) {
                waiting.push(node.short());
            }
        }
        if sent > 0 {
            self.stats
                .blocks_handed_over
                .fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_handed_over
                .fetch_add(sent, Ordering::Relaxed);
        }
        if !waiting.is_empty() {
            return (
                Outcome::Later(format!(
                    "waiting for {} to hold the block's references",
                    waiting.join(", ")
                )),
                sent,
            );
        }
        // Checked again: the layout may have given the partition back.
        if self.holds(&hash) {
            return (Outcome::Done, sent);
        }
        match self.mgr.delete_handed_over(hash).await {
            Ok(()) => {
                debug!("block {hash}: handed over, local copy deleted");
                (Outcome::Done, sent)
            }
            Err(e) => (Outcome::Failed(format!("deleting: {e}")), sent),
        }
    }

    /// Queues every block of partitions whose holding by this node changed
    /// since the last call (persisted, so a change while the node was down
    /// counts): their files may now have to be fetched or handed over.
    /// Returns how many blocks were queued.
    pub async fn queue_moved_partitions(&self) -> Result<u64> {
        let cluster = &self.cluster;
        let db = self.mgr.metadata();
        let me = cluster.id();
        let mut held = [0u8; 32];
        let laid_out = !cluster.storage_nodes_of_partition(0).is_empty();
        if !laid_out {
            return Ok(0);
        }
        for p in 0..=255u8 {
            if cluster.storage_nodes_of_partition(p).nodes().contains(&me) {
                held[p as usize / 8] |= 1 << (p % 8);
            }
        }
        let before = resync_queue::held_partitions(db).await?;
        if before == Some(held) {
            return Ok(0);
        }
        let mut queued = 0;
        for p in 0..=255u8 {
            let bit = |m: &[u8; 32]| m[p as usize / 8] & (1 << (p % 8)) != 0;
            if before.as_ref().is_some_and(|b| bit(b) == bit(&held)) {
                continue;
            }
            queued += resync_queue::enqueue_partition(db, RC_TREE, p, now_msec()).await?;
        }
        resync_queue::set_held_partitions(db, held).await?;
        if queued > 0 {
            info!("resync: the layout moved partitions; {queued} blocks queued");
            self.wake.notify_one();
        }
        Ok(queued)
    }

    /// Queues every block this node counts or has on disk (`hangar repair
    /// blocks`); returns how many.
    pub async fn queue_everything(&self) -> Result<u64> {
        let db = self.mgr.metadata();
        let mut n = 0;
        for p in 0..=255u8 {
            n += resync_queue::enqueue_partition(db, RC_TREE, p, now_msec()).await?;
        }
        let dirs = self.mgr.files().dirs().to_vec();
        let on_disk = tokio::task::spawn_blocking(move || crate::scan::list_block_files(&dirs))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?;
        for chunk in on_disk.chunks(1000) {
            n += chunk.len() as u64;
            resync_queue::enqueue(db, chunk.to_vec(), now_msec()).await?;
        }
        self.wake.notify_one();
        Ok(n)
    }

    /// Checks that every block referenced here, of a partition this node
    /// stores, has its file: the blocks' half of "this node holds what the
    /// layout assigns it". The missing ones are queued now. Returns how many
    /// are missing (0: every referenced block is here). Reads the count
    /// table a page at a time.
    pub async fn count_missing(&self) -> Result<u64> {
        let db = self.mgr.metadata().clone();
        let mut after: Option<Vec<u8>> = None;
        let mut missing = 0;
        loop {
            let start = after
                .clone()
                .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let page = db
                .range_async(RC_TREE, start, std::ops::Bound::Unbounded, false, 1000)
                .await?;
            let Some((last, _)) = page.last() else {
                return Ok(missing);
            };
            after = Some(last.clone());
            let full = page.len() == 1000;
            let candidates: Vec<Hash> = page
                .into_iter()
                .filter_map(|(k, v)| {
                    let h = Hash::from_slice(&k)?;
                    let rc = crate::refcount::RcRow::decode(&v).ok()?;
                    (rc.count > 0 && self.holds(&h)).then_some(h)
                })
                .collect();
            let files = self.mgr.files().clone();
            let absent: Vec<Hash> = tokio::task::spawn_blocking(move || {
                candidates
                    .into_iter()
                    .filter(|h| !files.exists(h))
                    .collect()
            })
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?;
            if !absent.is_empty() {
                missing += absent.len() as u64;
                self.queue_now(absent).await?;
            }
            if !full {
                return Ok(missing);
            }
        }
    }
}
