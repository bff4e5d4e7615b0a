//! The layout history: the versions still in use, the staged changes and
//! every node's progress through the versions. Nodes gossip it whole and
//! merge it as a CRDT, so they all converge on the same layout without a
//! leader (doc/layout.md, "The history as a CRDT").

use std::collections::{BTreeMap, BTreeSet};

use hangar_util::Hash;
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::assign::{AssignmentReport, MIN_CAPACITY, compute_assignment, describe};
use crate::error::LayoutError;
use crate::node::NodeId;
use crate::role::{LayoutParameters, NodeRole, ZoneRedundancy};
use crate::staging::Staging;
use crate::tracker::Tracker;
use crate::version::{LayoutVersion, Partition};

/// Everything a node knows about the layout. See doc/layout.md for the
/// merge rules and the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutHistory {
    /// Copies per partition; fixed for the life of the cluster.
    pub replication_factor: usize,
    /// The versions still in use, consecutive, oldest first; the last one is
    /// the current version. Never empty.
    pub versions: Vec<LayoutVersion>,
    /// Versions numbered below this are retired everywhere.
    pub retired_below: u64,
    /// Per node: the newest version it coordinates writes with (its older
    /// in-flight writes have finished).
    pub ack: Tracker,
    /// Per storage node: the newest version whose data it fully holds.
    pub sync: Tracker,
    /// Per node: the newest version it reads from (it has seen that
    /// version synced).
    pub sync_ack: Tracker,
    pub staging: Staging,
    /// Version numbers that were applied more than once with different
    /// content, with every content hash seen; the largest hash is kept.
    pub conflicts: BTreeMap<u64, BTreeSet<Hash>>,
}

/// One staged role change, as `layout show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedRole {
    pub node: NodeId,
    /// The role in the current version (`None`: the node has none).
    pub current: Option<NodeRole>,
    /// The staged role (`None`: the node is being removed).
    pub staged: Option<NodeRole>,
}

/// What `layout show` needs: the staged changes and what applying them
/// would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutPreview {
    pub current_version: u64,
    pub roles: Vec<StagedRole>,
    /// (current, staged) parameters, when a change is staged.
    pub parameters: Option<(LayoutParameters, LayoutParameters)>,
    /// The layout applying would produce (its report says how many
    /// partition replicas move and the usable capacity per zone), or why it
    /// cannot be applied. `None` when nothing is staged.
    pub outcome: Option<Result<AssignmentReport, LayoutError>>,
}

/// The storage nodes of one partition in one kept layout version. During a
/// transition a write must reach a write quorum of every such set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSet {
    pub version: u64,
    /// The version's `replication_factor` nodes for the partition.
    pub nodes: Vec<NodeId>,
}

/// One kept version, as `layout history` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionStatus {
    pub version: u64,
    pub hash: Hash,
    pub storage_nodes: usize,
    pub gateways: usize,
    pub partition_size: u64,
    /// `current`, `read` (the newest fully synced version, reads go here;
    /// may also be current) or `draining` (still written, not read).
    pub status: &'static str,
}

impl LayoutHistory {
    /// A new cluster's history: the empty version 0 and nothing staged.
    pub fn new(replication_factor: usize) -> Self {
        LayoutHistory {
            replication_factor,
            versions: vec![LayoutVersion::initial(replication_factor)],
            retired_below: 0,
            ack: Tracker::default(),
            sync: Tracker::default(),
            sync_ack: Tracker::default(),
            staging: Staging::default(),
            conflicts: BTreeMap::new(),
        }
    }

    /// The newest version.
    pub fn current(&self) -> &LayoutVersion {
        self.versions
            .last()
            .expect("a history always has a version")
    }

    /// The kept version numbered `v`, if any.
    pub fn version(&self, v: u64) -> Option<&LayoutVersion> {
        self.versions.iter().find(|x| x.version == v)
    }

    /// Fails unless `ours` (this node's configured replication factor) is
    /// the cluster's: such a node must not join.
    pub fn check_replication_factor(&self, ours: usize) -> Result<(), LayoutError> {
        if ours != self.replication_factor {
            return Err(LayoutError::ReplicationFactorMismatch {
                ours,
                theirs: self.replication_factor,
            });
        }
        Ok(())
    }

