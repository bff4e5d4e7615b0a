//! Multipart uploads: the service that owns the upload table and the part
//! table ([`crate::multipart`]: their rows). It starts an upload, records
//! its parts (each part a version of its own, its blocks stored through
//! [`Blocks`]), lists uploads and parts, aborts an upload, and completes one
//! by publishing, through [`Objects`], a new version that shares the parts'
//! blocks (no data is copied). It promises that a part is never recorded
//! into an upload that ended (one of the part and the end sees the other),
//! that the blocks of an ended upload's parts are released (by the part
//! table's hook), and that a completion either publishes the object or
//! leaves the upload in progress, to complete or abort again.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use hangar_db::Db;
use hangar_table::Lww;

use crate::blocks::Blocks;
use crate::bucket::BucketRow;
use crate::multipart::{
    CompleteError, CompletedPart, MIN_PART_SIZE, MpuRow, MpuTable, ObjectChecksum, PartRow,
    PartTable, mpu_sort_key,
};
use crate::object::{ObjectData, ObjectRow};
use crate::objects::Objects;
use crate::queues::{UploadOf, end_upload_record};
use crate::version_parts::VersionPart;
use crate::write_condition::WriteCondition;
use crate::{ModelError, Result, VersionId};
use hangar_table::Table;

/// The upload service of one node.
pub struct Uploads {
    db: Db,
    mpus: Table<MpuTable>,
    parts: Table<PartTable>,
    objects: Arc<Objects>,
    blocks: Arc<Blocks>,
}

impl Uploads {
    pub(crate) fn new(
        db: Db,
        mpus: Table<MpuTable>,
        parts: Table<PartTable>,
        objects: Arc<Objects>,
        blocks: Arc<Blocks>,
    ) -> Uploads {
        Uploads {
            db,
            mpus,
            parts,
            objects,
            blocks,
        }
    }

    pub(crate) fn mpu_rows(&self) -> &Table<MpuTable> {
        &self.mpus
    }

    pub(crate) fn part_rows(&self) -> &Table<PartTable> {
        &self.parts
    }
}

impl Uploads {
    /// Starts a multipart upload of `key`.
    pub async fn create(&self, bucket: &BucketRow, row: MpuRow) -> Result<()> {
        let sk = mpu_sort_key(&row.key, &row.upload_id);
        Ok(self.mpus.insert_one(&bucket.id_bytes(), &sk, row).await?)
    }

