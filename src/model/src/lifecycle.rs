//! A bucket's lifecycle rules as stored (a register of the bucket row,
//! checked by the S3 layer before it is stored), which versions and uploads
//! a rule matches, and when an action is due.
//!
//! Dates as S3 computes them: an action of `N` days is due at the first
//! midnight UTC at or after the start time plus `N` days (an object
//! created on 15 January at 10:30 with `Days` 3 expires on 19 January at
//! 00:00). With a shortened day (`lifecycle_day_secs`, for tests) the same
//! arithmetic runs in that unit: "midnight" is a multiple of the day since
//! the epoch.

use serde::{Deserialize, Serialize};

use crate::object::TagSet;

/// Most rules in one configuration (S3's limit).
pub const MAX_RULES: usize = 1000;

/// One rule, as S3's `LifecycleRule` without transitions (refused by the
/// S3 layer: there is one storage class).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LifecycleRule {
    pub id: String,
    pub enabled: bool,
    /// `None`: the rule gave the legacy top-level `Prefix` (in `prefix`).
    pub filter: Option<LifecycleFilter>,
    /// The legacy top-level prefix.
    pub prefix: String,
    /// `Expiration/Days`.
    pub expiration_days: Option<u32>,
    /// `Expiration/Date`, ms since the epoch (a midnight UTC).
    pub expiration_date_msec: Option<u64>,
    /// `Expiration/ExpiredObjectDeleteMarker`.
    pub expired_object_delete_marker: bool,
    /// `NoncurrentVersionExpiration/NoncurrentDays`.
    pub noncurrent_days: Option<u32>,
    /// `NoncurrentVersionExpiration/NewerNoncurrentVersions`.
    pub newer_noncurrent_versions: Option<u32>,
    /// `AbortIncompleteMultipartUpload/DaysAfterInitiation`.
    pub abort_days: Option<u32>,
}

/// A rule's `Filter`: every condition given must hold. `and` records
/// whether they were given inside `And` (so GET answers what was put).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LifecycleFilter {
    pub prefix: Option<String>,
    pub tags: TagSet,
    pub size_greater_than: Option<u64>,
    pub size_less_than: Option<u64>,
    pub and: bool,
}

impl LifecycleRule {
    /// The prefix the rule applies to (filter or legacy).
    pub fn key_prefix(&self) -> &str {
        match &self.filter {
            Some(f) => f.prefix.as_deref().unwrap_or(""),
            None => &self.prefix,
        }
    }

    /// Whether the rule applies to an object version of `key` with `size`
    /// and `tags` (a delete marker: size 0, no tags).
    pub fn matches(&self, key: &str, size: u64, tags: &TagSet) -> bool {
        if !self.enabled || !key.starts_with(self.key_prefix()) {
            return false;
        }
        let Some(f) = &self.filter else {
            return true;
        };
        f.tags.iter().all(|(k, v)| tags.get(k) == Some(v))
            && f.size_greater_than.is_none_or(|g| size > g)
            && f.size_less_than.is_none_or(|l| size < l)
    }

    /// Whether the rule applies to a delete marker of `key`: prefix only
    /// (S3 refuses `ExpiredObjectDeleteMarker` with tags; a marker has no
    /// size).
    pub fn matches_marker(&self, key: &str) -> bool {
        self.enabled
            && key.starts_with(self.key_prefix())
            && self.filter.as_ref().is_none_or(|f| f.tags.is_empty())
    }

    /// Whether the rule applies to an upload of `key` (S3 refuses
    /// `AbortIncompleteMultipartUpload` with tags or sizes).
    pub fn matches_upload(&self, key: &str) -> bool {
        self.enabled && key.starts_with(self.key_prefix())
    }

    /// When a current version created at `created_msec` expires, if the
    /// rule expires current versions.
    pub fn expiry_of_current(&self, created_msec: u64, day_msec: u64) -> Option<u64> {
        match (self.expiration_days, self.expiration_date_msec) {
            (Some(d), _) => Some(due_msec(created_msec, d, day_msec)),
            (None, Some(date)) => Some(date),
            (None, None) => None,
        }
    }
}

