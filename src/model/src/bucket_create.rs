//! Bucket creation: one coordinator per bucket name decides, one creation
//! of a name at a time.
//!
//! Two nodes that each read "no such bucket" and each write a row would
//! both answer 200, and the merge would keep one of the two rows. So a
//! creation is sent, on `hangar/bucket/create` ([`CreateBucket`] →
//! [`CreateReply`]), to the coordinator of its name: of the nodes with a
//! role in the current layout, the first by rendezvous hash of the name
//! (blake3 of name and node id, highest first) that the failure detector
//! reports up. The coordinator holds a lock for the name while it reads
//! the bucket row from a read quorum ([`Table::get_quorum`]), decides,
//! writes the bucket row and the creator's grant in one local transaction,
//! and replicates both (write quorum), then answers:
//!
//! - no live bucket: created, with id [`bucket_id`] of the row it replaces
//!   and `created_by` = the key;
//! - a live bucket created by the key, or that the key owns:
//!   [`ModelError::BucketAlreadyOwnedByYou`]. A creation whose replication
//!   failed (a 503) left the row on some nodes and perhaps not the grant:
//!   the retry replicates the row again and gives the grant, as the first
//!   attempt would have (stamped with the bucket's creation time, so a
//!   later revocation still wins);
//! - any other live bucket, or a live alias of that name
//!   ([`crate::alias`]): [`ModelError::BucketAlreadyExists`].
//!
//! The requester merges the rows of the answer into its own tables, so the
//! bucket is there for its next request. With no other node (one node, no
//! layout yet) the same steps run here. An unreachable coordinator (the
//! call fails, or the failure detector reports it down while it is asked)
//! is a [`ModelError::BucketCoordinator`] (S3: 503 with retry hints);
//! there is no fail-over to the next node while this node still reports
//! it up. A coordinator whose metadata disk stalls answers pings "unfit"
//! once a commit has waited `metadata_stall_timeout_msec`, so it is then
//! reported down and the next node takes over. A coordinator of an older binary, without the endpoint, leaves
//! the decision to the requester (as that binary does: not serialised).
//!
//! What it does not promise (a consensus round would): while nodes
//! disagree on the layout or on who is up, two coordinators may act at
//! once. Their creations from the same row get the same id (one bucket,
//! both answered 200); from different rows, the merge keeps one and
//! reports the other ([`crate::bucket::displaced`]).
//!
//! [`Table::get_quorum`]: hangar_table::Table::get_quorum

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, NetError, Request, Response};
use hangar_table::{Crdt, LwwMap, Replica};
use hangar_util::NodeId;
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::alias::{AliasChange, AliasReply};
use crate::bucket::{BucketRow, BucketTable, bucket_id, check_bucket_name};
use crate::key::{KeyRow, KeyTable, Permission, valid_key_id};
use crate::{Buckets, ModelError, Result};

/// The endpoint's path.
pub const PATH: &str = "hangar/bucket/create";
/// Calls the coordinator admits at once (more are refused as overloaded).
pub(crate) const QUEUE: usize = 256;
/// How long a requester waits for the coordinator: its quorum read, two
/// quorum writes and their lingers take well under a second when the nodes
/// are up.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a requester looks whether the coordinator it waits for is
/// still reported up.
const DOWN_POLL: Duration = Duration::from_millis(100);

/// A bucket creation, sent to the coordinator of its name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateBucket {
    pub name: String,
    /// The creating access key; `None` for the operator.
    pub owner: Option<String>,
}

/// What the coordinator decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Created,
    AlreadyOwnedByYou,
    AlreadyExists,
    /// The owner key does not exist (or was deleted).
    NoSuchKey,
    /// The name is refused (the coordinator's naming rules).
    InvalidName,
    /// The coordinator could not reach its quorums: `message` says why.
    Unavailable,
}

/// The coordinator's answer, with the rows as it holds them now, each as
/// stored (format byte and row, doc/table-rows.md): the requester decodes
/// them as it decodes any row from a peer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateReply {
    pub decision: Decision,
    pub bucket: Option<ByteBuf>,
    pub key: Option<ByteBuf>,
    pub message: String,
}

