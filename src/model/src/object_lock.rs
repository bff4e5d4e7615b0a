//! S3 Object Lock: a bucket's lock configuration (enabled, default
//! retention) and a version's retention and legal hold, and the one rule
//! every removal of a version obeys ([`removal_blocked`]).
//!
//! Both live in rows that already exist: the configuration is a register
//! of the bucket row (`BucketRow::object_lock`), a version's retention and
//! legal hold are registers of its object row (`ObjectRow::retention`,
//! `ObjectRow::legal_hold`), written in row format
//! [`crate::row_format::OBJECT_LOCK_ROW_FORMAT`] (doc/table-rows.md).
//!
//! What a removal sees: in a cluster the row is read at the read quorum
//! just before its tombstone is written, so a retention or a legal hold
//! whose Put returned (a write quorum holds it) before the removal started
//! is seen and refuses it. A retention set *while* a removal of the same
//! version is under way may lose: the tombstone replaces the version and
//! its registers with it (documented in doc/s3-compatibility.md).

use crate::object::ObjectRow;
pub use crate::retention::{
    DefaultRetention, ObjectLockConfig, Retention, RetentionMode, RetentionPeriod,
};

/// Why a version may not be removed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockReason {
    LegalHold,
    Retention(Retention),
}

/// Whether `row` (a live version) may be removed at `now_msec`: `None` if
/// it may, else why not. A legal hold always refuses; a retention refuses
/// until its date, a GOVERNANCE one not when `bypass_governance` (the
/// caller checked that the requester may bypass it).
pub fn removal_blocked(
    row: &ObjectRow,
    now_msec: u64,
    bypass_governance: bool,
) -> Option<LockReason> {
    if row.legal_hold.value {
        return Some(LockReason::LegalHold);
    }
    match row.retention.value {
        Some(r) if r.until_msec > now_msec => match (r.mode, bypass_governance) {
            (RetentionMode::Governance, true) => None,
            _ => Some(LockReason::Retention(r)),
        },
        _ => None,
    }
}

/// For lifecycle expiry (which never bypasses anything): whether version
/// `row` may be removed for good at `now_msec`.
pub fn may_remove_now(row: &ObjectRow, now_msec: u64) -> bool {
    removal_blocked(row, now_msec, false).is_none()
}

/// Whether replacing retention `old` by `new` at `now_msec` needs the
/// governance bypass or is refused: `Err(true)` needs the bypass (a
/// GOVERNANCE retention shortened or removed, or changed to another mode),
/// `Err(false)` is refused outright (a COMPLIANCE retention in force
/// shortened, removed or weakened). A retention past its date may be
/// changed freely.
pub fn retention_change_allowed(
    old: Option<Retention>,
    new: Option<Retention>,
    now_msec: u64,
    bypass_governance: bool,
) -> Result<(), bool> {
    let Some(old) = old.filter(|o| o.until_msec > now_msec) else {
        return Ok(());
    };
    let weaker = match new {
        None => true,
        Some(n) => n.until_msec < old.until_msec || n.mode != old.mode,
    };
    if !weaker {
        return Ok(());
    }
    match old.mode {
        RetentionMode::Compliance => Err(false),
        RetentionMode::Governance if bypass_governance => Ok(()),
        RetentionMode::Governance => Err(true),
    }
}

/// Names of the upload record's header entries that carry the lock of a
/// multipart upload's object until its completion (an `MpuRow` has no
/// field for it; no client header has these names, `x-hangar-` is ours).
const MPU_LOCK_MODE: &str = "x-hangar-lock-mode";
const MPU_LOCK_UNTIL: &str = "x-hangar-lock-until-msec";
const MPU_LOCK_HOLD: &str = "x-hangar-lock-legal-hold";

/// Records the lock of a multipart upload's object in its upload record's
/// headers (CreateMultipartUpload).
pub fn put_in_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
    retention: Option<Retention>,
    legal_hold: Option<bool>,
) {
    if let Some(r) = retention {
        let m = match r.mode {
            RetentionMode::Governance => "GOVERNANCE",
            RetentionMode::Compliance => "COMPLIANCE",
        };
        headers.insert(MPU_LOCK_MODE.into(), m.into());
        headers.insert(MPU_LOCK_UNTIL.into(), r.until_msec.to_string());
    }
    if let Some(h) = legal_hold {
        headers.insert(MPU_LOCK_HOLD.into(), if h { "ON" } else { "OFF" }.into());
    }
}

