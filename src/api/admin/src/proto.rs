//! The admin operations: one typed [`Request`] per thing an operator can
//! ask a node, the same whichever transport carries it (the local Unix
//! socket, `socket`, or the HTTP API, `http_api`), and the error an
//! operation answers with.
//!
//! On the socket, one connection carries one request: a JSON [`Request`]
//! on one line, then one JSON [`Response`] line. Over HTTP, each request is
//! a route (`routes`); its fields are the query string (`GET`) or the JSON
//! body (`POST`).

use serde::{Deserialize, Serialize};

/// An optional count given as a JSON number (a body, the socket) or as
/// text (a `GET` route's query string).
fn number_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(u64),
        Text(String),
    }
    match Option::<Given>::deserialize(d)? {
        None => Ok(None),
        Some(Given::Number(n)) => Ok(Some(n)),
        Some(Given::Text(t)) => t
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{t:?} is not a whole number"))),
    }
}

/// File name of the admin socket inside `metadata_dir`.
pub const SOCKET_NAME: &str = "admin.sock";

/// An operator request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    KeyCreate {
        #[serde(default)]
        name: String,
        /// When the key stops working, ms since the epoch; absent: never.
        #[serde(default)]
        expires_msec: Option<u64>,
    },
    KeyImport {
        id: String,
        secret: String,
        #[serde(default)]
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
    /// Sets when a key stops working (ms since the epoch), or with
    /// `expires_msec` absent that it never does.
    KeySetExpiry {
        key: String,
        #[serde(default)]
        expires_msec: Option<u64>,
    },
    /// Sets who a key is to S3 clients (the `Owner` of the buckets it
    /// creates): each field absent to leave it, empty to clear it (the
    /// canonical id derived from the key id, no display name).
    KeySetIdentity {
        key: String,
        #[serde(default)]
        canonical_id: Option<String>,
        #[serde(default)]
        display_name: Option<String>,
    },
    /// Creates an enabled SSE-KMS key with one version of material.
    KmsKeyCreate {
        #[serde(default)]
        description: String,
    },
    KmsKeyList,
    KmsKeyInfo {
        key: String,
    },
    /// Rotates (a new version of material for new data), disables or
    /// enables an SSE-KMS key.
    KmsKeyUpdate {
        key: String,
        #[serde(default)]
        rotate: bool,
        #[serde(default)]
        enabled: Option<bool>,
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
    /// Garage v2's AddBucketAlias (`hangar bucket alias`): makes the
    /// alias another name of the bucket ([`AliasChange`]).
    BucketAlias(AliasChange),
    /// Garage v2's RemoveBucketAlias (`hangar bucket unalias`): the same
    /// fields; the bucket stays.
    BucketUnalias(AliasChange),
    BucketPermission {
        bucket: String,
        key: String,
        #[serde(default)]
        read: bool,
        #[serde(default)]
        write: bool,
        #[serde(default)]
        owner: bool,
        /// true: grant the flags set; false: revoke them.
        allow: bool,
    },
    /// Makes a bucket a website (`allow`: with these documents) or no
    /// longer one (Garage's `bucket website --allow|--deny`).
    BucketWebsite {
        bucket: String,
        allow: bool,
        /// The index document suffix; `index.html` when absent.
        #[serde(default)]
        index_document: Option<String>,
        #[serde(default)]
        error_document: Option<String>,
    },
    /// Sets both quotas of a bucket (Garage's `bucket set-quotas`): a field
    /// absent (or null) is no limit.
    BucketSetQuotas {
        bucket: String,
        /// The most bytes the bucket may hold.
        #[serde(default)]
        max_size: Option<u64>,
        /// The most object versions the bucket may hold.
        #[serde(default)]
        max_objects: Option<u64>,
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
        #[serde(default)]
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
    /// Whether each partition has its quorums of live nodes.
    ClusterHealth,
    /// Per bucket its objects and bytes; per node its disks, table rows,
    /// block files, resync and scrub (`hangar stats`).
    ClusterStatistics,
    /// Every node's recent history (the console's plots): a point every
    /// few seconds over the last `window_secs` (default 900, at most 3600).
    ClusterHistory {
        #[serde(default, deserialize_with = "number_or_text")]
        window_secs: Option<u64>,
    },
    /// A bucket's objects and bytes over the last `window_secs` (default
    /// and most 3600), and its quotas.
    BucketHistory {
        name: String,
        #[serde(default, deserialize_with = "number_or_text")]
        window_secs: Option<u64>,
    },
    /// Connect to a peer given as `<id>@<host:port>`.
    NodeConnect {
        peer: String,
    },
    /// `layout assign`: fields left `None`/empty keep the staged role's.
    LayoutAssign {
        nodes: Vec<String>,
        #[serde(default)]
        zone: Option<String>,
        #[serde(default)]
        capacity: Option<u64>,
        #[serde(default)]
        gateway: bool,
        #[serde(default)]
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
        #[serde(default)]
        allow_missing_data: bool,
    },
    /// A signed admin token (`auth`): `scope` `read` (the `GET`
    /// operations) or `full`, valid until `expires_msec` (ms since the
    /// epoch; absent: never) on every node with this node's `admin_token`.
    AdminTokenCreate {
        scope: String,
        #[serde(default)]
        expires_msec: Option<u64>,
    },
    /// A presigned S3 URL for one request on a bucket, signed with one of
    /// the cluster's keys (the web console's object browser; the secret
    /// stays on the node). `action`: `get`, `put`, `delete` an object, or
    /// `list` the bucket.
    PresignObject {
        bucket: String,
        /// Access key id, id prefix or name.
        key: String,
        action: String,
        #[serde(default)]
        object: String,
        /// `list`: the ListObjectsV2 parameters.
        #[serde(default)]
        prefix: Option<String>,
        #[serde(default)]
        delimiter: Option<String>,
        #[serde(default)]
        continuation_token: Option<String>,
        /// `get`: answer with `Content-Disposition: attachment`.
        #[serde(default)]
        download: bool,
        /// 1 to 604800; 900 when not given.
        #[serde(default)]
        expires_secs: Option<u64>,
        /// `http(s)://host[:port]` the URL is for; the node's S3 address
        /// when not given.
        #[serde(default)]
        endpoint: Option<String>,
    },
}

/// A local alias as Garage's admin API v2 names it: a name of a bucket
/// that only one access key sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalAlias {
    pub access_key_id: String,
    pub alias: String,
}

/// The fields of AddBucketAlias and RemoveBucketAlias: the bucket
/// (`bucketId`: its id; or `bucket`: its name or an alias) and either
/// `globalAlias`, a name every client sees, or `localAlias`, a name only
/// one key sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliasChange {
    #[serde(default, rename = "bucketId", skip_serializing_if = "Option::is_none")]
    pub bucket_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    #[serde(
        default,
        rename = "globalAlias",
        skip_serializing_if = "Option::is_none"
    )]
    pub global_alias: Option<String>,
    #[serde(
        default,
        rename = "localAlias",
        skip_serializing_if = "Option::is_none"
    )]
    pub local_alias: Option<LocalAlias>,
}

