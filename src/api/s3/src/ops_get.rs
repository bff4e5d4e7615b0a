//! GetObject and HeadObject: preconditions, ranges, response overrides,
//! checksums, and the body streamed block by block with the next blocks
//! read ahead.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use hangar_model::object::{ObjectData, ObjectRow, StoredChecksum};
use http::{HeaderMap, HeaderValue};
use s3s::dto::{
    ChecksumMode, GetObjectInput, GetObjectOutput, HeadObjectInput, HeadObjectOutput, StreamingBlob,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::checksum;
use crate::conditions::{Preconditions, etag, read_preconditions};
use crate::error::OrS3;
use crate::object_parts::PartRead;
use crate::ops_versioning::parse_version_id;
use crate::sse_c::{Given, Sealing};
use crate::time::timestamp;
use hangar_model::version_ops::FoundVersion;

/// Blocks read ahead of the one being sent.
const READ_AHEAD: usize = 2;

/// What [`S3Api::prepare_read`] found.
struct Prepared {
    obj: ObjectRow,
    version_id: Option<String>,
    range: Option<Range<u64>>,
    /// The SSE-C key, checked against the object's.
    sse: Option<Given>,
    /// The part asked for with `partNumber`.
    part: Option<PartRead>,
}

/// The log text of an SSE-C object whose inline bytes do not open.
fn unopened(obj: &ObjectRow) -> String {
    format!(
        "version {}: inline data does not open under its key",
        hex::encode(obj.version)
    )
}

/// `x-amz-checksum-type` of a read that answers `checksum`: the object's
/// type (a multipart object's may be composite); none for a part's own.
fn checksum_type(
    checksum: Option<&StoredChecksum>,
    part: Option<&PartRead>,
) -> Option<s3s::dto::ChecksumType> {
    if part.is_some_and(|p| p.range.is_some()) {
        return None;
    }
    checksum.map(|c| {
        s3s::dto::ChecksumType::from_static(crate::multipart_checksum::Kind::of_stored(c).name())
    })
}

/// The fields GET and HEAD share.
struct Described {
    content_length: u64,
    content_range: Option<String>,
    checksum: Option<StoredChecksum>,
    headers: HeaderMap,
}

fn describe(
    obj: &ObjectRow,
    range: Option<&Range<u64>>,
    part: Option<&PartRead>,
    checksum_mode: Option<&ChecksumMode>,
    overrides: &[(&'static str, Option<&String>)],
) -> Described {
    let mut headers = HeaderMap::new();
    for (name, value) in &obj.headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(n, v);
        }
    }
    if !headers.contains_key(http::header::CONTENT_TYPE) {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("binary/octet-stream"),
        );
    }
    for (name, value) in overrides {
        if let Some(v) = value
            && let Ok(v) = HeaderValue::from_str(v)
        {
            headers.insert(*name, v);
        }
    }
    for (k, v) in &obj.user_meta {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(format!("x-amz-meta-{k}").as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(n, v);
        }
    }
    let (content_length, content_range) = match range {
        // An empty part (only the last part of an upload may be) has no
        // bytes to name.
        Some(r) if r.is_empty() => (0, None),
        Some(r) => (
            r.end - r.start,
            Some(format!("bytes {}-{}/{}", r.start, r.end - 1, obj.size)),
        ),
        None => (obj.size, None),
    };
    if let Some(n) = part.and_then(|p| p.count) {
        headers.insert("x-amz-mp-parts-count", HeaderValue::from(n));
    }
    // A checksum describes the whole object, so a range gets none; a part
    // read gets the part's own.
    let wants_checksum = checksum_mode.is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
    let checksum = match part {
        Some(p) if p.range.is_some() => p.checksum.clone(),
        _ if range.is_some() => None,
        _ => obj.checksum.clone(),
    }
    .filter(|_| wants_checksum);
    // S3 sends the count only when the object has tags, on GET and on HEAD
    // (whose output type lacks the field, hence a header here).
    if !obj.tag_set().is_empty() {
        headers.insert(
            "x-amz-tagging-count",
            HeaderValue::from(obj.tag_set().len()),
        );
    }
    Described {
        content_length,
        content_range,
        checksum,
        headers,
    }
}

