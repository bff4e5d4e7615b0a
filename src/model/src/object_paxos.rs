//! Conditional writes in a cluster (`If-None-Match: *`, `If-Match`),
//! decided by a Paxos round per key over the nodes of the bucket's
//! partition ([`crate::paxos`]; doc/replication.md, "Conditional writes").
//!
//! Last-writer-wins cannot decide "only if absent" between two writers on
//! two nodes: both read "absent" and both write. Here the node that
//! receives a conditional write proposes it: of concurrent conditional
//! writes of one key through any nodes, one round at a time decides, each
//! reads what the rounds before it published, so exactly one
//! `If-None-Match: *` succeeds and the others get `412`, and of writers
//! that match the same ETag at most one succeeds. There is no coordinator:
//! any majority of the key's nodes decides, whoever the nodes believe up.
//!
//! What it does not order: an unconditional write of the same key is not a
//! round (it stays leaderless and pays nothing); it may land between a
//! round's read and its publish, and then the higher timestamp wins, as
//! between any two writes (S3 orders nothing there either).
//!
//! Older binaries sent a conditional write to a coordinator on
//! `hangar/object/publish_if` ([`PublishIf`]); this node still serves that
//! endpoint, by running the round itself.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use hangar_net::{Endpoint, Handler, HandlerError, Request, Response};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::bucket::Versioning;
use crate::object::{ObjectRow, ObjectTable};
use crate::paxos::link::{MeshLink, PaxosEndpoints};
use crate::paxos::messages::{PaxosKey, Proposal};
use crate::paxos::proposer::{self, Link, Register};
use crate::paxos::{Acceptor, BallotClock, Outcome};
use crate::version_keys::VersionRef;
use crate::write_condition::{WriteCondition, stamped};
use crate::{ModelError, Result};
use hangar_table::Table;

/// The endpoint older binaries send conditional writes to.
pub const PATH: &str = "hangar/object/publish_if";
/// Calls of older binaries admitted at once.
const QUEUE: usize = 256;

/// A conditional publish, as older binaries send it to a coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishIf {
    /// The bucket id (the object table's partition key).
    #[serde(with = "serde_bytes")]
    pub bucket: Vec<u8>,
    pub key: String,
    pub row: ObjectRow,
    pub if_none_match_any: bool,
    pub if_match: Option<String>,
    #[serde(default)]
    pub versioning: Versioning,
}

/// The answer to a [`PublishIf`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum PublishIfReply {
    /// The row as written (with its timestamp).
    Published(Box<ObjectRow>),
    /// The condition does not hold on the current object.
    PreconditionFailed,
}

/// The conditional writes of one node: its acceptor (served on the mesh)
/// and its proposer.
pub(crate) struct Conditional {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: hangar_cluster::Cluster,
    objects: Table<ObjectTable>,
    eps: Arc<PaxosEndpoints>,
    clock: BallotClock,
    _legacy: Arc<Endpoint<PublishIf, PublishIfReply>>,
}

impl Conditional {
    /// Installs this node's acceptor (its state in `db`) and the legacy
    /// endpoint on the cluster's mesh.
    pub(crate) fn new(
        cluster: &hangar_cluster::Cluster,
        objects: Table<ObjectTable>,
        db: hangar_db::Db,
    ) -> Result<Conditional> {
        let mesh = cluster.mesh();
        let eps =
            PaxosEndpoints::new(mesh, Acceptor::new(db)).map_err(hangar_table::TableError::from)?;
        let legacy = mesh
            .endpoint(PATH)
            .map_err(hangar_table::TableError::from)?;
        let inner = Arc::new(Inner {
            cluster: cluster.clone(),
            objects,
            eps,
            clock: BallotClock::new(),
            _legacy: legacy.clone(),
        });
        legacy.set_handler(
            Legacy {
                inner: Arc::downgrade(&inner),
            },
            QUEUE,
        );
        Ok(Conditional { inner })
    }

