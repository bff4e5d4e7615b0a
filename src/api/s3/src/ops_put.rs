//! PutObject: the body is cut into blocks as it streams in, never buffered
//! whole. MD5 (the ETag), the requested flexible checksum and each block's
//! blake3 name are computed in the same pass; up to [`BLOCKS_IN_FLIGHT`]
//! blocks are being stored while the next one is read. The object becomes
//! visible only when its row is published, after every block is stored.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use futures::Stream;

use hangar_model::WriteCondition;
use hangar_model::bucket::BucketRow;
use hangar_model::garbage::UploadOf;
use hangar_model::object::{ObjectData, ObjectRow, StoredChecksum};
use hangar_model::{Model, ModelError, VersionId};
use hangar_table::Lww;
use http::HeaderMap;
use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::{ETagCondition, PutObjectInput, PutObjectOutput, StreamingBlob};
use s3s::{S3Error, S3Request, S3Response, S3Result, TrailingHeaders, s3_error};
use tokio::task::JoinHandle;

use crate::S3Api;
use crate::access::signer;
use crate::checksum::{self, Requested};
use crate::conditions::etag;
use crate::error::OrS3;
use crate::lingering_body::LingeringBody;
use crate::sse_c::Sealing;
use crate::upload_gate::Admission;
use hangar_model::sse_c::SseC;

/// Blocks of one upload being stored at once (bounds an upload's memory to
/// about this many blocks).
pub const BLOCKS_IN_FLIGHT: usize = 4;

/// The system headers S3 stores with an object and returns on GET/HEAD.
pub const SYSTEM_HEADERS: [&str; 6] = [
    "content-type",
    "content-encoding",
    "content-disposition",
    "content-language",
    "cache-control",
    "expires",
];

/// An object body once stored.
pub struct StoredBody {
    pub size: u64,
    /// The ETag: hex MD5 of the body, random for an SSE-C body.
    pub md5_hex: String,
    pub checksum: Option<StoredChecksum>,
    pub data: ObjectData,
    /// The SSE-C record the body was sealed with.
    pub sse_c: Option<SseC>,
}

/// The blocks of one upload being stored in background tasks while the body
/// is read on: at most [`BLOCKS_IN_FLIGHT`] at once, awaited in order.
///
/// Until [`BlockWriters::disarm`], dropping it (an error, or the
/// client going away and hyper dropping the request) releases the upload:
/// a task waits for the blocks still being stored, then queues the version
/// for collection, so no reference is added after the collector ran.
struct BlockWriters {
    model: Arc<Model>,
    version: VersionId,
    upload_of: UploadOf,
    /// SSE-C: each block is sealed before it is stored.
    sealing: Option<Arc<Sealing>>,
    /// The upload's admission: its blocks count in the gate's queue.
    admission: Option<Admission>,
    /// Bytes of the blocks pushed so far: the offset of the next one.
    offset: u64,
    tasks: VecDeque<JoinHandle<Result<(), ModelError>>>,
    /// The upload is registered and has not been handed over yet.
    armed: bool,
}

impl BlockWriters {
    fn new(
        model: Arc<Model>,
        version: VersionId,
        upload_of: UploadOf,
        sealing: Option<Arc<Sealing>>,
        admission: Option<Admission>,
    ) -> Self {
        BlockWriters {
            model,
            version,
            upload_of,
            sealing,
            admission,
            offset: 0,
            tasks: VecDeque::new(),
            armed: false,
        }
    }

    fn started(&self) -> bool {
        self.armed
    }

    /// Registers the upload; from here on its blocks are released on failure.
    async fn start(&mut self) -> S3Result<()> {
        self.model
            .objects()
            .begin_upload(self.version, &self.upload_of)
            .await
            .or_s3()?;
        self.armed = true;
        Ok(())
    }