    // ---- staging -------------------------------------------------------

    /// The roles the next version would have: the current roles with the
    /// staged changes applied.
    pub fn staged_roles(&self) -> BTreeMap<NodeId, NodeRole> {
        let mut roles = self.current().roles.clone();
        for (node, (_, role)) in &self.staging.roles {
            match role {
                Some(r) => roles.insert(*node, r.clone()),
                None => roles.remove(node),
            };
        }
        roles
    }

    /// The parameters the next version would have.
    fn staged_parameters(&self) -> LayoutParameters {
        self.staging
            .parameters
            .map(|(_, p)| p)
            .unwrap_or(self.current().parameters)
    }

    /// Stages a role for `node` (`layout assign`), written by node `me` at
    /// `now_msec`. The role is checked now so the operator hears at once.
    pub fn stage_role(
        &mut self,
        me: NodeId,
        now_msec: u64,
        node: NodeId,
        role: NodeRole,
    ) -> Result<(), LayoutError> {
        if role.zone.trim().is_empty() {
            return Err(LayoutError::EmptyZone { node: node.short() });
        }
        if let Some(c) = role.capacity
            && c < MIN_CAPACITY
        {
            return Err(LayoutError::CapacityTooSmall {
                node: node.short(),
                capacity: c,
                min: MIN_CAPACITY,
            });
        }
        let stamp = self.staging.next_stamp(me, now_msec);
        self.staging.set_role(stamp, node, Some(role));
        Ok(())
    }

    /// Stages the removal of `node`'s role (`layout remove`).
    pub fn stage_removal(
        &mut self,
        me: NodeId,
        now_msec: u64,
        node: NodeId,
    ) -> Result<(), LayoutError> {
        if !self.staged_roles().contains_key(&node) {
            return Err(LayoutError::NoRole(node.short()));
        }
        let stamp = self.staging.next_stamp(me, now_msec);
        self.staging.set_role(stamp, node, None);
        Ok(())
    }

    /// Stages new parameters (`layout config`).
    pub fn stage_parameters(
        &mut self,
        me: NodeId,
        now_msec: u64,
        parameters: LayoutParameters,
    ) -> Result<(), LayoutError> {
        if let ZoneRedundancy::AtLeast(n) = parameters.zone_redundancy {
            if n == 0 {
                return Err(LayoutError::ZeroRedundancy);
            }
            if n > self.replication_factor {
                return Err(LayoutError::RedundancyAboveRf {
                    asked: n,
                    rf: self.replication_factor,
                });
            }
        }
        let stamp = self.staging.next_stamp(me, now_msec);
        self.staging.set_parameters(stamp, parameters);
        Ok(())
    }

    /// Drops the staged changes (`layout revert`). Returns whether there
    /// were any.
    pub fn revert(&mut self, me: NodeId, now_msec: u64) -> bool {
        let had = !self.staging.is_empty();
        let stamp = self.staging.next_stamp(me, now_msec);
        self.staging.clear(stamp);
        had
    }

    /// What `layout show` prints: the staged changes and the outcome of
    /// applying them (computed, not applied).
    pub fn show(&self) -> LayoutPreview {
        let current = self.current();
        let roles = self
            .staging
            .roles
            .iter()
            .map(|(node, (_, staged))| StagedRole {
                node: *node,
                current: current.roles.get(node).cloned(),
                staged: staged.clone(),
            })
            .collect();
        let parameters = self
            .staging
            .parameters
            .map(|(_, p)| (current.parameters, p));
        let outcome = self.next_version().map(|r| r.map(|(_, report)| report));
        LayoutPreview {
            current_version: current.version,
            roles,
            parameters,
            outcome,
        }
    }

    /// The version `apply` would add, `None` when the staged layout is the
    /// current one.
    fn next_version(&self) -> Option<Result<(LayoutVersion, AssignmentReport), LayoutError>> {
        let current = self.current();
        let roles = self.staged_roles();
        let parameters = self.staged_parameters();
        if roles == current.roles && parameters == current.parameters {
            return None;
        }
        Some(compute_assignment(
            current,
            current.version + 1,
            roles,
            parameters,
        ))
    }

