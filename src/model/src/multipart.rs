//! Multipart uploads.
//!
//! - `mpu` table: partition = bucket id (32 bytes), sort key = object key ++
//!   NUL ++ upload id (16 bytes): one row per upload in progress, listed in
//!   key order as ListMultipartUploads wants;
//! - `mpu_part` table: partition = upload id (16 bytes), sort key = part
//!   number (u32, big-endian): one row per uploaded part, each part being a
//!   version of its own (with its block list in the version table).
//!
//! Completing an upload makes a new object version that shares the parts'
//! blocks (no data is copied), then releases the part versions.

use std::collections::BTreeMap;
use std::ops::Bound;

use hangar_table::{Crdt, Schema, Table};
use serde::{Deserialize, Serialize};

use crate::bucket::BucketRow;
use crate::garbage::{UPLOAD_TREE, queue_version_gc};
use crate::object::{ObjectData, ObjectRow, StoredChecksum};
use crate::version::VersionTable;
use crate::{Model, ModelError, Result, VersionId};

/// An upload in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MpuRow {
    #[serde(with = "hangar_util::serde_id16")]
    pub upload_id: VersionId,
    pub key: String,
    pub initiated_msec: u64,
    pub headers: BTreeMap<String, String>,
    pub user_meta: BTreeMap<String, String>,
    /// Checksum algorithm the client announced at creation.
    pub checksum_algorithm: Option<String>,
}

impl Crdt for MpuRow {
    fn merge(&mut self, _other: &Self) {
        // Written once at creation; deleted, never changed.
    }
}

/// The table of uploads in progress.
pub struct MpuTable;

impl Schema for MpuTable {
    const TREE: &'static str = "mpu";
    const PARTITION_LEN: usize = 32;
    type Row = MpuRow;
}

/// One uploaded part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartRow {
    /// The part's own version (its block list).
    #[serde(with = "hangar_util::serde_id16")]
    pub version: VersionId,
    pub size: u64,
    /// Hex MD5 of the part.
    pub etag: String,
    pub checksum: Option<StoredChecksum>,
    pub timestamp_msec: u64,
    /// Blocks of the part.
    pub blocks: u32,
}

impl Crdt for PartRow {
    fn merge(&mut self, other: &Self) {
        if (other.timestamp_msec, other.version) > (self.timestamp_msec, self.version) {
            *self = other.clone();
        }
    }
}

/// The table of uploaded parts.
pub struct PartTable;

impl Schema for PartTable {
    const TREE: &'static str = "mpu_part";
    const PARTITION_LEN: usize = 16;
    type Row = PartRow;
}

/// The sort key of an upload in the `mpu` table.
pub fn mpu_sort_key(key: &str, upload_id: &VersionId) -> Vec<u8> {
    let mut k = key.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(upload_id);
    k
}

/// What [`Model::complete_multipart`] needs to know of each part listed.
pub struct CompletedPart {
    pub part_number: u32,
    /// Hex MD5, without quotes.
    pub etag: String,
}

/// Why a completion was refused (each maps to an S3 error code).
#[derive(Debug)]
pub enum CompleteError {
    /// InvalidPart: a listed part is missing or its ETag differs.
    InvalidPart(u32),
    /// InvalidPartOrder: part numbers not ascending.
    InvalidPartOrder,
    /// EntityTooSmall: a part other than the last is under the minimum.
    EntityTooSmall(u32),
    /// MalformedXML: no parts listed.
    NoParts,
}

/// Smallest part, except the last, that S3 accepts in a completion.
pub const MIN_PART_SIZE: u64 = 5 << 20;

impl Model {
    /// Starts a multipart upload of `key`.
    pub async fn create_multipart(&self, bucket: &BucketRow, row: MpuRow) -> Result<()> {
        let part = bucket.id_bytes();
        self.db()
            .write(move |tx| {
                let sk = mpu_sort_key(&row.key, &row.upload_id);
                Table::<MpuTable>::tx_insert(tx, &part, &sk, &row)?;
                Ok::<_, ModelError>(())
            })
            .await
    }

