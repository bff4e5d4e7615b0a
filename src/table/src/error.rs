//! The errors of the table layer.

use hangar_db::DbError;
use hangar_util::NodeId;

use crate::fence;

/// Errors of the table layer.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("row of table {tree} cannot be decoded: {message}")]
    Decode { tree: &'static str, message: String },
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    #[error(transparent)]
    Net(#[from] hangar_net::NetError),
    #[error("table {tree}: a peer sent a bad answer: {message}")]
    BadAnswer { tree: &'static str, message: String },
    /// A live row refused because its partition key is fenced
    /// ([`fence`]): on a writer's replica, or by enough replicas that the
    /// write lost its quorum.
    #[error("table {tree}: row refused: {}", fence::FENCED)]
    Fenced { tree: &'static str },
    #[error("table {tree} has no fences")]
    NotFenceable { tree: &'static str },
    #[error(
        "table {tree}: too many fences on one partition key (at most {})",
        fence::MAX_FENCES
    )]
    TooManyFences { tree: &'static str },
}

impl From<TableError> for DbError {
    fn from(e: TableError) -> DbError {
        match e {
            TableError::Db(d) => d,
            TableError::Decode { tree, message } => DbError::Engine {
                engine: tree,
                message,
            },
            e @ (TableError::Replication(_)
            | TableError::Net(_)
            | TableError::BadAnswer { .. }
            | TableError::Fenced { .. }
            | TableError::NotFenceable { .. }
            | TableError::TooManyFences { .. }) => DbError::Engine {
                engine: "table replication",
                message: e.to_string(),
            },
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, TableError>;

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
    /// ([`crate::Sharded`]): the quorum error (which quorum, in which layout
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
