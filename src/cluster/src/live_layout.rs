//! The node's live copy of the cluster layout and how it spreads: every
//! change is persisted ([`crate::layout_file`]) and pushed to every live peer
//! over the mesh endpoint `hangar/layout/push`; peers merge it (the CRDT of
//! `hangar_layout`) and answer with what the caller lacks. Nodes also exchange every
//! [`EXCHANGE_INTERVAL`] and as soon as a peer comes up, so a node that was
//! down catches up. A peer whose replication factor differs is refused.
//! See doc/layout.md §9.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hangar_layout::{LayoutHistory, LayoutVersion, NodeId};
use hangar_net::{
    CallOpts, Endpoint, Handler, HandlerError, Mesh, NetError, Priority, Request, Response,
};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use tracing::{debug, info, warn};

use crate::layout_file;
use crate::node_info::{NodeInfo, local_info};

/// The mesh endpoint of layout gossip.
pub const PUSH_PATH: &str = "hangar/layout/push";
/// Every live peer is exchanged with at least this often.
pub const EXCHANGE_INTERVAL: Duration = Duration::from_secs(10);
/// How often the peer list is checked for peers that just came up.
const UP_POLL: Duration = Duration::from_secs(1);
/// Deadline of one exchange.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A push: the sender's whole history (`LayoutHistory::encode`) and its
/// self-description.
#[derive(Debug, Serialize, Deserialize)]
pub struct LayoutPush {
    pub history: ByteBuf,
    pub info: NodeInfo,
}

/// The answer: the receiver's history after the merge, only if it differs
/// from what was pushed (the caller lacks something), and the receiver's
/// self-description.
#[derive(Debug, Serialize, Deserialize)]
pub struct LayoutPushReply {
    pub history: Option<ByteBuf>,
    pub info: NodeInfo,
}

/// What this node knows about a peer from layout exchanges.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PeerLayoutState {
    /// The peer's self-description and when it arrived (ms since the epoch).
    pub info: Option<NodeInfo>,
    pub info_msec: Option<u64>,
    /// Why layout exchanges with this peer are refused (replication factor
    /// mismatch), by either side; `None` once an exchange succeeds.
    pub refused: Option<String>,
}

/// The node's layout: its history, kept on disk and in sync with the peers.
#[derive(Clone)]
pub struct ClusterLayout {
    inner: Arc<Inner>,
}

/// A [`ClusterLayout`] that does not keep it alive: for the handlers the
/// mesh holds (a handler holding the layout would hold the mesh too).
#[derive(Clone)]
pub struct WeakClusterLayout {
    inner: std::sync::Weak<Inner>,
}

impl WeakClusterLayout {
    /// The layout, unless the node is stopping.
    pub fn upgrade(&self) -> Option<ClusterLayout> {
        self.inner.upgrade().map(|inner| ClusterLayout { inner })
    }
}

/// The published history and what every read looks up in it.
struct Published {
    history: Arc<LayoutHistory>,
    /// `history.read_version()`, found once per change: finding it hashes
    /// every kept version (`LayoutHistory::synced_version`), too much for
    /// each row and block read.
    read_version: Arc<LayoutVersion>,
}

impl Published {
    fn of(h: &LayoutHistory) -> Published {
        Published {
            read_version: Arc::new(h.read_version().clone()),
            history: Arc::new(h.clone()),
        }
    }
}

struct Inner {
    me: NodeId,
    replication_factor: usize,
    metadata_dir: PathBuf,
    data_dirs: Vec<PathBuf>,
    mesh: Mesh,
    endpoint: Arc<Endpoint<LayoutPush, LayoutPushReply>>,
    /// Held across the file write, so the file follows the order of changes.
    history: tokio::sync::Mutex<LayoutHistory>,
    /// A copy of `history`, replaced (under the mutex above) after each
    /// change, for the look-ups of every table and block operation, which
    /// must neither wait for a file write nor copy the history.
    published: RwLock<Published>,
    peers: Mutex<BTreeMap<NodeId, PeerLayoutState>>,
    /// The peers this process exchanged histories with (either way) since
    /// it started: this node's history then holds everything theirs held
    /// at that exchange.
    exchanged: Mutex<BTreeSet<NodeId>>,
}

