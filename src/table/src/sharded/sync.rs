//! Anti-entropy for sharded tables ([`crate::Sharded`]).
//!
//! Every [`SYNC_INTERVAL`] (and about a second after a peer comes up, a
//! new layout version is applied, or every node acknowledged it), the
//! worker `sharded-sync` compares each layout partition this node holds, in
//! any active layout version, with each other node of that partition, for
//! every sharded table:
//!
//! 1. the roots of all partitions shared with a peer, in one message;
//! 2. for each partition whose roots differ ([`PARTITIONS_IN_FLIGHT`] at a
//!    time), the children of each differing node, depth after depth
//!    ([`super::merkle`]), down to depth [`merkle::DEPTH`] or to a node
//!    (the root included) covering at most [`LEAF_BATCH`] rows on both
//!    sides together;
//! 3. the leaves under those nodes, from both sides: the rows the peer has
//!    and this node lacks or holds otherwise are pulled and merged here, then
//!    the rows this node has and the peer lacks or holds otherwise (merged
//!    now) are pushed to the peer, in messages of at most
//!    [`MAX_ROWS_PER_MESSAGE`] rows;
//! 4. the roots again: equal roots mean the two replicas hold the same rows.
//!
//! Every call runs at background priority. Tombstones are rows like any
//! other, so a delete made while a node was down reaches it.
//!
//! Before comparing anything, a pass exchanges layout histories with every
//! live peer ([`hangar_cluster::ClusterLayout::exchange_with`]) and compares
//! only with the peers that answered, under the merged history: a node
//! started again from an old disk learns first that its partitions moved
//! (or that it was removed), instead of pushing rows the others deleted and
//! collected since (doc/replication.md §7).
//!
//! Layout sync: a pass is *complete* for the current layout version `v` when,
//! for every partition this node holds in `v` and every active version's set
//! of it, enough nodes of the set to meet every write quorum (`rf + 1 -
//! write quorum`, this node counted) compared equal (after repair) with this
//! node, so that it holds every acknowledged write; a version is reported
//! synced after a complete pass that started once every node had
//! acknowledged `v`
//! (`LayoutHistory::sync_may_start`). [`ShardedSyncStatus::synced_version`]
//! then reports `v`: this node's sharded tables hold everything `v` assigns
//! it. The caller combines it with the blocks' own report before
//! `LayoutHistory::mark_synced`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use hangar_cluster::Cluster;
use hangar_layout::Partition;
use hangar_net::{CallOpts, NetError};
use hangar_util::NodeId;
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};
use serde_bytes::ByteBuf;
use tokio::sync::watch;

use super::Sharded;
use super::handlers::read_rows;
use super::merkle::{self, DEPTH, Summary};
use crate::serve::{check_rows, merge_rows};
use crate::wire::{
    MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE, MerkleRequest, MerkleResponse, UpdateRows, WireRow,
    WireSummary, batches,
};
use crate::{RowTrees, Schema, Table, TableError};

/// Each partition is compared with each of its other replicas at least this
/// often.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(30);
/// A differing node covering at most this many rows (both sides together)
/// is settled by comparing its leaves rather than its children. A replica
/// that lacks most rows of a partition (a new or wiped node) differs in
/// nearly every child: settling each child apart cost two round trips per
/// row or so, while one listing of up to a page of leaves settles them
/// all (`script/bench-table-sync`, doc/replication.md §6).
pub const LEAF_BATCH: u64 = 1000;
/// How many differing partitions are settled with one peer at a time: each
/// is a chain of round trips (children, leaves, rows, roots), so several in
/// flight keep the link busy where one would leave it waiting.
pub const PARTITIONS_IN_FLIGHT: usize = 4;
/// How often the peer list is checked for peers that just came up.
const UP_POLL: Duration = Duration::from_secs(1);

/// What comparing some partitions with one peer did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PeerSync {
    /// Partitions compared.
    pub partitions: usize,
    /// Partitions whose roots differed at first.
    pub differed: usize,
    /// Partitions whose roots still differed after the repair (written to
    /// meanwhile, or a failure): compared again next pass.
    pub unequal_after: Vec<Partition>,
    pub rows_pulled: u64,
    pub rows_pushed: u64,
}