impl S3Api {
    /// Version `version_id` of `key` (its latest without one), which must
    /// be an object: a missing version or a delete marker is S3's error
    /// (with `x-amz-delete-marker` for a marker).
    pub(crate) async fn object_for_read(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<FoundVersion> {
        let b = self.bucket(signer, bucket).await?;
        let v = parse_version_id(version_id)?;
        let found = self
            .model
            .objects()
            .find_version(&b, key, v)
            .await
            .or_s3()?;
        match found {
            None if v.is_some() => Err(crate::error::no_such_version()),
            None => Err(s3_error!(NoSuchKey, "The specified key does not exist.")),
            Some(f) if f.row.is_delete_marker() => Err(crate::error::delete_marker(
                v.is_some(),
                f.id.map(|i| i.to_string()),
            )),
            Some(f) => Ok(f),
        }
    }

    /// What GET and HEAD share: the object, its preconditions, its SSE-C
    /// key (checked against the object's), and the byte range to send
    /// (`None`: all of it).
    #[allow(clippy::too_many_arguments)]
    async fn prepare_read(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        conditions: Preconditions<'_>,
        version_id: Option<&str>,
        range: Option<&s3s::dto::Range>,
        part_number: Option<i32>,
        sse: Option<Given>,
    ) -> S3Result<Prepared> {
        let found = self
            .object_for_read(signer, bucket, key, version_id)
            .await?;
        let (obj, id) = (found.row, found.id.map(|i| i.to_string()));
        let sse = crate::sse_c::for_read(&self.settings.sse_master_key, obj.sse_c.as_ref(), sse)?;
        conditions.check(&obj, false)?;
        let part = match part_number {
            Some(_) if range.is_some() => {
                return Err(s3_error!(
                    InvalidRequest,
                    "Cannot specify both Range header and partNumber query parameter"
                ));
            }
            Some(n) => Some(self.part_read(&obj, n).await?),
            None => None,
        };
        let range = match &part {
            Some(p) => p.range.clone(),
            None => range.map(|r| r.check(obj.size)).transpose()?,
        };
        Ok(Prepared {
            obj,
            version_id: id,
            range,
            sse,
            part,
        })
    }

    /// The bytes `range` of `obj`, as a stream of blocks; an SSE-C
    /// object's opened with `sse`, the key the caller checked
    /// ([`crate::sse_c::for_read`]).
    pub(crate) async fn body(
        &self,
        obj: &ObjectRow,
        range: Range<u64>,
        sse: Option<&Given>,
    ) -> S3Result<StreamingBlob> {
        let opening = match (&obj.sse_c, sse) {
            (None, _) => None,
            (Some(record), Some(g)) => {
                // A disabled KMS key opens nothing (HEAD still answers).
                self.check_kms_usable(Some(record)).await?;
                Some(Arc::new(Sealing::with(record, g)))
            }
            (Some(_), None) => return Err(crate::error::sse_c::key_required()),
        };
        let blocks = match &obj.data {
            ObjectData::Inline(b) => {
                let plain = match &opening {
                    None => Bytes::copy_from_slice(b),
                    Some(o) => Bytes::from(
                        o.record
                            .open(&o.key, b)
                            .ok_or_else(|| crate::error::internal(unopened(obj)))?,
                    ),
                };
                let bytes = plain.slice(range.start as usize..range.end as usize);
                return Ok(StreamingBlob::wrap::<_, std::io::Error>(
                    futures::stream::once(async move { Ok(bytes) }),
                ));
            }
            ObjectData::Deleted | ObjectData::DeleteMarker => {
                return Err(s3_error!(NoSuchKey, "The specified key does not exist."));
            }
            // Only the entries of the blocks overlapping the range are read
            // (the first found by a binary search over the entries' offsets).
            ObjectData::Blocks { count } => self
                .model
                .blocks()
                .for_range(&obj.version, *count, obj.size, range)
                .await
                .or_s3()?,
        };
        let parts: Vec<_> = blocks.into_iter().map(|b| (b.hash, b.from, b.to)).collect();
        // The blocks read ahead (no more than the range has) are this GET's
        // share of the RAM budget, held until the body is sent or dropped.
        let share = parts.len().clamp(1, READ_AHEAD + 1) as u32;
        let ram = self.budget.reserve(share).await?;
        let model = self.model.clone();
        let stream = futures::stream::iter(parts)
            .map(move |(hash, from, to)| {
                let model = model.clone();
                let opening = opening.clone();
                let _held = &ram;
                async move {
                    // In its own task: a read from another node holds a
                    // network stream the response body may not share.
                    let read = tokio::spawn(async move { model.blocks().read(hash).await });
                    let data = read.await.map_err(std::io::Error::other)?.map_err(|e| {
                        let e = crate::error::model_error(e);
                        std::io::Error::other(e.to_string())
                    })?;
                    let data = match opening {
                        None => data,
                        Some(o) => {
                            tokio::task::spawn_blocking(move || o.record.open(&o.key, &data))
                                .await
                                .map_err(std::io::Error::other)?
                                .map(Bytes::from)
                                .ok_or_else(|| {
                                    // The key matched the record: the block
                                    // was changed, or belongs elsewhere.
                                    tracing::error!(
                                        "block {hash} does not open under its version's key"
                                    );
                                    std::io::Error::other(format!("block {hash} does not open"))
                                })?
                        }
                    };
                    if to > data.len() {
                        return Err(std::io::Error::other(format!("block {hash} is short")));
                    }
                    Ok::<_, std::io::Error>(data.slice(from..to))
                }
            })
            .buffered(READ_AHEAD + 1)
            .into_stream();
        Ok(StreamingBlob::wrap(stream))
    }

    pub(crate) async fn do_get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = &req.input;
        let sse = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        let Prepared {
            obj,
            version_id,
            range,
            sse,
            part,
        } = self
            .prepare_read(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                read_preconditions!(input),
                input.version_id.as_deref(),
                input.range.as_ref(),
                input.part_number,
                sse,
            )
            .await?;
        let d = describe(
            &obj,
            range.as_ref(),
            part.as_ref(),
            input.checksum_mode.as_ref(),
            &[
                ("content-type", input.response_content_type.as_ref()),
                ("content-language", input.response_content_language.as_ref()),
                ("cache-control", input.response_cache_control.as_ref()),
                (
                    "content-disposition",
                    input.response_content_disposition.as_ref(),
                ),
                ("content-encoding", input.response_content_encoding.as_ref()),
            ],
        );
        let mut headers = d.headers;
        if let Some(e) = &input.response_expires {
            // response-expires is echoed as sent; the parsed timestamp is
            // only used to validate it.
            let mut s = Vec::new();
            if e.format(s3s::dto::TimestampFormat::HttpDate, &mut s)
                .is_ok()
                && let Ok(v) = HeaderValue::from_bytes(&s)
            {
                headers.insert(http::header::EXPIRES, v);
            }
        }
        let body = self
            .body(&obj, range.unwrap_or(0..obj.size), sse.as_ref())
            .await?;
        let mut out = GetObjectOutput {
            body: Some(body),
            content_length: Some(d.content_length as i64),
            content_range: d.content_range,
            accept_ranges: Some("bytes".into()),
            e_tag: Some(etag(&obj)),
            last_modified: Some(timestamp(obj.timestamp_msec)),
            version_id,
            ..Default::default()
        };
        (
            out.object_lock_mode,
            out.object_lock_retain_until_date,
            out.object_lock_legal_hold_status,
        ) = crate::ops_object_lock::lock_headers(&obj);
        (out.sse_customer_algorithm, out.sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        (out.server_side_encryption, out.ssekms_key_id) =
            crate::sse_managed::echo(obj.sse_c.as_ref());
        checksum::fill_checksum!(d.checksum.as_ref(), out);
        out.checksum_type = checksum_type(d.checksum.as_ref(), part.as_ref());
        let mut resp = S3Response::new(out);
        resp.headers = headers;
        if resp.output.content_range.is_some() {
            resp.status = Some(http::StatusCode::PARTIAL_CONTENT);
        }
        Ok(resp)
    }

    pub(crate) async fn do_head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = &req.input;
        let sse = self.sse_given(
            &req.headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        let Prepared {
            obj,
            version_id,
            range,
            sse,
            part,
        } = self
            .prepare_read(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                read_preconditions!(input),
                input.version_id.as_deref(),
                input.range.as_ref(),
                input.part_number,
                sse,
            )
            .await?;
        let d = describe(
            &obj,
            range.as_ref(),
            part.as_ref(),
            input.checksum_mode.as_ref(),
            &[],
        );
        let mut out = HeadObjectOutput {
            content_length: Some(d.content_length as i64),
            content_range: d.content_range,
            accept_ranges: Some("bytes".into()),
            e_tag: Some(etag(&obj)),
            last_modified: Some(timestamp(obj.timestamp_msec)),
            version_id,
            ..Default::default()
        };
        (
            out.object_lock_mode,
            out.object_lock_retain_until_date,
            out.object_lock_legal_hold_status,
        ) = crate::ops_object_lock::lock_headers(&obj);
        (out.sse_customer_algorithm, out.sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        (out.server_side_encryption, out.ssekms_key_id) =
            crate::sse_managed::echo(obj.sse_c.as_ref());
        checksum::fill_checksum!(d.checksum.as_ref(), out);
        out.checksum_type = checksum_type(d.checksum.as_ref(), part.as_ref());
        let mut resp = S3Response::new(out);
        resp.headers = d.headers;
        if resp.output.content_range.is_some() {
            // s3s answers HEAD with 200 whatever the output's status, and
            // S3 answers a range or a part of it with 206.
            resp.extensions.insert(crate::server::StatusOverride(
                http::StatusCode::PARTIAL_CONTENT,
            ));
        }
        Ok(resp)
    }
}