/// A reply's rows, decoded.
struct Rows {
    bucket: Option<BucketRow>,
    key: Option<KeyRow>,
}

impl CreateReply {
    fn rows(&self) -> Result<Rows> {
        Ok(Rows {
            bucket: self
                .bucket
                .as_ref()
                .map(|b| hangar_table::decode::<BucketTable>(b))
                .transpose()?,
            key: self
                .key
                .as_ref()
                .map(|k| hangar_table::decode::<KeyTable>(k))
                .transpose()?,
        })
    }
}

/// The creation endpoint of one node, and the layout it picks
/// coordinators from.
pub(crate) struct BucketCreation {
    cluster: hangar_cluster::Cluster,
    endpoint: Arc<Endpoint<CreateBucket, CreateReply>>,
    /// Alias changes, decided by the same coordinator under the same lock
    /// of the name (`crate::alias`).
    pub(crate) alias_endpoint: Arc<Endpoint<AliasChange, AliasReply>>,
}

impl BucketCreation {
    /// Registers the endpoint; [`BucketCreation::serve`] installs its
    /// handler once the model exists.
    pub(crate) fn new(cluster: &hangar_cluster::Cluster) -> Result<BucketCreation> {
        let endpoint = cluster
            .mesh()
            .endpoint(PATH)
            .map_err(hangar_table::TableError::from)?;
        let alias_endpoint = cluster
            .mesh()
            .endpoint(crate::alias::PATH)
            .map_err(hangar_table::TableError::from)?;
        Ok(BucketCreation {
            cluster: cluster.clone(),
            endpoint,
            alias_endpoint,
        })
    }

    /// Serves the creations this node coordinates, on `model`.
    pub(crate) fn serve(&self, model: Weak<Buckets>) {
        self.endpoint.set_handler(
            Coordinator {
                model: model.clone(),
            },
            QUEUE,
        );
        self.alias_endpoint
            .set_handler(crate::alias::AliasCoordinator { model }, QUEUE);
    }

    /// The coordinator of `name`; `None` when no other node has a role
    /// (one node, or no layout yet): this node decides alone.
    pub(crate) fn coordinator(&self, name: &str) -> Result<Option<NodeId>> {
        let history = self.cluster.layout().history();
        let me = self.cluster.id();
        let mut nodes: Vec<NodeId> = history.current().roles.keys().copied().collect();
        if nodes.iter().all(|n| *n == me) {
            return Ok(None);
        }
        nodes.sort_by_cached_key(|n| std::cmp::Reverse(rank(name, n)));
        nodes
            .into_iter()
            .find(|n| *n == me || self.cluster.is_up(*n))
            .map(Some)
            .ok_or_else(|| ModelError::BucketCoordinator {
                bucket: name.to_owned(),
                node: "(none)".into(),
                reason: "cannot be chosen: no node of the layout is up".into(),
                overloaded: false,
            })
    }
}

impl BucketCreation {
    /// The cluster the coordinators are chosen in.
    pub(crate) fn cluster(&self) -> &hangar_cluster::Cluster {
        &self.cluster
    }

