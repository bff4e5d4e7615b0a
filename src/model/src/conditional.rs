//! Conditional writes in a cluster (`If-None-Match: *`, `If-Match`): one
//! coordinator per bucket partition checks and writes them one at a time.
//!
//! Last-writer-wins cannot decide "only if absent" between two writers on
//! two nodes: both read "absent" and both write. So a conditional publish
//! is sent, on `hangar/object/publish_if` ([`PublishIf`] → [`PublishIfReply`]),
//! to the coordinator of the bucket's partition: the first node, by id, of
//! the partition's nodes (newest synced layout version) that the failure
//! detector reports up. The coordinator holds a lock for the key while it
//! reads the current row (read quorum), checks the condition, and writes
//! (write quorum), so of concurrent conditional writes of one key through
//! any nodes, exactly one `If-None-Match: *` succeeds and the others get
//! `412`. Unconditional writes stay leaderless.
//!
//! What it does not promise (a consensus round would): while nodes
//! disagree on who is up (a few ping intervals after a failure), two
//! coordinators may act at once; an unconditional write may land between
//! the coordinator's read and its write, as it may on S3.

use std::sync::Arc;

use async_trait::async_trait;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, Request, Response};
use hangar_util::{Hash, NodeId};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::bucket::Versioning;
use crate::condition::{WriteCondition, stamped};
use crate::object::{ObjectRow, ObjectTable};
use crate::rows::Rows;
use crate::versioning::VersionRef;
use crate::{ModelError, Result};

/// The endpoint's path.
pub const PATH: &str = "hangar/object/publish_if";
/// Keys locked independently (a stripe per hash of bucket and key).
const STRIPES: usize = 256;
/// Calls the coordinator admits at once.
const QUEUE: usize = 1024;

/// A conditional publish, sent to the coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishIf {
    /// The bucket id (the object table's partition key).
    #[serde(with = "serde_bytes")]
    pub bucket: Vec<u8>,
    pub key: String,
    pub row: ObjectRow,
    pub if_none_match_any: bool,
    pub if_match: Option<String>,
    /// The bucket's versioning: `Off` writes the object row as before; else
    /// the row is a new version ([`crate::versioned`]). Absent from the
    /// calls of older binaries (`Off`).
    #[serde(default)]
    pub versioning: Versioning,
}

/// The coordinator's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum PublishIfReply {
    /// The row as written (with its timestamp); boxed, the other variant
    /// being empty (the same bytes on the wire).
    Published(Box<ObjectRow>),
    /// The condition does not hold on the current object.
    PreconditionFailed,
}

/// The conditional writes of one node: the endpoint, and the key locks it
/// serves with.
pub(crate) struct Conditional {
    cluster: hangar_cluster::Cluster,
    endpoint: Arc<Endpoint<PublishIf, PublishIfReply>>,
}

impl Conditional {
    /// Installs the coordinator's handler on the cluster's mesh.
    pub(crate) fn new(
        cluster: &hangar_cluster::Cluster,
        objects: Rows<ObjectTable>,
    ) -> Result<Conditional> {
        let endpoint = cluster
            .mesh()
            .endpoint(PATH)
            .map_err(hangar_table::TableError::from)?;
        endpoint.set_handler(
            Coordinator {
                objects,
                locks: KeyLocks::new(),
            },
            QUEUE,
        );
        Ok(Conditional {
            cluster: cluster.clone(),
            endpoint,
        })
    }

    /// Publishes `row` as object `key` of bucket `part` if `cond` holds,
    /// through the coordinator of the bucket's partition.
    pub(crate) async fn publish(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
    ) -> Result<ObjectRow> {
        self.call(part, key, row, cond, Versioning::Off).await
    }

    /// Like [`Conditional::publish`] in a versioned bucket: the row becomes
    /// a new version of `key` (see [`crate::versioned`]).
    pub(crate) async fn publish_version(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
        mode: Versioning,
    ) -> Result<(ObjectRow, VersionRef)> {
        let row = self.call(part, key, row, cond, mode).await?;
        let id = match mode {
            Versioning::Enabled => VersionRef::Id {
                ts: row.timestamp_msec,
                id: row.version,
            },
            Versioning::Suspended | Versioning::Off => VersionRef::Null,
        };
        Ok((row, id))
    }