    async fn push(&mut self, index: u32, block: Bytes) -> S3Result<()> {
        if self.tasks.len() >= BLOCKS_IN_FLIGHT {
            self.wait_oldest().await?;
        }
        let (model, version, offset) = (self.model.clone(), self.version, self.offset);
        self.offset += block.len() as u64;
        let sealing = self.sealing.clone();
        let queued = self.admission.as_ref().map(|a| a.block(block.len() as u64));
        self.tasks.push_back(tokio::spawn(async move {
            let stored = match sealing {
                None => model.blocks().store(version, index, offset, block).await,
                Some(s) => {
                    let plain_len = block.len() as u64;
                    let sealed = tokio::task::spawn_blocking(move || {
                        Bytes::from(s.record.seal(&s.key, &block))
                    })
                    .await
                    .map_err(|e| ModelError::Invalid(format!("sealing task failed: {e}")))?;
                    model
                        .blocks()
                        .store_sealed(version, index, offset, plain_len, sealed)
                        .await
                }
            };
            if let Some(q) = queued {
                q.finish(stored.is_ok());
            }
            stored
        }));
        Ok(())
    }

    async fn wait_oldest(&mut self) -> S3Result<()> {
        if let Some(t) = self.tasks.pop_front() {
            t.await.map_err(crate::error::internal)?.or_s3()?;
        }
        Ok(())
    }

    /// Waits for every block to be stored.
    async fn finish(&mut self) -> S3Result<()> {
        while !self.tasks.is_empty() {
            self.wait_oldest().await?;
        }
        Ok(())
    }

    /// Hands the upload over to the caller, who publishes or releases it.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for BlockWriters {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (model, version) = (self.model.clone(), self.version);
        let tasks = std::mem::take(&mut self.tasks);
        tokio::spawn(async move {
            for t in tasks {
                let _ = t.await;
            }
            if let Err(e) = model.objects().abort_upload(version).await {
                tracing::error!("cannot release the blocks of a failed upload: {e}");
            }
        });
    }
}

/// Longest object key S3 accepts, in bytes.
const MAX_KEY_LEN: usize = 1024;

/// Refuses keys S3 would refuse as too long (for every write of a key),
/// and keys with U+0000, which XML 1.0 (every listing) cannot carry and
/// which separates a key from its versions in the object table.
pub(crate) fn check_key_length(key: &str) -> S3Result<()> {
    if key.contains('\0') {
        return Err(s3_error!(
            InvalidArgument,
            "Object keys may not contain the character U+0000"
        ));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(s3_error!(
            KeyTooLongError,
            "Your key is too long: {} bytes, at most {MAX_KEY_LEN}",
            key.len()
        ));
    }
    Ok(())
}

/// Largest object (PutObject) or part (UploadPart) one request may carry,
/// as in S3: 5 GiB.
pub(crate) const MAX_BODY_LEN: u64 = 5 * 1024 * 1024 * 1024;

fn entity_too_large(len: u64) -> S3Error {
    s3_error!(
        EntityTooLarge,
        "Your proposed upload exceeds the maximum allowed size: {len} bytes, at most {MAX_BODY_LEN}"
    )
}

/// The body length a request announces: `x-amz-decoded-content-length`
/// for an aws-chunked body, else `Content-Length` (which with aws-chunked
/// also counts the framing, so it only over-estimates).
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
    number("x-amz-decoded-content-length").or_else(|| number("content-length"))
}

/// An incoming body and the request headers that describe it.
pub(crate) struct BodySource<'a> {
    pub body: Option<StreamingBlob>,
    pub headers: &'a HeaderMap,
    pub content_md5: Option<&'a str>,
    pub trailers: Option<&'a TrailingHeaders>,
    /// Whether a small body may be kept inline (objects yes, parts no).
    pub inline_allowed: bool,
    /// What the stored version will become, recorded with the upload.
    pub upload_of: UploadOf,
    /// SSE-C: the body is sealed with this key and record as it is stored.
    pub sealing: Option<Sealing>,
}

/// The condition of a write (PutObject, CompleteMultipartUpload) from its
/// `If-Match` and `If-None-Match` headers, decided with the publication
/// ([`hangar_model::objects::Objects::publish_if`]). `If-None-Match`
/// takes `*` only, as in S3.
pub(crate) fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<WriteCondition> {
    Ok(WriteCondition {
        if_none_match_any: match if_none_match {
            None => false,
            Some(ETagCondition::Any) => true,
            Some(_) => {
                return Err(s3_error!(
                    NotImplemented,
                    "If-None-Match on a write supports only *"
                ));
            }
        },
        if_match: if_match.map(|c| match c {
            ETagCondition::Any => "*".to_owned(),
            ETagCondition::ETag(e) => e.value().to_owned(),
        }),
    })
}

