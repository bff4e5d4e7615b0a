//! Multipart uploads: Create, UploadPart, UploadPartCopy, Complete, Abort,
//! ListParts and ListMultipartUploads. Each part is stored as a version of
//! its own; completion shares the parts' blocks with the new object.

use std::ops::Bound;

use hangar_model::VersionId;
use hangar_model::bucket::BucketRow;
use hangar_model::garbage::UploadOf;
use hangar_model::multipart::{
    ChecksumRefusal, CompleteError, CompletedPart, MpuRow, PartRow, mpu_sort_key,
};
use hangar_model::object::{ObjectData, ObjectRow};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::checksum::{self, Algorithm};
use crate::conditions::{Preconditions, etag};
use crate::error::OrS3;
use crate::multipart_checksum::{Kind, Sent};
use crate::ops_put::check_key_length;
use crate::ops_put::{BodySource, StoredBody, system_headers};
use crate::sse_c::{Given, Sealing};
use crate::time::timestamp;
use hangar_model::sse_c::SseC;

/// Highest part number S3 allows.
const MAX_PART_NUMBER: i32 = 10_000;

fn parse_upload_id(id: &str) -> S3Result<VersionId> {
    let mut out = [0u8; 16];
    hex::decode_to_slice(id, &mut out).map_err(|_| no_such_upload())?;
    Ok(out)
}

fn no_such_upload() -> s3s::S3Error {
    crate::error::model_error(hangar_model::ModelError::NoSuchUpload)
}

/// The sealing of a part of `mpu` with the key `sse` checked against it.
fn part_sealing(mpu: &MpuRow, sse: Option<&Given>) -> Option<Sealing> {
    Some(Sealing::with(mpu.sse_c.as_ref()?, sse?))
}

/// A part number as S3 accepts it (1 to 10000), or `InvalidArgument`.
pub(crate) fn check_part_number(n: i32) -> S3Result<u32> {
    if (1..=MAX_PART_NUMBER).contains(&n) {
        Ok(n as u32)
    } else {
        Err(s3_error!(
            InvalidArgument,
            "Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive"
        ))
    }
}

impl S3Api {
    async fn upload(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        id: &str,
    ) -> S3Result<(BucketRow, MpuRow)> {
        let b = self.bucket(signer, bucket).await?;
        let upload_id = parse_upload_id(id)?;
        let mpu = self
            .model
            .uploads()
            .get(&b, key, &upload_id)
            .await
            .or_s3()?
            .ok_or_else(no_such_upload)?;
        Ok((b, mpu))
    }

    /// Records a stored part and returns its row.
    async fn record_part(
        &self,
        bucket: &BucketRow,
        mpu: &MpuRow,
        part_number: u32,
        version: VersionId,
        stored: StoredBody,
    ) -> S3Result<PartRow> {
        let blocks = match stored.data {
            ObjectData::Blocks { count } => count,
            ObjectData::Inline(_) | ObjectData::Deleted | ObjectData::DeleteMarker => 0,
        };
        let row = PartRow {
            deleted: false,
            version,
            size: stored.size,
            etag: stored.md5_hex,
            checksum: stored.checksum,
            timestamp_msec: hangar_util::time::now_msec(),
            blocks,
        };
        self.model
            .uploads()
            .put_part(bucket, &mpu.key, mpu.upload_id, part_number, row)
            .await
            .or_s3()
    }

