//! The types of S3 Object Lock that rows hold: a version's retention (its
//! mode and date) and a bucket's lock configuration with its default
//! retention. The rules that use them are in `crate::object_lock`; these
//! live apart so that the object row, which holds a retention, and those
//! rules, which read object rows, do not import each other.

use serde::{Deserialize, Serialize};

/// S3's retention modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RetentionMode {
    /// Removable before its date by a key allowed to bypass it (the
    /// bucket's owner) with `x-amz-bypass-governance-retention: true`.
    Governance,
    /// Removable by no one before its date; the date only moves later.
    Compliance,
}

/// A version's retention: its mode and the time until which it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Retention {
    pub mode: RetentionMode,
    /// ms since the epoch.
    pub until_msec: u64,
}

/// The period of a bucket's default retention: exactly one of days or
/// years, as S3's `DefaultRetention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RetentionPeriod {
    Days(u32),
    Years(u32),
}

/// A bucket's default retention, applied to every new version that does
/// not name its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DefaultRetention {
    pub mode: RetentionMode,
    pub period: RetentionPeriod,
}

pub(crate) const DAY_MSEC: u64 = 24 * 3600 * 1000;

impl DefaultRetention {
    /// The retention of a version published at `now_msec` (a year is 365
    /// days, as S3 counts it).
    pub fn retention_from(&self, now_msec: u64) -> Retention {
        let days = match self.period {
            RetentionPeriod::Days(d) => u64::from(d),
            RetentionPeriod::Years(y) => u64::from(y) * 365,
        };
        Retention {
            mode: self.mode,
            until_msec: now_msec.saturating_add(days.saturating_mul(DAY_MSEC)),
        }
    }
}

/// A bucket's Object Lock configuration. Present once Object Lock was
/// enabled; it is never removed (S3 has no way to disable it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectLockConfig {
    pub default_retention: Option<DefaultRetention>,
}
