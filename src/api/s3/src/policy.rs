//! Bucket policy documents: parsed and checked when they are put
//! (`MalformedPolicy` as S3 words it), kept as the JSON text the client
//! sent, and parsed again where a request is decided
//! ([`crate::policy_eval`]).
//!
//! What is understood: `Version` (2012-10-17 or 2008-10-17), `Id`,
//! `Statement` (one object or a list), and in a statement `Sid`, `Effect`,
//! `Principal` / `NotPrincipal` (`"*"`, or `{"AWS": …}` naming `"*"` or
//! Hangar access key ids), `Action` / `NotAction` (`s3:` actions with `*`
//! and `?` wildcards, or `*`), `Resource` / `NotResource` (`*`, or ARNs of
//! this bucket and its objects, with wildcards), and `Condition` with the
//! operators and keys of [`Operator`] and [`SUPPORTED_KEYS`]. A valid AWS
//! operator or key Hangar cannot evaluate is refused `501 NotImplemented`
//! rather than stored and ignored: ignored, it would open what a Deny meant
//! to close.

use std::net::IpAddr;

use ipnet::IpNet;
use s3s::{S3Error, s3_error};
use serde_json::Value;

/// Condition keys Hangar supplies to a policy (lower case: keys are
/// compared case-insensitively).
pub const SUPPORTED_KEYS: &[&str] = &[
    "aws:sourceip",
    "aws:securetransport",
    "aws:useragent",
    "aws:referer",
    "aws:principaltype",
    "aws:userid",
    "aws:username",
    "aws:epochtime",
    "s3:prefix",
    "s3:delimiter",
    "s3:max-keys",
    "s3:versionid",
    "s3:x-amz-acl",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-aws-kms-key-id",
    "s3:signatureversion",
    "s3:authtype",
];

/// Most statements one policy may hold (a 20 KB document holds fewer).
const MAX_STATEMENTS: usize = 1000;

/// A checked bucket policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub statements: Vec<Statement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Allow,
    Deny,
}

/// One statement: it applies to a request when its principal, action and
/// resource match and every condition holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub effect: Effect,
    pub principal: Principals,
    pub action: Patterns,
    pub resource: Patterns,
    pub conditions: Vec<Condition>,
}

/// `Principal` (or, negated, `NotPrincipal`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Principals {
    pub negated: bool,
    /// `"*"`: everyone, anonymous requests included.
    pub everyone: bool,
    /// Access key ids (`{"AWS": …}`).
    pub keys: Vec<String>,
    /// Canonical user ids (`{"CanonicalUser": …}`): every key of each.
    pub canonical_users: Vec<String>,
}

/// `Action` or `Resource` patterns (or, negated, `NotAction` or
/// `NotResource`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Patterns {
    pub negated: bool,
    pub patterns: Vec<String>,
}

/// A condition operator (without its `…IfExists` suffix or set prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    Bool,
    IpAddress,
    NotIpAddress,
    Null,
}

impl Operator {
    fn parse(name: &str) -> Option<Operator> {
        use Operator::*;
        Some(match name {
            "StringEquals" => StringEquals,
            "StringNotEquals" => StringNotEquals,
            "StringEqualsIgnoreCase" => StringEqualsIgnoreCase,
            "StringNotEqualsIgnoreCase" => StringNotEqualsIgnoreCase,
            "StringLike" => StringLike,
            "StringNotLike" => StringNotLike,
            "NumericEquals" => NumericEquals,
            "NumericNotEquals" => NumericNotEquals,
            "NumericLessThan" => NumericLessThan,
            "NumericLessThanEquals" => NumericLessThanEquals,
            "NumericGreaterThan" => NumericGreaterThan,
            "NumericGreaterThanEquals" => NumericGreaterThanEquals,
            "Bool" => Bool,
            "IpAddress" => IpAddress,
            "NotIpAddress" => NotIpAddress,
            "Null" => Null,
            _ => return None,
        })
    }