    /// The upload `upload_id` of `key`, if it is in progress.
    pub async fn get_multipart(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: &VersionId,
    ) -> Result<Option<MpuRow>> {
        Ok(Table::<MpuTable>::new(self.db().clone())
            .get(&bucket.id_bytes(), &mpu_sort_key(key, upload_id))
            .await?)
    }

    /// Uploads in progress in `bucket`, from sort key `start` on.
    pub async fn list_multipart(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, MpuRow)>> {
        Ok(Table::<MpuTable>::new(self.db().clone())
            .range(&bucket.id_bytes(), start, Bound::Unbounded, false, limit)
            .await?)
    }

    /// Records a stored part. The part's version stops being an upload in
    /// progress; a part it replaces is released.
    pub async fn put_part(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
        part_number: u32,
        row: PartRow,
    ) -> Result<()> {
        let part = bucket.id_bytes();
        let sk = mpu_sort_key(key, &upload_id);
        self.db()
            .write(move |tx| {
                tx.delete(UPLOAD_TREE, row.version.to_vec());
                if Table::<MpuTable>::tx_get(tx, &part, &sk)?.is_none() {
                    // Aborted or completed while the part was uploading.
                    queue_version_gc(tx, &row.version);
                    return Err(ModelError::NoSuchUpload);
                }
                let pn = part_number.to_be_bytes();
                if let Some(old) = Table::<PartTable>::tx_get(tx, &upload_id, &pn)? {
                    queue_version_gc(tx, &old.version);
                }
                Table::<PartTable>::tx_delete(tx, &upload_id, &pn);
                Table::<PartTable>::tx_insert(tx, &upload_id, &pn, &row)?;
                Ok(())
            })
            .await?;
        self.wake_gc();
        Ok(())
    }

    /// Parts of an upload from part number `from` on.
    pub async fn list_parts(
        &self,
        upload_id: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, PartRow)>> {
        Ok(Table::<PartTable>::new(self.db().clone())
            .range_numbered(upload_id, from, limit)
            .await?)
    }

    /// Ends an upload: its row and every part are removed and released.
    pub async fn abort_multipart(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
    ) -> Result<bool> {
        let parts = self.list_parts(&upload_id, 0, usize::MAX).await?;
        let part = bucket.id_bytes();
        let sk = mpu_sort_key(key, &upload_id);
        let existed = self
            .db()
            .write(move |tx| {
                let existed = Table::<MpuTable>::tx_get(tx, &part, &sk)?.is_some();
                Table::<MpuTable>::tx_delete(tx, &part, &sk);
                for (n, p) in &parts {
                    Table::<PartTable>::tx_delete(tx, &upload_id, &n.to_be_bytes());
                    queue_version_gc(tx, &p.version);
                }
                Ok::<_, ModelError>(existed)
            })
            .await?;
        self.wake_gc();
        Ok(existed)
    }