/// One sharded table, as the sync worker sees it.
#[async_trait]
pub trait ShardedSyncable: Send + Sync {
    fn tree(&self) -> &'static str;
    /// How many rows (tombstones included) this node stores, from the
    /// Merkle roots of every partition: 256 reads, whatever the size.
    async fn rows(&self) -> Result<u64, TableError>;
    /// Compares `partitions` of this node's table with `peer`'s and repairs
    /// both sides.
    async fn sync_with(
        &self,
        peer: NodeId,
        partitions: &[Partition],
    ) -> Result<PeerSync, TableError>;
    /// Marks `held` (the partitions this node holds in an active, assigned
    /// layout version) as held, and deletes this node's rows of every
    /// partition marked held before and not in `held` now
    /// ([`Schema::DROP_LOST_PARTITIONS`], [`merkle::drop_rows`]). Returns
    /// how many rows were deleted.
    async fn drop_lost(&self, held: &BTreeSet<Partition>) -> Result<u64, TableError>;
}

#[async_trait]
impl<S: Schema> ShardedSyncable for Table<S, Sharded> {
    fn tree(&self) -> &'static str {
        S::TREE
    }

    async fn rows(&self) -> Result<u64, TableError> {
        let all = (0..=Partition::MAX).collect();
        let roots = merkle::roots(self.local().db(), self.index_tree(), all).await?;
        Ok(roots.iter().map(|r| r.count).sum())
    }

    async fn sync_with(
        &self,
        peer: NodeId,
        partitions: &[Partition],
    ) -> Result<PeerSync, TableError> {
        self.sync_partitions_with(peer, partitions).await
    }

    async fn drop_lost(&self, held: &BTreeSet<Partition>) -> Result<u64, TableError> {
        /// Rows deleted per transaction.
        const PAGE: usize = 500;
        let db = self.local().db();
        let index = self.index_tree();
        let marks = merkle::held_marks(db, index).await?;
        let new: Vec<Partition> = held
            .iter()
            .copied()
            .filter(|p| !marks[*p as usize])
            .collect();
        if !new.is_empty() {
            merkle::mark_held(db, index, new).await?;
        }
        if !S::DROP_LOST_PARTITIONS {
            return Ok(0);
        }
        let lost: Vec<Partition> = (0..=Partition::MAX)
            .filter(|p| marks[*p as usize] && !held.contains(p))
            .collect();
        let mut dropped = 0;
        for (p, root) in lost
            .iter()
            .zip(merkle::roots(db, index, lost.clone()).await?)
        {
            if root.count == 0 {
                continue;
            }
            loop {
                let n = merkle::drop_rows(db, RowTrees::of::<S>(), index, *p, PAGE, forget::<S>)
                    .await?;
                dropped += n;
                if n == 0 {
                    break;
                }
            }
            tracing::info!(
                "{}: partition {p} is no longer stored here: {} rows handed over and deleted",
                S::TREE,
                root.count
            );
        }
        Ok(dropped)
    }
}

/// Undoes, for a row leaving with its partition, what it counted locally
/// ([`Schema::dropped`]).
fn forget<S: Schema>(
    tx: &mut hangar_db::Tx<'_>,
    key: &[u8],
    stored: &[u8],
) -> Result<(), hangar_db::DbError> {
    let row = crate::decode::<S>(stored)?;
    let (partition, sort) = key.split_at(S::PARTITION_LEN.min(key.len()));
    S::dropped(tx, partition, sort, &row)
}

fn bad<S: Schema>(message: impl Into<String>) -> TableError {
    TableError::BadAnswer {
        tree: S::TREE,
        message: message.into(),
    }
}

fn summary<S: Schema>(w: &WireSummary) -> Result<Summary, TableError> {
    let digest =
        <[u8; 32]>::try_from(w.digest.as_slice()).map_err(|_| bad::<S>("digest length"))?;
    Ok(Summary {
        digest,
        count: w.count,
    })
}