    /// Whether the operator holds when no value matches (the `Not` ones).
    pub fn negated(self) -> bool {
        use Operator::*;
        matches!(
            self,
            StringNotEquals
                | StringNotEqualsIgnoreCase
                | StringNotLike
                | NumericNotEquals
                | NotIpAddress
        )
    }
}

/// `ForAnyValue:` / `ForAllValues:` before an operator. Every key Hangar
/// supplies has one value, so both read as the plain operator, but for a
/// missing key, which `ForAllValues` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetQualifier {
    None,
    ForAnyValue,
    ForAllValues,
}

/// One `"Operator": {"key": values}` test.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub operator: Operator,
    pub if_exists: bool,
    pub set: SetQualifier,
    /// Lower case.
    pub key: String,
    pub values: Vec<String>,
    /// The values as networks, for the IP operators.
    pub nets: Vec<IpNet>,
}

fn malformed(message: impl Into<String>) -> S3Error {
    let message: String = message.into();
    s3_error!(MalformedPolicy, "{message}")
}

/// One string or a list of strings (`"s3:GetObject"` or `["s3:Get*"]`).
fn strings(v: &Value, what: &str) -> Result<Vec<String>, S3Error> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                _ => Err(malformed(format!(
                    "{what} must be a string or a list of strings"
                ))),
            })
            .collect(),
        _ => Err(malformed(format!(
            "{what} must be a string or a list of strings"
        ))),
    }
}

/// A condition value as text: strings, numbers and booleans are allowed.
fn condition_values(v: &Value) -> Result<Vec<String>, S3Error> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(malformed("Invalid Condition value")),
    };
    match v {
        Value::Array(items) if !items.is_empty() => items.iter().map(one).collect(),
        Value::Array(_) => Err(malformed("Invalid Condition value")),
        v => Ok(vec![one(v)?]),
    }
}

/// Parses an IP condition value: an address or a CIDR block.
pub fn parse_net(v: &str) -> Option<IpNet> {
    v.parse::<IpNet>()
        .ok()
        .or_else(|| v.parse::<IpAddr>().ok().map(IpNet::from))
}

impl Policy {
    /// Parses and checks a policy of bucket `bucket`.
    pub fn parse(text: &str, bucket: &str) -> Result<Policy, S3Error> {
        if text.len() > hangar_model::access::MAX_POLICY_LEN {
            return Err(malformed("Policies must be less than 20 KB"));
        }
        let doc: Value = serde_json::from_str(text)
            .map_err(|_| malformed("Policies must be valid JSON and the first byte must be '{'"))?;
        let Value::Object(doc) = doc else {
            return Err(malformed(
                "Policies must be valid JSON and the first byte must be '{'",
            ));
        };
        let mut statements = None;
        for (name, v) in &doc {
            match name.as_str() {
                "Version" => match v.as_str() {
                    Some("2012-10-17" | "2008-10-17") => {}
                    _ => return Err(malformed("Invalid policy version")),
                },
                "Id" => {
                    if !v.is_string() {
                        return Err(malformed("Id must be a string"));
                    }
                }
                "Statement" => statements = Some(v),
                other => return Err(malformed(format!("Unknown field {other}"))),
            }
        }
        let list: Vec<&Value> = match statements {
            None => return Err(malformed("Missing required field Statement")),
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::Object(_)) => vec![v],
            Some(_) => return Err(malformed("Statement must be an object or a list")),
        };
        if list.len() > MAX_STATEMENTS {
            return Err(malformed("Too many statements"));
        }
        let statements = list
            .into_iter()
            .map(|s| Statement::parse(s, bucket))
            .collect::<Result<_, _>>()?;
        Ok(Policy { statements })
    }
}