    /// The upload `upload_id` of `key`, if it is in progress.
    pub async fn get(
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
    pub async fn list(
        &self,
        bucket: &BucketRow,
        start: Bound<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, MpuRow)>> {
        Ok(self
            .mpus
            .range_filtered(&bucket.id_bytes(), start, limit, |m| !m.deleted)
            .await?)
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
            self.objects.abort_upload(version).await?;
        } else {
            end_upload_record(&self.db, version).await?;
        }
        self.blocks.wake_collector();
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
        if self.get(bucket, key, &upload_id).await?.is_none() {
            // Aborted or completed while the part was uploading.
            return Err(ModelError::NoSuchUpload);
        }
        let pn = part_number.to_be_bytes();
        let old = self.parts.get(&upload_id, &pn).await?;
        let floor = old.as_ref().map_or(0, |o| o.timestamp_msec + 1);
        let row = PartRow {
            timestamp_msec: hangar_util::time::now_msec().max(floor),
            ..row
        };
        self.parts.insert_one(&upload_id, &pn, row.clone()).await?;
        // An upload that ended between the check above and the part's row
        // may not have seen the part: look again, and end the part if so
        // (ending an upload tombstones its row before reading its parts, so
        // one of the two sees the other).
        if self.get(bucket, key, &upload_id).await?.is_none() {
            let tomb = PartRow {
                deleted: true,
                ..row
            };
            self.parts.insert_one(&upload_id, &pn, tomb).await?;
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
    pub async fn abort(&self, bucket: &BucketRow, key: &str, upload_id: VersionId) -> Result<bool> {
        let existed = self.end(bucket, key, upload_id).await?;
        self.blocks.wake_collector();
        Ok(existed)
    }

    /// Ends every upload in progress in `bucket` as
    /// [`Uploads::abort`] does (their parts' versions are queued
    /// for collection); returns how many there were. For a bucket being
    /// deleted, whose uploads are fenced so that none starts meanwhile.
    pub(crate) async fn end_all(&self, bucket: &BucketRow) -> Result<u64> {
        let mut ended = 0u64;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self.list(bucket, start, 256).await?;
            let full = page.len() == 256;
            after = page.last().map(|(k, _)| k.clone());
            for (_, m) in page {
                if self.end(bucket, &m.key, m.upload_id).await? {
                    ended += 1;
                }
            }
            if !full {
                break;
            }
        }
        self.blocks.wake_collector();
        Ok(ended)
    }

    /// Makes upload `upload_id`'s row a tombstone, then each of its parts;
    /// returns whether it was in progress.
    async fn end(&self, bucket: &BucketRow, key: &str, upload_id: VersionId) -> Result<bool> {
        let part = bucket.id_bytes();
        let sk = mpu_sort_key(key, &upload_id);
        let existed = match self.mpus.get(&part, &sk).await? {
            Some(m) if !m.deleted => {
                let tomb = MpuRow { deleted: true, ..m };
                self.mpus.insert_one(&part, &sk, tomb).await?;
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
            self.parts.insert(tombs).await?;
            if !full || last == u32::MAX {
                break;
            }
        }
        Ok(existed)
    }

    /// Completes an upload with the listed parts: the object becomes a new
    /// version sharing the parts' blocks, published if `cond` holds
    /// ([`Objects::publish_if`]: decided in the same round as PutObject's
    /// conditions; [`ModelError::PreconditionFailed`] leaves the upload in
    /// progress). Returns the published row, or why the list was refused
    /// (nothing changes then).
    pub async fn complete(
        &self,
        bucket: &BucketRow,
        mpu: &MpuRow,
        listed: &[CompletedPart],
        checksum: &ObjectChecksum<'_>,
        cond: WriteCondition,
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
        let numbered: Vec<(u32, PartRow)> = listed
            .iter()
            .map(|l| l.part_number)
            .zip(chosen.iter().cloned())
            .collect();
        let checksum = match checksum(&numbered) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };

        let version = crate::new_version_id();
        let part_key = bucket.id_bytes();
        self.objects
            .begin_upload(version, &UploadOf::object(&part_key, &mpu.key))
            .await?;
        let (mut next, mut bytes) = (0u32, 0u64);
        let mut bounds = Vec::with_capacity(chosen.len());
        for (p, l) in chosen.iter().zip(listed) {
            if let Err(e) = self
                .blocks
                .share_at(p.version, p.blocks, version, next, bytes)
                .await
            {
                self.objects.abort_upload(version).await?;
                // A part collected under us: the upload was completed or
                // aborted meanwhile.
                return Err(match e {
                    ModelError::SourceChanged => ModelError::NoSuchUpload,
                    e => e,
                });
            }
            bounds.push((
                l.part_number,
                VersionPart {
                    deleted: false,
                    size: p.size,
                    offset: bytes,
                    checksum: p.checksum.clone(),
                },
            ));
            next += p.blocks;
            bytes += p.size;
        }
        if let Err(e) = self.blocks.put_parts(version, bounds).await {
            self.objects.abort_upload(version).await?;
            return Err(e);
        }
        let etag = multipart_etag(chosen.iter().map(|p| p.etag.as_str()));
        let mut headers = mpu.headers.clone();
        let (retention, legal_hold) = crate::object_lock::take_from_headers(&mut headers);
        let acl = crate::access::take_acl_from_headers(&mut headers);
        let grants = crate::access::take_grants_from_headers(&mut headers);
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
            grants,
        };
        // Still in progress? (Another completion or an abort may have won.)
        if self.get(bucket, &mpu.key, &mpu.upload_id).await?.is_none() {
            self.objects.abort_upload(version).await?;
            return Err(ModelError::NoSuchUpload);
        }
        let published = match self.objects.publish_if(bucket, &mpu.key, row, cond).await {
            Ok(p) => p,
            Err(e) => {
                // Not published (a failed condition leaves the upload in
                // progress, to complete again): release the version,
                // unless a later round of the key may still publish it
                // (its upload record then stays, and the start-up scan
                // decides).
                if !e.outcome_unknown() {
                    self.objects.abort_upload(version).await?;
                }
                return Err(e);
            }
        };
        // After the object: a crash in between leaves an upload still in
        // progress, which the client can complete again or abort (the
        // object holds its own references to the parts' blocks).
        self.end(bucket, &mpu.key, mpu.upload_id).await?;
        self.blocks.wake_collector();
        Ok(Ok(published))
    }

    /// The object a completion of upload `upload_id` with `listed` already
    /// made, for a client that completes it again (a retry after a lost
    /// answer, which S3 answers as the first time): the key's current
    /// object, when the upload has ended (its row is a tombstone, kept
    /// until the tombstone delay) and that object's ETag is the one these
    /// parts make. `None` otherwise: the upload never existed, or the key
    /// has changed since (then S3's `NoSuchUpload` is the answer).
    pub async fn completed(
        &self,
        bucket: &BucketRow,
        key: &str,
        upload_id: &VersionId,
        listed: &[CompletedPart],
    ) -> Result<Option<ObjectRow>> {
        let ended = self
            .mpu_rows()
            .get(&bucket.id_bytes(), &mpu_sort_key(key, upload_id))
            .await?
            .is_some_and(|m| m.deleted);
        if !ended || listed.is_empty() {
            return Ok(None);
        }
        let etag = multipart_etag(listed.iter().map(|p| p.etag.as_str()));
        Ok(self
            .objects
            .get(bucket, key)
            .await?
            .filter(|o| o.etag == etag))
    }
}

/// The ETag of an object completed from `parts` (their ETags, in order):
/// the MD5 of their concatenated digests, then `-` and their count (S3's
/// multipart ETag).
fn multipart_etag<'a>(parts: impl ExactSizeIterator<Item = &'a str>) -> String {
    let n = parts.len();
    let md5s: Vec<u8> = parts
        .flat_map(|e| hex::decode(e).unwrap_or_default())
        .collect();
    format!("{}-{n}", hex::encode(s3_md5(&md5s)))
}

/// MD5 of the concatenated part digests (S3's multipart ETag).
fn s3_md5(data: &[u8]) -> Vec<u8> {
    use md5::Digest;
    md5::Md5::digest(data).to_vec()
}
