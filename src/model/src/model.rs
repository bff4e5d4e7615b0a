//! [`Model`]: the operations of the S3 and admin layers on one node's tables.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use hangar_block::BlockManager;
use hangar_db::Db;
use hangar_table::fence::FenceOp;
use hangar_table::{Schema, Table};
use hangar_util::Hash;
use hangar_util::time::now_msec;
use tokio::sync::Notify;

use futures::StreamExt;
use hangar_block::ReplicatedBlocks;

use crate::block_list::{BlockEntry, VersionTable};
use crate::bucket::{BucketRow, BucketTable, Versioning};
use crate::buckets::Buckets;
use crate::key::{KeyTable, Permission};
use crate::keys::Keys;
use crate::multipart::{MpuTable, PartTable};
use crate::object::{ObjectRow, ObjectTable};
use crate::object_paxos::Conditional;
use crate::queues::{UploadOf, end_upload_record, queue_version_gc, record_upload};
use crate::rows::Rows;
use crate::tables::Tables;
use crate::usage::{Usage, UsageRequest};
use crate::write_condition::{WriteCondition, stamped};
use crate::{ModelError, Result, VersionId};
use hangar_table::full_table::FullTable;
use hangar_table::sharded::ShardedTable;

/// The data model of one node.
pub struct Model {
    db: Db,
    /// This node's block files and references.
    blocks: Arc<BlockManager>,
    /// The cluster this node belongs to (of one node, alone or laid out).
    cluster: hangar_cluster::Cluster,
    /// The cluster's blocks, on the nodes the layout assigns them.
    replicated: Arc<ReplicatedBlocks>,
    keys: Arc<Keys>,
    buckets: Arc<Buckets>,
    objects: Rows<ObjectTable>,
    /// Conditional writes: a Paxos round per key.
    conditional: Conditional,
    versions: Rows<VersionTable>,
    mpus: Rows<MpuTable>,
    parts: Rows<PartTable>,
    gc_wakeup: Notify,
    /// Asks the nodes of a bucket's partition for its usage counters.
    usage: Arc<hangar_net::Endpoint<UsageRequest, Usage>>,
    tables: Tables,
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
        let objects = rows(&db, cluster)?;
        let conditional = Conditional::new(cluster, objects.clone(), db.clone())?;
        let keys = Arc::new(Keys::new(
            db.clone(),
            FullTable::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?,
        ));
        let buckets = Buckets::start(db.clone(), keys.clone(), cluster, allow_punycode)?;
        let usage = cluster
            .mesh()
            .endpoint(crate::usage::PATH)
            .map_err(hangar_table::TableError::from)?;
        usage.set_handler(
            crate::usage::UsageHandler { db: db.clone() },
            crate::usage::QUEUE,
        );
        let (versions, mpus, parts) = (
            rows(&db, cluster)?,
            rows(&db, cluster)?,
            rows(&db, cluster)?,
        );
        let tables = Tables {
            db: db.clone(),
            cluster: cluster.clone(),
            objects: objects.clone(),
            versions: versions.clone(),
            mpus: mpus.clone(),
            parts: parts.clone(),
            refs: replicated.ref_table().clone(),
            keys: keys.table().clone(),
            buckets: buckets.bucket_table().clone(),
            aliases: buckets.alias_table().clone(),
        };
        let model = Arc::new(Model {
            objects,
            conditional,
            versions,
            mpus,
            parts,
            tables,
            cluster: cluster.clone(),
            replicated,
            keys,
            buckets,
            db,
            blocks,
            gc_wakeup: Notify::new(),
            usage,
        });
        Ok(model)
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn blocks(&self) -> &Arc<BlockManager> {
        &self.blocks
    }

    /// Whether a block put of this node failed for overload within the
    /// last `window`.
    pub fn block_writes_overloaded_within(&self, window: std::time::Duration) -> bool {
        self.replicated.overloaded_within(window)
    }

