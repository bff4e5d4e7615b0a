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

use hangar_table::{Crdt, Schema, Table, max_by_content};
use serde::{Deserialize, Serialize};

use crate::bucket::BucketRow;
use crate::garbage::{UPLOAD_TREE, queue_version_gc};
use crate::model::put_object_row;
use crate::object::{ObjectData, ObjectRow, ObjectTable, StoredChecksum};
use crate::version::{BlockEntry, VersionTable};
use crate::{Model, ModelError, Result, VersionId};

/// An upload in progress, or the tombstone of one that was completed or
/// aborted (`deleted`). The derived order is the merge order: the tombstone
/// wins, and upload ids are never reused, so an ended upload stays ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MpuRow {
    #[serde(default)]
    pub deleted: bool,
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
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of uploads in progress.
pub struct MpuTable;

impl Schema for MpuTable {
    const TREE: &'static str = "mpu";
    const PARTITION_LEN: usize = 32;
    type Row = MpuRow;

    fn is_tombstone(row: &MpuRow) -> bool {
        row.deleted
    }
}

/// One uploaded part. The derived order is the merge order: a tombstone
/// (the upload ended) wins, then the newest part, then the version id and
/// the content break ties.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartRow {
    #[serde(default)]
    pub deleted: bool,
    /// Taken in the recording transaction, greater than the part replaced.
    pub timestamp_msec: u64,
    /// The part's own version (its block list).
    #[serde(with = "hangar_util::serde_id16")]
    pub version: VersionId,
    pub size: u64,
    /// Hex MD5 of the part.
    pub etag: String,
    pub checksum: Option<StoredChecksum>,
    /// Blocks of the part.
    pub blocks: u32,
}

impl Crdt for PartRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of uploaded parts.
pub struct PartTable;

impl Schema for PartTable {
    const TREE: &'static str = "mpu_part";
    const PARTITION_LEN: usize = 16;
    type Row = PartRow;

    fn is_tombstone(row: &PartRow) -> bool {
        row.deleted
    }

