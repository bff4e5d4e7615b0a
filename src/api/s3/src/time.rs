//! Conversions between table timestamps (ms) and S3 timestamps.

use std::time::{Duration, UNIX_EPOCH};

use s3s::dto::Timestamp;

/// A table timestamp as an S3 timestamp.
pub fn timestamp(msec: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(msec))
}

/// A table timestamp as S3 writes dates in XML and JSON
/// (`2026-12-07T23:45:00.000Z`).
pub fn iso8601_msec(msec: u64) -> String {
    let mut v = Vec::new();
    let _ = timestamp(msec).format(s3s::dto::TimestampFormat::DateTime, &mut v);
    String::from_utf8(v).unwrap_or_default()
}

/// An S3 timestamp as whole seconds since the epoch (HTTP dates have
/// one-second precision, so conditions compare whole seconds).
pub fn secs(t: &Timestamp) -> i64 {
    let odt: time::OffsetDateTime = t.clone().into();
    odt.unix_timestamp()
}

/// Whole seconds of a table timestamp.
pub fn msec_to_secs(msec: u64) -> i64 {
    (msec / 1000) as i64
}
