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

use crate::row_format::{SSE_C_ROW_FORMAT, TAGS_CORS_ROW_FORMAT};
use hangar_table::{Crdt, Lww, ROW_FORMAT, Schema, max_by_content};
use serde::{Deserialize, Serialize};

use crate::bucket::BucketRow;
use crate::object::{ObjectData, ObjectRow, StoredChecksum, TagSet};
use crate::queues::{UploadOf, end_upload_record, queue_version_gc};
use crate::sse_c::SseC;
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
    /// `x-amz-tagging` of CreateMultipartUpload: the completed object's
    /// tags (row format 3; absent when empty).
    #[serde(default, skip_serializing_if = "TagSet::is_empty")]
    pub tags: TagSet,
    /// SSE-C of the upload (row format 11; absent when not encrypted): its
    /// parts are sealed under the key it checks, and the completed object
    /// takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_c: Option<SseC>,
}

impl Crdt for MpuRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of uploads in progress.
pub struct MpuTable;

impl Schema for MpuTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "mpu";
    const PARTITION_LEN: usize = 32;
    type Row = MpuRow;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:mpu");
    /// A bucket's deletion closes its id to new uploads as it does to new
    /// objects ([`Model::delete_bucket`]), then ends the uploads in
    /// progress.
    const FENCE_TREE: Option<&'static str> = Some("fence:mpu");

    fn is_tombstone(row: &MpuRow) -> bool {
        row.deleted
    }

    fn format_of(row: &MpuRow) -> u8 {
        if row.sse_c.is_some() {
            SSE_C_ROW_FORMAT
        } else if row.tags.is_empty() {
            ROW_FORMAT
        } else {
            TAGS_CORS_ROW_FORMAT
        }
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
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "mpu_part";
    const PARTITION_LEN: usize = 16;
    type Row = PartRow;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:mpu_part");

    fn is_tombstone(row: &PartRow) -> bool {
        row.deleted
    }

    /// Every part version that is not the live one the merge keeps — the
    /// part replaced, the part that lost, or every part of an ended upload
    /// — is queued for collection.
    fn updated(
        tx: &mut hangar_db::Tx<'_>,
        _partition: &[u8],
        _sort: &[u8],
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
        let sk = mpu_sort_key(&row.key, &row.upload_id);
        self.mpu_rows().insert(&bucket.id_bytes(), &sk, row).await
    }

    /// The upload `upload_id` of `key`, if it is in progress.
    pub async fn get_multipart(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: &VersionId,
    ) -> Result<Option<MpuRow>> {
        Ok(self
            .mpu_rows()
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
        self.mpu_rows()
            .range_filtered(&bucket.id_bytes(), start, limit, |m| !m.deleted)
            .await
    }

    /// Records a stored part; a part it replaces is released (by the part
    /// table's hook). Refused with [`ModelError::NoSuchUpload`] (and the
    /// part's version released) if the upload ended meanwhile.
    pub async fn put_part(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
        part_number: u32,
        row: PartRow,
    ) -> Result<PartRow> {
        let version = row.version;
        let recorded = self
            .record_part(bucket, key, upload_id, part_number, row)
            .await;
        if recorded.is_err() {
            self.abort_upload(version).await?;
        } else {
            end_upload_record(self.db(), version).await?;
        }
        self.wake_gc();
        recorded
    }

    async fn record_part(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
        part_number: u32,
        row: PartRow,
    ) -> Result<PartRow> {
        if self.get_multipart(bucket, key, &upload_id).await?.is_none() {
            // Aborted or completed while the part was uploading.
            return Err(ModelError::NoSuchUpload);
        }
        let pn = part_number.to_be_bytes();
        let old = self.part_rows().get(&upload_id, &pn).await?;
        let floor = old.as_ref().map_or(0, |o| o.timestamp_msec + 1);
        let row = PartRow {
            timestamp_msec: hangar_util::time::now_msec().max(floor),
            ..row
        };
        self.part_rows()
            .insert(&upload_id, &pn, row.clone())
            .await?;
        // An upload that ended between the check above and the part's row
        // may not have seen the part: look again, and end the part if so
        // (ending an upload tombstones its row before reading its parts, so
        // one of the two sees the other).
        if self.get_multipart(bucket, key, &upload_id).await?.is_none() {
            let tomb = PartRow {
                deleted: true,
                ..row
            };
            self.part_rows().insert(&upload_id, &pn, tomb).await?;
            return Err(ModelError::NoSuchUpload);
        }
        Ok(row)
    }

    /// Parts of an upload from part number `from` on.
    pub async fn list_parts(
        &self,
        upload_id: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, PartRow)>> {
        let parts = self
            .part_rows()
            .range_numbered(upload_id, from, limit)
            .await?;
        Ok(parts.into_iter().filter(|(_, p)| !p.deleted).collect())
    }

    /// Ends an upload: its row and every part become tombstones, and the
    /// parts are released (by the part table's hook).
    pub async fn abort_multipart(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
    ) -> Result<bool> {
        let existed = self.end_multipart(bucket, key, upload_id).await?;
        self.wake_gc();
        Ok(existed)
    }

    /// Ends every upload in progress in `bucket` as
    /// [`Model::abort_multipart`] does (their parts' versions are queued
    /// for collection); returns how many there were. For a bucket being
    /// deleted, whose uploads are fenced so that none starts meanwhile.
    pub(crate) async fn end_all_multipart(&self, bucket: &BucketRow) -> Result<u64> {
        let mut ended = 0u64;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.list_multipart(bucket, start, 256).await?;
            let full = page.len() == 256;
            after = page.last().map(|(k, _)| k.clone());
            for (_, m) in page {
                if self.end_multipart(bucket, &m.key, m.upload_id).await? {
                    ended += 1;
                }
            }
            if !full {
                break;
            }
        }
        self.wake_gc();
        Ok(ended)
    }

    /// Makes upload `upload_id`'s row a tombstone, then each of its parts;
    /// returns whether it was in progress.
    async fn end_multipart(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: VersionId,
    ) -> Result<bool> {
        let part = bucket.id_bytes();
        let sk = mpu_sort_key(key, &upload_id);
        let existed = match self.mpu_rows().get(&part, &sk).await? {
            Some(m) if !m.deleted => {
                let tomb = MpuRow { deleted: true, ..m };
                self.mpu_rows().insert(&part, &sk, tomb).await?;
                true
            }
            _ => false,
        };
        // Every part recorded by now, listed in the completion or not.
        let mut from = 0u32;
        loop {
            let parts = self
                .part_rows()
                .range_numbered(&upload_id, from, 256)
                .await?;
            let Some(last) = parts.last().map(|(n, _)| *n) else {
                break;
            };
            from = last.saturating_add(1);
            let full = parts.len() == 256;
            let tombs = parts
                .into_iter()
                .filter(|(_, p)| !p.deleted)
                .map(|(n, p)| {
                    let tomb = PartRow { deleted: true, ..p };
                    (upload_id.to_vec(), n.to_be_bytes().to_vec(), tomb)
                })
                .collect();
            self.part_rows().insert_many(tombs).await?;
            if !full || last == u32::MAX {
                break;
            }
        }
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
        let part_key = bucket.id_bytes();
        self.begin_upload(version, &UploadOf::object(&part_key, &mpu.key))
            .await?;
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
        let mut headers = mpu.headers.clone();
        let (retention, legal_hold) = crate::object_lock::take_from_headers(&mut headers);
        let acl = crate::access::take_acl_from_headers(&mut headers);
        let row = ObjectRow {
            version,
            timestamp_msec: 0,
            size: chosen.iter().map(|p| p.size).sum(),
            etag,
            headers,
            user_meta: mpu.user_meta.clone(),
            checksum,
            data: ObjectData::Blocks { count: next },
            tags: Lww::new(0, mpu.tags.clone()),
            retention,
            legal_hold,
            sse_c: mpu.sse_c.clone(),
            acl,
        };
        // Still in progress? (Another completion or an abort may have won.)
        if self
            .get_multipart(bucket, &mpu.key, &mpu.upload_id)
            .await?
            .is_none()
        {
            self.abort_upload(version).await?;
            return Err(ModelError::NoSuchUpload);
        }
        let published = match self.publish(bucket, &mpu.key, row).await {
            Ok(p) => p,
            Err(e) => {
                self.abort_upload(version).await?;
                return Err(e);
            }
        };
        // After the object: a crash in between leaves an upload still in
        // progress, which the client can complete again or abort (the
        // object holds its own references to the parts' blocks).
        self.end_multipart(bucket, &mpu.key, mpu.upload_id).await?;
        self.wake_gc();
        Ok(Ok(published))
    }

    /// Makes version `to` use the `count` blocks of `from`, numbered from
    /// `first` and placed from byte `first_offset` of `to`. Offsets are
    /// recomputed from the block sizes, so a source written by row format 1
    /// (no offsets) gives entries with offsets. `to`'s entries are written
    /// before its references (as for any upload), and a reference is only
    /// added to a block whose file is still there, under the block's lock
    /// ([`hangar_block::BlockManager::add_ref_existing`]): a block the
    /// source's collection released is kept for the grace delay, so the
    /// reference either lands in time or finds the block gone. If the
    /// source lost any of its entries or blocks (it was overwritten or
    /// deleted and collected meanwhile), nothing more is shared and
    /// [`ModelError::SourceChanged`] is returned: the caller releases `to`.
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
            let want = count.min(next.saturating_add(BATCH)) - next;
            let page = self
                .version_rows()
                .range_numbered(&from, next, want as usize)
                .await?;
            let mut entries = Vec::with_capacity(page.len());
            for (k, (idx, mut e)) in page.into_iter().enumerate() {
                if idx != next + k as u32 || e.deleted {
                    return Err(ModelError::SourceChanged);
                }
                e.offset = offset;
                offset += e.size;
                entries.push(e);
            }
            if entries.len() != want as usize {
                return Err(ModelError::SourceChanged);
            }
            let rows = entries
                .iter()
                .enumerate()
                .map(|(k, e)| {
                    let idx = first + next + k as u32;
                    (to.to_vec(), idx.to_be_bytes().to_vec(), e.clone())
                })
                .collect();
            self.version_rows().insert_many(rows).await?;
            for e in &entries {
                if !self.add_block_ref(e.hash, to).await? {
                    return Err(ModelError::SourceChanged);
                }
            }
            next += want;
        }
        Ok(())
    }
}

/// MD5 of the concatenated part digests (S3's multipart ETag).
fn s3_md5(data: &[u8]) -> Vec<u8> {
    use md5::Digest;
    md5::Md5::digest(data).to_vec()
}
