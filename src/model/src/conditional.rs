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

use crate::condition::{WriteCondition, stamped};
use crate::object::{ObjectRow, ObjectTable};
use crate::rows::Rows;
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
                locks: Arc::new((0..STRIPES).map(|_| Mutex::new(())).collect()),
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
        let to = self.coordinator(part)?;
        let msg = PublishIf {
            bucket: part.to_vec(),
            key: key.to_owned(),
            row,
            if_none_match_any: cond.if_none_match_any,
            if_match: cond.if_match.clone(),
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

/// The coordinator's side: a lock per key stripe, then read, check, write.
struct Coordinator {
    objects: Rows<ObjectTable>,
    locks: Arc<Vec<Mutex<()>>>,
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
        let mut id = m.bucket.clone();
        id.extend_from_slice(m.key.as_bytes());
        let stripe = Hash::of(&id).as_bytes()[0] as usize % STRIPES;
        let _held = self.locks[stripe].lock().await;
        let cond = WriteCondition {
            if_none_match_any: m.if_none_match_any,
            if_match: m.if_match,
        };
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