    /// Makes the staged changes version `version` (`layout apply --version
    /// N`), which must be the current version + 1, and clears the staging.
    pub fn apply(
        &mut self,
        version: u64,
        me: NodeId,
        now_msec: u64,
    ) -> Result<AssignmentReport, LayoutError> {
        let current = self.current().version;
        if version != current + 1 {
            return Err(LayoutError::WrongVersion {
                asked: version,
                current,
            });
        }
        let (next, report) = self
            .next_version()
            .ok_or(LayoutError::NothingStaged(current))??;
        self.versions.push(next);
        let stamp = self.staging.next_stamp(me, now_msec);
        self.staging.clear(stamp);
        Ok(report)
    }

    // ---- merging -------------------------------------------------------

    /// Merges another node's history into this one (the CRDT join:
    /// commutative, associative, idempotent). Returns whether anything
    /// changed here. Fails, changing nothing, when the replication factors
    /// differ.
    pub fn merge(&mut self, other: &LayoutHistory) -> Result<bool, LayoutError> {
        if other.replication_factor != self.replication_factor {
            return Err(LayoutError::ReplicationFactorMismatch {
                ours: self.replication_factor,
                theirs: other.replication_factor,
            });
        }
        let before = self.clone();
        let bound = self.retired_below.max(other.retired_below);
        let mut by_number: BTreeMap<u64, LayoutVersion> =
            self.versions.drain(..).map(|v| (v.version, v)).collect();
        for theirs in &other.versions {
            match by_number.get_mut(&theirs.version) {
                None => {
                    by_number.insert(theirs.version, theirs.clone());
                }
                Some(mine) => {
                    let (hm, ht) = (mine.content_hash(), theirs.content_hash());
                    if hm != ht {
                        // The same number applied twice with different
                        // content: keep the larger hash everywhere, and
                        // record both so operators see it.
                        warn!(
                            version = theirs.version,
                            kept = %hm.max(ht),
                            discarded = %hm.min(ht),
                            "layout version applied twice with different content"
                        );
                        self.conflicts
                            .entry(theirs.version)
                            .or_default()
                            .extend([hm, ht]);
                        if ht > hm {
                            *mine = theirs.clone();
                        }
                    }
                }
            }
        }
        for (v, hashes) in &other.conflicts {
            self.conflicts
                .entry(*v)
                .or_default()
                .extend(hashes.iter().copied());
        }
        by_number.retain(|v, _| *v >= bound);
        self.conflicts.retain(|v, _| *v >= bound);
        self.versions = by_number.into_values().collect();
        self.retired_below = bound;
        self.ack.merge(&other.ack);
        self.sync.merge(&other.sync);
        self.sync_ack.merge(&other.sync_ack);
        self.staging.merge(&other.staging);
        Ok(*self != before)
    }

    // ---- progress and retirement ----------------------------------------

    /// Records that `node` coordinates its writes with version `v` and
    /// newer (its writes started under older versions have finished).
    pub fn ack_version(&mut self, node: NodeId, v: u64) -> bool {
        self.report(Which::Ack, node, v)
    }

    /// Records that storage node `node` holds all the data that the kept
    /// versions up to `v` assign it (its table and block sync for `v`
    /// finished; nodes offload data only once the versions needing it are
    /// retired). Refused (false) before every node acknowledged `v`: a sync
    /// started earlier could miss writes that skip `v`'s nodes.
    pub fn mark_synced(&mut self, node: NodeId, v: u64) -> bool {
        self.sync_may_start(v) && self.report(Which::Sync, node, v)
    }

    /// Records that `node` reads from version `v` on. Refused (false) until
    /// `v` is synced (see [`LayoutHistory::synced_version`]).
    pub fn ack_sync(&mut self, node: NodeId, v: u64) -> bool {
        self.synced_version() >= v && self.report(Which::SyncAck, node, v)
    }

    fn report(&mut self, which: Which, node: NodeId, v: u64) -> bool {
        let Some(hash) = self.version(v).map(|x| x.content_hash()) else {
            return false;
        };
        let tracker = match which {
            Which::Ack => &mut self.ack,
            Which::Sync => &mut self.sync,
            Which::SyncAck => &mut self.sync_ack,
        };
        let before = tracker.0.get(&node).copied();
        tracker.set(node, v, hash);
        tracker.0.get(&node).copied() != before
    }

