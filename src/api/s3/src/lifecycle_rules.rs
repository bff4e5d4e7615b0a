//! S3's lifecycle configuration: checking a `LifecycleConfiguration` as
//! PutBucketLifecycleConfiguration does (S3's limits and errors) and
//! converting it to and from the rows' [`LifecycleRule`]. Transitions to
//! other storage classes answer 501 NotImplemented: there is one class.

use std::collections::BTreeSet;

use hangar_model::lifecycle::{LifecycleFilter, LifecycleRule, MAX_RULES};
use hangar_model::object::TagSet;
use s3s::dto::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRuleAndOperator, LifecycleRuleFilter,
    NoncurrentVersionExpiration, Tag,
};
use s3s::{S3Error, S3ErrorCode, S3Result};

use crate::error::malformed_xml;

/// Longest rule ID (S3's limit).
pub const MAX_ID_LEN: usize = 255;
const DAY_MSEC: i64 = 86_400_000;

fn invalid_argument(message: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, message.to_owned())
}

fn invalid_request(message: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidRequest, message.to_owned())
}

fn positive(n: i32, message: &str) -> S3Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|&d| d > 0)
        .ok_or_else(|| invalid_argument(message))
}

fn size(n: Option<i64>) -> S3Result<Option<u64>> {
    n.map(|n| {
        u64::try_from(n)
            .map_err(|_| invalid_argument("ObjectSize values must be non-negative integers"))
    })
    .transpose()
}

fn tag_set(tags: Vec<Tag>) -> S3Result<TagSet> {
    let mut out = TagSet::new();
    for t in tags {
        let (Some(k), v) = (t.key, t.value) else {
            return Err(malformed_xml());
        };
        if out.insert(k, v.unwrap_or_default()).is_some() {
            return Err(invalid_request("Duplicate Tag Keys are not allowed."));
        }
    }
    Ok(out)
}

fn filter(f: LifecycleRuleFilter) -> S3Result<LifecycleFilter> {
    let single = [
        f.prefix.is_some(),
        f.tag.is_some(),
        f.object_size_greater_than.is_some(),
        f.object_size_less_than.is_some(),
        f.and.is_some(),
    ]
    .iter()
    .filter(|&&b| b)
    .count();
    // A filter holds one condition, or several inside And.
    if single > 1 {
        return Err(malformed_xml());
    }
    let out = match f.and {
        Some(LifecycleRuleAndOperator {
            object_size_greater_than,
            object_size_less_than,
            prefix,
            tags,
        }) => LifecycleFilter {
            prefix,
            tags: tag_set(tags.unwrap_or_default())?,
            size_greater_than: size(object_size_greater_than)?,
            size_less_than: size(object_size_less_than)?,
            and: true,
        },
        None => LifecycleFilter {
            prefix: f.prefix,
            tags: tag_set(f.tag.into_iter().collect())?,
            size_greater_than: size(f.object_size_greater_than)?,
            size_less_than: size(f.object_size_less_than)?,
            and: false,
        },
    };
    if let (Some(g), Some(l)) = (out.size_greater_than, out.size_less_than)
        && g >= l
    {
        return Err(invalid_argument(
            "ObjectSizeGreaterThan must be less than ObjectSizeLessThan",
        ));
    }
    Ok(out)
}