    /// Publishes `row` as object `key` of bucket `part` if `cond` holds.
    pub(crate) async fn publish(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
    ) -> Result<ObjectRow> {
        self.inner
            .decide(part, key, row, cond, Versioning::Off)
            .await
    }

    /// Like [`Conditional::publish`] in a versioned bucket: the row becomes
    /// a new version of `key` (see [`crate::version_ops`]).
    pub(crate) async fn publish_version(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
        mode: Versioning,
    ) -> Result<(ObjectRow, VersionRef)> {
        let row = self.inner.decide(part, key, row, cond, mode).await?;
        let id = match mode {
            Versioning::Enabled => VersionRef::Id {
                ts: row.timestamp_msec,
                id: row.version,
            },
            Versioning::Suspended | Versioning::Off => VersionRef::Null,
        };
        Ok((row, id))
    }
}

impl Conditional {
    /// Settles key `key` of bucket `part` ([`proposer::settle`]): after it,
    /// no conditional write of the key that was left undecided can be
    /// published any more.
    pub(crate) async fn settle(&self, part: &[u8; 32], key: &str) -> Result<()> {
        let inner = &self.inner;
        let p = <ObjectTable as hangar_table::Schema>::layout_partition(part);
        let nodes = inner.cluster.storage_nodes_of_partition(p);
        let _write = inner.cluster.track_write(&nodes);
        let link: Arc<dyn Link> = Arc::new(MeshLink::new(
            inner.cluster.clone(),
            inner.eps.clone(),
            nodes.sets.clone(),
        ));
        let register = Settling {
            objects: &inner.objects,
            part: *part,
        };
        proposer::settle(link, &inner.clock, &PaxosKey::new(part, key), &register).await
    }
}

/// The register of a settling round: it proposes nothing of its own.
struct Settling<'a> {
    objects: &'a Table<ObjectTable>,
    part: [u8; 32],
}

#[async_trait]
impl Register for Settling<'_> {
    async fn propose(&self) -> Result<Option<Proposal>> {
        Ok(None)
    }

    async fn publish(&self, value: &Proposal) -> Result<()> {
        if let Proposal::Publish { sort, row } = value {
            let row = hangar_table::decode::<ObjectTable>(row)?;
            self.objects.insert_one(&self.part, sort, row).await?;
        }
        Ok(())
    }

    async fn is_published(&self, _: &Proposal) -> Result<bool> {
        Ok(false)
    }

    async fn still_newest(&self, _: &Proposal) -> Result<bool> {
        Ok(false)
    }
}

impl Inner {
    async fn decide(
        &self,
        part: &[u8; 32],
        key: &str,
        row: ObjectRow,
        cond: &WriteCondition,
        versioning: Versioning,
    ) -> Result<ObjectRow> {
        let p = <ObjectTable as hangar_table::Schema>::layout_partition(part);
        let nodes = self.cluster.storage_nodes_of_partition(p);
        // Counted as a write of these versions: a node acknowledges a new
        // layout version only once the rounds begun under older ones ended.
        let _write = self.cluster.track_write(&nodes);
        let link: Arc<dyn Link> = Arc::new(MeshLink::new(
            self.cluster.clone(),
            self.eps.clone(),
            nodes.sets.clone(),
        ));
        let register = ObjectRegister {
            objects: &self.objects,
            part: *part,
            key,
            row,
            cond,
            versioning,
        };
        match proposer::run(link, &self.clock, &PaxosKey::new(part, key), &register).await? {
            Outcome::Published(v) => match v {
                Proposal::Publish { row, .. } => Ok(hangar_table::decode::<ObjectTable>(&row)?),
                Proposal::Nothing => Err(ModelError::Corrupt(
                    "a conditional write decided nothing as its own value".into(),
                )),
            },
            Outcome::PreconditionFailed => Err(ModelError::PreconditionFailed),
        }
    }
}