    /// Every part version that is not the live one the merge keeps — the
    /// part replaced, the part that lost, or every part of an ended upload
    /// — is queued for collection.
    fn updated(
        tx: &mut hangar_db::Tx<'_>,
        old: Option<&PartRow>,
        inserted: &PartRow,
        merged: &PartRow,
    ) -> std::result::Result<(), hangar_db::DbError> {
        for loser in old.into_iter().chain(std::iter::once(inserted)) {
            if loser.version != merged.version || merged.deleted {
                queue_version_gc(tx, &loser.version);
            }
        }
        Ok(())
    }
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
            .await?
            .filter(|m| !m.deleted))
    }

    /// Up to `limit` uploads in progress in `bucket`, from sort key `start`
    /// on; fewer only when there are no more.
    pub async fn list_multipart(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, MpuRow)>> {
        Ok(Table::<MpuTable>::new(self.db().clone())
            .range_filtered(&bucket.id_bytes(), start, limit, |m| !m.deleted)
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
        mut row: PartRow,
    ) -> Result<PartRow> {
        let version = row.version;
        let part = bucket.id_bytes();
        let sk = mpu_sort_key(key, &upload_id);
        let recorded = self
            .db()
            .write(move |tx| {
                tx.delete(UPLOAD_TREE, row.version.to_vec());
                let live = Table::<MpuTable>::tx_get(tx, &part, &sk)?.is_some_and(|m| !m.deleted);
                if !live {
                    // Aborted or completed while the part was uploading.
                    return Err(ModelError::NoSuchUpload);
                }
                let pn = part_number.to_be_bytes();
                let old = Table::<PartTable>::tx_get(tx, &upload_id, &pn)?;
                let floor = old.as_ref().map_or(0, |o| o.timestamp_msec + 1);
                row.timestamp_msec = hangar_util::time::now_msec().max(floor);
                Ok(Table::<PartTable>::tx_insert(tx, &upload_id, &pn, &row)?)
            })
            .await;
        if recorded.is_err() {
            // Nothing was written: the part's version is released here.
            self.abort_upload(version).await?;
        }
        self.wake_gc();
        recorded
    }

    /// Parts of an upload from part number `from` on.
    pub async fn list_parts(
        &self,
        upload_id: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, PartRow)>> {
        let parts = Table::<PartTable>::new(self.db().clone())
            .range_numbered(upload_id, from, limit)
            .await?;
        Ok(parts.into_iter().filter(|(_, p)| !p.deleted).collect())
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
                let existed = end_upload(tx, &part, &sk)?;
                for (n, p) in &parts {
                    end_part(tx, &upload_id, *n, p)?;
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
            if let Err(e) = self
                .share_blocks_at(p.version, p.blocks, version, next, bytes)
                .await
            {
                self.abort_upload(version).await?;
                // A part collected under us: the upload was completed or
                // aborted meanwhile.
                return Err(match e {
                    ModelError::SourceChanged => ModelError::NoSuchUpload,
                    e => e,
                });
            }
            next += p.blocks;
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
        let key = mpu.key.clone();
        let published = self
            .db()
            .write(move |tx| {
                if !end_upload(tx, &part_key, &sk)? {
                    return Err(ModelError::NoSuchUpload);
                }
                // Every part recorded by now, listed or not, is released:
                // the object holds its own references to the listed ones.
                let mut n = 0u32;
                while let Some((num, p)) = next_part(tx, &upload_id, n)? {
                    end_part(tx, &upload_id, num, &p)?;
                    n = match num.checked_add(1) {
                        Some(n) => n,
                        None => break,
                    };
                }
                let old = Table::<ObjectTable>::tx_get(tx, &part_key, key.as_bytes())?;
                tx.delete(UPLOAD_TREE, version.to_vec());
                put_object_row(tx, &part_key, &key, old, row)
            })
            .await;
        let published = match published {
            Ok(p) => p,
            Err(e) => {
                self.abort_upload(version).await?;
                return Err(e);
            }
        };
        self.wake_gc();
        Ok(Ok(published))
    }

    /// Makes version `to` use the `count` blocks of `from`, numbered from
    /// `first` and placed from byte `first_offset` of `to`. Offsets are
    /// recomputed from the block sizes, so a source written by row format 1
    /// (no offsets) gives entries with offsets. Each batch reads the source's
    /// entries in the transaction that adds `to`'s references, so a block
    /// cannot be collected between the two; if the source lost any of its
    /// blocks (it was overwritten or deleted and collected meanwhile),
    /// nothing more is shared and [`ModelError::SourceChanged`] is returned:
    /// the caller releases `to`.
    pub async fn share_blocks_at(
        &self,
        from: VersionId,
        count: u32,
        to: VersionId,
        first: u32,
        first_offset: u64,
    ) -> Result<()> {
        const BATCH: u32 = 256;
        let mut next = 0u32;
        let mut offset = first_offset;
        while next < count {
            let end = count.min(next.saturating_add(BATCH));
            let range = next..end;
            offset = self
                .db()
                .write(move |tx| {
                    let mut offset = offset;
                    for idx in range {
                        let mut entry: BlockEntry =
                            Table::<VersionTable>::tx_get(tx, &from, &idx.to_be_bytes())?
                                .filter(|e| !e.deleted)
                                .ok_or(ModelError::SourceChanged)?;
                        entry.offset = offset;
                        offset += entry.size;
                        hangar_block::add_ref(tx, &entry.hash, &to)?;
                        Table::<VersionTable>::tx_insert(
                            tx,
                            &to,
                            &(first + idx).to_be_bytes(),
                            &entry,
                        )?;
                    }
                    Ok::<_, ModelError>(offset)
                })
                .await?;
            next = end;
        }
        Ok(())
    }
}

/// Ends upload `sk` of bucket `part` (its row becomes a tombstone) inside a
/// transaction; returns whether it was in progress.
fn end_upload(tx: &mut hangar_db::Tx<'_>, part: &[u8; 32], sk: &[u8]) -> Result<bool> {
    match Table::<MpuTable>::tx_get(tx, part, sk)? {
        Some(mut m) if !m.deleted => {
            m.deleted = true;
            Table::<MpuTable>::tx_insert(tx, part, sk, &m)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Makes part `n` of an ended upload a tombstone (the table's hook
/// releases its version).
fn end_part(tx: &mut hangar_db::Tx<'_>, upload_id: &VersionId, n: u32, p: &PartRow) -> Result<()> {
    let mut tomb = p.clone();
    tomb.deleted = true;
    Table::<PartTable>::tx_insert(tx, upload_id, &n.to_be_bytes(), &tomb)?;
    Ok(())
}

/// The first live part numbered `from` or more, read inside a transaction
/// (so that a part recorded concurrently is not missed). Part numbers are at
/// most 10 000, so this probes at most that many keys.
fn next_part(
    tx: &hangar_db::Tx<'_>,
    upload_id: &VersionId,
    from: u32,
) -> Result<Option<(u32, PartRow)>> {
    for n in from..=MAX_PART_NUMBER {
        if let Some(p) = Table::<PartTable>::tx_get(tx, upload_id, &n.to_be_bytes())?
            && !p.deleted
        {
            return Ok(Some((n, p)));
        }
    }
    Ok(None)
}

/// The largest part number S3 accepts.
pub const MAX_PART_NUMBER: u32 = 10_000;

/// MD5 of the concatenated part digests (S3's multipart ETag).
fn s3_md5(data: &[u8]) -> Vec<u8> {
    use md5::Digest;
    md5::Md5::digest(data).to_vec()
}
