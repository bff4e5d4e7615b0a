//! HTTP preconditions on an object (RFC 7232 order, as S3 applies them).

use hangar_model::object::ObjectRow;
use s3s::dto::{ETag, ETagCondition, Timestamp};
use s3s::{S3Result, s3_error};

use crate::time::{msec_to_secs, secs};

/// The four conditional headers of a read (or of a copy's source).
#[derive(Default)]
pub struct Preconditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

fn matches(cond: &ETagCondition, etag: &str) -> bool {
    match cond {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == etag,
    }
}

impl Preconditions<'_> {
    /// Checks the conditions against `obj`. `not_modified_is_error` selects
    /// the answer to a failed If-None-Match / If-Modified-Since: 304 for a
    /// GET or HEAD, 412 for a copy source.
    pub fn check(&self, obj: &ObjectRow, not_modified_is_412: bool) -> S3Result<()> {
        let modified = msec_to_secs(obj.timestamp_msec);
        if let Some(c) = self.if_match {
            if !matches(c, &obj.etag) {
                return Err(s3_error!(
                    PreconditionFailed,
                    "At least one of the pre-conditions you specified did not hold"
                ));
            }
        } else if let Some(t) = self.if_unmodified_since
            && modified > secs(t)
        {
            return Err(s3_error!(
                PreconditionFailed,
                "At least one of the pre-conditions you specified did not hold"
            ));
        }
        let not_modified = if let Some(c) = self.if_none_match {
            matches(c, &obj.etag)
        } else if let Some(t) = self.if_modified_since {
            modified <= secs(t)
        } else {
            false
        };
        if not_modified {
            if not_modified_is_412 {
                return Err(s3_error!(
                    PreconditionFailed,
                    "At least one of the pre-conditions you specified did not hold"
                ));
            }
            // A 304 still identifies the object (RFC 7232 §4.1).
            let mut err = s3_error!(NotModified);
            let mut h = http::HeaderMap::new();
            if let Ok(v) = http::HeaderValue::from_str(&format!("\"{}\"", obj.etag)) {
                h.insert(http::header::ETAG, v);
            }
            let lm = httpdate::fmt_http_date(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(obj.timestamp_msec),
            );
            if let Ok(v) = http::HeaderValue::from_str(&lm) {
                h.insert(http::header::LAST_MODIFIED, v);
            }
            err.set_headers(h);
            return Err(err);
        }
        Ok(())
    }
}

/// The preconditions of a GetObject or HeadObject input (same field names).
macro_rules! read_preconditions {
    ($input:expr) => {
        $crate::conditions::Preconditions {
            if_match: $input.if_match.as_ref(),
            if_none_match: $input.if_none_match.as_ref(),
            if_modified_since: $input.if_modified_since.as_ref(),
            if_unmodified_since: $input.if_unmodified_since.as_ref(),
        }
    };
}
pub(crate) use read_preconditions;

/// The ETag of an object as S3 sends it.
pub fn etag(obj: &ObjectRow) -> ETag {
    ETag::Strong(obj.etag.clone())
}
