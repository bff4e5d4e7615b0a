//! Typed answers of the cluster layout operations (`hangar layout …`, and
//! the health part of `hangar status`): the node builds them
//! (`src/hangar/src/admin/layout.rs`), the CLI reads them
//! (`src/hangar/src/cli/layout.rs`), and both transports carry them as the
//! JSON objects doc/admin-api.yaml describes — the same bytes as the
//! untyped answers these replace. Node ids and hashes are hex strings.
//!
//! Every field has a default when read, so a CLI reads the answer of a
//! node that does not send a field yet (a cluster being upgraded).

use std::collections::BTreeMap;

use hangar_layout::{AssignmentReport, NodeId, NodeRole, StagedRole, ZoneRedundancy};
use hangar_util::config::ConsistencyMode;
use serde::{Deserialize, Serialize};

/// Content hashes of a version number applied more than once with
/// different content (version number as a string → hashes in hex); empty
/// when there is no conflict.
pub type Conflicts = BTreeMap<String, Vec<String>>;

/// One role staged by `layout assign`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleStaged {
    pub node: NodeId,
    pub role: NodeRole,
}

/// `layout assign`: the roles staged, and to how many peers the change
/// was pushed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutAssigned {
    pub staged: Vec<RoleStaged>,
    pub pushed_to_peers: usize,
}

/// `layout remove`: the node whose removal is staged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutRemoved {
    pub removed: NodeId,
    pub pushed_to_peers: usize,
}

/// `layout config -r`: the zone redundancy staged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutConfigured {
    pub zone_redundancy: ZoneRedundancy,
    pub pushed_to_peers: usize,
}

/// `layout apply --version N`: the version applied and what it moved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutApplied {
    pub version: u64,
    pub report: Option<AssignmentReport>,
    pub pushed_to_peers: usize,
}

/// `layout revert`: whether anything was staged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutReverted {
    pub reverted: bool,
    pub pushed_to_peers: usize,
}

/// What `layout skip-dead-nodes` did about the dead nodes' sync
/// acknowledgement of the version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncAck {
    /// Set: the version is synced.
    Set,
    /// Not yet: run the command again once the version is synced.
    #[default]
    WhenSynced,
    /// Cannot be: a dead node holds partitions of the version, which cannot
    /// sync without it (or `--allow-missing-data`).
    Blocked,
}

/// `layout skip-dead-nodes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeadNodesSkipped {
    /// The nodes of the kept versions that were down.
    pub nodes: Vec<NodeId>,
    /// How many tracker entries changed.
    pub changed: usize,
    pub sync_ack: SyncAck,
    pub pushed_to_peers: usize,
}

/// A node's role in the current version, for `layout show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutRole {
    pub id: NodeId,
    pub zone: String,
    /// Bytes; `None` for a gateway.
    pub capacity: Option<u64>,
    pub tags: Vec<String>,
    pub gateway: bool,
    /// How many partitions it holds a replica of.
    pub partitions: usize,
    pub partition_list: Vec<u8>,
}

/// The current version, for `layout show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CurrentLayout {
    pub version: u64,
    pub hash: String,
    pub zone_redundancy: ZoneRedundancy,
    pub partition_size: u64,
    pub roles: Vec<LayoutRole>,
    /// `None` before the first apply.
    pub report: Option<AssignmentReport>,
}

/// A staged change of the layout parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StagedParameters {
    pub current: ZoneRedundancy,
    pub staged: ZoneRedundancy,
}

/// The staged changes, for `layout show`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StagedChanges {
    pub roles: Vec<StagedRole>,
    pub parameters: Option<StagedParameters>,
}

/// What applying the staged changes would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApplyOutcome {
    /// The layout it would produce.
    Ok(AssignmentReport),
    /// Why it cannot be applied.
    Error(String),
}

/// `layout show`: the current version, the staged changes and what
/// applying them would do (`None`: nothing is staged).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutShow {
    pub replication_factor: usize,
    pub current: CurrentLayout,
    pub staged: StagedChanges,
    pub outcome: Option<ApplyOutcome>,
    pub conflicts: Conflicts,
}

/// One kept version, for `layout history`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VersionLine {
    pub version: u64,
    pub hash: String,
    pub storage_nodes: usize,
    pub gateways: usize,
    pub partition_size: u64,
    /// `current`, `read` or `draining` (`hangar_layout::VersionStatus`).
    pub status: String,
}

/// The versions one node reported, per tracker (absent: none yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeTrackers {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_ack: Option<u64>,
}

