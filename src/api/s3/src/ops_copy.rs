//! CopyObject: metadata and tagging COPY or REPLACE, copy-source
//! preconditions. Plain to plain, data is never copied: the new version
//! references the source's blocks (or carries its inline bytes). With
//! SSE-C on either side the data is read, opened with the source's key,
//! and stored again, sealed with the destination's key or plain.

use hangar_model::garbage::UploadOf;
use hangar_model::object::{ObjectData, ObjectRow};
use hangar_table::Lww;
use s3s::dto::{
    CopyObjectInput, CopyObjectOutput, CopyObjectResult, CopySource, MetadataDirective,
    TaggingDirective,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::conditions::{Preconditions, etag};
use crate::error::OrS3;
use crate::ops_put::check_key_length;
use crate::ops_put::{BodySource, system_headers};
use crate::sse_c::Sealing;
use crate::time::timestamp;
use hangar_model::version_ops::FoundVersion;

/// The version a copy source names, if any.
fn version_id_of(source: &CopySource) -> Option<&str> {
    match source {
        CopySource::Bucket { version_id, .. } => version_id.as_deref(),
        _ => None,
    }
}

impl S3Api {
    /// The object a copy reads, once the caller's read permission on it
    /// (the access check covered the destination) and the copy-source
    /// preconditions are checked; with its bucket and key.
    pub(crate) async fn copy_source<T>(
        &self,
        req: &S3Request<T>,
        source: &CopySource,
        conditions: Preconditions<'_>,
    ) -> S3Result<(String, String, FoundVersion)> {
        let (mut bucket, key, version_id) = match source {
            CopySource::Bucket {
                bucket,
                key,
                version_id,
            } => (
                bucket.to_string(),
                key.to_string(),
                version_id.as_ref().map(|v| v.to_string()),
            ),
            CopySource::AccessPoint { .. } | CopySource::Outpost { .. } => {
                return Err(s3_error!(NotImplemented, "Access points are not supported"));
            }
        };
        // The access check covered the destination; the source is read
        // with the same caller (its key, or anonymous, and the request's
        // condition keys) under the source bucket's own policy.
        let caller = req
            .extensions
            .get::<crate::access::Caller>()
            .cloned()
            .unwrap_or_default();
        let signer = caller.key.as_ref().map(|k| k.access_key_id.as_str());
        if let Some(src) = self
            .model
            .buckets()
            .get_bucket_as(&bucket, signer)
            .await
            .or_s3()?
        {
            let action = crate::access::iam_action("GetObject", version_id.is_some());
            const EXPECTED: &str = "x-amz-source-expected-bucket-owner";
            let owner = if req.headers.contains_key(EXPECTED) {
                Some(crate::ops_acl::bucket_owner(&self.model, &src).await?)
            } else {
                None
            };
            if !caller.may(&src, crate::access::Need::Read, &action, Some(&key))
                || owner
                    .as_ref()
                    .is_some_and(|o| !crate::auth::owned_as_expected(&req.headers, EXPECTED, o))
            {
                return Err(s3_error!(AccessDenied, "Access Denied to the copy source"));
            }
            // The bucket's own name, also when the source names an alias.
            bucket = src.name;
        }
        let found = self
            .object_for_read(signer, &bucket, &key, version_id.as_deref())
            .await?;
        conditions.check(&found.row, true)?;
        Ok((bucket, key, found))
    }

    pub(crate) async fn do_copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let input = &req.input;
        let (src_bucket, src_key, found) = self
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
        let dst_sse = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        let dst_b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        check_key_length(&input.key)?;
        // The copy's encryption is the request's or the destination's
        // default, never the source's.
        let dst_managed = self
            .managed_sealing(
                &dst_b,
                crate::sse_managed::Asked {
                    algorithm: input.server_side_encryption.as_ref(),
                    kms_key_id: input.ssekms_key_id.as_deref(),
                },
                dst_sse.is_some(),
            )
            .await?;

        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        if replace {
            crate::user_meta::check(input.metadata.as_ref())?;
        }
        // A copy of a given version onto its key restores it: allowed.
        let by_version = version_id_of(&input.copy_source).is_some();
        // Sealed on either side: the data is read and stored again.
        let sse_involved = src_sse.is_some() || dst_sse.is_some() || dst_managed.is_some();
        // Encrypting, decrypting or changing the key changes the object; a
        // managed source copied without asking for an encryption does not.
        let changes_encryption = src.sse_c.as_ref().is_some_and(|r| r.is_customer_key())
            || dst_sse.is_some()
            || input.server_side_encryption.is_some();
        if src_bucket == dst_b.name
            && src_key == input.key
            && !replace
            && !by_version
            && !changes_encryption
        {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
            ));
        }
        let (headers, user_meta) = if replace {
            (
                system_headers(&req.headers),
                input
                    .metadata
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            )
        } else {
            (src.headers.clone(), src.user_meta.clone())
        };

        // The copy's own ACL (a copy does not take its source's).
        let acl = self.upload_acl(&dst_b, input).await?;
        // x-amz-tagging-directive: the source's tags (COPY, the default)
        // or the request's x-amz-tagging (REPLACE).
        let tags = match input.tagging_directive.as_ref().map(|d| d.as_str()) {
            None | Some(TaggingDirective::COPY) => src.tag_set().clone(),
            Some(TaggingDirective::REPLACE) => {
                crate::tagging::from_optional_header(input.tagging.as_deref())?
            }
            Some(_) => {
                return Err(s3_error!(InvalidArgument, "Unknown tagging directive."));
            }
        };

        // The copy is a new version: its lock comes from this request or
        // the destination's default, never from the source.
        let lock = crate::ops_object_lock::new_lock(
            &dst_b,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        let version = hangar_model::new_version_id();
        let upload_of = UploadOf::object(&dst_b.id_bytes(), &input.key);
        let (data, size, new_etag, sse_c) = if sse_involved {
            // Sealed on either side: the data is read (opened with the
            // source's key) and stored again (sealed with the new key, or
            // plain), never shared.
            let body = self.body(&src, 0..src.size, src_sse.as_ref()).await?;
            let no_headers = http::HeaderMap::new();
            let stored = self
                .store_body(
                    version,
                    BodySource {
                        body: Some(body),
                        headers: &no_headers,
                        content_md5: None,
                        trailers: None,
                        inline_allowed: true,
                        upload_of,
                        sealing: match &dst_sse {
                            Some(g) => Some(Sealing::new(g)),
                            None => dst_managed,
                        },
                    },
                )
                .await?;
            // A multipart object copied keeps its ETag when plain to plain
            // only; from SSE-C to plain it is the MD5 of the content.
            (stored.data, stored.size, stored.md5_hex, stored.sse_c)
        } else {
            (
                self.shared_data(&src, version, &upload_of).await?,
                src.size,
                src.etag.clone(),
                None,
            )
        };
        let row = ObjectRow {
            version,
            timestamp_msec: hangar_util::time::now_msec(),
            size,
            etag: new_etag,
            headers,
            user_meta,
            checksum: src.checksum.clone(),
            data,
            tags: Lww::new(0, tags),
            retention: Lww::default(),
            legal_hold: Lww::default(),
            sse_c,
            acl: Lww::default(),
            grants: Lww::default(),
        };
        let mut row = row;
        (row.acl, row.grants) = crate::ops_acl::AskedAcl::upload_registers(acl.as_ref());
        lock.apply(&mut row);
        let row = match self.model.objects().publish(&dst_b, &input.key, row).await {
            Ok(row) => row,
            Err(e) => {
                let _ = self.model.objects().abort_upload(version).await;
                return Err(crate::error::model_error(e));
            }
        };
        let result = CopyObjectResult {
            e_tag: Some(etag(&row)),
            last_modified: Some(timestamp(row.timestamp_msec)),
            ..Default::default()
        };
        let (sse_customer_algorithm, sse_customer_key_md5) = crate::sse_c::echo(dst_sse.as_ref());
        let (server_side_encryption, ssekms_key_id) = crate::sse_managed::echo(row.sse_c.as_ref());
        Ok(S3Response::new(CopyObjectOutput {
            server_side_encryption,
            ssekms_key_id,
            copy_object_result: Some(result),
            version_id: crate::ops_versioning::published_id(&dst_b, &row),
            copy_source_version_id: src_version,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        }))
    }

    /// The data of a plain copy of plain `src` as `version`: its inline
    /// bytes, or references to its blocks.
    async fn shared_data(
        &self,
        src: &ObjectRow,
        version: hangar_model::VersionId,
        upload_of: &UploadOf,
    ) -> S3Result<ObjectData> {
        Ok(match &src.data {
            ObjectData::Inline(b) => ObjectData::Inline(b.clone()),
            ObjectData::Blocks { count } => {
                self.model
                    .objects()
                    .begin_upload(version, upload_of)
                    .await
                    .or_s3()?;
                match self
                    .model
                    .blocks()
                    .share(
                        src.version,
                        *count,
                        version,
                        crate::object_parts::parts_count(&src.etag).is_some(),
                    )
                    .await
                {
                    Ok(()) => ObjectData::Blocks { count: *count },
                    Err(e) => {
                        let _ = self.model.objects().abort_upload(version).await;
                        return Err(crate::error::model_error(e));
                    }
                }
            }
            ObjectData::Deleted | ObjectData::DeleteMarker => {
                return Err(s3_error!(NoSuchKey, "The specified key does not exist."));
            }
        })
    }
}