    /// Completes an upload with the listed parts: the object becomes a new
    /// version sharing the parts' blocks. Returns the published row, or why
    /// the list was refused (nothing changes then).
    pub async fn complete_multipart(
        &self,
        bucket: &BucketRow,
        mpu: &MpuRow,
        listed: &[CompletedPart],
        checksum: Option<StoredChecksum>,
    ) -> Result<std::result::Result<ObjectRow, CompleteError>> {
        if listed.is_empty() {
            return Ok(Err(CompleteError::NoParts));
        }
        let stored: BTreeMap<u32, PartRow> = self
            .list_parts(&mpu.upload_id, 0, usize::MAX)
            .await?
            .into_iter()
            .collect();
        let mut chosen = Vec::with_capacity(listed.len());
        let mut previous = 0u32;
        for (i, l) in listed.iter().enumerate() {
            if l.part_number <= previous && i > 0 {
                return Ok(Err(CompleteError::InvalidPartOrder));
            }
            previous = l.part_number;
            let Some(p) = stored.get(&l.part_number) else {
                return Ok(Err(CompleteError::InvalidPart(l.part_number)));
            };
            if p.etag != l.etag {
                return Ok(Err(CompleteError::InvalidPart(l.part_number)));
            }
            if i + 1 < listed.len() && p.size < MIN_PART_SIZE {
                return Ok(Err(CompleteError::EntityTooSmall(l.part_number)));
            }
            chosen.push(p.clone());
        }

        let version = crate::new_version_id();
        self.begin_upload(version).await?;
        let (mut next, mut bytes) = (0u32, 0u64);
        let mut md5s = Vec::with_capacity(chosen.len() * 16);
        for p in &chosen {
            next += self
                .share_blocks_at(p.version, version, next, bytes)
                .await?;
            bytes += p.size;
            md5s.extend(hex::decode(&p.etag).unwrap_or_default());
        }
        let etag = format!("{}-{}", hex::encode(s3_md5(&md5s)), chosen.len());
        let row = ObjectRow {
            version,
            timestamp_msec: hangar_util::time::now_msec(),
            size: chosen.iter().map(|p| p.size).sum(),
            etag,
            headers: mpu.headers.clone(),
            user_meta: mpu.user_meta.clone(),
            checksum,
            data: ObjectData::Blocks { count: next },
        };
        let part_key = bucket.id_bytes();
        let sk = mpu_sort_key(&mpu.key, &mpu.upload_id);
        let upload_id = mpu.upload_id;
        let all_parts: Vec<(u32, VersionId)> =
            stored.iter().map(|(n, p)| (*n, p.version)).collect();
        let published = row.clone();
        let key = mpu.key.clone();
        self.db()
            .write(move |tx| {
                if Table::<MpuTable>::tx_get(tx, &part_key, &sk)?.is_none() {
                    queue_version_gc(tx, &version);
                    return Err(ModelError::NoSuchUpload);
                }
                Table::<MpuTable>::tx_delete(tx, &part_key, &sk);
                for (n, v) in &all_parts {
                    Table::<PartTable>::tx_delete(tx, &upload_id, &n.to_be_bytes());
                    queue_version_gc(tx, v);
                }
                let old =
                    Table::<crate::object::ObjectTable>::tx_get(tx, &part_key, key.as_bytes())?;
                tx.delete(UPLOAD_TREE, version.to_vec());
                Table::<crate::object::ObjectTable>::tx_insert(
                    tx,
                    &part_key,
                    key.as_bytes(),
                    &published,
                )?;
                if let Some(old) = old
                    && matches!(old.data, ObjectData::Blocks { .. })
                {
                    queue_version_gc(tx, &old.version);
                }
                Ok(())
            })
            .await?;
        self.wake_gc();
        Ok(Ok(row))
    }

    /// Makes version `to` use the blocks of `from`, numbered from `first`
    /// and placed from byte `first_offset` of `to`; returns how many blocks
    /// were shared. Offsets are recomputed from the block sizes, so a source
    /// written by row format 1 (no offsets) gives entries with offsets.
    pub async fn share_blocks_at(
        &self,
        from: VersionId,
        to: VersionId,
        first: u32,
        first_offset: u64,
    ) -> Result<u32> {
        let mut next = 0u32;
        let mut offset = first_offset;
        loop {
            let mut page = self.version_blocks(&from, next, 256).await?;
            let Some((last, _)) = page.last() else {
                return Ok(next);
            };
            next = last + 1;
            for (_, entry) in &mut page {
                entry.offset = offset;
                offset += entry.size;
            }
            self.db()
                .write(move |tx| {
                    for (idx, entry) in &page {
                        hangar_block::add_ref(tx, &entry.hash, &to)?;
                        Table::<VersionTable>::tx_insert(
                            tx,
                            &to,
                            &(first + idx).to_be_bytes(),
                            entry,
                        )?;
                    }
                    Ok::<_, ModelError>(())
                })
                .await?;
        }
    }
}

/// MD5 of the concatenated part digests (S3's multipart ETag).
fn s3_md5(data: &[u8]) -> Vec<u8> {
    use md5::Digest;
    md5::Md5::digest(data).to_vec()
}
