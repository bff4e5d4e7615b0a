//! What a bucket policy says about one request, and whether a policy is
//! public. Pure: the request is described by a [`Request`], built by
//! `crate::access` from the HTTP request.
//!
//! A statement applies when its principal, action and resource match and
//! all its conditions hold; an applying Deny wins over any Allow
//! ([`Decision`]). How that combines with a key's own permissions and the
//! ACLs is `crate::access`'s business.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::policy::{Condition, Effect, Operator, Patterns, Policy, Principals, SetQualifier};
use crate::wildcard;

/// One request as a policy sees it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The access key id; `None` for an anonymous request.
    pub principal: Option<String>,
    /// The key's canonical user id; `None` for an anonymous request.
    pub canonical_id: Option<String>,
    /// `s3:GetObject`, …
    pub action: String,
    /// `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`.
    pub resource: String,
    /// Condition keys (lower case) and their values; a key absent here is
    /// absent from the request.
    pub keys: BTreeMap<&'static str, String>,
}

/// What a policy says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A Deny statement applies: refused, whatever else grants.
    Deny,
    /// An Allow statement applies, and no Deny.
    Allow,
    /// No statement applies.
    NoOpinion,
}

impl Policy {
    /// The decision of this policy on `r`.
    pub fn evaluate(&self, r: &Request) -> Decision {
        let mut allowed = false;
        for s in &self.statements {
            let applies = principal_matches(&s.principal, r)
                && patterns_match(&s.action, &r.action, true)
                && patterns_match(&s.resource, &r.resource, false)
                && s.conditions.iter().all(|c| condition_holds(c, r));
            if applies {
                match s.effect {
                    Effect::Deny => return Decision::Deny,
                    Effect::Allow => allowed = true,
                }
            }
        }
        if allowed {
            Decision::Allow
        } else {
            Decision::NoOpinion
        }
    }

    /// Whether any Allow statement could apply to an anonymous request
    /// (everyone, or a `NotPrincipal`), whatever its conditions.
    pub fn may_allow_anonymous(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.effect == Effect::Allow && (s.principal.everyone || s.principal.negated))
    }

    /// Whether the policy grants public access, as S3 judges it: an Allow
    /// statement for everyone (`"*"`, or a `NotPrincipal`) without a
    /// condition that pins the caller down — an `IpAddress` on
    /// `aws:SourceIp` with no `/0` block, or a `StringEquals` on
    /// `aws:userid` / `aws:username`.
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| {
            s.effect == Effect::Allow
                && (s.principal.everyone || s.principal.negated)
                && !s.conditions.iter().any(pins_caller)
        })
    }
}

fn pins_caller(c: &Condition) -> bool {
    if c.if_exists {
        return false;
    }
    match (c.operator, c.key.as_str()) {
        (Operator::IpAddress, "aws:sourceip") => c.nets.iter().all(|n| n.prefix_len() > 0),
        (Operator::StringEquals, "aws:userid" | "aws:username") => true,
        _ => false,
    }
}

fn principal_matches(p: &Principals, r: &Request) -> bool {
    let named = p.everyone
        || r.principal
            .as_ref()
            .is_some_and(|k| p.keys.iter().any(|id| id == k))
        || r.canonical_id
            .as_ref()
            .is_some_and(|c| p.canonical_users.iter().any(|id| id == c));
    named != p.negated
}

/// Actions are matched ignoring case, resources exactly.
fn patterns_match(p: &Patterns, value: &str, ignore_case: bool) -> bool {
    let any = p
        .patterns
        .iter()
        .any(|pat| wildcard::matches(pat, value, ignore_case));
    any != p.negated
}

fn condition_holds(c: &Condition, r: &Request) -> bool {
    let value = r.keys.get(c.key.as_str());
    if c.operator == Operator::Null {
        // "true": the key must be absent; "false": present.
        let want_absent = c.values.iter().any(|v| v.eq_ignore_ascii_case("true"));
        return value.is_none() == want_absent;
    }
    let Some(value) = value else {
        // A missing key: a negated operator holds (nothing matched), as
        // do `…IfExists` and `ForAllValues:` (no value to fail).
        return c.if_exists || c.set == SetQualifier::ForAllValues || c.operator.negated();
    };
    let any = value_matches(c, value);
    any != c.operator.negated()
}