/// Takes the lock recorded by [`put_in_headers`] out of `headers`, as the
/// registers of the completed object (timestamp 0, as given at upload).
pub fn take_from_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
) -> (
    hangar_table::Lww<Option<Retention>>,
    hangar_table::Lww<bool>,
) {
    let mode = headers.remove(MPU_LOCK_MODE);
    let until = headers
        .remove(MPU_LOCK_UNTIL)
        .and_then(|u| u.parse::<u64>().ok());
    let hold = headers.remove(MPU_LOCK_HOLD);
    let retention = match (mode.as_deref(), until) {
        (Some("GOVERNANCE"), Some(u)) => Some(Retention {
            mode: RetentionMode::Governance,
            until_msec: u,
        }),
        (Some("COMPLIANCE"), Some(u)) => Some(Retention {
            mode: RetentionMode::Compliance,
            until_msec: u,
        }),
        _ => None,
    };
    let retention = retention.map_or_else(Default::default, |r| hangar_table::Lww::new(0, Some(r)));
    let hold = hold.map_or_else(Default::default, |h| hangar_table::Lww::new(0, h == "ON"));
    (retention, hold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_table::Lww;

    fn row(hold: bool, ret: Option<Retention>) -> ObjectRow {
        let mut r = ObjectRow::tombstone([1; 16], 5);
        r.data = crate::object::ObjectData::Inline(vec![]);
        r.legal_hold = Lww::new(1, hold);
        r.retention = Lww::new(1, ret);
        r
    }

    #[test]
    fn removals_obey_holds_and_retentions() {
        let g = Retention {
            mode: RetentionMode::Governance,
            until_msec: 100,
        };
        let c = Retention {
            mode: RetentionMode::Compliance,
            until_msec: 100,
        };
        assert!(may_remove_now(&row(false, None), 50));
        assert_eq!(
            removal_blocked(&row(true, None), 50, true),
            Some(LockReason::LegalHold)
        );
        assert!(!may_remove_now(&row(false, Some(g)), 99));
        assert!(removal_blocked(&row(false, Some(g)), 99, true).is_none());
        assert!(may_remove_now(&row(false, Some(g)), 100));
        assert!(removal_blocked(&row(false, Some(c)), 99, true).is_some());
        assert!(may_remove_now(&row(false, Some(c)), 101));
    }

    #[test]
    fn compliance_only_extends_and_governance_needs_the_bypass() {
        let at = |mode, until_msec| Some(Retention { mode, until_msec });
        use RetentionMode::*;
        assert_eq!(
            retention_change_allowed(at(Compliance, 100), at(Compliance, 200), 50, false),
            Ok(())
        );
        assert_eq!(
            retention_change_allowed(at(Compliance, 100), at(Compliance, 90), 50, true),
            Err(false)
        );
        assert_eq!(
            retention_change_allowed(at(Compliance, 100), None, 50, true),
            Err(false)
        );
        assert_eq!(
            retention_change_allowed(at(Compliance, 100), at(Governance, 200), 50, true),
            Err(false)
        );
        assert_eq!(
            retention_change_allowed(at(Governance, 100), at(Governance, 90), 50, false),
            Err(true)
        );
        assert_eq!(
            retention_change_allowed(at(Governance, 100), at(Governance, 90), 50, true),
            Ok(())
        );
        assert_eq!(
            retention_change_allowed(at(Governance, 100), at(Compliance, 200), 50, false),
            Err(true)
        );
        assert_eq!(
            retention_change_allowed(at(Governance, 100), at(Governance, 300), 50, false),
            Ok(())
        );
        // Past its date: anything goes.
        assert_eq!(
            retention_change_allowed(at(Compliance, 100), None, 150, false),
            Ok(())
        );
        let d = DefaultRetention {
            mode: Governance,
            period: RetentionPeriod::Years(1),
        };
        assert_eq!(
            d.retention_from(0).until_msec,
            365 * crate::retention::DAY_MSEC
        );
    }
}
