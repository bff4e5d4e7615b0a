//! Put/GetBucketNotificationConfiguration: a bucket's notification rules,
//! a register of its row (`hangar_model::notification`). The events are
//! queued by the model's object table hook and sent by
//! [`crate::notify_worker`].

use hangar_model::notification::{DestinationKind, NotificationRule, event_matches};
use s3s::dto::{
    Event, FilterRule, FilterRuleName, GetBucketNotificationConfigurationInput,
    GetBucketNotificationConfigurationOutput, LambdaFunctionConfiguration,
    NotificationConfiguration, NotificationConfigurationFilter,
    PutBucketNotificationConfigurationInput, PutBucketNotificationConfigurationOutput,
    QueueConfiguration, S3KeyFilter, TopicConfiguration,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;

/// Every event name S3 takes in a configuration, and whether Hangar sends
/// it. Copies and browser-form uploads are sent as `s3:ObjectCreated:Put`
/// and lifecycle expirations as `s3:ObjectRemoved:*` (the event is made
/// from the stored row, which does not say how it was written), so their
/// own names are refused rather than never sent; the names of features
/// Hangar does not have (restore, replication, transitions, tiering,
/// reduced redundancy) are accepted and never sent, as on a bucket that
/// never uses them.
const EVENTS: &[(&str, bool)] = &[
    ("s3:ObjectCreated:*", true),
    ("s3:ObjectCreated:Put", true),
    ("s3:ObjectCreated:CompleteMultipartUpload", true),
    ("s3:ObjectCreated:Post", false),
    ("s3:ObjectCreated:Copy", false),
    ("s3:ObjectRemoved:*", true),
    ("s3:ObjectRemoved:Delete", true),
    ("s3:ObjectRemoved:DeleteMarkerCreated", true),
    ("s3:ObjectTagging:*", true),
    ("s3:ObjectTagging:Put", true),
    ("s3:ObjectTagging:Delete", true),
    ("s3:ObjectAcl:Put", true),
    ("s3:LifecycleExpiration:*", false),
    ("s3:LifecycleExpiration:Delete", false),
    ("s3:LifecycleExpiration:DeleteMarkerCreated", false),
    ("s3:ObjectRestore:*", true),
    ("s3:ObjectRestore:Post", true),
    ("s3:ObjectRestore:Completed", true),
    ("s3:ObjectRestore:Delete", true),
    ("s3:ReducedRedundancyLostObject", true),
    ("s3:Replication:*", true),
    ("s3:Replication:OperationFailedReplication", true),
    ("s3:Replication:OperationMissedThreshold", true),
    ("s3:Replication:OperationReplicatedAfterThreshold", true),
    ("s3:Replication:OperationNotTracked", true),
    ("s3:LifecycleTransition", true),
    ("s3:IntelligentTiering", true),
];

/// Most rules in one configuration (S3 has no documented limit; this one
/// bounds the work of each object change).
const MAX_RULES: usize = 100;

impl S3Api {
    pub(crate) async fn do_put_bucket_notification_configuration(
        &self,
        req: S3Request<PutBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let rules = self.rules_of(input.notification_configuration)?;
        self.model
            .buckets()
            .set_bucket_notification(&b.name, rules)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketNotificationConfigurationOutput {}))
    }

    pub(crate) async fn do_get_bucket_notification_configuration(
        &self,
        req: S3Request<GetBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let mut out = GetBucketNotificationConfigurationOutput::default();
        for r in b.notification_rules() {
            let events = r.events.iter().map(|e| Event::from(e.clone())).collect();
            let filter = filter_of(r);
            let id = Some(r.id.clone());
            match r.kind {
                DestinationKind::Queue => out
                    .queue_configurations
                    .get_or_insert_with(Vec::new)
                    .push(QueueConfiguration {
                        events,
                        filter,
                        id,
                        queue_arn: r.target.clone(),
                    }),
                DestinationKind::Topic => out
                    .topic_configurations
                    .get_or_insert_with(Vec::new)
                    .push(TopicConfiguration {
                        events,
                        filter,
                        id,
                        topic_arn: r.target.clone(),
                    }),
                DestinationKind::CloudFunction => out
                    .lambda_function_configurations
                    .get_or_insert_with(Vec::new)
                    .push(LambdaFunctionConfiguration {
                        events,
                        filter,
                        id,
                        lambda_function_arn: r.target.clone(),
                    }),
            }
        }
        Ok(S3Response::new(out))
    }

    /// The rules of configuration `c`, checked as S3 checks them: known
    /// event names, one prefix and one suffix per filter, destinations the
    /// operator configured, no two rules selecting the same event of the
    /// same key.
    fn rules_of(&self, c: NotificationConfiguration) -> S3Result<Vec<NotificationRule>> {
        if c.event_bridge_configuration.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "EventBridge destinations are not supported"
            ));
        }
        let mut asked = Vec::new();
        for q in c.queue_configurations.unwrap_or_default() {
            asked.push((
                DestinationKind::Queue,
                q.id,
                q.queue_arn,
                q.events,
                q.filter,
            ));
        }
        for t in c.topic_configurations.unwrap_or_default() {
            asked.push((
                DestinationKind::Topic,
                t.id,
                t.topic_arn,
                t.events,
                t.filter,
            ));
        }
        for l in c.lambda_function_configurations.unwrap_or_default() {
            asked.push((
                DestinationKind::CloudFunction,
                l.id,
                l.lambda_function_arn,
                l.events,
                l.filter,
            ));
        }
        if asked.len() > MAX_RULES {
            return Err(s3_error!(
                InvalidArgument,
                "A notification configuration may have at most {MAX_RULES} rules"
            ));
        }
        let unknown: Vec<&str> = asked
            .iter()
            .map(|a| a.2.as_str())
            .filter(|arn| !self.settings.notify_targets.iter().any(|t| t.arn() == *arn))
            .collect();
        if !unknown.is_empty() {
            return Err(s3_error!(
                InvalidArgument,
                "Unable to validate the following destination configurations: {}",
                unknown.join(", ")
            ));
        }
        let mut rules: Vec<NotificationRule> = Vec::new();
        for (kind, id, target, events, filter) in asked {
            let events: Vec<String> = events.into_iter().map(String::from).collect();
            if events.is_empty() {
                return Err(s3_error!(
                    InvalidArgument,
                    "A notification configuration must name at least one event"
                ));
            }
            for e in &events {
                match EVENTS.iter().find(|(n, _)| n == e) {
                    None => {
                        return Err(s3_error!(
                            InvalidArgument,
                            "The event is not supported for notifications: {e}"
                        ));
                    }
                    Some((_, false)) => {
                        return Err(s3_error!(
                            NotImplemented,
                            "Hangar does not send {e}: see doc/s3-compatibility.md, \"Bucket notifications\""
                        ));
                    }
                    Some(_) => {}
                }
            }
            let (prefix, suffix) = key_filter(filter)?;
            let rule = NotificationRule {
                id: id.unwrap_or_else(new_id),
                kind,
                target,
                events,
                prefix,
                suffix,
            };
            if rules.iter().any(|r| r.id == rule.id) {
                return Err(s3_error!(
                    InvalidArgument,
                    "Two notification configurations have the same Id: {}",
                    rule.id
                ));
            }
            if rules.iter().any(|r| overlap(r, &rule)) {
                return Err(s3_error!(
                    InvalidArgument,
                    "Configurations overlap. Configurations on the same bucket cannot share a common event type."
                ));
            }
            rules.push(rule);
        }
        Ok(rules)
    }
}

