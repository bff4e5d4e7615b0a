//! [`Model`]: one node's data model, as services — keys, buckets, objects,
//! uploads, blocks — over the node's tables, and the operations that span
//! several of them (deleting a bucket, the lifecycle pass).

use std::sync::Arc;

use hangar_block::{BlockManager, ReplicatedBlocks};
use hangar_db::Db;
use hangar_table::fence::FenceOp;
use hangar_table::{Replica, Schema};
use hangar_util::time::now_msec;

use crate::blocks::Blocks;
use crate::bucket::BucketTable;
use crate::buckets::Buckets;
use crate::key::{KeyTable, Permission};
use crate::keys::Keys;
use crate::kms_keys::KmsKeys;
use crate::objects::Objects;
use crate::tables::Tables;
use crate::uploads::Uploads;
use crate::{ModelError, Result};
use hangar_table::Table;

/// The data model of one node.
pub struct Model {
    db: Db,
    /// The cluster this node belongs to (of one node, alone or laid out).
    cluster: hangar_cluster::Cluster,
    keys: Arc<Keys>,
    kms_keys: KmsKeys,
    buckets: Arc<Buckets>,
    objects: Arc<Objects>,
    uploads: Uploads,
    blocks: Arc<Blocks>,
    tables: Tables,
    notifications: crate::notification::Notifications,
}

/// How long a bucket deletion's fence refuses writes before it is sealed
/// (one round trip later) or, when the deletion died, expires. Short, for
/// the writers of a bucket whose deleting node died; safe however short,
/// since the seal looks for rows again.
const DELETE_FENCE_TTL_MSEC: u64 = 30 * 1000;

