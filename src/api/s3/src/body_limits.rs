//! Bounds on the request bodies s3s reads whole into memory to parse them
//! (the XML of DeleteObjects, CompleteMultipartUpload, CreateBucket and
//! every other operation but the streamed uploads).
//!
//! s3s stops reading such a body at its `xml_max_body_size`, but a body it
//! cut short that way is answered `500 InternalError` (s3s 0.14 only
//! recognises its own limit error, not the one its streaming reader
//! raises). So the announced length is checked first, when access is
//! checked and before a byte of the body is read: past the bound the client
//! gets `400 MaxMessageLengthExceeded` at once, as S3 answers.

use std::sync::{Arc, LazyLock};

use http::HeaderMap;
use s3s::config::{S3Config, StaticConfigProvider};
use s3s::{S3Result, s3_error};

/// Largest body held in memory for parsing: 20 MiB, s3s's default, which
/// holds the largest valid documents (1000 keys of 1 KiB to delete, 10 000
/// parts with checksums to complete) several times over.
pub const MAX_BUFFERED_BODY: u64 = 20 * 1024 * 1024;

/// Most bytes of such bodies (announced lengths) read whole at once on a
/// node, across all requests; past it a request is answered `503
/// SlowDown` before its body is read. Bodies are only read once the
/// request is authorised, so this bounds what authorised clients make the
/// node hold (20 MiB each otherwise, times `s3_max_connections`).
pub const MAX_BUFFERED_TOTAL: u64 = 256 << 20;

/// The unit [`MAX_BUFFERED_TOTAL`] is counted in.
const BUFFERED_UNIT: u64 = 4096;

static BUFFERED: LazyLock<Arc<tokio::sync::Semaphore>> = LazyLock::new(|| {
    Arc::new(tokio::sync::Semaphore::new(
        (MAX_BUFFERED_TOTAL / BUFFERED_UNIT) as usize,
    ))
});

/// A share of a node-wide bound on bytes held in memory, carried in a
/// request's extensions until the operation is done with its body.
#[derive(Clone)]
pub(crate) struct HeldBytes(#[allow(dead_code)] pub Arc<tokio::sync::OwnedSemaphorePermit>);

/// Takes the share of [`MAX_BUFFERED_TOTAL`] of an authorised request whose
/// body s3s will read whole, kept in `extensions` for as long as the
/// request is served; `503 SlowDown` when the node holds as much as it may.
/// `announced`: the body's [`announced`] length.
pub(crate) fn reserve(op: &str, announced: u64, extensions: &mut http::Extensions) -> S3Result<()> {
    if streams_body(op) {
        return Ok(());
    }
    let len = announced.min(MAX_BUFFERED_BODY);
    if len == 0 {
        return Ok(());
    }
    let units = len.div_ceil(BUFFERED_UNIT) as u32;
    let permit = BUFFERED
        .clone()
        .try_acquire_many_owned(units)
        .map_err(|_| {
            crate::admission::slow_down_because(
                "Please reduce your request rate: the node holds as many request bodies as it may.",
            )
        })?;
    extensions.insert(HeldBytes(Arc::new(permit)));
    Ok(())
}

/// The length a request's `Content-Length` announces (0 without one).
pub(crate) fn announced(headers: &HeaderMap) -> u64 {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// Largest file a POST form (PostObject) uploads: s3s reads the whole file
/// into memory before the operation stores it, so it is bounded far below
/// S3's 5 GiB. A larger file is answered `400 EntityTooLarge`.
pub const MAX_POST_OBJECT_BODY: u64 = 64 * 1024 * 1024;

/// Most bytes of a POST form's field values before its file part (s3s's
/// `form_max_fields_size`; its default, 20 MiB, was read before the
/// request was authorised). A policy, its signature fields and 2 KiB of
/// metadata fit many times over.
pub const MAX_FORM_FIELDS: usize = 48 * 1024;

/// The s3s configuration with those bounds.
pub(crate) fn s3s_config() -> Arc<StaticConfigProvider> {
    let mut cfg = S3Config::default();
    cfg.form_max_fields_size = MAX_FORM_FIELDS;
    cfg.form_max_field_size = MAX_FORM_FIELDS;
    cfg.xml_max_body_size = MAX_BUFFERED_BODY as usize;
    cfg.post_object_max_file_size = MAX_POST_OBJECT_BODY;
    Arc::new(StaticConfigProvider::new(Arc::new(cfg)))
}

/// Whether s3s streams this operation's body to the operation instead of
/// reading it whole first.
fn streams_body(op: &str) -> bool {
    matches!(
        op,
        "PutObject" | "UploadPart" | "PostObject" | "WriteGetObjectResponse"
    )
}

/// Refuses, before it is read, a body s3s would read whole and that is
/// announced longer than [`MAX_BUFFERED_BODY`].
pub(crate) fn check(op: &str, headers: &HeaderMap) -> S3Result<()> {
    if streams_body(op) {
        return Ok(());
    }
    match headers.get(http::header::CONTENT_LENGTH) {
        Some(v) => {
            let len = v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
            match len {
                Some(len) if len > MAX_BUFFERED_BODY => Err(s3_error!(
                    MaxMessageLengthExceeded,
                    "Your request was too big: {len} bytes, at most {MAX_BUFFERED_BODY} for {op}"
                )),
                Some(_) => Ok(()),
                None => Err(s3_error!(InvalidArgument, "Content-Length is not a number")),
            }
        }
        // A body of unknown length (chunked transfer) is refused by s3s's
        // signature check already (`411 MissingContentLength`).
        None => Ok(()),
    }
}

/// Refuses a request with a body (announced, or chunked) to a bucket that
/// does not exist with `404 NoSuchBucket` before the body is read: the
/// operation would answer the same once it had read (up to
/// [`MAX_BUFFERED_BODY`] of) it.
pub(crate) fn check_missing_bucket(headers: &HeaderMap, bucket: &str) -> S3Result<()> {
    let chunked = headers.contains_key(http::header::TRANSFER_ENCODING);
    if chunked || announced(headers) > 0 {
        return Err(s3_error!(
            NoSuchBucket,
            "The specified bucket does not exist: {bucket}"
        ));
    }
    Ok(())
}