impl Statement {
    fn parse(v: &Value, bucket: &str) -> Result<Statement, S3Error> {
        let Value::Object(m) = v else {
            return Err(malformed("Statement must be an object"));
        };
        let mut effect = None;
        let mut principal = None;
        let mut action = None;
        let mut resource = None;
        let mut conditions = Vec::new();
        for (name, v) in m {
            match name.as_str() {
                "Sid" => {
                    if !v.is_string() {
                        return Err(malformed("Sid must be a string"));
                    }
                }
                "Effect" => {
                    effect = Some(match v.as_str() {
                        Some("Allow") => Effect::Allow,
                        Some("Deny") => Effect::Deny,
                        _ => return Err(malformed(format!("Invalid effect: {v}"))),
                    })
                }
                "Principal" | "NotPrincipal" => {
                    if principal.is_some() {
                        return Err(malformed("Principal and NotPrincipal are exclusive"));
                    }
                    principal = Some(parse_principal(v, name == "NotPrincipal")?);
                }
                "Action" | "NotAction" => {
                    if action.is_some() {
                        return Err(malformed("Action and NotAction are exclusive"));
                    }
                    let patterns = strings(v, name)?;
                    for a in &patterns {
                        let lower = a.to_ascii_lowercase();
                        if lower != "*" && !lower.starts_with("s3:") {
                            return Err(malformed("Policy has invalid action"));
                        }
                    }
                    action = Some(Patterns {
                        negated: name == "NotAction",
                        patterns,
                    });
                }
                "Resource" | "NotResource" => {
                    if resource.is_some() {
                        return Err(malformed("Resource and NotResource are exclusive"));
                    }
                    let patterns = strings(v, name)?;
                    for r in &patterns {
                        check_resource(r, bucket)?;
                    }
                    resource = Some(Patterns {
                        negated: name == "NotResource",
                        patterns,
                    });
                }
                "Condition" => conditions = parse_conditions(v)?,
                other => return Err(malformed(format!("Unknown field {other}"))),
            }
        }
        Ok(Statement {
            effect: effect.ok_or_else(|| malformed("Missing required field Effect"))?,
            principal: principal.ok_or_else(|| malformed("Missing required field Principal"))?,
            action: action.ok_or_else(|| malformed("Missing required field Action"))?,
            resource: resource.ok_or_else(|| malformed("Missing required field Resource"))?,
            conditions,
        })
    }
}

fn invalid_principal() -> S3Error {
    malformed("Invalid principal in policy")
}

fn parse_principal(v: &Value, negated: bool) -> Result<Principals, S3Error> {
    let mut p = Principals {
        negated,
        ..Default::default()
    };
    match v {
        Value::String(s) if s == "*" => p.everyone = true,
        Value::Object(m) if !m.is_empty() => {
            for (kind, ids) in m {
                for id in strings(ids, "Principal").map_err(|_| invalid_principal())? {
                    match kind.as_str() {
                        "AWS" if id == "*" => p.everyone = true,
                        "AWS" if hangar_model::key::valid_key_id(&id) => p.keys.push(id),
                        "CanonicalUser" if hangar_model::key::valid_canonical_id(&id) => {
                            p.canonical_users.push(id)
                        }
                        _ => return Err(invalid_principal()),
                    }
                }
            }
        }
        _ => return Err(invalid_principal()),
    }
    Ok(p)
}

/// A resource must be `*` or an ARN of this bucket or of objects in it.
fn check_resource(r: &str, bucket: &str) -> Result<(), S3Error> {
    if r == "*" {
        return Ok(());
    }
    let Some(rest) = r.strip_prefix("arn:aws:s3:::") else {
        return Err(malformed("Policy has invalid resource"));
    };
    let bucket_part = rest.split('/').next().unwrap_or("");
    if crate::wildcard::matches(bucket_part, bucket, false) {
        Ok(())
    } else {
        Err(malformed("Policy has invalid resource"))
    }
}