fn rule(r: s3s::dto::LifecycleRule) -> S3Result<LifecycleRule> {
    if r.transitions.as_ref().is_some_and(|t| !t.is_empty())
        || r.noncurrent_version_transitions
            .as_ref()
            .is_some_and(|t| !t.is_empty())
    {
        return Err(S3Error::with_message(
            S3ErrorCode::NotImplemented,
            "Transitions to other storage classes are not implemented: Hangar has one storage class"
                .to_owned(),
        ));
    }
    let enabled = match r.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        _ => return Err(malformed_xml()),
    };
    let id = r.id.unwrap_or_default();
    if id.len() > MAX_ID_LEN {
        return Err(invalid_argument(
            "ID length should not exceed allowed limit of 255",
        ));
    }
    // Exactly one of the legacy Prefix and Filter.
    let (filter, prefix) = match (r.filter, r.prefix) {
        (Some(f), None) => (Some(filter(f)?), String::new()),
        (None, Some(p)) => (None, p),
        _ => return Err(malformed_xml()),
    };
    let mut out = LifecycleRule {
        id,
        enabled,
        filter,
        prefix,
        ..Default::default()
    };
    if let Some(LifecycleExpiration {
        date,
        days,
        expired_object_delete_marker,
    }) = r.expiration
    {
        match (date, days, expired_object_delete_marker) {
            (None, Some(d), None) => {
                out.expiration_days = Some(positive(
                    d,
                    "'Days' in the Expiration action must be a positive integer",
                )?);
            }
            (Some(date), None, None) => {
                let odt: time::OffsetDateTime = date.into();
                let ms = i64::try_from(odt.unix_timestamp_nanos() / 1_000_000)
                    .map_err(|_| malformed_xml())?;
                if ms < 0 || ms % DAY_MSEC != 0 {
                    return Err(invalid_argument("'Date' must be at midnight GMT"));
                }
                out.expiration_date_msec = Some(ms as u64);
            }
            (None, None, Some(m)) => out.expired_object_delete_marker = m,
            _ => return Err(malformed_xml()),
        }
    }
    if let Some(NoncurrentVersionExpiration {
        newer_noncurrent_versions,
        noncurrent_days,
    }) = r.noncurrent_version_expiration
    {
        let Some(d) = noncurrent_days else {
            return Err(malformed_xml());
        };
        out.noncurrent_days = Some(positive(
            d,
            "'NoncurrentDays' in the NoncurrentVersionExpiration action must be a positive integer",
        )?);
        if let Some(n) = newer_noncurrent_versions {
            out.newer_noncurrent_versions = Some(
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| {
                        invalid_argument(
                            "'NewerNoncurrentVersions' in the NoncurrentVersionExpiration \
                             action must be between 1 and 100",
                        )
                    })?,
            );
        }
    }
    if let Some(AbortIncompleteMultipartUpload {
        days_after_initiation,
    }) = r.abort_incomplete_multipart_upload
    {
        let Some(d) = days_after_initiation else {
            return Err(malformed_xml());
        };
        out.abort_days = Some(positive(
            d,
            "'DaysAfterInitiation' in the AbortIncompleteMultipartUpload action must be a \
             positive integer",
        )?);
    }
    let tagged = out.filter.as_ref().is_some_and(|f| !f.tags.is_empty());
    let sized = out
        .filter
        .as_ref()
        .is_some_and(|f| f.size_greater_than.is_some() || f.size_less_than.is_some());
    if out.abort_days.is_some() && (tagged || sized) {
        return Err(invalid_request(if tagged {
            "AbortIncompleteMultipartUpload cannot be specified with Tags."
        } else {
            "AbortIncompleteMultipartUpload cannot be specified with ObjectSize filters."
        }));
    }
    if out.expired_object_delete_marker && tagged {
        return Err(invalid_request(
            "ExpiredObjectDeleteMarker cannot be specified with Tags.",
        ));
    }
    if out.expiration_days.is_none()
        && out.expiration_date_msec.is_none()
        && !out.expired_object_delete_marker
        && out.noncurrent_days.is_none()
        && out.abort_days.is_none()
    {
        return Err(invalid_request(
            "At least one action needs to be specified in a rule",
        ));
    }
    Ok(out)
}

/// Checks a configuration and converts it; rules without ID get one.
pub fn from_xml(config: Option<BucketLifecycleConfiguration>) -> S3Result<Vec<LifecycleRule>> {
    let Some(config) = config else {
        return Err(malformed_xml());
    };
    if config.rules.is_empty() {
        return Err(malformed_xml());
    }
    if config.rules.len() > MAX_RULES {
        return Err(invalid_request(
            "The number of lifecycle rules must not exceed the allowed limit of 1000 rules",
        ));
    }
    let mut rules = config
        .rules
        .into_iter()
        .map(rule)
        .collect::<S3Result<Vec<_>>>()?;
    let mut ids = BTreeSet::new();
    for r in &rules {
        if !r.id.is_empty() && !ids.insert(r.id.clone()) {
            return Err(invalid_argument(
                "Rule ID must be unique. Found same ID for more than one rule",
            ));
        }
    }
    for r in &mut rules {
        if r.id.is_empty() {
            // S3 names a rule given without ID.
            r.id = hex::encode(hangar_model::new_version_id());
        }
    }
    Ok(rules)
}

fn tags_xml(tags: &TagSet) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect()
}