    /// Marks `nodes` (dead ones, as the operator says) as having
    /// acknowledged and read-acknowledged version `v`, so retiring older
    /// versions does not wait for nodes that will never answer
    /// (`layout skip-dead-nodes`). With `allow_missing_data` they are also
    /// marked synced, so reads move to `v` even though the data they should
    /// have copied may be missing. Returns how many entries changed.
    pub fn skip_dead_nodes(
        &mut self,
        v: u64,
        nodes: &[NodeId],
        allow_missing_data: bool,
    ) -> Result<usize, LayoutError> {
        if self.version(v).is_none() {
            return Err(LayoutError::WrongVersion {
                asked: v,
                current: self.current().version,
            });
        }
        let mut changed = 0;
        for &n in nodes {
            changed += usize::from(self.ack_version(n, v));
            changed += usize::from(self.ack_sync(n, v));
            if allow_missing_data {
                changed += usize::from(self.mark_synced(n, v));
            }
        }
        Ok(changed)
    }

    /// Every node with a role (storage or gateway) in a kept version.
    pub fn all_nodes(&self) -> BTreeSet<NodeId> {
        self.versions
            .iter()
            .flat_map(|v| v.roles.keys().copied())
            .collect()
    }

    /// Every storage node of a kept version.
    pub fn storage_nodes(&self) -> BTreeSet<NodeId> {
        self.versions
            .iter()
            .flat_map(|v| v.node_ids.iter().copied())
            .collect()
    }

    /// A node's tracked version, counting a report made for content that
    /// lost a version conflict as a report for the version before.
    fn effective(&self, tracker: &Tracker, node: &NodeId, hashes: &BTreeMap<u64, Hash>) -> u64 {
        match tracker.0.get(node) {
            None => 0,
            Some((v, h)) => match hashes.get(v) {
                Some(kept) if kept != h => v.saturating_sub(1),
                _ => *v,
            },
        }
    }

    fn hashes(&self) -> BTreeMap<u64, Hash> {
        self.versions
            .iter()
            .map(|v| (v.version, v.content_hash()))
            .collect()
    }

    fn min_over(&self, tracker: &Tracker, nodes: &BTreeSet<NodeId>) -> u64 {
        let hashes = self.hashes();
        nodes
            .iter()
            .map(|n| self.effective(tracker, n, &hashes))
            .min()
            .unwrap_or(self.current().version)
    }

    /// The version every node has acknowledged; sync for a version may
    /// start once this reaches it.
    pub fn min_ack(&self) -> u64 {
        self.min_over(&self.ack, &self.all_nodes())
    }

    /// The newest kept version with an assignment whose storage nodes have
    /// all synced it (0 if none): reads may go to it.
    pub fn synced_version(&self) -> u64 {
        let hashes = self.hashes();
        self.versions
            .iter()
            .filter(|v| v.is_assigned())
            .rfind(|v| {
                v.node_ids
                    .iter()
                    .all(|n| self.effective(&self.sync, n, &hashes) >= v.version)
            })
            .map_or(0, |v| v.version)
    }

    /// The newest version every node reads from.
    pub fn min_sync_ack(&self) -> u64 {
        self.min_over(&self.sync_ack, &self.all_nodes())
    }

    /// Whether the data sync towards version `v` may start: every node
    /// acknowledged it, so no write can still miss `v`'s nodes.
    pub fn sync_may_start(&self, v: u64) -> bool {
        self.min_ack() >= v
    }

    /// The version reads go to: the [synced version](LayoutHistory::synced_version)
    /// if any, else the oldest kept version with an assignment (else the
    /// current version, which has none).
    pub fn read_version(&self) -> &LayoutVersion {
        let synced = self.synced_version();
        self.version(synced)
            .filter(|v| v.is_assigned())
            .or_else(|| self.versions.iter().find(|v| v.is_assigned()))
            .unwrap_or(self.current())
    }

    /// The nodes a read of partition `p` goes to.
    pub fn read_nodes_of_partition(&self, p: Partition) -> Vec<NodeId> {
        self.read_version().nodes_of_partition(p)
    }