/// The object row of one key as a Paxos register.
struct ObjectRegister<'a> {
    objects: &'a Table<ObjectTable>,
    part: [u8; 32],
    key: &'a str,
    row: ObjectRow,
    cond: &'a WriteCondition,
    versioning: Versioning,
}

fn proposal(sort: Vec<u8>, row: &ObjectRow) -> Proposal {
    Proposal::Publish {
        sort: ByteBuf::from(sort),
        row: ByteBuf::from(hangar_table::encode::<ObjectTable>(row)),
    }
}

#[async_trait]
impl Register for ObjectRegister<'_> {
    async fn propose(&self) -> Result<Option<Proposal>> {
        if self.versioning != Versioning::Off {
            return Ok(crate::version_ops::plan_version(
                self.objects,
                &self.part,
                self.key,
                self.row.clone(),
                self.cond,
                self.versioning,
            )
            .await?
            .map(|(sort, row, _)| proposal(sort, &row)));
        }
        let old = self.objects.get(&self.part, self.key.as_bytes()).await?;
        if !self.cond.holds(old.as_ref().filter(|o| !o.is_deleted())) {
            return Ok(None);
        }
        let row = stamped(self.row.clone(), old.as_ref());
        Ok(Some(proposal(self.key.as_bytes().to_vec(), &row)))
    }

    async fn publish(&self, value: &Proposal) -> Result<()> {
        if let Proposal::Publish { sort, row } = value {
            let row = hangar_table::decode::<ObjectTable>(row)?;
            self.objects.insert_one(&self.part, sort, row).await?;
        }
        Ok(())
    }

    async fn is_published(&self, value: &Proposal) -> Result<bool> {
        let Proposal::Publish { sort, row } = value else {
            return Ok(false);
        };
        let ours = hangar_table::decode::<ObjectTable>(row)?;
        Ok(self
            .objects
            .get(&self.part, sort)
            .await?
            .is_some_and(|r| r.version == ours.version && !r.is_deleted()))
    }

    async fn still_newest(&self, value: &Proposal) -> Result<bool> {
        let Proposal::Publish { row, .. } = value else {
            return Ok(false);
        };
        let ours = hangar_table::decode::<ObjectTable>(row)?.timestamp_msec;
        let newest = if self.versioning != Versioning::Off {
            crate::version_ops::head_of(self.objects, &self.part, self.key)
                .await?
                .newest_ts()
        } else {
            self.objects
                .get(&self.part, self.key.as_bytes())
                .await?
                .map(|r| r.timestamp_msec)
        };
        Ok(newest.is_none_or(|t| t < ours))
    }
}

/// The endpoint of older binaries: the round is run here for them.
struct Legacy {
    inner: Weak<Inner>,
}

#[async_trait]
impl Handler<PublishIf, PublishIfReply> for Legacy {
    async fn handle(
        &self,
        req: Request<PublishIf>,
    ) -> std::result::Result<Response<PublishIfReply>, HandlerError> {
        let m = req.msg;
        let Some(inner) = self.inner.upgrade() else {
            return Err(HandlerError::new("shutting down"));
        };
        let part: [u8; 32] = m
            .bucket
            .as_slice()
            .try_into()
            .map_err(|_| HandlerError::new("bad bucket id"))?;
        if m.key.len() > crate::paxos::messages::MAX_OBJECT_KEY {
            return Err(HandlerError::new("object key too long"));
        }
        let cond = WriteCondition {
            if_none_match_any: m.if_none_match_any,
            if_match: m.if_match,
        };
        match inner
            .decide(&part, &m.key, m.row, &cond, m.versioning)
            .await
        {
            Ok(row) => Ok(Response::new(PublishIfReply::Published(Box::new(row)))),
            Err(ModelError::PreconditionFailed) => {
                Ok(Response::new(PublishIfReply::PreconditionFailed))
            }
            Err(e) => Err(HandlerError::new(e)),
        }
    }
}