impl ClusterLayout {
    /// Takes the history loaded by [`layout_file::load_or_create`] (so a
    /// node with another replication factor stops before joining the mesh),
    /// registers the gossip endpoint and starts the exchange loop.
    pub fn start(
        mesh: Mesh,
        history: LayoutHistory,
        metadata_dir: PathBuf,
        data_dirs: Vec<PathBuf>,
    ) -> Result<ClusterLayout, NetError> {
        let replication_factor = history.replication_factor;
        info!(
            "cluster layout: version {}, replication factor {replication_factor}",
            history.current().version
        );
        let endpoint = mesh.endpoint::<LayoutPush, LayoutPushReply>(PUSH_PATH)?;
        let layout = ClusterLayout {
            inner: Arc::new(Inner {
                me: mesh.id(),
                replication_factor,
                metadata_dir,
                data_dirs,
                mesh,
                endpoint,
                published: RwLock::new(Published::of(&history)),
                history: tokio::sync::Mutex::new(history),
                peers: Mutex::new(BTreeMap::new()),
                exchanged: Mutex::new(BTreeSet::new()),
            }),
        };
        layout.inner.endpoint.set_handler(
            PushHandler {
                layout: Arc::downgrade(&layout.inner),
            },
            64,
        );
        tokio::spawn(exchange_loop(Arc::downgrade(&layout.inner)));
        Ok(layout)
    }

    /// This node's id, as the layout writes it.
    pub fn me(&self) -> NodeId {
        self.inner.me
    }

