//! Objects and their versions: the service that owns the object table
//! (sharded: each bucket's rows on the nodes of its partition) and the
//! conditional writes decided on it by a Paxos round per key
//! ([`crate::object_paxos`]). It publishes a version as the object of a key
//! — at once, past the stored row's timestamp, or only if a condition holds
//! — after checking the bucket's quotas; reads an object or one of its
//! versions; lists a bucket's objects or versions; writes delete markers
//! and tombstones; and changes a version's registers (tags, ACL, retention,
//! legal hold: [`crate::object_config`], [`crate::lock_ops`]). Reading and
//! listing versions is [`crate::version_ops`] and [`crate::version_list`].
//!
//! It promises that a published row is on a write quorum of its partition's
//! nodes when `publish` returns, and that an upload recorded with
//! [`Objects::begin_upload`] is either published or released (its blocks
//! collected) even if the node crashes in between (crate::garbage). The
//! version a row replaces is released by the object table's hook, through
//! the durable `version_gc` queue, in the row's own transaction.

use std::ops::Bound;
use std::sync::Arc;

use hangar_db::Db;
use hangar_table::Schema;

use crate::blocks::Blocks;
use crate::bucket::{BucketRow, Versioning};
use crate::object::{ObjectRow, ObjectTable};
use crate::object_paxos::Conditional;
use crate::queues::{UploadOf, end_upload_record, queue_version_gc, record_upload};
use crate::usage::{Usage, UsageRequest};
use crate::write_condition::{WriteCondition, stamped};
use crate::{ModelError, Result, VersionId};
use hangar_table::Table;

/// The object service of one node.
pub struct Objects {
    db: Db,
    cluster: hangar_cluster::Cluster,
    rows: Table<ObjectTable>,
    /// Conditional writes: a Paxos round per key.
    conditional: Conditional,
    /// Asks the nodes of a bucket's partition for its usage counters.
    usage: Arc<hangar_net::Endpoint<UsageRequest, Usage>>,
    blocks: Arc<Blocks>,
}

impl Objects {
    /// The service over `rows`, serving this node's usage counters and
    /// its part of the conditional writes' Paxos rounds.
    pub(crate) fn start(
        db: Db,
        cluster: &hangar_cluster::Cluster,
        rows: Table<ObjectTable>,
        blocks: Arc<Blocks>,
    ) -> Result<Objects> {
        let conditional = Conditional::new(cluster, rows.clone(), db.clone())?;
        let usage = cluster
            .mesh()
            .endpoint(crate::usage::PATH)
            .map_err(hangar_table::TableError::from)?;
        usage.set_handler(
            crate::usage::UsageHandler { db: db.clone() },
            crate::usage::QUEUE,
        );
        Ok(Objects {
            db,
            cluster: cluster.clone(),
            rows,
            conditional,
            usage,
            blocks,
        })
    }

    pub(crate) fn rows(&self) -> &Table<ObjectTable> {
        &self.rows
    }

    pub(crate) fn conditional(&self) -> &Conditional {
        &self.conditional
    }

    /// Asks the version collector to run now (a version was released).
    pub(crate) fn wake_collector(&self) {
        self.blocks.wake_collector();
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
                hangar_table::ReplicationError::NoLayoutYet {
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
            hangar_table::TableError::Replication(hangar_table::ReplicationError::Quorum {
                op: "usage",
                tree: ObjectTable::TREE,
                partition: p,
                down,
                source: Box::new(e),
            })
        })?;
        Ok(answers
            .into_iter()
            .map(|(_, u)| u)
            .fold(Usage::default(), Usage::max))
    }

    /// The live object `key` of `bucket` (a tombstone reads as none): its
    /// latest version, unless that is a delete marker.
    pub async fn get(&self, bucket: &BucketRow, key: &str) -> Result<Option<ObjectRow>> {
        Ok(self
            .latest_version(bucket, key)
            .await?
            .map(|f| f.row)
            .filter(|o| !o.is_delete_marker()))
    }

    /// Up to `limit` live objects of `bucket` after `start`, in key order;
    /// fewer only when there are no more.
    pub async fn list(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, ObjectRow)>> {
        if bucket.versioning() != Versioning::Off {
            return self.list_latest(bucket, start, limit).await;
        }
        Ok(self
            .rows
            .range_filtered(&bucket.id_bytes(), start, limit, |o| !o.is_deleted())
            .await?)
    }

    /// Whether `bucket` holds any object, version or delete marker (a
    /// bucket must hold none to be deleted, as in S3).
    pub(crate) async fn holds_any_version(&self, bucket: &BucketRow) -> Result<bool> {
        Ok(!self
            .rows
            .range_filtered(&bucket.id_bytes(), Bound::Unbounded, 1, |o| !o.is_deleted())
            .await?
            .is_empty())
    }

    /// Registers an upload in progress of `of`, before its first block is
    /// stored.
    pub async fn begin_upload(&self, version: VersionId, of: &UploadOf) -> Result<()> {
        record_upload(&self.db, version, of).await
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

    /// Like [`Objects::publish`], only if `cond` holds on the current object;
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
            // block (`Objects::begin_upload`); an inline one is recorded here.
            record_upload(&self.db, version, &UploadOf::object(&part, key)).await?;
        }
        let published = if bucket.versioning() != Versioning::Off {
            self.publish_versioned(bucket, key, row, cond).await?.0
        } else if !cond.is_none() {
            self.conditional.publish(&part, key, row, &cond).await?
        } else {
            let old = self.rows.get(&part, key.as_bytes()).await?;
            let row = stamped(row, old.as_ref());
            self.rows
                .insert_one(&part, key.as_bytes(), row.clone())
                .await?;
            row
        };
        // After the row: a crash in between leaves a record the start-up
        // scan finds published.
        end_upload_record(&self.db, version).await?;
        self.wake_collector();
        Ok(published)
    }

    /// Refuses the publication of `row` as `key` if it would take the
    /// bucket past a quota: what the bucket holds now ([`Objects::bucket_usage`]),
    /// plus the row, minus the null version it replaces (unless versioning
    /// is enabled, where every write adds a version). As Garage, only a
    /// write that adds objects (or bytes) is refused, so an overwrite that
    /// does not grow the bucket always passes. Writes racing through
    /// several nodes are each checked against what the others have not yet
    /// counted: together they may pass a quota by what was in flight.
    async fn check_quotas(&self, bucket: &BucketRow, key: &str, row: &ObjectRow) -> Result<()> {
        self.check_quotas_for(bucket, key, row.usage()).await
    }

    /// [`Objects::check_quotas`] for a write of `key` that would add `add`
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
            self.rows
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
        self.wake_collector();
        Ok(())
    }

    /// Deletes object `key`; returns whether it existed.
    pub async fn delete(&self, bucket: &BucketRow, key: &str) -> Result<bool> {
        let existed = self.delete_many(bucket, vec![key.to_owned()]).await?;
        Ok(existed[0])
    }

    /// Deletes several objects; returns, for each key, whether it existed.
    /// A deleted object becomes a tombstone row, newer than the row it
    /// deletes.
    pub async fn delete_many(&self, bucket: &BucketRow, keys: Vec<String>) -> Result<Vec<bool>> {
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
            let old = self.rows.get(&part, key.as_bytes()).await?;
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
        self.rows.insert(tombs).await?;
        self.wake_collector();
        Ok(existed)
    }
}
