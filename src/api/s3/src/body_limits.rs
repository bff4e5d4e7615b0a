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

use std::sync::Arc;

use http::HeaderMap;
use s3s::config::{S3Config, StaticConfigProvider};
use s3s::{S3Result, s3_error};

/// Largest body held in memory for parsing: 20 MiB, s3s's default, which
/// holds the largest valid documents (1000 keys of 1 KiB to delete, 10 000
/// parts with checksums to complete) several times over.
pub const MAX_BUFFERED_BODY: u64 = 20 * 1024 * 1024;

/// Largest file a POST form (PostObject) uploads: s3s reads the whole file
/// into memory before the operation stores it, so it is bounded far below
/// S3's 5 GiB. A larger file is answered `400 EntityTooLarge`.
pub const MAX_POST_OBJECT_BODY: u64 = 64 * 1024 * 1024;

/// The s3s configuration with those bounds.
pub(crate) fn s3s_config() -> Arc<StaticConfigProvider> {
    let mut cfg = S3Config::default();
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