/// Leaves by key hash: (value hash, storage key).
type LeafMap = BTreeMap<[u8; 32], ([u8; 32], Vec<u8>)>;

impl<S: Schema> Table<S, Sharded> {
    async fn remote(&self, peer: NodeId, req: MerkleRequest) -> Result<MerkleResponse, TableError> {
        Ok(self
            .eps
            .merkle
            .call(peer, req, CallOpts::background())
            .await?)
    }

    async fn remote_roots(
        &self,
        peer: NodeId,
        partitions: &[Partition],
    ) -> Result<Vec<Summary>, TableError> {
        let r = self
            .remote(
                peer,
                MerkleRequest::Roots {
                    partitions: ByteBuf::from(partitions.to_vec()),
                },
            )
            .await?;
        match r {
            MerkleResponse::Roots(rs) if rs.len() == partitions.len() => {
                rs.iter().map(summary::<S>).collect()
            }
            _ => Err(bad::<S>("not the roots asked for")),
        }
    }

    /// Compares `partitions` (each listed once) of this node's replica with
    /// `peer`'s and, where they differ, moves the differing rows both ways;
    /// see the module documentation.
    pub async fn sync_partitions_with(
        &self,
        peer: NodeId,
        partitions: &[Partition],
    ) -> Result<PeerSync, TableError> {
        let mut report = PeerSync {
            partitions: partitions.len(),
            ..Default::default()
        };
        if partitions.is_empty() {
            return Ok(report);
        }
        let db = self.local().db();
        let theirs = self.remote_roots(peer, partitions).await?;
        let ours = merkle::roots(db, self.index_tree(), partitions.to_vec()).await?;
        let differing: Vec<(Partition, u64)> = partitions
            .iter()
            .zip(theirs)
            .zip(ours)
            .filter(|((_, t), o)| t != o)
            .map(|((p, t), o)| (*p, t.count.saturating_add(o.count)))
            .collect();
        report.differed = differing.len();
        let mut settled =
            futures::stream::iter(differing.into_iter().map(|(p, rows)| async move {
                let (pulled, pushed) = self.sync_partition(peer, p, rows).await?;
                let t = self.remote_roots(peer, &[p]).await?[0];
                let equal = t == self.merkle_root(p).await?;
                Ok::<_, TableError>((p, pulled, pushed, equal))
            }))
            .buffer_unordered(PARTITIONS_IN_FLIGHT);
        while let Some(r) = settled.next().await {
            let (p, pulled, pushed, equal) = r?;
            report.rows_pulled += pulled;
            report.rows_pushed += pushed;
            if !equal {
                report.unequal_after.push(p);
            }
            tracing::debug!(
                "table {}: partition {p} with {}: {pulled} rows pulled, {pushed} pushed",
                S::TREE,
                peer.short()
            );
        }
        Ok(report)
    }

    /// Finds the differing rows of partition `p`, whose roots cover `rows`
    /// rows on both sides together, and moves them; returns (rows pulled,
    /// rows pushed).
    async fn sync_partition(
        &self,
        peer: NodeId,
        p: Partition,
        rows: u64,
    ) -> Result<(u64, u64), TableError> {
        let db = self.local().db();
        let index = self.index_tree();
        // Differing nodes still to look at, with the rows they cover.
        let mut stack: Vec<(Vec<u8>, u64)> = vec![(Vec::new(), rows)];
        let mut buckets: Vec<Vec<u8>> = Vec::new();
        while let Some((prefix, rows)) = stack.pop() {
            if prefix.len() == DEPTH || rows <= LEAF_BATCH {
                buckets.push(prefix);
                continue;
            }
            let ours: BTreeMap<u8, Summary> = merkle::children(db, index, p, &prefix)
                .await?
                .into_iter()
                .collect();
            let r = self
                .remote(
                    peer,
                    MerkleRequest::Children {
                        partition: p,
                        prefix: ByteBuf::from(prefix.clone()),
                    },
                )
                .await?;
            let MerkleResponse::Children(kids) = r else {
                return Err(bad::<S>("not children"));
            };
            if kids.len() > 256 {
                return Err(bad::<S>("too many children"));
            }
            let mut theirs = BTreeMap::new();
            for (b, s) in &kids {
                theirs.insert(*b, summary::<S>(s)?);
            }
            let bytes: BTreeSet<u8> = ours.keys().chain(theirs.keys()).copied().collect();
            for b in bytes {
                let (o, t) = (ours.get(&b), theirs.get(&b));
                if o == t {
                    continue;
                }
                let mut child = prefix.clone();
                child.push(b);
                let rows = o
                    .map_or(0, |s| s.count)
                    .saturating_add(t.map_or(0, |s| s.count));
                stack.push((child, rows));
            }
        }
        let (mut pulled, mut pushed) = (0, 0);
        for prefix in buckets {
            let (a, b) = self.sync_leaves(peer, p, &prefix).await?;
            pulled += a;
            pushed += b;
        }
        Ok((pulled, pushed))
    }