    /// Calls coordinator `to` of `name` on `endpoint`. `None` when `to` runs
    /// a binary without the endpoint (a cluster being upgraded): the caller
    /// then decides itself, as such nodes do. A coordinator that stops
    /// answering pings fails the call then, not at the timeout: the
    /// client's retry goes to the next node.
    pub(crate) async fn call<M: hangar_net::Message, R: hangar_net::Message>(
        &self,
        endpoint: &Endpoint<M, R>,
        to: NodeId,
        name: &str,
        msg: M,
    ) -> Result<Option<R>> {
        let call = endpoint.call(to, msg, CallOpts::default().with_timeout(CALL_TIMEOUT));
        let reported_down = async {
            while self.cluster.is_up(to) {
                tokio::time::sleep(DOWN_POLL).await;
            }
        };
        let reply = tokio::select! {
            r = call => match r {
                Err(NetError::NoSuchEndpoint(path)) => {
                    tracing::warn!(
                        "bucket {name}: coordinator {} runs a binary without {path}; deciding here",
                        to.short()
                    );
                    return Ok(None);
                }
                r => r,
            },
            () = reported_down => {
                return Err(ModelError::BucketCoordinator {
                    bucket: name.to_owned(),
                    node: to.short(),
                    reason: "was reported down while it was asked".into(),
                    overloaded: false,
                });
            }
        }
        .map_err(|e| ModelError::BucketCoordinator {
            bucket: name.to_owned(),
            node: to.short(),
            overloaded: matches!(e, NetError::Overloaded(_)),
            reason: match e {
                NetError::Overloaded(_) => "is overloaded".to_owned(),
                e => format!("did not answer: {e}"),
            },
        })?;
        Ok(Some(reply))
    }
}

/// The rendezvous rank of node `n` for bucket `name`.
fn rank(name: &str, n: &NodeId) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("hangar 2026-12 bucket coordinator");
    h.update(&n.0);
    h.update(name.as_bytes());
    *h.finalize().as_bytes()
}

impl Buckets {
    /// Creates bucket `name`; `owner`, if given, is recorded as its creator
    /// and gets read, write and owner permissions on it. Through the name's
    /// coordinator in a cluster (see the module documentation).
    pub async fn create_bucket(&self, name: &str, owner: Option<&str>) -> Result<BucketRow> {
        check_bucket_name(name, self.allow_punycode())?;
        if let Some(id) = owner
            && !valid_key_id(id)
        {
            return Err(ModelError::NoSuchKey(id.to_owned()));
        }
        let c = self.bucket_creation();
        let (reply, rows) = match c.coordinator(name)? {
            Some(to) if to != c.cluster.id() => match self.ask(c, to, name, owner).await? {
                Some(answer) => answer,
                None => self.decide_creation(name, owner).await?,
            },
            _ => self.decide_creation(name, owner).await?,
        };
        match reply.decision {
            Decision::Created => Ok(rows.bucket.ok_or_else(|| bad_reply(name))?),
            Decision::AlreadyOwnedByYou => Err(ModelError::BucketAlreadyOwnedByYou(name.into())),
            Decision::AlreadyExists => Err(ModelError::BucketAlreadyExists(name.into())),
            Decision::NoSuchKey => Err(ModelError::NoSuchKey(owner.unwrap_or_default().into())),
            Decision::InvalidName => Err(ModelError::Invalid(reply.message)),
            Decision::Unavailable => Err(ModelError::BucketCoordinator {
                bucket: name.into(),
                node: "(this node)".into(),
                reason: format!("could not store it: {}", reply.message),
                overloaded: false,
            }),
        }
    }

    /// Sends the creation to coordinator `to`, and merges the rows of its
    /// answer here. `None` when `to` runs a binary without the endpoint
    /// (a cluster being upgraded): this node then decides, as such nodes do.
    async fn ask(
        &self,
        c: &BucketCreation,
        to: NodeId,
        name: &str,
        owner: Option<&str>,
    ) -> Result<Option<(CreateReply, Rows)>> {
        let msg = CreateBucket {
            name: name.to_owned(),
            owner: owner.map(str::to_owned),
        };
        let Some(reply) = c.call(&*c.endpoint, to, name, msg).await? else {
            return Ok(None);
        };
        if reply.decision == Decision::Unavailable {
            return Err(ModelError::BucketCoordinator {
                bucket: name.to_owned(),
                node: to.short(),
                reason: format!("could not store it: {}", reply.message),
                overloaded: false,
            });
        }
        let rows = reply.rows()?;
        if rows.bucket.as_ref().is_some_and(|b| b.name != name)
            || rows
                .key
                .as_ref()
                .is_some_and(|k| Some(k.access_key_id.as_str()) != owner)
        {
            return Err(bad_reply(name));
        }
        let (bucket, key) = (rows.bucket.clone(), rows.key.clone());
        self.db()
            .write(move |tx| {
                if let Some(b) = &bucket {
                    Replica::<BucketTable>::tx_insert(tx, b"", b.name.as_bytes(), b)?;
                }
                if let Some(k) = &key {
                    Replica::<KeyTable>::tx_insert(tx, b"", k.access_key_id.as_bytes(), k)?;
                }
                Ok::<_, ModelError>(())
            })
            .await?;
        Ok(Some((reply, rows)))
    }