/// The first "midnight" (a multiple of `day_msec` since the epoch) at or
/// after `start_msec` + `days` days: when an action of `days` days on
/// something started at `start_msec` is due.
pub fn due_msec(start_msec: u64, days: u32, day_msec: u64) -> u64 {
    let day = day_msec.max(1);
    let t = start_msec.saturating_add(u64::from(days).saturating_mul(day));
    t.div_ceil(day).saturating_mul(day)
}

/// What the lifecycle worker may do to one version: the single place a
/// removal is decided, so that a retention check (object lock) can refuse
/// it here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Expire the current version: a delete marker in a versioned bucket,
    /// a delete in an unversioned one.
    ExpireCurrent,
    /// Remove a noncurrent version for good.
    RemoveNoncurrent,
    /// Remove a delete marker that is the only version of its key.
    RemoveExpiredMarker,
}

/// One live version of a key, as the planner sees it.
#[derive(Debug, Clone)]
pub struct VersionFacts<'a> {
    pub timestamp_msec: u64,
    pub size: u64,
    pub tags: &'a TagSet,
    pub delete_marker: bool,
}

/// What the rules do now (`now_msec`) to the live versions of `key`,
/// given newest first (a bucket never versioned has at most one): the
/// indexes of the versions to act on, each with its action.
pub fn plan_key(
    rules: &[LifecycleRule],
    key: &str,
    versions: &[VersionFacts<'_>],
    versioned: bool,
    now_msec: u64,
    day_msec: u64,
) -> Vec<(usize, Removal)> {
    let mut out = Vec::new();
    let Some(current) = versions.first() else {
        return out;
    };
    if current.delete_marker {
        // A marker with no version behind it is an expired object delete
        // marker (S3 removes it under ExpiredObjectDeleteMarker, and under
        // an expiration by age).
        if versions.len() == 1
            && rules.iter().any(|r| {
                r.matches_marker(key)
                    && (r.expired_object_delete_marker || r.expiration_days.is_some())
            })
        {
            out.push((0, Removal::RemoveExpiredMarker));
        }
    } else if rules.iter().any(|r| {
        r.matches(key, current.size, current.tags)
            && r.expiry_of_current(current.timestamp_msec, day_msec)
                .is_some_and(|due| now_msec >= due)
    }) {
        out.push((0, Removal::ExpireCurrent));
    }
    if !versioned {
        return out;
    }
    // Version i (i >= 1) became noncurrent when version i - 1 was written;
    // i - 1 noncurrent versions are newer than it.
    for (i, v) in versions.iter().enumerate().skip(1) {
        let since = versions[i - 1].timestamp_msec;
        let newer = (i - 1) as u64;
        let due = rules.iter().any(|r| {
            let (size, tags) = (v.size, v.tags);
            r.noncurrent_days
                .is_some_and(|d| now_msec >= due_msec(since, d, day_msec))
                && newer >= u64::from(r.newer_noncurrent_versions.unwrap_or(0))
                && if v.delete_marker {
                    r.matches_marker(key)
                } else {
                    r.matches(key, size, tags)
                }
        });
        if due {
            out.push((i, Removal::RemoveNoncurrent));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400_000;

    #[test]
    fn expiry_rounds_up_to_the_next_midnight() {
        // 2014-01-15 10:30 UTC + 3 days -> 2014-01-19 00:00 UTC (S3's example).
        let created = 1_389_781_800_000;
        assert_eq!(due_msec(created, 3, DAY), 1_390_089_600_000);
        // Exactly at midnight: that midnight.
        assert_eq!(due_msec(1_389_744_000_000, 1, DAY), 1_389_830_400_000);
        // A shortened day of 2 s.
        assert_eq!(due_msec(4_100, 1, 2_000), 8_000);
        assert_eq!(due_msec(4_000, 1, 2_000), 6_000);
        // Saturates instead of overflowing.
        assert_eq!(due_msec(u64::MAX - 5, 10, DAY), u64::MAX);
    }

    fn rule() -> LifecycleRule {
        LifecycleRule {
            id: "r".into(),
            enabled: true,
            filter: Some(LifecycleFilter::default()),
            expiration_days: Some(1),
            ..Default::default()
        }
    }

    #[test]
    fn filters_match_prefix_tags_and_sizes() {
        let mut r = rule();
        let none = TagSet::new();
        assert!(r.matches("any", 0, &none));
        r.filter.as_mut().unwrap().prefix = Some("logs/".into());
        assert!(r.matches("logs/a", 0, &none));
        assert!(!r.matches("data/a", 0, &none));
        let f = r.filter.as_mut().unwrap();
        f.tags.insert("k".into(), "v".into());
        f.size_greater_than = Some(10);
        f.size_less_than = Some(100);
        let tagged: TagSet = [("k".to_string(), "v".to_string()), ("x".into(), "y".into())].into();
        assert!(r.matches("logs/a", 50, &tagged));
        assert!(!r.matches("logs/a", 50, &none));
        assert!(!r.matches("logs/a", 10, &tagged));
        assert!(!r.matches("logs/a", 100, &tagged));
        let other: TagSet = [("k".to_string(), "w".to_string())].into();
        assert!(!r.matches("logs/a", 50, &other));
        assert!(
            !r.matches_marker("logs/a"),
            "a tag rule never matches a marker"
        );
        r.enabled = false;
        assert!(!r.matches("logs/a", 50, &tagged));
    }

    #[test]
    fn legacy_prefix_and_dates() {
        let r = LifecycleRule {
            filter: None,
            prefix: "tmp/".into(),
            ..rule()
        };
        assert!(r.matches("tmp/x", 5, &TagSet::new()));
        assert!(r.matches_marker("tmp/x"));
        assert!(!r.matches_upload("x"));
        assert_eq!(r.expiry_of_current(1, DAY), Some(2 * DAY));
        let d = LifecycleRule {
            expiration_days: None,
            expiration_date_msec: Some(5 * DAY),
            ..rule()
        };
        assert_eq!(d.expiry_of_current(1, DAY), Some(5 * DAY));
    }

    fn facts(ts: u64, marker: bool, tags: &TagSet) -> VersionFacts<'_> {
        VersionFacts {
            timestamp_msec: ts,
            size: 1,
            tags,
            delete_marker: marker,
        }
    }

    #[test]
    fn plans_expiry_noncurrent_and_markers() {
        let t = TagSet::new();
        let mut r = rule();
        r.noncurrent_days = Some(1);
        let rules = [r.clone()];
        // Unversioned: the object expires at the first midnight after a day.
        let one = [facts(DAY / 2, false, &t)];
        assert!(plan_key(&rules, "k", &one, false, 2 * DAY - 1, DAY).is_empty());
        assert_eq!(
            plan_key(&rules, "k", &one, false, 2 * DAY, DAY),
            vec![(0, Removal::ExpireCurrent)]
        );
        // Versioned: v0 current (written at 10 days), v1 noncurrent since
        // then, v2 since 5 days.
        let vs = [
            facts(10 * DAY, false, &t),
            facts(5 * DAY, false, &t),
            facts(DAY, false, &t),
        ];
        assert_eq!(
            plan_key(&rules, "k", &vs, true, 10 * DAY + 1, DAY),
            vec![(2, Removal::RemoveNoncurrent)]
        );
        assert_eq!(
            plan_key(&rules, "k", &vs, true, 11 * DAY, DAY),
            vec![
                (0, Removal::ExpireCurrent),
                (1, Removal::RemoveNoncurrent),
                (2, Removal::RemoveNoncurrent)
            ]
        );
        // NewerNoncurrentVersions 1 keeps the newest noncurrent version.
        let mut keep = r.clone();
        keep.expiration_days = None;
        keep.newer_noncurrent_versions = Some(1);
        assert_eq!(
            plan_key(&[keep.clone()], "k", &vs, true, 100 * DAY, DAY),
            vec![(2, Removal::RemoveNoncurrent)]
        );
        // A lone delete marker goes; one with versions behind it stays.
        let mut m = keep;
        m.noncurrent_days = None;
        m.expired_object_delete_marker = true;
        let lone = [facts(DAY, true, &t)];
        assert_eq!(
            plan_key(&[m.clone()], "k", &lone, true, DAY, DAY),
            vec![(0, Removal::RemoveExpiredMarker)]
        );
        let behind = [facts(DAY, true, &t), facts(0, false, &t)];
        assert!(plan_key(&[m], "k", &behind, true, 100 * DAY, DAY).is_empty());
        // An expiration by age removes a lone marker too.
        assert!(
            plan_key(&rules, "k", &behind[..1], true, 100 * DAY, DAY)
                .contains(&(0, Removal::RemoveExpiredMarker))
        );
    }
}
