//! The local admin protocol between the `hangar` CLI and a running node.
//!
//! The node listens on a Unix socket, `<metadata_dir>/admin.sock`, created
//! with mode 0600: whoever can use it could read the node's files anyway.
//! One connection carries one request: a JSON [`Request`] on one line, then
//! one JSON [`Response`] line.

use serde::{Deserialize, Serialize};

/// File name of the admin socket inside `metadata_dir`.
pub const SOCKET_NAME: &str = "admin.sock";

/// A CLI request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    KeyCreate {
        name: String,
    },
    KeyImport {
        id: String,
        secret: String,
        name: String,
    },
    KeyList,
    KeyInfo {
        key: String,
    },
    KeyDelete {
        key: String,
    },
    KeySetCreateBucket {
        key: String,
        allow: bool,
    },
    BucketCreate {
        name: String,
    },
    BucketList,
    BucketInfo {
        name: String,
    },
    BucketDelete {
        name: String,
    },
    BucketPermission {
        bucket: String,
        key: String,
        read: bool,
        write: bool,
        owner: bool,
        /// true: grant the flags set; false: revoke them.
        allow: bool,
    },
    WorkerList,
    /// One worker's status and the settings it reads.
    WorkerInfo {
        name: String,
    },
    /// Changes a worker setting at runtime (`resync-chunks-in-flight`…).
    WorkerSet {
        setting: String,
        value: String,
    },
    /// Queue every block this node counts or stores for the resync worker.
    RepairBlocks,
    /// `start`, `pause`, `resume` or `cancel` the scrub.
    Scrub {
        command: String,
    },
    /// One anti-entropy pass of every sharded table, now.
    RepairTables,
    /// Empty the resync queue and its error list.
    ClearResyncQueue,
    /// Blocks whose last resync attempt failed.
    BlockListErrors,
    /// Make failed blocks (one, or all) due now.
    BlockRetryNow {
        hash: Option<String>,
    },
    /// What this node knows of one block.
    BlockInfo {
        hash: String,
    },
    /// The rows and Merkle digest of each replicated table on this node.
    TableStatus,
    /// This node's `<id>@<address>`.
    NodeId,
    /// Every known node and its state.
    Status,
    /// Connect to a peer given as `<id>@<host:port>`.
    NodeConnect {
        peer: String,
    },
    /// `layout assign`: fields left `None`/empty keep the staged role's.
    LayoutAssign {
        nodes: Vec<String>,
        zone: Option<String>,
        capacity: Option<u64>,
        gateway: bool,
        tags: Vec<String>,
    },
    LayoutRemove {
        node: String,
    },
    LayoutConfig {
        zone_redundancy: String,
    },
    LayoutShow,
    LayoutApply {
        version: u64,
    },
    LayoutRevert,
    LayoutHistory,
    LayoutSkipDeadNodes {
        version: u64,
        allow_missing_data: bool,
    },
}

/// The node's answer: a JSON value, or an error message for the operator.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Ok(serde_json::Value),
    Error(String),
}