    pub(crate) async fn do_create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        check_key_length(&input.key)?;
        crate::user_meta::check(input.metadata.as_ref())?;
        let tags = crate::tagging::from_optional_header(input.tagging.as_deref())?;
        let lock = crate::ops_object_lock::new_lock(
            &b,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        let acl = self.upload_acl(&b, &input).await?;
        let mut headers = system_headers(&req.headers);
        hangar_model::object_lock::put_in_headers(&mut headers, lock.retention, lock.legal_hold);
        let (canned, users) = crate::ops_acl::AskedAcl::upload_registers(acl.as_ref());
        hangar_model::access::put_acl_in_headers(&mut headers, canned.value);
        hangar_model::access::put_grants_in_headers(&mut headers, &users.value);
        let upload_id = hangar_model::new_version_id();
        let algorithm = input
            .checksum_algorithm
            .as_ref()
            .map(|a| a.as_str().to_owned());
        let checksum_type = crate::multipart_checksum::upload_type(
            algorithm.as_deref(),
            input.checksum_type.as_ref().map(|t| t.as_str()),
        )?;
        let sse = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        let managed = self
            .managed_sealing(
                &b,
                crate::sse_managed::Asked {
                    algorithm: input.server_side_encryption.as_ref(),
                    kms_key_id: input.ssekms_key_id.as_deref(),
                },
                sse.is_some(),
            )
            .await?;
        // The parts are sealed under this record's salt and key (the
        // customer's, or the managed key's derived from it).
        let record = match &sse {
            Some(g) => Some(SseC::new(&g.key)),
            None => managed.map(|s| s.record),
        };
        let row = MpuRow {
            deleted: false,
            upload_id,
            key: input.key.clone(),
            initiated_msec: hangar_util::time::now_msec(),
            headers,
            user_meta: input.metadata.unwrap_or_default().into_iter().collect(),
            checksum_algorithm: algorithm,
            tags,
            sse_c: record,
            checksum_type,
        };
        let kind = crate::multipart_checksum::of_upload(&row).map(|(_, k)| k.name());
        let (server_side_encryption, ssekms_key_id) = crate::sse_managed::echo(row.sse_c.as_ref());
        self.model.uploads().create(&b, row).await.or_s3()?;
        let (sse_customer_algorithm, sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        Ok(S3Response::new(CreateMultipartUploadOutput {
            server_side_encryption,
            ssekms_key_id,
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(hex::encode(upload_id)),
            checksum_algorithm: input.checksum_algorithm,
            checksum_type: kind.map(ChecksumType::from_static),
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        }))
    }

    pub(crate) async fn do_upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let S3Request {
            input,
            headers,
            trailing_headers,
            ..
        } = req;
        let part_number = check_part_number(input.part_number)?;
        let (b, mpu) = self
            .upload(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                &input.upload_id,
            )
            .await?;
        let sse = crate::sse_c::for_part(
            &self.settings.sse_master_key,
            mpu.sse_c.as_ref(),
            self.sse_given(
                &headers,
                input.sse_customer_algorithm.as_deref(),
                input.sse_customer_key.as_deref(),
                input.sse_customer_key_md5.as_deref(),
            )?,
        )?;
        // Parts of an upload under a disabled KMS key are refused.
        self.check_kms_usable(mpu.sse_c.as_ref()).await?;
        let version = hangar_model::new_version_id();
        let stored = self
            .store_body(
                version,
                BodySource {
                    body: input.body,
                    headers: &headers,
                    content_md5: input.content_md5.as_deref(),
                    trailers: trailing_headers.as_ref(),
                    inline_allowed: false,
                    upload_of: UploadOf::Part {
                        upload_id: mpu.upload_id,
                        part_number,
                    },
                    sealing: part_sealing(&mpu, sse.as_ref()),
                },
            )
            .await?;
        let row = self
            .record_part(&b, &mpu, part_number, version, stored)
            .await?;
        let mut out = UploadPartOutput {
            e_tag: Some(ETag::Strong(row.etag.clone())),
            ..Default::default()
        };
        (out.sse_customer_algorithm, out.sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        (out.server_side_encryption, out.ssekms_key_id) =
            crate::sse_managed::echo(mpu.sse_c.as_ref());
        checksum::fill_checksum!(row.checksum.as_ref(), out);
        Ok(S3Response::new(out))
    }

    pub(crate) async fn do_upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let input = &req.input;
        let part_number = check_part_number(input.part_number)?;
        let (b, mpu) = self
            .upload(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                &input.upload_id,
            )
            .await?;
        let (_, _, found) = self
            .copy_source(
                &req,
                &input.copy_source,
                Preconditions {
                    if_match: input.copy_source_if_match.as_ref(),
                    if_none_match: input.copy_source_if_none_match.as_ref(),
                    if_modified_since: input.copy_source_if_modified_since.as_ref(),
                    if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
                },
            )
            .await?;
        let src_version = found.id.map(|i| i.to_string());
        let src = found.row;
        let src_sse = crate::sse_c::for_read(
            &self.settings.sse_master_key,
            src.sse_c.as_ref(),
            self.sse_given(
                &req.headers,
                input.copy_source_sse_customer_algorithm.as_deref(),
                input.copy_source_sse_customer_key.as_deref(),
                input.copy_source_sse_customer_key_md5.as_deref(),
            )?,
        )?;
        let sse = crate::sse_c::for_part(
            &self.settings.sse_master_key,
            mpu.sse_c.as_ref(),
            self.sse_given(
                &req.headers,
                input.sse_customer_algorithm.as_deref(),
                input.sse_customer_key.as_deref(),
                input.sse_customer_key_md5.as_deref(),
            )?,
        )?;
        let range = match &input.copy_source_range {
            None => 0..src.size,
            Some(r) => {
                let parsed = r
                    .strip_prefix("bytes=")
                    .and_then(|r| r.split_once('-'))
                    .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
                match parsed {
                    Some((a, z)) if a <= z && z < src.size => a..z + 1,
                    // Well formed, but past the source's end (AWS API
                    // reference, UploadPartCopy: InvalidRange).
                    Some((a, z)) if a <= z => {
                        return Err(s3_error!(
                            InvalidRange,
                            "The x-amz-copy-source-range bytes={a}-{z} is not within the source object of {} bytes",
                            src.size
                        ));
                    }
                    _ => {
                        return Err(s3_error!(
                            InvalidArgument,
                            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy, within the object"
                        ));
                    }
                }
            }
        };
        self.check_kms_usable(mpu.sse_c.as_ref()).await?;
        let body = self.body(&src, range, src_sse.as_ref()).await?;
        let version = hangar_model::new_version_id();
        let no_headers = http::HeaderMap::new();
        let stored = self
            .store_body(
                version,
                BodySource {
                    body: Some(body),
                    headers: &no_headers,
                    content_md5: None,
                    trailers: None,
                    inline_allowed: false,
                    upload_of: UploadOf::Part {
                        upload_id: mpu.upload_id,
                        part_number,
                    },
                    sealing: part_sealing(&mpu, sse.as_ref()),
                },
            )
            .await?;
        let row = self
            .record_part(&b, &mpu, part_number, version, stored)
            .await?;
        let (sse_customer_algorithm, sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        let (server_side_encryption, ssekms_key_id) = crate::sse_managed::echo(mpu.sse_c.as_ref());
        Ok(S3Response::new(UploadPartCopyOutput {
            sse_customer_algorithm,
            sse_customer_key_md5,
            server_side_encryption,
            ssekms_key_id,
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(row.etag)),
                last_modified: Some(timestamp(row.timestamp_msec)),
                ..Default::default()
            }),
            copy_source_version_id: src_version,
            ..Default::default()
        }))
    }

    pub(crate) async fn do_complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let cond =
            crate::ops_put::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let listed = completed_parts(input.multipart_upload.as_ref())?;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        // A malformed id is an upload that does not exist.
        let upload_id = parse_upload_id(&input.upload_id)?;
        let uploads = self.model.uploads();
        let Some(mpu) = uploads.get(&b, &input.key, &upload_id).await.or_s3()? else {
            // Completed already? A client retrying after a lost answer gets
            // the first answer again (AWS API reference,
            // CompleteMultipartUpload).
            let done = uploads
                .completed(&b, &input.key, &upload_id, &listed)
                .await
                .or_s3()?;
            return match done {
                Some(row) => Ok(S3Response::new(completed_output(&input, &b, &row))),
                None => Err(no_such_upload()),
            };
        };
        // The key is optional here (the parts were checked as they came);
        // one that is sent must be the upload's.
        let sent = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        if sent.is_some() {
            crate::sse_c::for_part(&self.settings.sse_master_key, mpu.sse_c.as_ref(), sent)?;
        }
        let sent = checksums_sent(&input, &mpu);
        let row = match self
            .model
            .uploads()
            .complete(
                &b,
                &mpu,
                &listed,
                &|parts| {
                    // x-amz-mp-object-size, when sent, is checked first
                    // (AWS API reference, CompleteMultipartUpload).
                    let size: u64 = parts.iter().map(|(_, p)| p.size).sum();
                    match input.mpu_object_size {
                        Some(announced) if u64::try_from(announced) != Ok(size) => {
                            Err(CompleteError::ObjectSize {
                                announced,
                                parts: size,
                            })
                        }
                        _ => crate::multipart_checksum::object_checksum(&mpu, &sent, parts),
                    }
                },
                cond,
            )
            .await
            .or_s3()?
        {
            Ok(row) => row,
            Err(CompleteError::InvalidPart(n)) => {
                return Err(s3_error!(
                    InvalidPart,
                    "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag. (part {n})"
                ));
            }
            Err(CompleteError::InvalidPartOrder) => {
                return Err(s3_error!(
                    InvalidPartOrder,
                    "The list of parts was not in ascending order. The parts list must be specified in order by part number."
                ));
            }
            Err(CompleteError::EntityTooSmall(n)) => {
                return Err(s3_error!(
                    EntityTooSmall,
                    "Your proposed upload is smaller than the minimum allowed object size. Each part must be at least 5 MB in size, except the last part. (part {n})"
                ));
            }
            Err(CompleteError::NoParts) => {
                return Err(s3_error!(
                    MalformedXML,
                    "The XML you provided was not well-formed or did not validate against our published schema: no parts listed"
                ));
            }
            Err(CompleteError::Checksum(ChecksumRefusal::PartMismatch(n))) => {
                return Err(s3_error!(
                    InvalidPart,
                    "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified checksum may not match the part's checksum. (part {n})"
                ));
            }
            Err(CompleteError::Checksum(ChecksumRefusal::Missing(m))) => {
                return Err(s3_error!(InvalidRequest, "{m}"));
            }
            Err(CompleteError::Checksum(ChecksumRefusal::ObjectMismatch(m))) => {
                return Err(s3_error!(BadDigest, "{m}"));
            }
            Err(CompleteError::ObjectSize { announced, parts }) => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The provided object size {announced} does not match the size of the parts, {parts} bytes."
                ));
            }
        };
        Ok(S3Response::new(completed_output(&input, &b, &row)))
    }

    pub(crate) async fn do_abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let upload_id = parse_upload_id(&input.upload_id)?;
        if !self
            .model
            .uploads()
            .abort(&b, &input.key, upload_id)
            .await
            .or_s3()?
        {
            return Err(no_such_upload());
        }
        let mut resp = S3Response::new(AbortMultipartUploadOutput::default());
        resp.status = Some(http::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub(crate) async fn do_list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        let (b, mpu) = self
            .upload(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                &input.upload_id,
            )
            .await?;
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let from = input.part_number_marker.unwrap_or(0).max(0) as u32 + 1;
        let mut parts = self
            .model
            .uploads()
            .list_parts(&mpu.upload_id, from, max + 1)
            .await
            .or_s3()?;
        let truncated = parts.len() > max;
        parts.truncate(max);
        let next = parts.last().map(|(n, _)| *n as i32);
        let parts = parts
            .into_iter()
            .map(|(n, p)| {
                let mut part = Part {
                    part_number: Some(n as i32),
                    e_tag: Some(ETag::Strong(p.etag.clone())),
                    size: Some(p.size as i64),
                    last_modified: Some(timestamp(p.timestamp_msec)),
                    ..Default::default()
                };
                checksum::fill_checksum!(p.checksum.as_ref(), part);
                part
            })
            .collect();
        let owner = crate::ops_acl::bucket_owner(&self.model, &b).await?;
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            max_parts: Some(max as i32),
            is_truncated: Some(truncated),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            parts: Some(parts),
            // The bucket owner's, as in ListMultipartUploads.
            initiator: Some(initiator(&owner)),
            owner: Some(owner),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            checksum_algorithm: mpu
                .checksum_algorithm
                .as_deref()
                .map(|a| ChecksumAlgorithm::from(a.to_owned())),
            checksum_type: crate::multipart_checksum::of_upload(&mpu)
                .map(|(_, k)| ChecksumType::from_static(k.name())),
            ..Default::default()
        }))
    }

    pub(crate) async fn do_list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
        let mut start: Vec<u8> = match (&input.key_marker, &input.upload_id_marker) {
            (Some(k), Some(u)) => {
                let mut s = mpu_sort_key(k, &parse_upload_id(u)?);
                s.push(0);
                s
            }
            (Some(k), None) => {
                let mut s = k.as_bytes().to_vec();
                s.push(1);
                s
            }
            _ => prefix.as_bytes().to_vec(),
        };
        let mut entries: Vec<Listed> = Vec::new();
        let mut truncated = false;
        let mut first = true;
        'scan: loop {
            let bound = if first {
                Bound::Included(start.as_slice())
            } else {
                Bound::Excluded(start.as_slice())
            };
            let rows = self
                .model
                .uploads()
                .list(&b, bound, LIST_PAGE)
                .await
                .or_s3()?;
            first = false;
            let n = rows.len();
            for (sort, r) in rows {
                start = sort;
                if !r.key.starts_with(&prefix) {
                    if r.key.as_str() < prefix.as_str() {
                        continue;
                    }
                    break 'scan;
                }
                let item = match delimiter
                    .as_deref()
                    .and_then(|d| r.key[prefix.len()..].find(d).map(|i| (i, d.len())))
                {
                    Some((i, dl)) => Listed::Prefix(r.key[..prefix.len() + i + dl].to_owned()),
                    None => Listed::Upload(Box::new(r)),
                };
                if let Listed::Prefix(p) = &item {
                    // A prefix already listed, here or on the page before.
                    let seen = matches!(entries.last(), Some(Listed::Prefix(q)) if q == p);
                    if seen || input.key_marker.as_deref() == Some(p.as_str()) {
                        continue;
                    }
                }
                if entries.len() == max {
                    truncated = true;
                    break 'scan;
                }
                entries.push(item);
            }
            if n < LIST_PAGE {
                break;
            }
        }
        let (next_key, next_upload) = match entries.last().filter(|_| truncated) {
            Some(Listed::Upload(u)) => (Some(u.key.clone()), Some(hex::encode(u.upload_id))),
            Some(Listed::Prefix(p)) => (Some(p.clone()), None),
            None => (None, None),
        };
        let mut uploads = Vec::new();
        let mut prefixes = Vec::new();
        // The bucket owner's, like the objects the uploads become
        // (`bucket_owner`); the upload row does not record its initiator.
        let owner = crate::ops_acl::bucket_owner(&self.model, &b).await?;
        let initiator = initiator(&owner);
        for e in entries {
            match e {
                Listed::Upload(u) => uploads.push(MultipartUpload {
                    key: Some(u.key),
                    upload_id: Some(hex::encode(u.upload_id)),
                    initiated: Some(timestamp(u.initiated_msec)),
                    initiator: Some(initiator.clone()),
                    owner: Some(owner.clone()),
                    ..Default::default()
                }),
                Listed::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(p) }),
            }
        }
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            delimiter,
            key_marker: input.key_marker,
            upload_id_marker: input.upload_id_marker,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            next_key_marker: next_key,
            next_upload_id_marker: next_upload,
            uploads: Some(uploads),
            common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
            ..Default::default()
        }))
    }
}

