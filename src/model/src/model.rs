//! [`Model`]: the operations of the S3 and admin layers on one node's tables.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use hangar_block::BlockManager;
use hangar_db::Db;
use hangar_table::Table;
use hangar_util::Hash;
use hangar_util::time::now_msec;
use tokio::sync::Notify;

use crate::bucket::{BucketRow, BucketTable, check_bucket_name};
use crate::garbage::{UPLOAD_TREE, queue_version_gc};
use crate::key::{KeyRow, KeyTable, Permission, new_key_id, new_secret, valid_key_id};
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::version::{BlockEntry, VersionTable};
use crate::{ModelError, Result, VersionId};

/// The data model of one node.
pub struct Model {
    db: Db,
    blocks: Arc<BlockManager>,
    keys: Table<KeyTable>,
    buckets: Table<BucketTable>,
    objects: Table<ObjectTable>,
    versions: Table<VersionTable>,
    gc_wakeup: Notify,
    block_gc_delay_msec: u64,
    allow_punycode: bool,
}

/// A condition on the object a write replaces (S3's conditional writes).
#[derive(Debug, Clone, Default)]
pub struct WriteCondition {
    /// `If-None-Match: *`: only if no object exists.
    pub if_none_match_any: bool,
    /// `If-Match`: only if an object exists with this ETag (`*`: any).
    pub if_match: Option<String>,
}

/// A change of permissions: `Some(true)` grants, `Some(false)` revokes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PermissionChange {
    pub read: Option<bool>,
    pub write: Option<bool>,
    pub owner: Option<bool>,
}