fn parse_conditions(v: &Value) -> Result<Vec<Condition>, S3Error> {
    let Value::Object(ops) = v else {
        return Err(malformed("Condition must be an object"));
    };
    let mut out = Vec::new();
    for (op_name, tests) in ops {
        let (set, rest) = if let Some(r) = op_name.strip_prefix("ForAnyValue:") {
            (SetQualifier::ForAnyValue, r)
        } else if let Some(r) = op_name.strip_prefix("ForAllValues:") {
            (SetQualifier::ForAllValues, r)
        } else {
            (SetQualifier::None, op_name.as_str())
        };
        let (base, if_exists) = match rest.strip_suffix("IfExists") {
            Some(b) => (b, true),
            None => (rest, false),
        };
        let operator = match Operator::parse(base) {
            Some(o) if !(if_exists && o == Operator::Null) => o,
            _ if is_aws_operator(base) => {
                return Err(s3_error!(
                    NotImplemented,
                    "The condition operator {op_name} is not supported by this server"
                ));
            }
            _ => {
                return Err(malformed(format!("Invalid Condition type : {op_name}")));
            }
        };
        let Value::Object(tests) = tests else {
            return Err(malformed(format!("Invalid Condition block for {op_name}")));
        };
        for (key, values) in tests {
            let key = key.to_ascii_lowercase();
            if !SUPPORTED_KEYS.contains(&key.as_str()) {
                return Err(s3_error!(
                    NotImplemented,
                    "The condition key {key} is not supported by this server"
                ));
            }
            let values = condition_values(values)?;
            let mut nets = Vec::new();
            match operator {
                Operator::IpAddress | Operator::NotIpAddress => {
                    for v in &values {
                        nets.push(parse_net(v).ok_or_else(|| {
                            malformed(format!("Invalid IP address or CIDR block: {v}"))
                        })?);
                    }
                }
                Operator::Bool | Operator::Null
                    if values.iter().any(|v| {
                        !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false")
                    }) =>
                {
                    return Err(malformed(format!("Invalid boolean value for {op_name}")));
                }
                Operator::NumericEquals
                | Operator::NumericNotEquals
                | Operator::NumericLessThan
                | Operator::NumericLessThanEquals
                | Operator::NumericGreaterThan
                | Operator::NumericGreaterThanEquals
                    if values.iter().any(|v| v.parse::<f64>().is_err()) =>
                {
                    return Err(malformed(format!("Invalid numeric value for {op_name}")));
                }
                _ => {}
            }
            out.push(Condition {
                operator,
                if_exists,
                set,
                key,
                values,
                nets,
            });
        }
    }
    Ok(out)
}

