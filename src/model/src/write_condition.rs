//! The conditions of S3's conditional writes, and the timestamp a write
//! publishes with: what the local and the coordinated publish share.

use hangar_util::time::now_msec;

use crate::object::ObjectRow;

/// A condition on the object a write replaces (S3's conditional writes).
#[derive(Debug, Clone, Default)]
pub struct WriteCondition {
    /// `If-None-Match: *`: only if no object exists.
    pub if_none_match_any: bool,
    /// `If-Match`: only if an object exists with this ETag (`*`: any).
    pub if_match: Option<String>,
}

impl WriteCondition {
    /// Whether there is no condition at all.
    pub(crate) fn is_none(&self) -> bool {
        !self.if_none_match_any && self.if_match.is_none()
    }

    /// Whether the condition holds on `current`, the live object (if any).
    pub(crate) fn holds(&self, current: Option<&ObjectRow>) -> bool {
        match (current, &self.if_match) {
            (Some(_), _) if self.if_none_match_any => false,
            (Some(o), Some(etag)) => etag == "*" || *etag == o.etag,
            (None, Some(_)) => false,
            _ => true,
        }
    }
}

/// `row` with its publication timestamp: at least now, and strictly greater
/// than `old`'s (the stored row), so that it wins the merge and what is
/// published is what is kept.
pub(crate) fn stamped(mut row: ObjectRow, old: Option<&ObjectRow>) -> ObjectRow {
    let floor = old.map_or(0, |o| o.timestamp_msec + 1);
    row.timestamp_msec = now_msec().max(floor).max(row.timestamp_msec);
    row
}