/// The prefix and suffix of a configuration's key filter.
fn key_filter(filter: Option<NotificationConfigurationFilter>) -> S3Result<(String, String)> {
    let rules = filter
        .and_then(|f| f.key)
        .and_then(|k| k.filter_rules)
        .unwrap_or_default();
    let (mut prefix, mut suffix) = (None, None);
    for FilterRule { name, value } in rules {
        let name = name.map(|n| n.as_str().to_ascii_lowercase());
        let slot = match name.as_deref() {
            Some("prefix") => &mut prefix,
            Some("suffix") => &mut suffix,
            _ => {
                return Err(s3_error!(
                    InvalidArgument,
                    "filter rule name must be either prefix or suffix"
                ));
            }
        };
        if slot.is_some() {
            return Err(s3_error!(
                InvalidArgument,
                "Cannot specify more than one {} rule in a filter.",
                name.unwrap_or_default()
            ));
        }
        *slot = Some(value.unwrap_or_default());
    }
    Ok((prefix.unwrap_or_default(), suffix.unwrap_or_default()))
}

/// The filter of rule `r`, as a configuration gives it back.
fn filter_of(r: &NotificationRule) -> Option<NotificationConfigurationFilter> {
    let mut rules = Vec::new();
    for (name, value) in [
        (FilterRuleName::PREFIX, &r.prefix),
        (FilterRuleName::SUFFIX, &r.suffix),
    ] {
        if !value.is_empty() {
            rules.push(FilterRule {
                name: Some(FilterRuleName::from(name.to_owned())),
                value: Some(value.clone()),
            });
        }
    }
    (!rules.is_empty()).then_some(NotificationConfigurationFilter {
        key: Some(S3KeyFilter {
            filter_rules: Some(rules),
        }),
    })
}