impl Model {
    pub fn new(
        db: Db,
        blocks: Arc<BlockManager>,
        block_gc_delay_msec: u64,
        allow_punycode: bool,
    ) -> Arc<Model> {
        Arc::new(Model {
            keys: Table::new(db.clone()),
            buckets: Table::new(db.clone()),
            objects: Table::new(db.clone()),
            versions: Table::new(db.clone()),
            db,
            blocks,
            gc_wakeup: Notify::new(),
            block_gc_delay_msec,
            allow_punycode,
        })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn blocks(&self) -> &Arc<BlockManager> {
        &self.blocks
    }

    pub(crate) fn block_gc_delay_msec(&self) -> u64 {
        self.block_gc_delay_msec
    }

    pub(crate) fn gc_wakeup(&self) -> &Notify {
        &self.gc_wakeup
    }

    /// Asks the version collector to run now.
    pub fn wake_gc(&self) {
        self.gc_wakeup.notify_one();
    }

    // ---- access keys ----

    /// Creates a key with a fresh id and secret.
    pub async fn create_key(&self, name: &str) -> Result<KeyRow> {
        self.import_key(&new_key_id(), &new_secret(), name).await
    }

    /// Creates a key with a given id and secret (`hangar key import`).
    pub async fn import_key(&self, id: &str, secret: &str, name: &str) -> Result<KeyRow> {
        if !valid_key_id(id) {
            return Err(ModelError::Invalid(format!(
                "access key id {id:?} must be GK followed by 24 hex digits"
            )));
        }
        if secret.len() < 16 {
            return Err(ModelError::Invalid("secret key too short".into()));
        }
        let now = now_msec();
        let row = KeyRow {
            access_key_id: id.to_owned(),
            name: name.to_owned(),
            secret: secret.to_owned(),
            allow_create_bucket: false,
            buckets: Default::default(),
            created_msec: now,
            updated_msec: now,
            deleted: false,
        };
        let r = row.clone();
        self.db
            .write(move |tx| {
                match Table::<KeyTable>::tx_get(tx, b"", r.access_key_id.as_bytes())? {
                    Some(old) if !old.deleted => {
                        return Err(ModelError::KeyAlreadyExists(r.access_key_id));
                    }
                    _ => {}
                }
                Table::<KeyTable>::tx_insert(tx, b"", r.access_key_id.as_bytes(), &r)?;
                Ok(())
            })
            .await?;
        Ok(row)
    }

    /// The live key with this id.
    pub async fn get_key(&self, id: &str) -> Result<Option<KeyRow>> {
        Ok(self
            .keys
            .get(b"", id.as_bytes())
            .await?
            .filter(|k| !k.deleted))
    }

    /// Every live key.
    pub async fn list_keys(&self) -> Result<Vec<KeyRow>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self
                .keys
                .range(b"", start, Bound::Unbounded, false, 1000)
                .await?;
            let full = page.len() == 1000;
            after = page.last().map(|(k, _)| k.clone());
            out.extend(page.into_iter().map(|(_, r)| r).filter(|k| !k.deleted));
            if !full {
                return Ok(out);
            }
        }
    }

    /// Finds a key by id, or by name when exactly one key has that name.
    pub async fn find_key(&self, id_or_name: &str) -> Result<KeyRow> {
        if let Some(k) = self.get_key(id_or_name).await? {
            return Ok(k);
        }
        let matches: Vec<_> = self
            .list_keys()
            .await?
            .into_iter()
            .filter(|k| k.name == id_or_name || k.access_key_id.starts_with(id_or_name))
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().expect("one match")),
            0 => Err(ModelError::NoSuchKey(id_or_name.to_owned())),
            _ => Err(ModelError::Invalid(format!(
                "{id_or_name:?} matches several keys; give the full key id"
            ))),
        }
    }

    /// Applies `f` to the live key `id` and stores the result.
    async fn update_key(
        &self,
        id: &str,
        f: impl FnOnce(&mut KeyRow) + Send + 'static,
    ) -> Result<KeyRow> {
        let id = id.to_owned();
        self.db
            .write(move |tx| {
                let mut k = Table::<KeyTable>::tx_get(tx, b"", id.as_bytes())?
                    .filter(|k| !k.deleted)
                    .ok_or_else(|| ModelError::NoSuchKey(id.clone()))?;
                f(&mut k);
                k.updated_msec = now_msec().max(k.updated_msec + 1);
                Table::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?;
                Ok(k)
            })
            .await
    }

    /// Deletes a key (a tombstone row).
    pub async fn delete_key(&self, id: &str) -> Result<()> {
        self.update_key(id, |k| {
            k.deleted = true;
            k.buckets.clear();
        })
        .await
        .map(|_| ())
    }

    /// Grants or revokes the right to create buckets.
    pub async fn set_create_bucket(&self, id: &str, allow: bool) -> Result<KeyRow> {
        self.update_key(id, move |k| k.allow_create_bucket = allow)
            .await
    }

    /// Changes a key's permissions on an existing bucket.
    pub async fn set_permission(
        &self,
        bucket: &str,
        key_id: &str,
        change: PermissionChange,
    ) -> Result<KeyRow> {
        if self.get_bucket(bucket).await?.is_none() {
            return Err(ModelError::NoSuchBucket(bucket.to_owned()));
        }
        let b = bucket.to_owned();
        self.update_key(key_id, move |k| {
            let mut p = k.permission(&b);
            p.read = change.read.unwrap_or(p.read);
            p.write = change.write.unwrap_or(p.write);
            p.owner = change.owner.unwrap_or(p.owner);
            if p.any() {
                k.buckets.insert(b, p);
            } else {
                k.buckets.remove(&b);
            }
        })
        .await
    }

    // ---- buckets ----

    /// The live bucket named `name`.
    pub async fn get_bucket(&self, name: &str) -> Result<Option<BucketRow>> {
        Ok(self
            .buckets
            .get(b"", name.as_bytes())
            .await?
            .filter(|b| !b.deleted))
    }

    /// Every live bucket.
    pub async fn list_buckets(&self) -> Result<Vec<BucketRow>> {
        let rows = self
            .buckets
            .range(b"", Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(_, b)| b)
            .filter(|b| !b.deleted)
            .collect())
    }

    /// Creates bucket `name`; `owner`, if given, gets read, write and owner
    /// permissions on it in the same transaction.
    pub async fn create_bucket(&self, name: &str, owner: Option<&str>) -> Result<BucketRow> {
        check_bucket_name(name, self.allow_punycode)?;
        let now = now_msec();
        let name = name.to_owned();
        let owner = owner.map(str::to_owned);
        self.db
            .write(move |tx| {
                let old = Table::<BucketTable>::tx_get(tx, b"", name.as_bytes())?;
                if old.as_ref().is_some_and(|b| !b.deleted) {
                    return Err(ModelError::BucketAlreadyExists(name));
                }
                let row = BucketRow {
                    name: name.clone(),
                    id: hex::encode(rand::random::<[u8; 32]>()),
                    created_msec: now,
                    updated_msec: old.map_or(now, |o| now.max(o.updated_msec + 1)),
                    deleted: false,
                };
                Table::<BucketTable>::tx_insert(tx, b"", name.as_bytes(), &row)?;
                if let Some(id) = owner {
                    let mut k = Table::<KeyTable>::tx_get(tx, b"", id.as_bytes())?
                        .filter(|k| !k.deleted)
                        .ok_or_else(|| ModelError::NoSuchKey(id.clone()))?;
                    k.buckets.insert(
                        name.clone(),
                        Permission {
                            read: true,
                            write: true,
                            owner: true,
                        },
                    );
                    k.updated_msec = now.max(k.updated_msec + 1);
                    Table::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?;
                }
                Ok(row)
            })
            .await
    }

    /// Deletes an empty bucket and every key's permissions on it.
    pub async fn delete_bucket(&self, name: &str) -> Result<()> {
        let bucket = self
            .get_bucket(name)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(name.to_owned()))?;
        if !self
            .list_objects(&bucket, Bound::Unbounded, 1)
            .await?
            .is_empty()
        {
            return Err(ModelError::BucketNotEmpty(name.to_owned()));
        }
        let holders: Vec<String> = self
            .list_keys()
            .await?
            .into_iter()
            .filter(|k| k.buckets.contains_key(name))
            .map(|k| k.access_key_id)
            .collect();
        let name = name.to_owned();
        self.db
            .write(move |tx| {
                let now = now_msec();
                let mut b = bucket;
                b.deleted = true;
                b.updated_msec = now.max(b.updated_msec + 1);
                Table::<BucketTable>::tx_insert(tx, b"", name.as_bytes(), &b)?;
                for id in holders {
                    if let Some(mut k) = Table::<KeyTable>::tx_get(tx, b"", id.as_bytes())? {
                        k.buckets.remove(&name);
                        k.updated_msec = now.max(k.updated_msec + 1);
                        Table::<KeyTable>::tx_insert(tx, b"", id.as_bytes(), &k)?;
                    }
                }
                Ok::<_, ModelError>(())
            })
            .await
    }

    /// Number of objects and bytes in a bucket (a full scan).
    pub async fn bucket_usage(&self, bucket: &BucketRow) -> Result<(u64, u64)> {
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.list_objects(bucket, start, 1000).await?;
            n += page.len() as u64;
            bytes += page.iter().map(|(_, o)| o.size).sum::<u64>();
            if page.len() < 1000 {
                return Ok((n, bytes));
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    // ---- objects ----

    /// The object `key` of `bucket`.
    pub async fn get_object(&self, bucket: &BucketRow, key: &str) -> Result<Option<ObjectRow>> {
        Ok(self.objects.get(&bucket.id_bytes(), key.as_bytes()).await?)
    }

    /// Up to `limit` objects of `bucket` after `start`, in key order.
    pub async fn list_objects(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, ObjectRow)>> {
        Ok(self
            .objects
            .range(&bucket.id_bytes(), start, Bound::Unbounded, false, limit)
            .await?)
    }

    /// Registers an upload in progress, before its first block is stored.
    pub async fn begin_upload(&self, version: VersionId) -> Result<()> {
        self.db
            .write(move |tx| {
                tx.put(UPLOAD_TREE, version.to_vec(), Vec::new());
                Ok::<_, ModelError>(())
            })
            .await
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
        let (hash, data) = tokio::task::spawn_blocking(move || (Hash::of(&data), data))
            .await
            .map_err(|e| ModelError::Invalid(format!("hashing task failed: {e}")))?;
        let entry = BlockEntry {
            hash,
            size: data.len() as u64,
            offset,
        };
        self.blocks
            .store(hash, data, version, move |tx| {
                Table::<VersionTable>::tx_insert(tx, &version, &index.to_be_bytes(), &entry)?;
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Makes `row` the current version of `key`, in one transaction with the
    /// end of its upload; the version it replaces is queued for collection.
    pub async fn publish(&self, bucket: &BucketRow, key: &str, row: ObjectRow) -> Result<()> {
        self.publish_if(bucket, key, row, WriteCondition::default())
            .await
    }

    /// Like [`Model::publish`], only if `cond` holds on the current object
    /// (checked in the publishing transaction); otherwise the new version is
    /// released and [`ModelError::PreconditionFailed`] returned.
    pub async fn publish_if(
        &self,
        bucket: &BucketRow,
        key: &str,
        row: ObjectRow,
        cond: WriteCondition,
    ) -> Result<()> {
        let part = bucket.id_bytes();
        let key = key.to_owned();
        self.db
            .write(move |tx| {
                let old = Table::<ObjectTable>::tx_get(tx, &part, key.as_bytes())?;
                let holds = match (&old, &cond.if_match) {
                    (Some(_), _) if cond.if_none_match_any => false,
                    (Some(o), Some(etag)) => etag == "*" || *etag == o.etag,
                    (None, Some(_)) => false,
                    _ => true,
                };
                if !holds {
                    return Err(ModelError::PreconditionFailed);
                }
                tx.delete(UPLOAD_TREE, row.version.to_vec());
                Table::<ObjectTable>::tx_insert(tx, &part, key.as_bytes(), &row)?;
                if let Some(old) = old
                    && old.version != row.version
                    && matches!(old.data, ObjectData::Blocks { .. })
                {
                    queue_version_gc(tx, &old.version);
                }
                Ok::<_, ModelError>(())
            })
            .await?;
        self.wake_gc();
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

    /// Deletes several objects in one transaction; returns, for each key,
    /// whether it existed.
    pub async fn delete_objects(&self, bucket: &BucketRow, keys: Vec<String>) -> Result<Vec<bool>> {
        let part = bucket.id_bytes();
        let existed = self
            .db
            .write(move |tx| {
                let mut existed = Vec::with_capacity(keys.len());
                for key in keys {
                    let old = Table::<ObjectTable>::tx_get(tx, &part, key.as_bytes())?;
                    if let Some(old) = &old {
                        Table::<ObjectTable>::tx_delete(tx, &part, key.as_bytes());
                        if matches!(old.data, ObjectData::Blocks { .. }) {
                            queue_version_gc(tx, &old.version);
                        }
                    }
                    existed.push(old.is_some());
                }
                Ok::<_, ModelError>(existed)
            })
            .await?;
        self.wake_gc();
        Ok(existed)
    }

    /// Makes version `to` use the same blocks as version `from` (a copy
    /// shares blocks instead of duplicating them). `to` must have been
    /// registered with [`Model::begin_upload`]. Returns the block count.
    pub async fn share_blocks(&self, from: VersionId, to: VersionId) -> Result<u32> {
        self.share_blocks_at(from, to, 0, 0).await
    }

    /// Up to `limit` block entries of `version` from block `from` on.
    pub async fn version_blocks(
        &self,
        version: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, BlockEntry)>> {
        Ok(self.versions.range_numbered(version, from, limit).await?)
    }
}