/// Collects the system headers of a request, as sent, except the
/// `aws-chunked` transfer coding, which describes the request, not the object.
pub fn system_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    SYSTEM_HEADERS
        .iter()
        .filter_map(|h| {
            let mut v = headers.get(*h)?.to_str().ok()?.to_owned();
            let chunked = |c: &str| c.trim().eq_ignore_ascii_case("aws-chunked");
            // Kept byte for byte (`deflate, gzip` comes back so), unless
            // it names the transfer coding, which is taken out.
            if *h == "content-encoding" && v.split(',').any(chunked) {
                v = v
                    .split(',')
                    .filter(|c| !chunked(c))
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
                    .join(", ");
                if v.is_empty() {
                    return None;
                }
            }
            Some(((*h).to_owned(), v))
        })
        .collect()
}

/// Maps an error raised by the body stream. s3s does not export its
/// aws-chunked error type, so its display text is matched.
fn body_error(e: &(dyn std::error::Error + Send + Sync + 'static)) -> S3Error {
    if let Some(s3) = e.downcast_ref::<S3Error>() {
        let mut err = S3Error::new(s3.code().clone());
        if let Some(m) = s3.message() {
            err.set_message(m.to_owned());
        }
        return err;
    }
    let text = e.to_string();
    if text.contains("Sha256Mismatch") {
        let mut err = S3Error::with_message(
            s3s::S3ErrorCode::Custom("XAmzContentSHA256Mismatch".into()),
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        );
        err.set_status_code(http::StatusCode::BAD_REQUEST);
        err
    } else if text.contains("SignatureMismatch") {
        s3_error!(
            SignatureDoesNotMatch,
            "The request signature we calculated does not match the signature you provided (chunk signature)."
        )
    } else if text.contains("FormatError") || text.contains("TooLarge") || text.contains("TooMany")
    {
        s3_error!(InvalidRequest, "Malformed aws-chunked body: {text}")
    } else {
        s3_error!(IncompleteBody, "The request body ended early: {text}")
    }
}

impl S3Api {
    /// The live bucket `name` for a request signed by access key `signer`
    /// (its local alias of the name first), or NoSuchBucket.
    pub(crate) async fn bucket(&self, signer: Option<&str>, name: &str) -> S3Result<BucketRow> {
        self.model
            .buckets()
            .get_bucket_as(name, signer)
            .await
            .or_s3()?
            .ok_or_else(|| s3_error!(NoSuchBucket, "The specified bucket does not exist"))
    }

    /// Bytes of `src`'s body kept in the object's row rather than in blocks.
    fn inline_max(&self, src: &BodySource<'_>) -> usize {
        if src.inline_allowed {
            self.settings.inline_threshold
        } else {
            0
        }
    }

    /// Refuses an upload that would store blocks while this node sheds
    /// them: a block put of it failed for overload within
    /// `s3_shed_after_overload_msec`.
    fn refuse_if_shedding(&self) -> S3Result<()> {
        let window = self.settings.shed_after_overload;
        if !window.is_zero() && self.model.blocks().overloaded_within(window) {
            return Err(self.budget.shed());
        }
        Ok(())
    }

    /// Reads `src.body` to its end and stores it as `version`, checking the
    /// Content-MD5 and checksum the client sent. On any error the blocks
    /// already stored are released.
    pub(crate) async fn store_body(
        &self,
        version: VersionId,
        src: BodySource<'_>,
    ) -> S3Result<StoredBody> {
        // Refused before a byte of the body is read (and before any
        // `100 Continue`): a client announcing 6 GiB is answered at once.
        let declared = declared_length(src.headers);
        if let Some(len) = declared
            && len > MAX_BODY_LEN
        {
            return Err(entity_too_large(len));
        }
        // Uploads kept in rows are neither shed nor gated: both are about
        // the wait of block writes. Only a client that waits for
        // `100 Continue` is refused, here, before anything polls its body
        // (which would send the `100 Continue`): the others send their body
        // whatever the answer, so refusing them early saved them nothing
        // and cost uploads that would have gone through (doc/operations.md,
        // "Shed on arrival").
        let stores_blocks = declared.is_none_or(|len| len > self.inline_max(&src) as u64);
        let admission = if stores_blocks {
            let waits_for_continue = crate::expect_continue::header_expects_continue(src.headers);
            if waits_for_continue {
                self.refuse_if_shedding()?;
            }
            Some(self.uploads.admit(declared, waits_for_continue)?)
        } else {
            None
        };
        let requested = checksum::requested(src.headers)?;
        if let Some(m) = src.content_md5 {
            let valid = base64::engine::general_purpose::STANDARD
                .decode(m.trim())
                .is_ok_and(|d| d.len() == 16);
            if !valid {
                return Err(s3_error!(
                    InvalidDigest,
                    "The Content-MD5 you specified is not valid."
                ));
            }
        }
        self.store_body_inner(version, src, requested, admission)
            .await
    }

    async fn store_body_inner(
        &self,
        version: VersionId,
        src: BodySource<'_>,
        requested: Option<Requested>,
        admission: Option<Admission>,
    ) -> S3Result<StoredBody> {
        let src_decoded_length = src
            .headers
            .get("x-amz-decoded-content-length")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let declared_len = declared_length(src.headers);
        let inline_max = self.inline_max(&src);
        let BodySource {
            body,
            content_md5,
            trailers,
            upload_of,
            sealing,
            ..
        } = src;
        let sealing = sealing.map(Arc::new);
        let block_size = self.settings.block_size;
        let mut md5 = Md5::new();
        let mut sum = requested.as_ref().map(|r| checksum::hasher(r.algorithm));
        let mut buf = BytesMut::new();
        let mut size = 0u64;
        let mut next_index = 0u32;
        let mut writers = BlockWriters::new(
            self.model.clone(),
            version,
            upload_of,
            sealing.clone(),
            admission,
        );
        let mut _ram = None;
        let body: std::pin::Pin<Box<dyn Stream<Item = _> + Send>> = match body {
            Some(b) => Box::pin(b),
            None => Box::pin(futures::stream::empty()),
        };
        // Refused part way, the rest of the body is read in the background
        // so that the client gets the answer (lingering_body.rs).
        let mut body = LingeringBody::new(body, declared_len);

        while let Some(chunk) = body.next().await {
            let chunk: Bytes = chunk.map_err(|e| body_error(e.as_ref()))?;
            md5.update(&chunk);
            if let Some(s) = &mut sum {
                s.update(&chunk);
            }
            size += chunk.len() as u64;
            if let Some(declared) = src_decoded_length
                && size > declared
            {
                // Stop at once: the RAM share below was sized by the declaration.
                return Err(s3_error!(
                    IncompleteBody,
                    "The body is longer than the x-amz-decoded-content-length header ({declared}) says."
                ));
            }
            if size > MAX_BODY_LEN {
                // A body without a length (chunked transfer) stops here.
                return Err(entity_too_large(size));
            }
            buf.extend_from_slice(&chunk);
            if !writers.started() && buf.len() > inline_max {
                // The block being filled plus those being stored; a body of
                // known length never has more blocks than that in memory.
                let share = declared_len
                    .map_or(u64::MAX, |len| len.div_ceil(block_size as u64))
                    .clamp(1, BLOCKS_IN_FLIGHT as u64 + 1);
                _ram = Some(self.budget.reserve(share as u32).await?);
                writers.start().await?;
            }
            while writers.started() && buf.len() >= block_size {
                writers
                    .push(next_index, buf.split_to(block_size).freeze())
                    .await?;
                next_index += 1;
            }
        }
        if writers.started() && !buf.is_empty() {
            writers.push(next_index, buf.split().freeze()).await?;
            next_index += 1;
        }
        let started = writers.started();
        writers.finish().await?;

        if let Some(declared) = src_decoded_length
            && declared != size
        {
            return Err(s3_error!(
                IncompleteBody,
                "You did not provide the number of bytes specified by the x-amz-decoded-content-length header ({declared} declared, {size} received)."
            ));
        }
        let digest = md5.finalize();
        if let Some(sent) = content_md5 {
            let computed = base64::engine::general_purpose::STANDARD.encode(digest);
            if sent.trim() != computed {
                return Err(s3_error!(
                    BadDigest,
                    "The Content-MD5 you specified did not match what we received."
                ));
            }
        }
        let checksum = match (requested, sum) {
            (Some(r), Some(s)) => Some(checksum::verify(&r, s, trailers)?),
            _ => None,
        };
        let data = match (&sealing, started) {
            (_, true) => ObjectData::Blocks { count: next_index },
            (None, false) => ObjectData::Inline(buf.to_vec()),
            (Some(s), false) => ObjectData::Inline(s.record.seal(&s.key, &buf)),
        };
        writers.disarm();
        // The MD5 checked the body above; an SSE-C or SSE-KMS ETag is not
        // the MD5.
        let md5_hex = match &sealing {
            Some(s) if !s.etag_is_md5() => hangar_model::sse_c::new_etag(),
            _ => hex::encode(digest),
        };
        Ok(StoredBody {
            size,
            md5_hex,
            checksum,
            data,
            sse_c: sealing.map(|s| s.record.clone()),
        })
    }

    pub(crate) async fn do_put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let S3Request {
            input,
            headers,
            trailing_headers,
            ..
        } = req;
        let bucket = self.bucket(signer(&req.credentials), &input.bucket).await?;
        check_key_length(&input.key)?;
        // Checked before the body is read.
        crate::user_meta::check(input.metadata.as_ref())?;
        let tags = crate::tagging::from_optional_header(input.tagging.as_deref())?;
        let acl = self.upload_acl(&bucket, &input).await?;
        let lock = crate::ops_object_lock::new_lock(
            &bucket,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        let cond = write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let sse = self.sse_given(
            &headers,
            input.sse_customer_algorithm.as_deref(),
            input.sse_customer_key.as_deref(),
            input.sse_customer_key_md5.as_deref(),
        )?;
        let managed = self
            .managed_sealing(
                &bucket,
                crate::sse_managed::Asked {
                    algorithm: input.server_side_encryption.as_ref(),
                    kms_key_id: input.ssekms_key_id.as_deref(),
                },
                sse.is_some(),
            )
            .await?;
        // A body that cannot fit the bucket's quotas is refused before it
        // is read (with `Expect: 100-continue`, before it is even sent).
        if let Some(size) = declared_length(&headers) {
            let add = hangar_model::usage::Usage {
                objects: 1,
                bytes: size,
            };
            self.model
                .objects()
                .check_quotas_for(&bucket, &input.key, add)
                .await
                .map_err(crate::error::model_error)?;
        }
        let version = hangar_model::new_version_id();
        let stored = self
            .store_body(
                version,
                BodySource {
                    body: input.body,
                    headers: &headers,
                    content_md5: input.content_md5.as_deref(),
                    trailers: trailing_headers.as_ref(),
                    inline_allowed: true,
                    upload_of: UploadOf::object(&bucket.id_bytes(), &input.key),
                    sealing: match &sse {
                        Some(g) => Some(Sealing::new(g)),
                        None => managed,
                    },
                },
            )
            .await?;
        let mut row = ObjectRow {
            version,
            timestamp_msec: hangar_util::time::now_msec(),
            size: stored.size,
            etag: stored.md5_hex,
            headers: system_headers(&headers),
            user_meta: input.metadata.unwrap_or_default().into_iter().collect(),
            checksum: stored.checksum,
            data: stored.data,
            tags: Lww::new(0, tags),
            retention: Lww::default(),
            legal_hold: Lww::default(),
            sse_c: stored.sse_c,
            acl: Lww::default(),
            grants: Lww::default(),
        };
        (row.acl, row.grants) = crate::ops_acl::AskedAcl::upload_registers(acl.as_ref());
        lock.apply(&mut row);
        let row = match self
            .model
            .objects()
            .publish_if(&bucket, &input.key, row, cond)
            .await
        {
            Ok(row) => row,
            Err(e) => {
                // The version was never published: release its blocks,
                // unless a later round may still publish it (its upload
                // record then stays, and the start-up scan decides).
                if !e.outcome_unknown() {
                    let _ = self.model.objects().abort_upload(version).await;
                }
                return Err(crate::error::model_error(e));
            }
        };
        let mut out = PutObjectOutput {
            e_tag: Some(etag(&row)),
            size: Some(row.size as i64),
            version_id: crate::ops_versioning::published_id(&bucket, &row),
            ..Default::default()
        };
        (out.sse_customer_algorithm, out.sse_customer_key_md5) = crate::sse_c::echo(sse.as_ref());
        (out.server_side_encryption, out.ssekms_key_id) =
            crate::sse_managed::echo(row.sse_c.as_ref());
        checksum::fill_checksum!(row.checksum.as_ref(), out);
        Ok(S3Response::new(out))
    }
}