/// Whether some key and event would be selected by both `a` and `b`.
fn overlap(a: &NotificationRule, b: &NotificationRule) -> bool {
    let related = |x: &str, y: &str, f: fn(&str, &str) -> bool| f(x, y) || f(y, x);
    let events = a.events.iter().any(|x| {
        b.events
            .iter()
            .any(|y| event_matches(x, y) || event_matches(y, x))
    });
    events
        && related(&a.prefix, &b.prefix, |x, y| x.starts_with(y))
        && related(&a.suffix, &b.suffix, |x, y| x.ends_with(y))
}

/// An id for a rule given none, as S3 makes one.
fn new_id() -> String {
    use base64::Engine as _;
    let bytes: [u8; 12] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(events: &[&str], prefix: &str, suffix: &str) -> NotificationRule {
        NotificationRule {
            id: "r".into(),
            kind: DestinationKind::Queue,
            target: "arn".into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            prefix: prefix.into(),
            suffix: suffix.into(),
        }
    }

    #[test]
    fn rules_overlap_when_one_key_and_event_fits_both() {
        let created = rule(&["s3:ObjectCreated:*"], "images/", "");
        assert!(overlap(
            &created,
            &rule(&["s3:ObjectCreated:Put"], "images/a", "")
        ));
        assert!(overlap(
            &created,
            &rule(&["s3:ObjectCreated:Put"], "", ".jpg")
        ));
        assert!(!overlap(
            &created,
            &rule(&["s3:ObjectCreated:Put"], "docs/", "")
        ));
        assert!(!overlap(
            &created,
            &rule(&["s3:ObjectRemoved:*"], "images/", "")
        ));
        let jpg = rule(&["s3:ObjectCreated:*"], "", ".jpg");
        assert!(!overlap(&jpg, &rule(&["s3:ObjectCreated:*"], "", ".png")));
    }

    #[test]
    fn a_filter_has_at_most_one_prefix_and_one_suffix() {
        let f = |rules: Vec<(&str, &str)>| {
            key_filter(Some(NotificationConfigurationFilter {
                key: Some(S3KeyFilter {
                    filter_rules: Some(
                        rules
                            .into_iter()
                            .map(|(n, v)| FilterRule {
                                name: Some(FilterRuleName::from(n.to_owned())),
                                value: Some(v.to_owned()),
                            })
                            .collect(),
                    ),
                }),
            }))
        };
        assert_eq!(
            f(vec![("Prefix", "a/"), ("suffix", ".x")]).unwrap(),
            ("a/".to_owned(), ".x".to_owned())
        );
        assert!(f(vec![("prefix", "a/"), ("prefix", "b/")]).is_err());
        assert!(f(vec![("middle", "a")]).is_err());
    }
}