/// `layout history`: the kept versions and each node's progress through
/// them (node id in hex → trackers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutHistoryAnswer {
    pub current_version: u64,
    pub retired_below: u64,
    pub versions: Vec<VersionLine>,
    pub min_ack: u64,
    pub synced_version: u64,
    pub min_sync_ack: u64,
    pub trackers: BTreeMap<String, NodeTrackers>,
    pub conflicts: Conflicts,
}

/// The partitions counted by whether their write sets have a write quorum
/// of live nodes (`hangar status`, `/health`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterHealth {
    /// `healthy`, `degraded`, `unavailable` or `no layout applied`.
    pub status: String,
    pub consistency_mode: ConsistencyMode,
    pub read_quorum: usize,
    pub write_quorum: usize,
    pub partitions: usize,
    /// Every replica up.
    pub healthy: usize,
    /// A write quorum up in every set, not every replica.
    pub degraded: usize,
    /// Some set short of a write quorum.
    pub unavailable: usize,
}

/// `GET /health`: whether this node can serve reads and writes at its
/// consistency mode now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeHealth {
    /// `healthy`, `degraded` or `unavailable`.
    pub status: String,
    /// One line saying why.
    pub reason: String,
    /// This node's `<id>@<host:port>`.
    pub node: String,
    pub known_peers: usize,
    pub peers_up: usize,
    pub layout_version: u64,
    pub partitions: ClusterHealth,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi_check::{fields, required_in_doc};

    /// The hand-written OpenAPI document and the types agree field by field
    /// on the answers it names as schemas.
    #[test]
    fn the_openapi_document_names_every_field_of_the_layout_answers() {
        assert_eq!(fields(LayoutShow::default()), required_in_doc(&["Layout"]));
        assert_eq!(
            fields(LayoutHistoryAnswer::default()),
            required_in_doc(&["LayoutHistory"])
        );
        assert_eq!(
            fields(ClusterHealth::default()),
            required_in_doc(&["Health"])
        );
        assert_eq!(
            fields(NodeHealth::default()),
            required_in_doc(&["NodeHealth"])
        );
    }

    /// What nodes wrote before these types (`json!` answers) reads into
    /// them, and is written back the same.
    #[test]
    fn the_untyped_answers_read_and_write_back_unchanged() {
        let show = serde_json::json!({
            "replication_factor": 3,
            "current": {
                "version": 1, "hash": "ab", "zone_redundancy": "maximum",
                "partition_size": 10,
                "roles": [{"id": "00".repeat(32), "zone": "dc1", "capacity": null,
                    "tags": ["a"], "gateway": true, "partitions": 0, "partition_list": []}],
                "report": null,
            },
            "staged": {
                "roles": [{"node": "11".repeat(32), "current": null,
                    "staged": {"zone": "dc2", "capacity": 5, "tags": []}}],
                "parameters": {"current": "maximum", "staged": 2},
            },
            "outcome": {"error": "not enough zones"},
            "conflicts": {"3": ["cd", "ef"]},
        });
        let typed: LayoutShow = serde_json::from_value(show.clone()).unwrap();
        assert_eq!(
            typed.outcome,
            Some(ApplyOutcome::Error("not enough zones".into()))
        );
        assert_eq!(serde_json::to_value(&typed).unwrap(), show);
        let history = serde_json::json!({
            "current_version": 2, "retired_below": 1,
            "versions": [{"version": 2, "hash": "ab", "storage_nodes": 3, "gateways": 0,
                "partition_size": 7, "status": "current"}],
            "min_ack": 2, "synced_version": 1, "min_sync_ack": 1,
            "trackers": {"aa": {"ack": 2}, "bb": {"ack": 2, "sync": 1, "sync_ack": 1}},
            "conflicts": {},
        });
        let typed: LayoutHistoryAnswer = serde_json::from_value(history.clone()).unwrap();
        assert_eq!(typed.trackers["aa"].sync, None);
        assert_eq!(serde_json::to_value(&typed).unwrap(), history);
        let skipped = serde_json::json!({
            "nodes": ["22".repeat(32)], "changed": 4, "sync_ack": "when_synced",
            "pushed_to_peers": 2,
        });
        let typed: DeadNodesSkipped = serde_json::from_value(skipped.clone()).unwrap();
        assert_eq!(typed.sync_ack, SyncAck::WhenSynced);
        assert_eq!(serde_json::to_value(&typed).unwrap(), skipped);
    }
}
