//! The error type of the layout: every way a layout request can be refused,
//! each with a message that says what is wrong and how to fix it.

/// Everything that can fail in `hangar_layout`. Serializable so that a node
/// can send a refusal to the CLI that asked (its `Display` is the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum LayoutError {
    #[error(
        "replication factor {rf} needs at least {rf} storage nodes, but the layout has {have}{}",
        list_suffix(.nodes)
    )]
    NotEnoughNodes {
        rf: usize,
        have: usize,
        nodes: Vec<String>,
    },
    #[error(
        "zone redundancy {asked} needs storage nodes in at least {asked} distinct zones, but they are in only {have}{} (stage nodes in more zones, or lower it with `layout config -r`)",
        list_suffix(.zones)
    )]
    NotEnoughZones {
        asked: usize,
        have: usize,
        zones: Vec<String>,
    },
    #[error("zone redundancy {asked} is larger than the replication factor {rf}")]
    RedundancyAboveRf { asked: usize, rf: usize },
    #[error("zone redundancy must be at least 1 (or `maximum`)")]
    ZeroRedundancy,
    #[error("replication factor must be at least 1")]
    ZeroReplicationFactor,
    #[error(
        "node {node} has capacity {capacity} bytes; a storage node needs at least {min} bytes (e.g. `-c 1T`), or make it a gateway (`-g`)"
    )]
    CapacityTooSmall {
        node: String,
        capacity: u64,
        min: u64,
    },
    #[error("node {node} has an empty zone name; give it one with `-z <zone>`")]
    EmptyZone { node: String },
    #[error("no known node id starts with {0:?} (`hangar status` lists the nodes)")]
    UnknownNode(String),
    #[error("node id prefix {prefix:?} is ambiguous: it matches {}", .matches.join(", "))]
    AmbiguousNode {
        prefix: String,
        matches: Vec<String>,
    },
    #[error("node {0} has no role in the layout (nothing to remove)")]
    NoRole(String),
    #[error("not a node id: {0:?} (expected 64 hex characters)")]
    BadNodeId(String),
    #[error("not a zone redundancy: {0:?} (expected a number >= 1 or `maximum`)")]
    BadRedundancy(String),
    #[error(
        "layout version {asked} cannot be applied: the current version is {current}, so the next one is {}",
        .current + 1
    )]
    WrongVersion { asked: u64, current: u64 },
    #[error(
        "no staged changes: the staged layout is the same as version {0} (stage some with `hangar layout assign`, `remove` or `config`)"
    )]
    NothingStaged(u64),
    #[error(
        "replication factor mismatch: this node is configured with {ours}, the cluster's layout uses {theirs}; a node cannot join a cluster with another replication factor"
    )]
    ReplicationFactorMismatch { ours: usize, theirs: usize },
    #[error(
        "the constraints cannot be met (internal: flow {got} of {need}); please report this with `layout show --json`"
    )]
    Infeasible { got: u64, need: u64 },
    #[error("layout encoding: {0}")]
    Encoding(String),
}

fn list_suffix(items: &[String]) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!(" ({})", items.join(", "))
    }
}

impl From<hangar_util::node_id::ParseNodeIdError> for LayoutError {
    fn from(e: hangar_util::node_id::ParseNodeIdError) -> Self {
        LayoutError::BadNodeId(e.0)
    }
}