    async fn call(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
        versioning: Versioning,
    ) -> Result<ObjectRow> {
        let to = self.coordinator(part)?;
        let msg = PublishIf {
            bucket: part.to_vec(),
            key: key.to_owned(),
            row,
            if_none_match_any: cond.if_none_match_any,
            if_match: cond.if_match.clone(),
            versioning,
        };
        let reply = self
            .endpoint
            .call(to, msg, CallOpts::default())
            .await
            .map_err(hangar_table::TableError::from)?;
        match reply {
            PublishIfReply::Published(row) => Ok(*row),
            PublishIfReply::PreconditionFailed => Err(ModelError::PreconditionFailed),
        }
    }

    /// The first live node, by id, of the bucket partition's read nodes.
    fn coordinator(&self, part: &[u8; 32]) -> Result<NodeId> {
        let p = <crate::object::ObjectTable as hangar_table::Schema>::layout_partition(part);
        let mut nodes = self.cluster.layout().history().read_nodes_of_partition(p);
        nodes.sort();
        nodes
            .into_iter()
            .find(|n| self.cluster.is_up(*n))
            .ok_or_else(|| {
                ModelError::Table(hangar_table::TableError::Replication(
                    hangar_table::replicated::ReplicationError::NoQuorum {
                        stored: 0,
                        nodes: 0,
                        needed: 1,
                        errors: vec!["no node of the bucket's partition is up".into()],
                    },
                ))
            })
    }
}

/// Locks of keys, a stripe per hash of bucket and key: one conditional
/// write of a key at a time.
pub(crate) struct KeyLocks(Vec<Mutex<()>>);

impl KeyLocks {
    pub(crate) fn new() -> KeyLocks {
        KeyLocks((0..STRIPES).map(|_| Mutex::new(())).collect())
    }

    /// Waits for and holds the lock of `key` of bucket `part`.
    pub(crate) async fn lock(&self, part: &[u8], key: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut id = part.to_vec();
        id.extend_from_slice(key.as_bytes());
        let stripe = Hash::of(&id).as_bytes()[0] as usize % STRIPES;
        self.0[stripe].lock().await
    }
}

/// The coordinator's side: a lock per key stripe, then read, check, write.
struct Coordinator {
    objects: Rows<ObjectTable>,
    locks: KeyLocks,
}

#[async_trait]
impl Handler<PublishIf, PublishIfReply> for Coordinator {
    async fn handle(
        &self,
        req: Request<PublishIf>,
    ) -> std::result::Result<Response<PublishIfReply>, HandlerError> {
        let m = req.msg;
        if m.bucket.len() != 32 || m.key.len() > 1024 {
            return Err(HandlerError::new("bad bucket id or key"));
        }
        let _held = self.locks.lock(&m.bucket, &m.key).await;
        let cond = WriteCondition {
            if_none_match_any: m.if_none_match_any,
            if_match: m.if_match,
        };
        if m.versioning != Versioning::Off {
            return match crate::versioned::write_version(
                &self.objects,
                &m.bucket,
                &m.key,
                m.row,
                &cond,
                m.versioning,
            )
            .await
            {
                Ok((row, _)) => Ok(Response::new(PublishIfReply::Published(Box::new(row)))),
                Err(ModelError::PreconditionFailed) => {
                    Ok(Response::new(PublishIfReply::PreconditionFailed))
                }
                Err(e) => Err(HandlerError::new(e)),
            };
        }
        let old = self
            .objects
            .get(&m.bucket, m.key.as_bytes())
            .await
            .map_err(HandlerError::new)?;
        if !cond.holds(old.as_ref().filter(|o| !o.is_deleted())) {
            return Ok(Response::new(PublishIfReply::PreconditionFailed));
        }
        let row = stamped(m.row, old.as_ref());
        self.objects
            .insert(&m.bucket, m.key.as_bytes(), row.clone())
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(PublishIfReply::Published(Box::new(row))))
    }
}