/// The initiator S3 shows for an upload whose owner is `owner` (an upload
/// row does not record the key that began it).
fn initiator(owner: &Owner) -> Initiator {
    Initiator {
        id: owner.id.clone(),
        display_name: owner.display_name.clone(),
    }
}

/// The parts a CompleteMultipartUpload lists. An upload has at most one
/// part per number: a longer list cannot be valid, and is refused before
/// any part is looked up.
fn completed_parts(m: Option<&CompletedMultipartUpload>) -> S3Result<Vec<CompletedPart>> {
    let parts = m.and_then(|m| m.parts.as_deref()).unwrap_or_default();
    if parts.len() > MAX_PART_NUMBER as usize {
        return Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema: {} parts listed, at most {MAX_PART_NUMBER}",
            parts.len()
        ));
    }
    Ok(parts
        .iter()
        .map(|p| CompletedPart {
            part_number: p.part_number.unwrap_or(0).max(0) as u32,
            etag: p
                .e_tag
                .as_ref()
                .map(|e| e.value().trim_matches('"').to_owned())
                .unwrap_or_default(),
        })
        .collect())
}

/// The answer to a completion that published `row`.
fn completed_output(
    input: &CompleteMultipartUploadInput,
    bucket: &BucketRow,
    row: &ObjectRow,
) -> CompleteMultipartUploadOutput {
    let mut out = CompleteMultipartUploadOutput {
        bucket: Some(input.bucket.clone()),
        key: Some(input.key.clone()),
        e_tag: Some(etag(row)),
        location: Some(format!("/{}/{}", input.bucket, input.key)),
        version_id: crate::ops_versioning::published_id(bucket, row),
        checksum_type: row
            .checksum
            .as_ref()
            .map(|c| ChecksumType::from_static(Kind::of_stored(c).name())),
        ..Default::default()
    };
    (out.server_side_encryption, out.ssekms_key_id) = crate::sse_managed::echo(row.sse_c.as_ref());
    checksum::fill_checksum!(row.checksum.as_ref(), out);
    out
}