/// The stored rules as S3 answers them, in the form they were put.
pub fn to_xml(rules: &[LifecycleRule]) -> Vec<s3s::dto::LifecycleRule> {
    rules
        .iter()
        .map(|r| s3s::dto::LifecycleRule {
            abort_incomplete_multipart_upload: r.abort_days.map(|d| {
                AbortIncompleteMultipartUpload {
                    days_after_initiation: Some(d as i32),
                }
            }),
            expiration: (r.expiration_days.is_some()
                || r.expiration_date_msec.is_some()
                || r.expired_object_delete_marker)
                .then(|| LifecycleExpiration {
                    date: r.expiration_date_msec.map(crate::time::timestamp),
                    days: r.expiration_days.map(|d| d as i32),
                    expired_object_delete_marker: r.expired_object_delete_marker.then_some(true),
                }),
            filter: r.filter.as_ref().map(|f| {
                let gt = f.size_greater_than.map(|s| s as i64);
                let lt = f.size_less_than.map(|s| s as i64);
                if f.and {
                    LifecycleRuleFilter {
                        and: Some(LifecycleRuleAndOperator {
                            object_size_greater_than: gt,
                            object_size_less_than: lt,
                            prefix: f.prefix.clone(),
                            tags: (!f.tags.is_empty()).then(|| tags_xml(&f.tags)),
                        }),
                        object_size_greater_than: None,
                        object_size_less_than: None,
                        prefix: None,
                        tag: None,
                    }
                } else {
                    LifecycleRuleFilter {
                        and: None,
                        object_size_greater_than: gt,
                        object_size_less_than: lt,
                        prefix: f.prefix.clone(),
                        tag: tags_xml(&f.tags).into_iter().next(),
                    }
                }
            }),
            id: Some(r.id.clone()),
            noncurrent_version_expiration: r.noncurrent_days.map(|d| NoncurrentVersionExpiration {
                newer_noncurrent_versions: r.newer_noncurrent_versions.map(|n| n as i32),
                noncurrent_days: Some(d as i32),
            }),
            noncurrent_version_transitions: None,
            prefix: r.filter.is_none().then(|| r.prefix.clone()),
            status: ExpirationStatus::from_static(if r.enabled {
                ExpirationStatus::ENABLED
            } else {
                ExpirationStatus::DISABLED
            }),
            transitions: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str) -> s3s::dto::LifecycleRule {
        s3s::dto::LifecycleRule {
            abort_incomplete_multipart_upload: None,
            expiration: Some(LifecycleExpiration {
                date: None,
                days: Some(1),
                expired_object_delete_marker: None,
            }),
            filter: Some(LifecycleRuleFilter {
                prefix: Some("logs/".into()),
                ..Default::default()
            }),
            id: Some(id.into()),
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
            status: ExpirationStatus::from_static(ExpirationStatus::ENABLED),
            transitions: None,
        }
    }

    fn code(rules: Vec<s3s::dto::LifecycleRule>) -> S3ErrorCode {
        from_xml(Some(BucketLifecycleConfiguration { rules }))
            .unwrap_err()
            .code()
            .clone()
    }

    #[test]
    fn rules_round_trip_and_errors_are_s3s() {
        let got = from_xml(Some(BucketLifecycleConfiguration {
            rules: vec![rule("a"), rule("b")],
        }))
        .unwrap();
        assert_eq!(got[0].key_prefix(), "logs/");
        assert_eq!(got[1].expiration_days, Some(1));
        let back = to_xml(&got);
        assert_eq!(back[0].id.as_deref(), Some("a"));
        assert_eq!(
            from_xml(Some(BucketLifecycleConfiguration { rules: back })).unwrap(),
            got
        );

        assert_eq!(
            code(vec![rule("a"), rule("a")]),
            S3ErrorCode::InvalidArgument
        );
        assert_eq!(code(vec![]), S3ErrorCode::MalformedXML);
        let mut both = rule("a");
        both.prefix = Some("x".into());
        assert_eq!(code(vec![both]), S3ErrorCode::MalformedXML);
        let mut zero = rule("a");
        zero.expiration.as_mut().unwrap().days = Some(0);
        assert_eq!(code(vec![zero]), S3ErrorCode::InvalidArgument);
        let mut none = rule("a");
        none.expiration = None;
        assert_eq!(code(vec![none]), S3ErrorCode::InvalidRequest);
        let many = (0..=MAX_RULES).map(|i| rule(&i.to_string())).collect();
        assert_eq!(code(many), S3ErrorCode::InvalidRequest);
        let mut tr = rule("a");
        tr.transitions = Some(vec![Default::default()]);
        assert_eq!(code(vec![tr]), S3ErrorCode::NotImplemented);
        assert_eq!(
            from_xml(None).unwrap_err().code(),
            &S3ErrorCode::MalformedXML
        );
    }
}