    /// A handle that does not keep the layout alive.
    pub fn downgrade(&self) -> WeakClusterLayout {
        WeakClusterLayout {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Exchanges histories with each of `peers` now, concurrently (one
    /// push and its answer each, at most a few seconds): once it returns,
    /// this node's history holds everything those that answered held.
    /// Returns the peers that answered. What a node must do before it acts
    /// on its layout towards a peer, such as pushing rows of the partitions
    /// it holds: a node that was away may hold a layout the others have
    /// long left (doc/replication.md §7).
    pub async fn exchange_with(&self, peers: &[NodeId]) -> BTreeSet<NodeId> {
        let mut set = tokio::task::JoinSet::new();
        for &id in peers {
            if id == self.inner.me {
                continue;
            }
            let inner = self.inner.clone();
            set.spawn(async move { inner.exchange(id).await.is_ok().then_some(id) });
        }
        set.join_all().await.into_iter().flatten().collect()
    }

    /// Whether this process exchanged histories with `peer` (either way)
    /// since it started, so that its history is not older than what `peer`
    /// held then.
    pub fn has_exchanged_with(&self, peer: NodeId) -> bool {
        peer == self.inner.me
            || self
                .inner
                .exchanged
                .lock()
                .expect("exchanged lock")
                .contains(&peer)
    }

    /// Exchanges histories with `peer` in the background (after a peer's
    /// message showed that one of the two layouts is stale).
    pub fn exchange_soon(&self, peer: NodeId) {
        if peer == self.inner.me {
            return;
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let _ = inner.exchange(peer).await;
        });
    }

    /// A copy of the current history.
    pub async fn snapshot(&self) -> LayoutHistory {
        self.inner.history.lock().await.clone()
    }

    /// The current history, shared: cheap, never waits for a change being
    /// written. It may be one change behind a concurrent [`Self::update`]
    /// or merge that has not finished writing its file yet.
    pub fn history(&self) -> Arc<LayoutHistory> {
        self.inner.published()
    }

    /// The version reads go to in [`Self::history`]
    /// ([`LayoutHistory::read_version`]), without computing it again.
    pub fn read_version(&self) -> Arc<LayoutVersion> {
        self.inner
            .published
            .read()
            .expect("published lock")
            .read_version
            .clone()
    }

    /// The cluster's replication factor (fixed for the cluster's life).
    pub fn replication_factor(&self) -> usize {
        self.inner.replication_factor
    }

    /// What is known of each peer (self-descriptions, refusals).
    pub fn peers(&self) -> BTreeMap<NodeId, PeerLayoutState> {
        self.inner.peers.lock().expect("peers lock").clone()
    }

    /// This node's self-description, measured now.
    pub fn local_info(&self) -> NodeInfo {
        local_info(&self.inner.data_dirs, &self.inner.metadata_dir)
    }

    /// Runs an operator change (`layout assign`, `apply`…) on the history;
    /// if it changed anything, persists it and pushes it to every live peer
    /// (waiting at most a few seconds for them). Returns the change's result
    /// and how many peers took the push.
    pub async fn update<R>(
        &self,
        what: &str,
        f: impl FnOnce(&mut LayoutHistory) -> Result<R, String>,
    ) -> Result<(R, usize), String> {
        let (changed, r) = {
            let mut h = self.inner.history.lock().await;
            let mut next = h.clone();
            let r = f(&mut next)?;
            next.prune();
            if next == *h {
                (false, r)
            } else {
                log_change(&h, &next, &format!("{what} on this node"));
                save(&self.inner.metadata_dir, &next)?;
                self.inner.publish(&next);
                *h = next;
                (true, r)
            }
        };
        let pushed = if changed {
            self.inner.push_to_all(None).await
        } else {
            0
        };
        Ok((r, pushed))
    }
}

impl Inner {
    fn published(&self) -> Arc<LayoutHistory> {
        self.published
            .read()
            .expect("published lock")
            .history
            .clone()
    }

    /// Makes `h` what [`ClusterLayout::history`] returns. Called with the
    /// history mutex held, so copies are published in the order of changes.
    fn publish(&self, h: &LayoutHistory) {
        *self.published.write().expect("published lock") = Published::of(h);
    }

    /// Merges a peer's history; persists and logs when something changed.
    /// Returns the merged history and whether it changed.
    async fn merge(
        &self,
        from: NodeId,
        theirs: &LayoutHistory,
    ) -> Result<(LayoutHistory, bool), String> {
        let mut h = self.history.lock().await;
        let mut next = h.clone();
        next.merge(theirs).map_err(|e| e.to_string())?;
        next.prune();
        if next == *h {
            return Ok((next, false));
        }
        log_change(&h, &next, &format!("merged from {}", from.short()));
        save(&self.metadata_dir, &next)?;
        self.publish(&next);
        *h = next.clone();
        Ok((next, true))
    }

    fn refuse(&self, peer: NodeId, why: String) {
        let mut peers = self.peers.lock().expect("peers lock");
        let st = peers.entry(peer).or_default();
        if st.refused.as_deref() != Some(&why) {
            warn!("layout exchange with {} refused: {why}", peer.short());
        }
        st.refused = Some(why);
    }

    fn heard_from(&self, peer: NodeId, info: NodeInfo) {
        let mut peers = self.peers.lock().expect("peers lock");
        let st = peers.entry(peer).or_default();
        if st.refused.take().is_some() {
            info!("layout exchange with {} works again", peer.short());
        }
        st.info = Some(info);
        st.info_msec = Some(hangar_util::time::now_msec());
    }

    /// The refusal text; the same on both nodes (ordered by id), so each
    /// side logs it once however the exchanges interleave.
    fn mismatch_message(&self, peer: NodeId, theirs: usize) -> String {
        let mut both = [(peer, theirs), (self.me, self.replication_factor)];
        both.sort();
        let [(a, ra), (b, rb)] = both;
        format!(
            "replication factor mismatch: node {} has replication factor {ra}, node {} has {rb}; a node cannot join a cluster with another replication factor",
            a.short(),
            b.short(),
        )
    }

    /// One exchange with `peer`: push ours, merge what comes back.
    async fn exchange(self: &Arc<Self>, peer: NodeId) -> Result<(), String> {
        let ours = self.history.lock().await.encode();
        let msg = LayoutPush {
            history: ByteBuf::from(ours),
            info: local_info(&self.data_dirs, &self.metadata_dir),
        };
        let opts = CallOpts {
            timeout: Some(CALL_TIMEOUT),
            priority: Priority::Control,
        };
        let reply = match self.endpoint.call(peer, msg, opts).await {
            Ok(r) => r,
            Err(NetError::Remote { message, .. }) => {
                self.refuse(peer, message.clone());
                return Err(message);
            }
            Err(e) => {
                debug!("layout exchange with {}: {e}", peer.short());
                return Err(e.to_string());
            }
        };
        self.heard_from(peer, reply.info);
        if let Some(bytes) = reply.history {
            let theirs = LayoutHistory::decode(&bytes).map_err(|e| e.to_string())?;
            if theirs.replication_factor != self.replication_factor {
                let why = self.mismatch_message(peer, theirs.replication_factor);
                self.refuse(peer, why.clone());
                return Err(why);
            }
            let (_, changed) = self.merge(peer, &theirs).await?;
            if changed {
                tokio::spawn(self.push_to_all(Some(peer)));
            }
        }
        self.exchanged_with(peer);
        Ok(())
    }

    /// Records that this node's history now holds `peer`'s.
    fn exchanged_with(&self, peer: NodeId) {
        self.exchanged.lock().expect("exchanged lock").insert(peer);
    }

    /// Exchanges with every live peer but `except`, concurrently; returns
    /// how many exchanges succeeded. Boxed: an exchange that learns
    /// something pushes it on, so the two futures refer to each other.
    fn push_to_all(
        self: &Arc<Self>,
        except: Option<NodeId>,
    ) -> Pin<Box<dyn Future<Output = usize> + Send + 'static>> {
        let me = self.clone();
        Box::pin(async move {
            let mut set = tokio::task::JoinSet::new();
            for id in me.mesh.up_nodes() {
                if id == me.me || Some(id) == except {
                    continue;
                }
                let inner = me.clone();
                set.spawn(async move { inner.exchange(id).await.is_ok() });
            }
            set.join_all().await.into_iter().filter(|ok| *ok).count()
        })
    }
}

/// Writes the history file. The fsyncs block, so the runtime is told
/// (other tasks move to another worker thread meanwhile).
fn save(metadata_dir: &std::path::Path, h: &LayoutHistory) -> Result<(), String> {
    tokio::task::block_in_place(|| layout_file::save(metadata_dir, h)).map_err(|e| e.to_string())
}

/// Logs what a new history changes compared with the old one.
fn log_change(old: &LayoutHistory, new: &LayoutHistory, how: &str) {
    let (ov, nv) = (old.current().version, new.current().version);
    if nv != ov {
        info!(
            "cluster layout version {nv} is now current (was {ov}), {how}: {} storage nodes, {} roles",
            new.current().node_ids.len(),
            new.current().roles.len()
        );
    } else if old.current().content_hash() != new.current().content_hash() {
        warn!(
            "cluster layout version {nv} replaced by other content ({how}): it was applied twice"
        );
    }
    // An apply clears the staging; that goes without saying.
    if old.staging != new.staging && nv == ov {
        info!(
            "staged layout changes now: {} roles, parameters {} ({how})",
            new.staging.roles.len(),
            if new.staging.parameters.is_some() {
                "changed"
            } else {
                "unchanged"
            }
        );
    }
    if new.retired_below != old.retired_below {
        info!("layout versions below {} retired", new.retired_below);
    }
}

struct PushHandler {
    layout: std::sync::Weak<Inner>,
}

#[async_trait]
impl Handler<LayoutPush, LayoutPushReply> for PushHandler {
    async fn handle(
        &self,
        req: Request<LayoutPush>,
    ) -> Result<Response<LayoutPushReply>, HandlerError> {
        let inner = self
            .layout
            .upgrade()
            .ok_or_else(|| HandlerError::new("node is stopping"))?;
        let from = req.from;
        let theirs = LayoutHistory::decode(&req.msg.history).map_err(HandlerError::new)?;
        if theirs.replication_factor != inner.replication_factor {
            let why = inner.mismatch_message(from, theirs.replication_factor);
            inner.refuse(from, why.clone());
            return Err(HandlerError(why));
        }
        inner.heard_from(from, req.msg.info);
        let (merged, changed) = inner.merge(from, &theirs).await.map_err(HandlerError)?;
        inner.exchanged_with(from);
        if changed {
            tokio::spawn(inner.push_to_all(Some(from)));
        }
        Ok(Response::new(LayoutPushReply {
            history: (merged != theirs).then(|| ByteBuf::from(merged.encode())),
            info: local_info(&inner.data_dirs, &inner.metadata_dir),
        }))
    }
}

/// Exchanges with peers that just came up, and with every live peer every
/// [`EXCHANGE_INTERVAL`]. Ends when the layout is dropped.
async fn exchange_loop(layout: std::sync::Weak<Inner>) {
    let mut was_up: BTreeSet<NodeId> = BTreeSet::new();
    let mut last_round = Instant::now();
    loop {
        tokio::time::sleep(UP_POLL).await;
        let Some(inner) = layout.upgrade() else {
            return;
        };
        let up: BTreeSet<NodeId> = inner
            .mesh
            .up_nodes()
            .into_iter()
            .filter(|id| *id != inner.me)
            .collect();
        let targets: Vec<NodeId> = if last_round.elapsed() >= EXCHANGE_INTERVAL {
            last_round = Instant::now();
            up.iter().copied().collect()
        } else {
            up.difference(&was_up).copied().collect()
        };
        was_up = up;
        let mut set = tokio::task::JoinSet::new();
        for id in targets {
            let me = inner.clone();
            set.spawn(async move { me.exchange(id).await });
        }
        drop(inner);
        set.join_all().await;
    }
}