impl Model {
    /// The model of a node of `cluster` (a cluster of one node is one
    /// too): keys, buckets and bucket aliases replicated to every node,
    /// blocks stored on the nodes the layout assigns them (`replicated`,
    /// built on the same cluster, whose block reference table is one of the
    /// sharded tables); objects, versions and uploads on the nodes of their
    /// partition (doc/architecture.md).
    pub fn new(
        db: Db,
        blocks: Arc<BlockManager>,
        allow_punycode: bool,
        cluster: &hangar_cluster::Cluster,
        replicated: Arc<ReplicatedBlocks>,
    ) -> Result<Arc<Model>> {
        let keys = Arc::new(Keys::new(
            db.clone(),
            Table::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?,
        ));
        let kms_keys = KmsKeys::new(
            db.clone(),
            Table::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?,
        );
        let buckets = Buckets::start(db.clone(), keys.clone(), cluster, allow_punycode)?;
        let (object_rows, versions, version_parts, mpus, parts) = (
            rows(&db, cluster)?,
            rows(&db, cluster)?,
            rows(&db, cluster)?,
            rows(&db, cluster)?,
            rows(&db, cluster)?,
        );
        let tables = Tables {
            db: db.clone(),
            cluster: cluster.clone(),
            objects: object_rows.clone(),
            versions: versions.clone(),
            version_parts: version_parts.clone(),
            mpus: mpus.clone(),
            parts: parts.clone(),
            refs: replicated.ref_table().clone(),
            keys: keys.table().clone(),
            kms_keys: kms_keys.table().clone(),
            buckets: buckets.bucket_table().clone(),
            aliases: buckets.alias_table().clone(),
        };
        let blocks = Arc::new(Blocks::new(
            cluster.clone(),
            blocks,
            replicated,
            versions,
            version_parts,
        ));
        let objects = Arc::new(Objects::start(
            db.clone(),
            cluster,
            object_rows,
            blocks.clone(),
        )?);
        let uploads = Uploads::new(db.clone(), mpus, parts, objects.clone(), blocks.clone());
        let notifications = crate::notification::Notifications::start(db.clone(), cluster)?;
        Ok(Arc::new(Model {
            db,
            cluster: cluster.clone(),
            keys,
            kms_keys,
            buckets,
            objects,
            uploads,
            blocks,
            tables,
            notifications,
        }))
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The cluster this node belongs to.
    pub(crate) fn cluster(&self) -> &hangar_cluster::Cluster {
        &self.cluster
    }

    /// Whether this node belongs to a replicated cluster (replication
    /// factor above 1) and knows no layout yet: a node just started to join
    /// or replace a node of a cluster, or every node of one not laid out
    /// yet. Object rows and blocks then have no nodes to go to: the tables
    /// refuse them (`NoLayoutYet`, doc/replication.md §1) rather than keep
    /// them alone, where a write acknowledged could be lost with this node
    /// and a read would miss what the cluster holds; the S3 API refuses
    /// such operations up front until the layout arrives.
    pub fn awaiting_layout(&self) -> bool {
        self.cluster.awaits_layout()
    }

    /// The key service: access keys and their rights.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The KMS key service: the keys of SSE-KMS.
    pub fn kms_keys(&self) -> &KmsKeys {
        &self.kms_keys
    }

    /// The node's replicated tables, for their workers.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The bucket service: buckets, their names and configuration.
    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    /// The queue of bucket notification events on this node.
    pub fn notifications(&self) -> &crate::notification::Notifications {
        &self.notifications
    }

    /// The object service: objects, their versions and registers.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The upload service: multipart uploads and their parts.
    pub fn uploads(&self) -> &Uploads {
        &self.uploads
    }

    /// The block service: versions' block lists and the block store.
    pub fn blocks(&self) -> &Blocks {
        &self.blocks
    }

    /// Deletes an empty bucket (`name`: its name or an alias), every
    /// key's permissions on it and its aliases.
    ///
    /// A PUT racing the deletion must not be acknowledged into a bucket
    /// that is then deleted: the bucket's id is first closed to new objects
    /// on a write quorum of its partition's nodes, and only then checked
    /// empty there ([`hangar_table::fence`] says why that suffices). Found
    /// not empty, the fence is opened again (or expires) and the answer is
    /// `BucketNotEmpty`; otherwise it is made permanent before the bucket's
    /// tombstone is written, so that a writer that found the bucket before
    /// its deletion is refused however late it publishes.
    ///
    /// Multipart uploads in progress do not keep the bucket (as on S3's
    /// general purpose buckets): the bucket's id is closed to new uploads
    /// the same way, and once both fences are sealed every upload still in
    /// progress is aborted, its parts' blocks released, before the
    /// tombstone.
    pub async fn delete_bucket(&self, name: &str) -> Result<()> {
        self.buckets.buckets_writable()?;
        let bucket = self
            .buckets
            .get_bucket(name)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(name.to_owned()))?;
        let name = bucket.name.as_str();
        // A look without a fence first: deleting a bucket that plainly
        // holds objects does not disturb its writers.
        if self.objects.holds_any_version(&bucket).await? {
            return Err(ModelError::BucketNotEmpty(name.to_owned()));
        }
        let part = bucket.id_bytes();
        let token: u64 = rand::random();
        let close = FenceOp::Close {
            ttl_msec: DELETE_FENCE_TTL_MSEC,
        };
        // Objects closed and found none: uploads closed too (their rows
        // are not looked at: uploads in progress do not keep a bucket, as
        // on S3), then both sealed, objects first, so that nothing is
        // permanent before the bucket is known empty.
        let steps = [
            (close, true),
            (close, false),
            (FenceOp::Seal, true),
            (FenceOp::Seal, false),
        ];
        for (op, objects) in steps {
            let answer = if objects {
                self.objects.rows().fence(&part, token, op).await
            } else {
                self.uploads.mpu_rows().fence(&part, token, op).await
            };
            let found = match answer {
                Ok(a) => objects && a.live,
                Err(e) => {
                    self.open_fences(&part, token).await;
                    return Err(e.into());
                }
            };
            if found {
                self.open_fences(&part, token).await;
                return Err(ModelError::BucketNotEmpty(name.to_owned()));
            }
        }
        // No upload can start any more: end those in progress, before the
        // tombstone (a deletion interrupted here is finished by a retry;
        // once the bucket is gone no client can reach them).
        let ended = self.uploads.end_all(&bucket).await?;
        if ended > 0 {
            tracing::info!(bucket = %name, "deleting bucket {name}: {ended} multipart uploads in progress aborted");
        }
        let holders: Vec<String> = self
            .keys()
            .list()
            .await?
            .into_iter()
            .filter(|k| k.permission(name).any())
            .map(|k| k.access_key_id)
            .collect();
        let name = name.to_owned();
        let id = bucket.id.clone();
        let (deleted, keys) = self
            .db
            .write(move |tx| {
                let now = now_msec();
                // Re-read: the bucket may have been deleted and re-created
                // since it was checked, and that one is not ours to delete.
                let mut b = Replica::<BucketTable>::tx_get(tx, b"", name.as_bytes())?
                    .filter(|b| !b.deleted && b.id == id)
                    .ok_or_else(|| ModelError::NoSuchBucket(name.clone()))?;
                b.deleted = true;
                b.updated_msec = now.max(b.updated_msec + 1);
                let b = Replica::<BucketTable>::tx_insert(tx, b"", name.as_bytes(), &b)?;
                let mut keys = Vec::new();
                for id in holders {
                    if let Some(mut k) = Replica::<KeyTable>::tx_get(tx, b"", id.as_bytes())? {
                        k.buckets.update(name.clone(), now, Permission::default());
                        keys.push(Replica::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?);
                    }
                }
                Ok::<_, ModelError>((b, keys))
            })
            .await?;
        self.buckets.replicate_bucket(&deleted).await?;
        for k in &keys {
            self.keys().replicate(k).await?;
        }
        self.buckets.drop_aliases_of(&bucket).await
    }

    /// Removes fence `token` of a bucket's objects and uploads after a
    /// deletion gave up; where the removal does not arrive, the fence
    /// expires.
    async fn open_fences(&self, part: &[u8], token: u64) {
        if let Err(e) = self.objects.rows().fence(part, token, FenceOp::Open).await {
            tracing::warn!("opening the fence of a bucket whose deletion gave up: {e}");
        }
        if let Err(e) = self
            .uploads
            .mpu_rows()
            .fence(part, token, FenceOp::Open)
            .await
        {
            tracing::warn!("opening the upload fence of a bucket whose deletion gave up: {e}");
        }
    }
}

/// The rows of table `S`, on the nodes `cluster` places them.
fn rows<S: Schema>(db: &Db, cluster: &hangar_cluster::Cluster) -> Result<Table<S>> {
    Ok(Table::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?)
}