    /// The write sets of partition `p`: one node set per kept version with
    /// an assignment, oldest first, each with the version it comes from (so
    /// a caller can say which version lacks a quorum). A write succeeds
    /// when it reaches a write quorum in every set.
    pub fn write_sets_of_partition(&self, p: Partition) -> Vec<WriteSet> {
        self.versions
            .iter()
            .filter(|v| v.is_assigned())
            .map(|v| WriteSet {
                version: v.version,
                nodes: v.nodes_of_partition(p),
            })
            .collect()
    }

    /// The union of the write sets of partition `p`, each node once,
    /// sorted: who a write is sent to.
    pub fn write_nodes_of_partition(&self, p: Partition) -> Vec<NodeId> {
        let mut all: Vec<NodeId> = self
            .write_sets_of_partition(p)
            .into_iter()
            .flat_map(|s| s.nodes)
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Retires the versions no node reads from any more (below the minimum
    /// sync-ack) and a leading version without assignment once a newer one
    /// exists. Returns whether any version was retired. A local update, to
    /// run after merges and tracker changes; never retires the current
    /// version.
    pub fn prune(&mut self) -> bool {
        let current = self.current().version;
        let mut bound = self.retired_below.max(self.min_sync_ack().min(current));
        while let Some(first) = self.versions.iter().find(|v| v.version >= bound)
            && !first.is_assigned()
            && first.version < current
        {
            bound = first.version + 1;
        }
        if bound == self.retired_below {
            return false;
        }
        self.retired_below = bound;
        let before = self.versions.len();
        self.versions.retain(|v| v.version >= bound);
        self.conflicts.retain(|v, _| *v >= bound);
        self.versions.len() != before
    }

    /// One line per kept version, oldest first (`layout history`).
    pub fn history(&self) -> Vec<VersionStatus> {
        let read = self.read_version().version;
        let current = self.current().version;
        self.versions
            .iter()
            .map(|v| VersionStatus {
                version: v.version,
                hash: v.content_hash(),
                storage_nodes: v.node_ids.len(),
                gateways: v.roles.len() - v.node_ids.len(),
                partition_size: v.partition_size,
                status: if v.version == current {
                    "current"
                } else if v.version == read {
                    "read"
                } else {
                    "draining"
                },
            })
            .collect()
    }

    /// The report of the current version (moves counted from the previous
    /// kept version), for `layout show`; `None` before the first apply.
    pub fn describe_current(&self) -> Option<AssignmentReport> {
        let current = self.current();
        let empty = LayoutVersion::initial(self.replication_factor);
        let prev = self.versions.iter().rev().nth(1).unwrap_or(&empty);
        describe(current, prev)
    }

    // ---- encoding ------------------------------------------------------

    /// The MessagePack encoding (maps with field names, doc/layout.md).
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("a layout history always encodes")
    }

    /// Decodes and checks a history (from disk or from a peer).
    pub fn decode(bytes: &[u8]) -> Result<Self, LayoutError> {
        let h: LayoutHistory =
            rmp_serde::from_slice(bytes).map_err(|e| LayoutError::Encoding(e.to_string()))?;
        h.check()?;
        Ok(h)
    }

    /// Checks the invariants a decoder cannot.
    pub fn check(&self) -> Result<(), LayoutError> {
        let bad = |m: &str| Err(LayoutError::Encoding(m.to_owned()));
        if self.versions.is_empty() {
            return bad("a layout history needs at least one version");
        }
        for w in self.versions.windows(2) {
            if w[1].version != w[0].version + 1 {
                return bad("layout versions are not consecutive");
            }
        }
        // A node's history always starts at its bound (new: 0 and 0; prune
        // and merge keep the versions from the bound on), and merges rely
        // on it: a history starting above its bound would leave a gap in
        // the versions of the node that merges it.
        if self.versions[0].version != self.retired_below {
            return bad("the oldest layout version is not the retirement bound");
        }
        for v in &self.versions {
            if v.replication_factor != self.replication_factor {
                return bad("a layout version has another replication factor");
            }
            v.check()?;
        }
        Ok(())
    }
}

enum Which {
    Ack,
    Sync,
    SyncAck,
}