/// The checksums a completion of `mpu` sends: each listed part's and the
/// object's of the upload's algorithm, and the checksum type.
fn checksums_sent(input: &CompleteMultipartUploadInput, mpu: &MpuRow) -> Sent {
    let algorithm = crate::multipart_checksum::of_upload(mpu).map(|(a, _)| a);
    // The value of `a` among a DTO's five checksum fields.
    fn pick(a: Option<Algorithm>, fields: [&Option<String>; 5]) -> Option<String> {
        let i = Algorithm::ALL.iter().position(|x| Some(*x) == a)?;
        fields[i].clone()
    }
    let parts = input
        .multipart_upload
        .as_ref()
        .and_then(|m| m.parts.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            pick(
                algorithm,
                [
                    &p.checksum_crc32,
                    &p.checksum_crc32c,
                    &p.checksum_crc64nvme,
                    &p.checksum_sha1,
                    &p.checksum_sha256,
                ],
            )
        })
        .collect();
    Sent {
        parts,
        object: pick(
            algorithm,
            [
                &input.checksum_crc32,
                &input.checksum_crc32c,
                &input.checksum_crc64nvme,
                &input.checksum_sha1,
                &input.checksum_sha256,
            ],
        ),
        kind: input.checksum_type.as_ref().map(|t| t.as_str().to_owned()),
    }
}

/// Uploads read from the table at once while listing.
const LIST_PAGE: usize = 1000;

/// One entry of a ListMultipartUploads answer.
enum Listed {
    Upload(Box<MpuRow>),
    /// Keys sharing this prefix up to the delimiter, listed once.
    Prefix(String),
}