    /// The coordinator's part: under the name's lock, a quorum read, the
    /// decision, the rows written here and replicated.
    async fn decide_creation(
        &self,
        name: &str,
        owner: Option<&str>,
    ) -> Result<(CreateReply, Rows)> {
        let _held = self.bucket_locks().lock(name).await;
        self.buckets_writable()?;
        self.bucket_table().get_quorum(b"", name.as_bytes()).await?;
        // An alias of the name, as every acknowledged alias change of it
        // went through this lock: a name is a bucket or an alias, never both.
        self.alias_table().get_quorum(b"", name.as_bytes()).await?;
        if let Some(k) = owner {
            let local = crate::alias::alias_sort_key(Some(k), name);
            self.alias_table().get_quorum(b"", local.as_bytes()).await?;
        }
        if let Some(id) = owner
            && self.keys().get(id).await?.is_none()
        {
            return Ok(reply(Decision::NoSuchKey, None, None));
        }
        let (name, owner) = (name.to_owned(), owner.map(str::to_owned));
        let (decision, bucket, key, changed) = self
            .db()
            .write(move |tx| {
                let now = now_msec();
                let old = Replica::<BucketTable>::tx_get(tx, b"", name.as_bytes())?;
                let key = match &owner {
                    Some(id) => Replica::<KeyTable>::tx_get(tx, b"", id.as_bytes())?
                        .filter(|k| !k.is_deleted()),
                    None => None,
                };
                if owner.is_some() && key.is_none() {
                    return Ok((Decision::NoSuchKey, old, None, false));
                }
                if old.as_ref().is_none_or(|b| b.deleted)
                    && crate::alias::tx_resolve(tx, &name)?.is_some()
                {
                    return Ok((Decision::AlreadyExists, None, None, false));
                }
                // The creator's own local alias of the name would hide the
                // new bucket from it.
                if let Some(k) = &owner
                    && crate::alias::tx_resolve(tx, &crate::alias::alias_sort_key(Some(k), &name))?
                        .is_some()
                {
                    return Ok((Decision::AlreadyExists, None, None, false));
                }
                let (decision, bucket, grant_ts) = match old {
                    Some(b) if !b.deleted => {
                        let mine = owner.as_deref().is_some_and(|o| b.created_by(o));
                        let owns = key.as_ref().is_some_and(|k| k.permission(&name).owner);
                        let decision = if mine || owns {
                            Decision::AlreadyOwnedByYou
                        } else {
                            Decision::AlreadyExists
                        };
                        // A creator whose grant is older than the bucket
                        // never got it (its creation stopped half-way).
                        let unfinished = mine
                            && key.as_ref().is_some_and(|k| {
                                k.buckets.entry(&name).is_none_or(|e| e.ts < b.created_msec)
                            });
                        let ts = unfinished.then_some(b.created_msec);
                        (decision, b, ts)
                    }
                    old => {
                        let mut row = BucketRow::new(
                            &name,
                            bucket_id(&name, old.as_ref().map(|o| o.id.as_str())),
                            now,
                            old.as_ref().map_or(now, |o| now.max(o.updated_msec + 1)),
                        );
                        row.created_by = owner.clone();
                        let row =
                            Replica::<BucketTable>::tx_insert(tx, b"", name.as_bytes(), &row)?;
                        let ts = owner.is_some().then_some(row.created_msec);
                        (Decision::Created, row, ts)
                    }
                };
                let key = match (key, grant_ts) {
                    (Some(mut k), Some(ts)) => {
                        let mut grant = LwwMap::default();
                        grant.update(
                            name.clone(),
                            ts,
                            Permission {
                                read: true,
                                write: true,
                                owner: true,
                            },
                        );
                        k.buckets.merge(&grant);
                        let id = k.access_key_id.clone();
                        Some((
                            Replica::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?,
                            true,
                        ))
                    }
                    (k, _) => k.map(|k| (k, false)),
                };
                let changed = key.as_ref().is_some_and(|(_, c)| *c);
                Ok::<_, ModelError>((decision, Some(bucket), key.map(|(k, _)| k), changed))
            })
            .await?;
        if matches!(decision, Decision::Created | Decision::AlreadyOwnedByYou)
            && let Some(b) = &bucket
        {
            // Again for a retry: the first attempt may have stored the row
            // on fewer nodes than a quorum.
            if let Err(e) = self.replicate_bucket(b).await {
                return Ok(unavailable(e));
            }
        }
        if changed
            && let Some(k) = &key
            && let Err(e) = self.keys().replicate(k).await
        {
            return Ok(unavailable(e));
        }
        Ok(reply(decision, bucket, key))
    }
}