    async fn local_leaves(&self, p: Partition, prefix: &[u8]) -> Result<LeafMap, TableError> {
        let mut out = LeafMap::new();
        let mut after = None;
        loop {
            let page = merkle::leaves(
                self.local().db(),
                self.index_tree(),
                p,
                prefix,
                after,
                MAX_ROWS_PER_MESSAGE,
            )
            .await?;
            let full = page.len() == MAX_ROWS_PER_MESSAGE;
            after = page.last().map(|l| l.h);
            for l in page {
                out.insert(l.h, (l.vh, l.key));
            }
            if !full {
                return Ok(out);
            }
        }
    }

    async fn remote_leaves(
        &self,
        peer: NodeId,
        p: Partition,
        prefix: &[u8],
    ) -> Result<LeafMap, TableError> {
        let mut out = LeafMap::new();
        let mut after: Option<[u8; 32]> = None;
        loop {
            let r = self
                .remote(
                    peer,
                    MerkleRequest::Leaves {
                        partition: p,
                        prefix: ByteBuf::from(prefix.to_vec()),
                        after: after.map(|a| ByteBuf::from(a.to_vec())),
                        limit: MAX_ROWS_PER_MESSAGE as u32,
                    },
                )
                .await?;
            let MerkleResponse::Leaves { leaves, more } = r else {
                return Err(bad::<S>("not leaves"));
            };
            if leaves.len() > MAX_ROWS_PER_MESSAGE || (more && leaves.is_empty()) {
                return Err(bad::<S>("bad leaf page"));
            }
            for l in leaves {
                let h = *blake3::hash(&l.key).as_bytes();
                let vh = <[u8; 32]>::try_from(l.value_hash.as_slice())
                    .map_err(|_| bad::<S>("value hash length"))?;
                if l.key.len() > MAX_KEY_LEN
                    || l.key.len() < S::PARTITION_LEN
                    || !h.starts_with(prefix)
                    || after.is_some_and(|a| h <= a)
                {
                    return Err(bad::<S>("a leaf out of the range asked"));
                }
                after = Some(h);
                out.insert(h, (vh, l.key.into_vec()));
            }
            if !more {
                return Ok(out);
            }
        }
    }