    pub(crate) fn object_rows(&self) -> &Rows<ObjectTable> {
        &self.objects
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

    pub(crate) fn conditional(&self) -> &Conditional {
        &self.conditional
    }

    pub(crate) fn version_rows(&self) -> &Rows<VersionTable> {
        &self.versions
    }

    pub(crate) fn mpu_rows(&self) -> &Rows<MpuTable> {
        &self.mpus
    }

    pub(crate) fn part_rows(&self) -> &Rows<PartTable> {
        &self.parts
    }

    pub(crate) fn gc_wakeup(&self) -> &Notify {
        &self.gc_wakeup
    }

    /// Asks the version collector to run now.
    pub fn wake_gc(&self) {
        self.gc_wakeup.notify_one();
    }

    /// The key service: access keys and their rights.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The node's replicated tables, for their workers.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The bucket service: buckets, their names and configuration.
    pub fn buckets(&self) -> &Buckets {
        &self.buckets
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
        if self.holds_any_version(&bucket).await? {
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
                self.objects.fence(&part, token, op).await
            } else {
                self.mpus.fence(&part, token, op).await
            };
            let found = match answer {
                Ok(a) => objects && a.live,
                Err(e) => {
                    self.open_fences(&part, token).await;
                    return Err(e);
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
        let ended = self.end_all_multipart(&bucket).await?;
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
                let mut b = Table::<BucketTable>::tx_get(tx, b"", name.as_bytes())?
                    .filter(|b| !b.deleted && b.id == id)
                    .ok_or_else(|| ModelError::NoSuchBucket(name.clone()))?;
                b.deleted = true;
                b.updated_msec = now.max(b.updated_msec + 1);
                let b = Table::<BucketTable>::tx_insert(tx, b"", name.as_bytes(), &b)?;
                let mut keys = Vec::new();
                for id in holders {
                    if let Some(mut k) = Table::<KeyTable>::tx_get(tx, b"", id.as_bytes())? {
                        k.buckets.update(name.clone(), now, Permission::default());
                        keys.push(Table::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?);
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
        if let Err(e) = self.objects.fence(part, token, FenceOp::Open).await {
            tracing::warn!("opening the fence of a bucket whose deletion gave up: {e}");
        }
        if let Err(e) = self.mpus.fence(part, token, FenceOp::Open).await {
            tracing::warn!("opening the upload fence of a bucket whose deletion gave up: {e}");
        }
    }

    /// The object versions a bucket stores and their bytes
    /// ([`crate::usage`]): the largest of each counter among a read quorum
    /// of the nodes of the bucket's partition: one read, whatever the
    /// bucket holds.
    pub async fn bucket_usage(&self, bucket: &BucketRow) -> Result<Usage> {
        let id = bucket.id_bytes();
        let (ep, cluster) = (&self.usage, &self.cluster);
        let p = ObjectTable::layout_partition(&id);
        let nodes = cluster.read_nodes_of_partition(p);
        if nodes.is_empty() {
            return Err(hangar_table::TableError::Replication(
                hangar_table::full_table::ReplicationError::NoLayoutYet {
                    tree: ObjectTable::TREE,
                    replication_factor: cluster.replication_factor(),
                },
            )
            .into());
        }
        let quorum = cluster.quorums().read.min(nodes.len()).max(1);
        let answers = hangar_cluster::call_quorum(
            cluster.mesh(),
            ep,
            &nodes,
            UsageRequest {
                bucket: id.to_vec(),
            },
            quorum,
            hangar_net::CallOpts::default(),
        )
        .await
        .map_err(|e| {
            let down = nodes
                .iter()
                .copied()
                .filter(|n| !cluster.is_up(*n))
                .collect();
            hangar_table::TableError::Replication(
                hangar_table::full_table::ReplicationError::Quorum {
                    op: "usage",
                    tree: ObjectTable::TREE,
                    partition: p,
                    down,
                    source: Box::new(e),
                },
            )
        })?;
        Ok(answers
            .into_iter()
            .map(|(_, u)| u)
            .fold(Usage::default(), Usage::max))
    }

    // ---- objects ----

    /// The live object `key` of `bucket` (a tombstone reads as none): its
    /// latest version, unless that is a delete marker.
    pub async fn get_object(&self, bucket: &BucketRow, key: &str) -> Result<Option<ObjectRow>> {
        Ok(self
            .latest_version(bucket, key)
            .await?
            .map(|f| f.row)
            .filter(|o| !o.is_delete_marker()))
    }

    /// Up to `limit` live objects of `bucket` after `start`, in key order;
    /// fewer only when there are no more.
    pub async fn list_objects(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, ObjectRow)>> {
        if bucket.versioning() != Versioning::Off {
            return self.list_latest(bucket, start, limit).await;
        }
        self.objects
            .range_filtered(&bucket.id_bytes(), start, limit, |o| !o.is_deleted())
            .await
    }

    /// Whether `bucket` holds any object, version or delete marker (a
    /// bucket must hold none to be deleted, as in S3).
    async fn holds_any_version(&self, bucket: &BucketRow) -> Result<bool> {
        Ok(!self
            .objects
            .range_filtered(&bucket.id_bytes(), Bound::Unbounded, 1, |o| !o.is_deleted())
            .await?
            .is_empty())
    }

    /// Registers an upload in progress of `of`, before its first block is
    /// stored.
    pub async fn begin_upload(&self, version: VersionId, of: &UploadOf) -> Result<()> {
        record_upload(&self.db, version, of).await
    }

    /// Stores block number `index` of `version`, which starts at byte
    /// `offset` of the version, named by its blake3 hash (computed here, off
    /// the async threads).
    pub async fn store_block(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        data: Bytes,
    ) -> Result<()> {
        let plain_len = data.len() as u64;
        self.store_block_as(version, index, offset, plain_len, data, true)
            .await
    }

    /// Stores block `index` of an SSE-C version: `sealed` is the block as
    /// [`crate::sse_c::SseC::seal`] made it, named by its own blake3 hash
    /// (so equal plaintexts under other keys are other blocks) and never
    /// compressed; the entry records `plain_len`, the plaintext's length,
    /// which offsets and ranges count in.
    pub async fn store_sealed_block(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        plain_len: u64,
        sealed: Bytes,
    ) -> Result<()> {
        self.store_block_as(version, index, offset, plain_len, sealed, false)
            .await
    }

    async fn store_block_as(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        plain_len: u64,
        data: Bytes,
        compress: bool,
    ) -> Result<()> {
        let (hash, data) = tokio::task::spawn_blocking(move || (Hash::of(&data), data))
            .await
            .map_err(|e| ModelError::Invalid(format!("hashing task failed: {e}")))?;
        let entry = BlockEntry {
            hash,
            size: plain_len,
            deleted: false,
            offset,
        };
        // The entry first: an entry whose block never got its reference is
        // harmless to the collector (dropping a reference that is not there
        // does nothing), a reference no entry names would never be dropped.
        self.versions
            .insert(&version, &index.to_be_bytes(), entry)
            .await?;
        if compress {
            self.replicated.put(hash, data, version).await?;
        } else {
            self.replicated
                .put_incompressible(hash, data, version)
                .await?;
        }
        Ok(())
    }

    /// The plain content of block `hash`: from this node's disk, or from
    /// the nodes that hold it (the closest first, hedged).
    pub async fn read_block(&self, hash: Hash) -> Result<Bytes> {
        Ok(self.replicated.get(hash).await?)
    }

    /// Adds `version`'s reference to block `hash` if the block is still
    /// stored; returns whether it was (a copy shares its source's blocks).
    pub(crate) async fn add_block_ref(&self, hash: Hash, version: VersionId) -> Result<bool> {
        Ok(self.replicated.add_ref(hash, version).await?)
    }

    /// Drops `version`'s references to `hashes`, wherever the blocks are.
    pub(crate) async fn drop_block_refs(
        &self,
        version: VersionId,
        hashes: Vec<Hash>,
    ) -> Result<()> {
        // The references this node holds of partitions it no longer stores
        // (a lone node's, written before a layout gave them to other
        // nodes): no unref below reaches them. Those of the partitions it
        // stores are dropped by the unref below, once.
        let moved: Vec<Hash> = hashes
            .iter()
            .filter(|h| {
                !self
                    .cluster
                    .stores_partition(hangar_layout::partition_of(h))
            })
            .copied()
            .collect();
        if !moved.is_empty() {
            self.blocks.unref_held(moved, version).await?;
        }
        let unrefs = futures::stream::iter(
            hashes
                .into_iter()
                .map(|h| async move { self.replicated.unref(h, version).await }),
        )
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
        for r in unrefs {
            r?;
        }
        Ok(())
    }

    /// Makes `row` the current version of `key`; the version it replaces is
    /// queued for collection (by the object table's hook). Returns the row
    /// as published: its timestamp is taken now, past the stored row's.
    pub async fn publish(
        &self,
        bucket: &BucketRow,
        key: &str,
        row: ObjectRow,
    ) -> Result<ObjectRow> {
        self.publish_if(bucket, key, row, WriteCondition::default())
            .await
    }

    /// Like [`Model::publish`], only if `cond` holds on the current object;
    /// otherwise [`ModelError::PreconditionFailed`] is returned and the
    /// caller releases the version. A condition is decided by a Paxos round
    /// over the nodes of the key's partition (`crate::object_paxos`).
    pub async fn publish_if(
        &self,
        bucket: &BucketRow,
        key: &str,
        row: ObjectRow,
        cond: WriteCondition,
    ) -> Result<ObjectRow> {
        self.check_quotas(bucket, key, &row).await?;
        let part = bucket.id_bytes();
        let version = row.version;
        if !cond.is_none() && matches!(row.data, crate::object::ObjectData::Inline(_)) {
            // A Paxos round interrupted by a crash may leave its value
            // accepted by a minority, for any later round of the key to
            // complete. The start-up scan settles the key of every recorded
            // upload (garbage.rs), so that a write the crash cut off is
            // published or not once the node is back — not at the key's
            // next conditional write, maybe hours later, which would then
            // fail on it. A body in blocks was recorded with its first
            // block (`Model::begin_upload`); an inline one is recorded here.
            record_upload(&self.db, version, &UploadOf::object(&part, key)).await?;
        }
        let published = if bucket.versioning() != Versioning::Off {
            self.publish_versioned(bucket, key, row, cond).await?.0
        } else if !cond.is_none() {
            self.conditional.publish(&part, key, row, &cond).await?
        } else {
            let old = self.objects.get(&part, key.as_bytes()).await?;
            let row = stamped(row, old.as_ref());
            self.objects
                .insert(&part, key.as_bytes(), row.clone())
                .await?;
            row
        };
        // After the row: a crash in between leaves a record the start-up
        // scan finds published.
        end_upload_record(&self.db, version).await?;
        self.wake_gc();
        Ok(published)
    }

    /// Refuses the publication of `row` as `key` if it would take the
    /// bucket past a quota: what the bucket holds now ([`Model::bucket_usage`]),
    /// plus the row, minus the null version it replaces (unless versioning
    /// is enabled, where every write adds a version). As Garage, only a
    /// write that adds objects (or bytes) is refused, so an overwrite that
    /// does not grow the bucket always passes. Writes racing through
    /// several nodes are each checked against what the others have not yet
    /// counted: together they may pass a quota by what was in flight.
    async fn check_quotas(&self, bucket: &BucketRow, key: &str, row: &ObjectRow) -> Result<()> {
        self.check_quotas_for(bucket, key, row.usage()).await
    }

    /// [`Model::check_quotas`] for a write of `key` that would add `add`
    /// (one object of its declared size): the S3 layer asks before it reads
    /// a body, so that a body that cannot fit is refused without being
    /// stored; the check at publication is the one that counts.
    pub async fn check_quotas_for(&self, bucket: &BucketRow, key: &str, add: Usage) -> Result<()> {
        let q = bucket.quotas();
        if q.is_unlimited() || add == Usage::default() {
            return Ok(());
        }
        let replaced = if bucket.versioning() == Versioning::Enabled {
            Usage::default()
        } else {
            self.objects
                .get(&bucket.id_bytes(), key.as_bytes())
                .await?
                .map(|o| o.usage())
                .unwrap_or_default()
        };
        let now = self.bucket_usage(bucket).await?;
        let more_objects = add.objects.saturating_sub(replaced.objects);
        if let Some(max) = q.max_objects
            && more_objects > 0
            && now.objects.saturating_add(more_objects) > max
        {
            crate::usage::OBJECT_QUOTA_REFUSALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(ModelError::QuotaExceeded(format!(
                "Object quota is reached, maximum objects for this bucket: {max}"
            )));
        }
        let more_bytes = add.bytes.saturating_sub(replaced.bytes);
        if let Some(max) = q.max_size
            && more_bytes > 0
            && now.bytes.saturating_add(more_bytes) > max
        {
            crate::usage::SIZE_QUOTA_REFUSALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(ModelError::QuotaExceeded(format!(
                "Bucket size quota is reached, maximum total size of objects for this bucket: {max}. \
                 The bucket is already {} bytes, and this object would add {more_bytes} bytes.",
                now.bytes
            )));
        }
        Ok(())
    }

    /// Ends a failed upload: its blocks are released.
    pub async fn abort_upload(&self, version: VersionId) -> Result<()> {
        self.db
            .write(move |tx| {
                queue_version_gc(tx, &version);
                Ok::<_, ModelError>(())
            })
            .await?;
        self.wake_gc();
        Ok(())
    }

    /// Deletes object `key`; returns whether it existed.
    pub async fn delete_object(&self, bucket: &BucketRow, key: &str) -> Result<bool> {
        let existed = self.delete_objects(bucket, vec![key.to_owned()]).await?;
        Ok(existed[0])
    }

    /// Deletes several objects; returns, for each key, whether it existed.
    /// A deleted object becomes a tombstone row, newer than the row it
    /// deletes.
    pub async fn delete_objects(&self, bucket: &BucketRow, keys: Vec<String>) -> Result<Vec<bool>> {
        if bucket.versioning() != Versioning::Off {
            // Each key gets a delete marker of its own.
            let mut existed = Vec::with_capacity(keys.len());
            for key in keys {
                existed.push(self.delete_version(bucket, &key, None).await?.existed);
            }
            return Ok(existed);
        }
        self.tombstone_objects(bucket, keys).await
    }

    /// Deletes objects of a bucket never versioned: each becomes a
    /// tombstone row, newer than the row it deletes.
    pub(crate) async fn tombstone_objects(
        &self,
        bucket: &BucketRow,
        keys: Vec<String>,
    ) -> Result<Vec<bool>> {
        let part = bucket.id_bytes();
        let mut existed = Vec::with_capacity(keys.len());
        let mut tombs = Vec::new();
        for key in keys {
            let old = self.objects.get(&part, key.as_bytes()).await?;
            let live = old.as_ref().is_some_and(|o| !o.is_deleted());
            if live {
                let tomb = stamped(
                    ObjectRow::tombstone(crate::new_version_id(), 0),
                    old.as_ref(),
                );
                tombs.push((part.to_vec(), key.into_bytes(), tomb));
            }
            existed.push(live);
        }
        self.objects.insert_many(tombs).await?;
        self.wake_gc();
        Ok(existed)
    }

    /// Makes version `to` use the `count` blocks of version `from` (a copy
    /// shares blocks instead of duplicating them), or fails with
    /// [`ModelError::SourceChanged`] if `from` lost blocks meanwhile. `to`
    /// must have been registered with [`Model::begin_upload`].
    pub async fn share_blocks(&self, from: VersionId, count: u32, to: VersionId) -> Result<()> {
        self.share_blocks_at(from, count, to, 0, 0).await
    }

    /// Up to `limit` block entries of `version` from block `from` on.
    pub async fn version_blocks(
        &self,
        version: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, BlockEntry)>> {
        self.versions.range_numbered(version, from, limit).await
    }
}

/// The rows of table `S`, on the nodes `cluster` places them.
fn rows<S: Schema>(db: &Db, cluster: &hangar_cluster::Cluster) -> Result<Rows<S>> {
    Ok(Rows::new(
        ShardedTable::new(db.clone(), cluster.clone()).map_err(hangar_table::TableError::from)?,
    ))
}