/// Operators of AWS's policy language that Hangar does not evaluate.
fn is_aws_operator(name: &str) -> bool {
    matches!(
        name,
        "DateEquals"
            | "DateNotEquals"
            | "DateLessThan"
            | "DateLessThanEquals"
            | "DateGreaterThan"
            | "DateGreaterThanEquals"
            | "BinaryEquals"
            | "ArnEquals"
            | "ArnNotEquals"
            | "ArnLike"
            | "ArnNotLike"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> String {
        Policy::parse(text, "photos")
            .expect_err(text)
            .code()
            .as_str()
            .to_owned()
    }

    #[test]
    fn a_full_policy_parses() {
        let p = Policy::parse(
            r#"{
              "Version": "2012-10-17",
              "Id": "p1",
              "Statement": [
                {"Sid": "pub", "Effect": "Allow", "Principal": "*",
                 "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::photos/public/*"},
                {"Effect": "Deny", "Principal": {"AWS": ["GK000000000000000000000001", "*"]},
                 "NotAction": "s3:Get*", "NotResource": ["arn:aws:s3:::photos"],
                 "Condition": {"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "::1"]},
                               "ForAnyValue:StringLikeIfExists": {"s3:prefix": "home/*"},
                               "Bool": {"aws:SecureTransport": false},
                               "NumericLessThan": {"s3:max-keys": 10}}}
              ]
            }"#,
            "photos",
        )
        .unwrap();
        assert_eq!(p.statements.len(), 2);
        let deny = &p.statements[1];
        assert_eq!(deny.effect, Effect::Deny);
        assert!(deny.principal.everyone);
        assert_eq!(deny.principal.keys, ["GK000000000000000000000001"]);
        assert!(deny.action.negated && deny.resource.negated);
        assert_eq!(deny.conditions.len(), 4);
        let ip = deny
            .conditions
            .iter()
            .find(|c| c.operator == Operator::NotIpAddress)
            .unwrap();
        assert_eq!(ip.key, "aws:sourceip");
        assert_eq!(ip.nets.len(), 2);
        let like = deny
            .conditions
            .iter()
            .find(|c| c.operator == Operator::StringLike)
            .unwrap();
        assert!(like.if_exists);
        assert_eq!(like.set, SetQualifier::ForAnyValue);
        let b = deny
            .conditions
            .iter()
            .find(|c| c.operator == Operator::Bool)
            .unwrap();
        assert_eq!(b.values, ["false"]);
        // A single statement object, and no Version, are accepted.
        let one = Policy::parse(
            r#"{"Statement": {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "*", "Resource": "*"}}"#,
            "photos",
        )
        .unwrap();
        assert_eq!(one.statements.len(), 1);
    }

    #[test]
    fn malformed_policies_are_malformed_policy() {
        let stmt = |inner: &str| format!(r#"{{"Version":"2012-10-17","Statement":[{inner}]}}"#);
        for bad in [
            "".to_owned(),
            "[]".to_owned(),
            "not json".to_owned(),
            r#"{"Version":"2012-10-17"}"#.to_owned(),
            r#"{"Version":"2020-01-01","Statement":[]}"#.to_owned(),
            r#"{"Statement":[],"Extra":1}"#.to_owned(),
            stmt(r#"{"Effect":"Maybe","Principal":"*","Action":"s3:*","Resource":"*"}"#),
            stmt(r#"{"Principal":"*","Action":"s3:*","Resource":"*"}"#),
            stmt(r#"{"Effect":"Allow","Action":"s3:*","Resource":"*"}"#),
            stmt(r#"{"Effect":"Allow","Principal":"someone","Action":"s3:*","Resource":"*"}"#),
            stmt(
                r#"{"Effect":"Allow","Principal":{"AWS":"nobody"},"Action":"s3:*","Resource":"*"}"#,
            ),
            stmt(
                r#"{"Effect":"Allow","Principal":{"Service":"x"},"Action":"s3:*","Resource":"*"}"#,
            ),
            stmt(r#"{"Effect":"Allow","Principal":"*","Action":"ec2:Run","Resource":"*"}"#),
            stmt(r#"{"Effect":"Allow","Principal":"*","Action":[],"Resource":"*"}"#),
            stmt(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::other/*"}"#,
            ),
            stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"photos/*"}"#),
            stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*"}"#),
            stmt(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"Wibble":{"aws:SourceIp":"1.2.3.4"}}}"#,
            ),
            stmt(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"1.2.3.400"}}}"#,
            ),
            stmt(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"yes"}}}"#,
            ),
            stmt(
                r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"NumericLessThan":{"s3:max-keys":"ten"}}}"#,
            ),
            stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Bogus":1}"#),
        ] {
            assert_eq!(code(&bad), "MalformedPolicy", "{bad}");
        }
        let big = format!(
            r#"{{"Statement":[],"Id":"{}"}}"#,
            "x".repeat(hangar_model::access::MAX_POLICY_LEN)
        );
        assert_eq!(code(&big), "MalformedPolicy");
    }

    #[test]
    fn operators_and_keys_hangar_cannot_evaluate_are_not_implemented() {
        let with = |cond: &str| {
            format!(
                r#"{{"Statement":[{{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*","Condition":{cond}}}]}}"#
            )
        };
        assert_eq!(
            code(&with(
                r#"{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}"#
            )),
            "NotImplemented"
        );
        assert_eq!(
            code(&with(
                r#"{"StringEquals":{"s3:ExistingObjectTag/team":"a"}}"#
            )),
            "NotImplemented"
        );
        // Known keys are case-insensitive.
        Policy::parse(&with(r#"{"StringEquals":{"AWS:SOURCEIP":"x"}}"#), "photos").unwrap();
    }

    #[test]
    fn resources_may_use_wildcards_in_the_bucket_name() {
        for ok in [
            "arn:aws:s3:::photos",
            "arn:aws:s3:::photos/*",
            "arn:aws:s3:::pho*/a?c",
            "*",
        ] {
            check_resource(ok, "photos").unwrap();
        }
    }
}