    /// Compares the leaves under `prefix` and moves the differing rows.
    async fn sync_leaves(
        &self,
        peer: NodeId,
        p: Partition,
        prefix: &[u8],
    ) -> Result<(u64, u64), TableError> {
        let ours = self.local_leaves(p, prefix).await?;
        let theirs = self.remote_leaves(peer, p, prefix).await?;
        let pull: Vec<Vec<u8>> = theirs
            .iter()
            .filter(|(h, (vh, _))| ours.get(*h).map(|o| &o.0) != Some(vh))
            .map(|(_, (_, k))| k.clone())
            .collect();
        let push: Vec<Vec<u8>> = ours
            .iter()
            .filter(|(h, (vh, _))| theirs.get(*h).map(|t| &t.0) != Some(vh))
            .map(|(_, (_, k))| k.clone())
            .collect();
        let pulled = self.pull_rows(peer, p, pull).await?;
        // Pushed after the pull, so that a row both sides held differently
        // goes back merged.
        let rows = read_all::<S>(self.local().db(), push).await?;
        let mut pushed = 0;
        for rows in batches(rows) {
            let n = rows.len() as u64;
            match self
                .eps
                .update
                .call(peer, UpdateRows { rows }, CallOpts::background())
                .await
            {
                Ok(_) => pushed += n,
                // The peer refuses writers' live rows of a fenced key, and
                // takes a push for a write. Its own pass pulls them: pulls
                // merge regardless of fences.
                Err(NetError::Remote { message, .. }) if message.contains(crate::fence::FENCED) => {
                    tracing::debug!(
                        "table {}: {} refused {n} rows of a fenced key; it pulls them",
                        S::TREE,
                        peer.short()
                    );
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok((pulled, pushed))
    }

    /// Fetches the rows of `keys` from `peer` and merges them here.
    async fn pull_rows(
        &self,
        peer: NodeId,
        p: Partition,
        keys: Vec<Vec<u8>>,
    ) -> Result<u64, TableError> {
        let mut pulled = 0;
        let mut rest: &[Vec<u8>] = &keys;
        while !rest.is_empty() {
            let ask = &rest[..rest.len().min(MAX_ROWS_PER_MESSAGE)];
            let r = self
                .remote(
                    peer,
                    MerkleRequest::Rows {
                        keys: ask.iter().map(|k| ByteBuf::from(k.clone())).collect(),
                    },
                )
                .await?;
            let MerkleResponse::Rows(rows) = r else {
                return Err(bad::<S>("not rows"));
            };
            // The answer follows the order asked, skipping keys the peer no
            // longer holds, and may stop early at its byte budget: go on
            // after the last key it sent.
            let mut next = ask.len();
            if let Some(last) = rows.last() {
                next = ask
                    .iter()
                    .position(|k| k.as_slice() == last.key.as_slice())
                    .ok_or_else(|| bad::<S>("a row not asked for"))?
                    + 1;
            }
            let asked: BTreeSet<&[u8]> = ask.iter().map(|k| k.as_slice()).collect();
            if rows.iter().any(|r| {
                !asked.contains(r.key.as_slice())
                    || S::layout_partition(&r.key[..S::PARTITION_LEN.min(r.key.len())]) != p
            }) {
                return Err(bad::<S>("a row not asked for"));
            }
            let rows = check_rows::<S>(rows).map_err(|m| bad::<S>(m))?;
            pulled += rows.len() as u64;
            merge_rows(self.local(), rows).await?;
            rest = &rest[next..];
        }
        Ok(pulled)
    }
}

/// Every stored row of `keys` held here, in order.
async fn read_all<S: Schema>(
    db: &hangar_db::Db,
    keys: Vec<Vec<u8>>,
) -> Result<Vec<WireRow>, TableError> {
    let mut out = Vec::new();
    let mut rest = keys;
    while !rest.is_empty() {
        let rows = read_rows::<S>(db, rest.clone()).await?;
        let next = match rows.last() {
            Some(last) => {
                rest.iter()
                    .position(|k| k.as_slice() == last.key.as_slice())
                    .expect("read_rows returns keys asked")
                    + 1
            }
            None => rest.len(),
        };
        out.extend(rows);
        rest.drain(..next);
    }
    Ok(out)
}

/// What one pass over every partition of this node did.
#[derive(Debug, Default, Clone)]
pub struct PassReport {
    /// The current layout version when the pass started.
    pub version: u64,
    /// For every partition this node holds in `version`, and every active
    /// version's set of it: enough of the set's nodes (this one counted)
    /// compared equal with this node, for every table, to meet every write
    /// quorum of the set (2 of 3 with rf 3): this node holds every
    /// acknowledged write of the partition.
    pub complete: bool,
    /// Whether every node had acknowledged `version` when the pass started
    /// (`LayoutHistory::sync_may_start`): only then may a complete pass
    /// report the version synced.
    pub sync_may_start: bool,
    /// Partitions this node holds in `version` that the pass did not find
    /// complete (as for `complete`): what is left before this node's
    /// tables hold everything `version` assigns it.
    pub pending: usize,
    /// Rows deleted because their partition left this node
    /// ([`ShardedSyncable::drop_lost`]).
    pub rows_dropped: u64,
    /// (peer, partitions) comparisons made, per table.
    pub compared: usize,
    pub partitions_differed: usize,
    pub rows_pulled: u64,
    pub rows_pushed: u64,
    /// The same counts per table.
    pub per_table: BTreeMap<&'static str, TableSyncCounts>,
    /// When the pass started (ms since the epoch).
    pub started_msec: u64,
    pub errors: Vec<String>,
}

/// What sync passes moved for one table.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TableSyncCounts {
    pub partitions_differed: u64,
    pub rows_pulled: u64,
    pub rows_pushed: u64,
    /// Rows deleted because their partition left this node.
    pub rows_dropped: u64,
}

impl PassReport {
    /// The layout version this pass shows synced, if any.
    pub fn synced(&self) -> Option<u64> {
        (self.complete && self.sync_may_start).then_some(self.version)
    }
}

/// One anti-entropy pass: compares every partition this node holds (in any
/// active layout version) of every table with each other node of it.
pub async fn sync_pass(cluster: &Cluster, tables: &[Arc<dyn ShardedSyncable>]) -> PassReport {
    let me = cluster.id();
    // First the layout: a node that was away (or removed while it was down)
    // may hold a version the others retired long ago, under which it would
    // push rows whose tombstones they have since collected. After these
    // exchanges this node's history holds everything each answering peer's
    // held, so every version it finds active is active on that peer too;
    // peers that did not answer are not compared this pass.
    let up: Vec<NodeId> = cluster
        .mesh()
        .up_nodes()
        .into_iter()
        .filter(|n| *n != me)
        .collect();
    let fresh = cluster.layout().exchange_with(&up).await;
    let h = cluster.layout().history();
    let version = h.current().version;
    let mut report = PassReport {
        version,
        sync_may_start: h.sync_may_start(version),
        started_msec: now_msec(),
        ..Default::default()
    };
    let in_current: BTreeSet<Partition> = h.current().partitions_of_node(me).into_iter().collect();
    let mine: BTreeSet<Partition> = h
        .versions
        .iter()
        .filter(|v| v.is_assigned())
        .flat_map(|v| v.partitions_of_node(me))
        .collect();
    let mut by_peer: BTreeMap<NodeId, Vec<Partition>> = BTreeMap::new();
    for p in &mine {
        for n in h.write_nodes_of_partition(*p) {
            if n != me {
                by_peer.entry(n).or_default().push(*p);
            }
        }
    }
    // Per partition, the peers every table compared equal with.
    let mut equal_with: BTreeMap<Partition, BTreeSet<NodeId>> = BTreeMap::new();
    for (peer, ps) in by_peer {
        if !cluster.is_up(peer) {
            continue;
        }
        if !fresh.contains(&peer) {
            report.errors.push(format!(
                "layout exchange with {} failed: not compared",
                peer.short()
            ));
            continue;
        }
        let mut unequal: BTreeSet<Partition> = BTreeSet::new();
        let mut failed = false;
        for t in tables {
            report.compared += 1;
            match t.sync_with(peer, &ps).await {
                Ok(r) => {
                    report.partitions_differed += r.differed;
                    report.rows_pulled += r.rows_pulled;
                    report.rows_pushed += r.rows_pushed;
                    let c = report.per_table.entry(t.tree()).or_default();
                    c.partitions_differed += r.differed as u64;
                    c.rows_pulled += r.rows_pulled;
                    c.rows_pushed += r.rows_pushed;
                    unequal.extend(r.unequal_after);
                }
                Err(e) => {
                    failed = true;
                    report
                        .errors
                        .push(format!("{} with {}: {e}", t.tree(), peer.short()));
                }
            }
        }
        if !failed {
            for p in ps.iter().filter(|p| !unequal.contains(p)) {
                equal_with.entry(*p).or_default().insert(peer);
            }
        }
    }
    // Complete when, for every partition held in the current version, each
    // active version's set has enough nodes known equal (this one
    // included) to meet every write quorum of that set: then every
    // acknowledged write is here. One node of three may be down.
    let write = cluster.quorums().write;
    report.pending = in_current
        .iter()
        .filter(|p| {
            let equal = equal_with.get(p);
            !h.write_sets_of_partition(**p).iter().all(|set| {
                let needed = (set.nodes.len() + 1).saturating_sub(write).max(1);
                let have = set
                    .nodes
                    .iter()
                    .filter(|n| **n == me || equal.is_some_and(|e| e.contains(n)))
                    .count();
                have >= needed
            })
        })
        .count();
    report.complete = report.pending == 0;
    // Rows of partitions this node held and no longer holds in any active
    // version: every holder of the newer versions reported holding every
    // acknowledged row before the old version retired, so they leave.
    // Before any layout is assigned nothing is held, and nothing dropped.
    if h.versions.iter().any(|v| v.is_assigned()) {
        for t in tables {
            match t.drop_lost(&mine).await {
                Ok(n) => {
                    report.rows_dropped += n;
                    report.per_table.entry(t.tree()).or_default().rows_dropped += n;
                }
                Err(e) => report
                    .errors
                    .push(format!("{}: dropping lost partitions: {e}", t.tree())),
            }
        }
    }
    report
}

/// What the sync worker has established, for the caller that marks the
/// layout synced (cheap to clone; every clone sees the same status).
#[derive(Clone)]
pub struct ShardedSyncStatus {
    synced: Arc<watch::Sender<u64>>,
    passes: Arc<AtomicU64>,
    /// When the status was made (the worker started), ms since the epoch.
    since_msec: u64,
    /// When the last complete pass started (0: none yet).
    last_complete_msec: Arc<AtomicU64>,
    /// Per table, what every pass moved.
    totals: Arc<std::sync::Mutex<BTreeMap<&'static str, TableSyncCounts>>>,
    /// The last pass's [`PassReport::pending`].
    pending: Arc<AtomicU64>,
    /// How long the last pass took, in ms.
    last_pass_msec: Arc<AtomicU64>,
}

impl Default for ShardedSyncStatus {
    fn default() -> Self {
        ShardedSyncStatus {
            synced: Arc::new(watch::channel(0).0),
            passes: Arc::new(AtomicU64::new(0)),
            since_msec: now_msec(),
            last_complete_msec: Arc::new(AtomicU64::new(0)),
            totals: Arc::default(),
            pending: Arc::default(),
            last_pass_msec: Arc::default(),
        }
    }
}

impl ShardedSyncStatus {
    /// The newest layout version whose data this node's sharded tables are
    /// known to hold entirely (0 before the first such pass).
    pub fn synced_version(&self) -> u64 {
        *self.synced.borrow()
    }

    /// Sees [`ShardedSyncStatus::synced_version`] change: to mark the
    /// layout synced as soon as it moves (with the blocks' own report).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.synced.subscribe()
    }

    /// How many passes the worker finished.
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::SeqCst)
    }

    /// How far behind this node's sharded tables may be, in ms: the time
    /// since the start of the last pass that found them complete (holding
    /// every write acknowledged before it started), or since the worker
    /// started when no pass was complete yet.
    pub fn lag_msec(&self, now_msec: u64) -> u64 {
        let last = self.last_complete_msec.load(Ordering::Relaxed);
        now_msec.saturating_sub(if last == 0 { self.since_msec } else { last })
    }

    /// Partitions of the current layout version that this node holds and
    /// the last pass did not find complete (0 before the first pass: see
    /// [`ShardedSyncStatus::passes`]).
    pub fn pending_partitions(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// How long the last pass took, in ms (0 before the first).
    pub fn last_pass_msec(&self) -> u64 {
        self.last_pass_msec.load(Ordering::Relaxed)
    }

    /// Per table, what the passes since start moved.
    pub fn totals(&self) -> BTreeMap<&'static str, TableSyncCounts> {
        self.totals.lock().expect("sync totals lock").clone()
    }

    /// Takes a pass's report into account.
    pub fn record(&self, r: &PassReport) {
        if r.complete {
            self.last_complete_msec
                .fetch_max(r.started_msec, Ordering::Relaxed);
        }
        {
            let mut t = self.totals.lock().expect("sync totals lock");
            for (tree, c) in &r.per_table {
                let e = t.entry(tree).or_default();
                e.partitions_differed += c.partitions_differed;
                e.rows_pulled += c.rows_pulled;
                e.rows_pushed += c.rows_pushed;
                e.rows_dropped += c.rows_dropped;
            }
        }
        self.pending.store(r.pending as u64, Ordering::Relaxed);
        self.last_pass_msec
            .store(now_msec().saturating_sub(r.started_msec), Ordering::Relaxed);
        if let Some(v) = r.synced() {
            self.synced.send_if_modified(|s| {
                let newer = v > *s;
                if newer {
                    *s = v;
                }
                newer
            });
        }
        self.passes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Starts the anti-entropy worker `sharded-sync` of `tables` (all on
/// `cluster`): a pass every `interval` and whenever a peer comes up.
/// Returns the task and the status it updates.
pub fn spawn_sharded_sync_worker(
    cluster: Cluster,
    tables: Vec<Arc<dyn ShardedSyncable>>,
    workers: &WorkerRegistry,
    interval: Duration,
) -> (tokio::task::JoinHandle<()>, ShardedSyncStatus) {
    let w = workers.register("sharded-sync");
    let status = ShardedSyncStatus::default();
    let st = status.clone();
    let task = tokio::spawn(async move {
        let me = cluster.id();
        let mut was_up: BTreeSet<NodeId> = BTreeSet::new();
        let mut next = tokio::time::Instant::now();
        let (mut pulled, mut pushed, mut dropped) = (0u64, 0u64, 0u64);
        let mut seen_layout = (0u64, 0u64);
        loop {
            // A new version, or every node acknowledging it, starts a pass
            // at once: the pass that lets the version be reported synced.
            let h = cluster.layout().history();
            let layout_now = (h.current().version, h.min_ack());
            let layout_moved = layout_now != seen_layout;
            seen_layout = layout_now;
            let up: BTreeSet<NodeId> = cluster
                .mesh()
                .up_nodes()
                .into_iter()
                .filter(|n| *n != me)
                .collect();
            let came_up = up.difference(&was_up).next().is_some();
            was_up = up;
            if came_up || layout_moved || tokio::time::Instant::now() >= next {
                next = tokio::time::Instant::now() + interval;
                w.set_state(WorkerState::Busy);
                let r = sync_pass(&cluster, &tables).await;
                pulled += r.rows_pulled;
                pushed += r.rows_pushed;
                w.add_processed(r.rows_pulled + r.rows_pushed);
                for e in &r.errors {
                    tracing::debug!("sharded sync: {e}");
                    w.record_error(e);
                }
                if r.partitions_differed > 0 {
                    tracing::info!(
                        "sharded sync: {} partitions differed: {} rows pulled, {} pushed",
                        r.partitions_differed,
                        r.rows_pulled,
                        r.rows_pushed
                    );
                }
                let before = st.synced_version();
                st.record(&r);
                if st.synced_version() > before {
                    tracing::info!(
                        "sharded tables hold every row of layout version {}",
                        st.synced_version()
                    );
                }
                dropped += r.rows_dropped;
                w.set_progress(
                    format!(
                        "layout version {} {}; synced version {}; {pulled} rows pulled, {pushed} pushed, {dropped} dropped (partitions moved away) in all",
                        r.version,
                        if r.complete {
                            "in sync".to_string()
                        } else {
                            format!("not yet in sync ({} partitions to go)", r.pending)
                        },
                        st.synced_version()
                    ),
                    None,
                );
                w.set_state(WorkerState::Idle);
            }
            tokio::time::sleep(UP_POLL).await;
        }
    });
    (task, status)
}