/// A decision and its rows, with the reply that carries them.
fn reply(
    decision: Decision,
    bucket: Option<BucketRow>,
    key: Option<KeyRow>,
) -> (CreateReply, Rows) {
    let r = CreateReply {
        decision,
        bucket: bucket
            .as_ref()
            .map(|b| ByteBuf::from(hangar_table::encode::<BucketTable>(b))),
        key: key
            .as_ref()
            .map(|k| ByteBuf::from(hangar_table::encode::<KeyTable>(k))),
        message: String::new(),
    };
    (r, Rows { bucket, key })
}

/// The answer of a coordinator that could not reach its quorums.
fn unavailable(e: ModelError) -> (CreateReply, Rows) {
    let (mut r, rows) = reply(Decision::Unavailable, None, None);
    r.message = e.to_string();
    (r, rows)
}

fn bad_reply(name: &str) -> ModelError {
    ModelError::Corrupt(format!(
        "the coordinator of bucket {name} answered with rows of another bucket or key"
    ))
}

/// The coordinator's side of [`PATH`].
struct Coordinator {
    model: Weak<Buckets>,
}

#[async_trait]
impl Handler<CreateBucket, CreateReply> for Coordinator {
    async fn handle(
        &self,
        req: Request<CreateBucket>,
    ) -> std::result::Result<Response<CreateReply>, HandlerError> {
        let m = req.msg;
        let model = self
            .model
            .upgrade()
            .ok_or_else(|| HandlerError::new("the node is stopping"))?;
        if let Err(e) = check_bucket_name(&m.name, model.allow_punycode()) {
            let (mut r, _) = reply(Decision::InvalidName, None, None);
            r.message = e.to_string();
            return Ok(Response::new(r));
        }
        if m.owner.as_deref().is_some_and(|o| !valid_key_id(o)) {
            return Ok(Response::new(reply(Decision::NoSuchKey, None, None).0));
        }
        match model.decide_creation(&m.name, m.owner.as_deref()).await {
            Ok((r, _)) => Ok(Response::new(r)),
            Err(e @ ModelError::Table(_)) => Ok(Response::new(unavailable(e).0)),
            Err(e) => Err(HandlerError::new(e)),
        }
    }
}

/// Locks of bucket names and aliases, a stripe per hash of the name: one
/// decision about a name at a time on its coordinator.
pub(crate) struct NameLocks(Vec<tokio::sync::Mutex<()>>);

/// Names locked independently.
const STRIPES: usize = 256;

impl NameLocks {
    pub(crate) fn new() -> NameLocks {
        NameLocks((0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect())
    }

    /// Waits for and holds the lock of `name`.
    pub(crate) async fn lock(&self, name: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let stripe = hangar_util::Hash::of(name.as_bytes()).as_bytes()[0] as usize % STRIPES;
        self.0[stripe].lock().await
    }
}