/// Whether `value` matches one of the condition's values under its
/// operator, taken positively (`StringNotEquals` as `StringEquals`).
fn value_matches(c: &Condition, value: &str) -> bool {
    use Operator::*;
    match c.operator {
        StringEquals | StringNotEquals => c.values.iter().any(|v| v == value),
        StringEqualsIgnoreCase | StringNotEqualsIgnoreCase => c
            .values
            .iter()
            .any(|v| v.to_lowercase() == value.to_lowercase()),
        StringLike | StringNotLike => c.values.iter().any(|v| wildcard::matches(v, value, false)),
        Bool => c.values.iter().any(|v| v.eq_ignore_ascii_case(value)),
        IpAddress | NotIpAddress => match value.parse::<IpAddr>() {
            Ok(ip) => {
                let ip = ip.to_canonical();
                c.nets.iter().any(|n| n.contains(&ip))
            }
            Err(_) => false,
        },
        NumericEquals
        | NumericNotEquals
        | NumericLessThan
        | NumericLessThanEquals
        | NumericGreaterThan
        | NumericGreaterThanEquals => {
            let Ok(x) = value.parse::<f64>() else {
                return false;
            };
            c.values
                .iter()
                .filter_map(|v| v.parse::<f64>().ok())
                .any(|y| match c.operator {
                    NumericEquals | NumericNotEquals => x == y,
                    NumericLessThan => x < y,
                    NumericLessThanEquals => x <= y,
                    NumericGreaterThan => x > y,
                    _ => x >= y,
                })
        }
        Null => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY1: &str = "GK000000000000000000000001";
    const KEY2: &str = "GK000000000000000000000002";

    fn policy(statements: &str) -> Policy {
        Policy::parse(
            &format!(r#"{{"Version":"2012-10-17","Statement":[{statements}]}}"#),
            "b",
        )
        .unwrap()
    }

    fn req(who: Option<&str>, action: &str, resource: &str) -> Request {
        Request {
            principal: who.map(str::to_owned),
            canonical_id: who.map(hangar_model::key::derived_canonical_id),
            action: action.into(),
            resource: resource.into(),
            keys: BTreeMap::new(),
        }
    }

    fn with(mut r: Request, key: &'static str, value: &str) -> Request {
        r.keys.insert(key, value.into());
        r
    }

    const PUBLIC_READ: &str = r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}"#;

    #[test]
    fn allow_matches_principal_action_and_resource() {
        let p = policy(PUBLIC_READ);
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/x")),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(Some(KEY1), "s3:getobject", "arn:aws:s3:::b/x")),
            Decision::Allow,
            "actions ignore case"
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:PutObject", "arn:aws:s3:::b/x")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b")),
            Decision::NoOpinion,
            "the bucket is not an object of it"
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::B/x")),
            Decision::NoOpinion,
            "resources are case-sensitive"
        );
    }

    #[test]
    fn a_canonical_user_principal_names_every_key_of_that_id() {
        let p = policy(&format!(
            r#"{{"Effect":"Allow","Principal":{{"CanonicalUser":"{}"}},"Action":"s3:GetObject","Resource":"*"}}"#,
            hangar_model::key::derived_canonical_id(KEY1)
        ));
        let get = |who| p.evaluate(&req(who, "s3:GetObject", "arn:aws:s3:::b/x"));
        assert_eq!(get(Some(KEY1)), Decision::Allow);
        assert_eq!(get(Some(KEY2)), Decision::NoOpinion);
        assert_eq!(get(None), Decision::NoOpinion);
        // A key given that id by the operator is named too.
        let mut r = req(Some(KEY2), "s3:GetObject", "arn:aws:s3:::b/x");
        r.canonical_id = Some(hangar_model::key::derived_canonical_id(KEY1));
        assert_eq!(p.evaluate(&r), Decision::Allow);
        assert!(
            Policy::parse(
                r#"{"Statement":[{"Effect":"Allow","Principal":{"CanonicalUser":"a b"},"Action":"*","Resource":"*"}]}"#,
                "b"
            )
            .is_err()
        );
    }

    #[test]
    fn an_explicit_deny_wins_over_any_allow() {
        let p = policy(&format!(
            r#"{PUBLIC_READ},
               {{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/secret/*"}}"#
        ));
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/open")),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/secret/x")),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&req(
                Some(KEY1),
                "s3:DeleteObject",
                "arn:aws:s3:::b/secret/x"
            )),
            Decision::Deny
        );
        // Order does not matter.
        let p = policy(&format!(
            r#"{{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/secret/*"}},
               {PUBLIC_READ}"#
        ));
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/secret/x")),
            Decision::Deny
        );
    }

    #[test]
    fn named_keys_and_negations() {
        let p = policy(&format!(
            r#"{{"Effect":"Allow","Principal":{{"AWS":["{KEY1}"]}},"Action":["s3:Get*","s3:List*"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}}"#
        ));
        assert_eq!(
            p.evaluate(&req(Some(KEY1), "s3:ListBucket", "arn:aws:s3:::b")),
            Decision::Allow
        );
        assert_eq!(
            p.evaluate(&req(Some(KEY2), "s3:ListBucket", "arn:aws:s3:::b")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/x")),
            Decision::NoOpinion
        );
        // Everyone but KEY1 is denied everything but reads.
        let p = policy(&format!(
            r#"{{"Effect":"Deny","NotPrincipal":{{"AWS":"{KEY1}"}},"NotAction":"s3:Get*","Resource":"*"}}"#
        ));
        assert_eq!(
            p.evaluate(&req(Some(KEY2), "s3:PutObject", "arn:aws:s3:::b/x")),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:PutObject", "arn:aws:s3:::b/x")),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&req(Some(KEY2), "s3:GetObject", "arn:aws:s3:::b/x")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&req(Some(KEY1), "s3:PutObject", "arn:aws:s3:::b/x")),
            Decision::NoOpinion
        );
        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","NotResource":"arn:aws:s3:::b/public/*"}"#,
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/public/x")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&req(None, "s3:GetObject", "arn:aws:s3:::b/private")),
            Decision::Deny
        );
    }

    #[test]
    fn source_ip_conditions_match_cidr_blocks() {
        let p = policy(
            r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*",
                "Condition":{"IpAddress":{"aws:SourceIp":["127.0.0.0/8","2001:db8::/32"]}}}"#,
        );
        let r = req(None, "s3:GetObject", "arn:aws:s3:::b/x");
        assert_eq!(p.evaluate(&r), Decision::NoOpinion, "no address known");
        for (ip, d) in [
            ("127.0.0.1", Decision::Allow),
            ("127.255.1.2", Decision::Allow),
            ("::ffff:127.0.0.1", Decision::Allow),
            ("2001:db8::7", Decision::Allow),
            ("10.0.0.1", Decision::NoOpinion),
            ("2001:db9::7", Decision::NoOpinion),
        ] {
            assert_eq!(p.evaluate(&with(r.clone(), "aws:sourceip", ip)), d, "{ip}");
        }
        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"NotIpAddress":{"aws:SourceIp":"192.168.1.1"}}}"#,
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "aws:sourceip", "192.168.1.1")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "aws:sourceip", "192.168.1.2")),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&r),
            Decision::Deny,
            "a negated operator holds on a missing key"
        );
    }

    #[test]
    fn string_bool_numeric_and_null_conditions() {
        let p = policy(
            r#"{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",
                "Condition":{"StringLike":{"s3:prefix":["home/*",""]},
                             "NumericLessThanEquals":{"s3:max-keys":"100"}}}"#,
        );
        let list = |prefix: &str, max: Option<&str>| {
            let mut r = with(
                req(None, "s3:ListBucket", "arn:aws:s3:::b"),
                "s3:prefix",
                prefix,
            );
            if let Some(m) = max {
                r = with(r, "s3:max-keys", m);
            }
            p.evaluate(&r)
        };
        assert_eq!(list("home/a/", Some("10")), Decision::Allow);
        assert_eq!(list("", Some("100")), Decision::Allow);
        assert_eq!(list("home/a/", Some("1000")), Decision::NoOpinion);
        assert_eq!(list("other/", Some("10")), Decision::NoOpinion);
        assert_eq!(
            list("home/", None),
            Decision::NoOpinion,
            "a missing key fails"
        );

        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"Bool":{"aws:SecureTransport":"false"}}}"#,
        );
        let r = req(Some(KEY1), "s3:GetObject", "arn:aws:s3:::b/x");
        assert_eq!(
            p.evaluate(&with(r.clone(), "aws:securetransport", "false")),
            Decision::Deny
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "aws:securetransport", "true")),
            Decision::NoOpinion
        );

        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"StringNotEqualsIgnoreCase":{"s3:x-amz-acl":["private","bucket-owner-full-control"]}}}"#,
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "s3:x-amz-acl", "PRIVATE")),
            Decision::NoOpinion
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "s3:x-amz-acl", "public-read")),
            Decision::Deny
        );

        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"Null":{"s3:x-amz-acl":"true"}}}"#,
        );
        assert_eq!(p.evaluate(&r), Decision::Deny);
        assert_eq!(
            p.evaluate(&with(r.clone(), "s3:x-amz-acl", "private")),
            Decision::NoOpinion
        );

        let p = policy(
            r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"StringEqualsIfExists":{"s3:x-amz-acl":"public-read"}}}"#,
        );
        assert_eq!(
            p.evaluate(&r),
            Decision::Deny,
            "IfExists holds on a missing key"
        );
        assert_eq!(
            p.evaluate(&with(r.clone(), "s3:x-amz-acl", "private")),
            Decision::NoOpinion
        );
    }

    #[test]
    fn public_policies() {
        assert!(policy(PUBLIC_READ).is_public());
        assert!(!policy(&format!(
            r#"{{"Effect":"Allow","Principal":{{"AWS":"{KEY1}"}},"Action":"s3:*","Resource":"*"}}"#
        ))
        .is_public());
        assert!(
            !policy(r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}"#)
                .is_public()
        );
        assert!(
            !policy(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}"#
            )
            .is_public()
        );
        assert!(
            policy(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}}}"#
            )
            .is_public()
        );
        assert!(policy(&format!(
            r#"{{"Effect":"Allow","NotPrincipal":{{"AWS":"{KEY1}"}},"Action":"s3:*","Resource":"*"}}"#
        ))
        .is_public());
    }
}