/// The node's answer on the socket: a JSON value, or an error.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Ok(serde_json::Value),
    Error(AdminError),
}

/// What kind of failure an operation met; over HTTP, its status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The request is malformed or names something impossible (400).
    BadRequest,
    /// The key, bucket, worker… it names does not exist (404).
    NotFound,
    /// It contradicts what exists: a bucket that exists, one not empty (409).
    Conflict,
    /// Too few nodes are reachable now; retry later (503).
    Unavailable,
    /// The node failed (500); its log says more.
    Internal,
}

impl ErrorCode {
    /// The HTTP status an error of this kind is answered with.
    pub fn http_status(self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            ErrorCode::BadRequest => S::BAD_REQUEST,
            ErrorCode::NotFound => S::NOT_FOUND,
            ErrorCode::Conflict => S::CONFLICT,
            ErrorCode::Unavailable => S::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => S::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An operation's failure: its kind and a message for the operator that
/// says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct AdminError {
    pub code: ErrorCode,
    pub message: String,
}

impl AdminError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        AdminError {
            code,
            message: message.into(),
        }
    }

    pub fn bad(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// A failure of the node itself: logged here, since the operator only
    /// sees the message.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!("admin operation failed: {e}");
        Self::new(ErrorCode::Internal, e.to_string())
    }
}
