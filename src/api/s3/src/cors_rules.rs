//! S3's CORS rules: checking a `CORSConfiguration` as PutBucketCors does
//! (limits and S3's exact errors), converting it to and from the rows'
//! [`CorsRule`], and finding the rule that allows a request.
//!
//! Matching, as S3 does it: the first rule (in the order given) whose
//! `AllowedMethod` names the method exactly, one of whose `AllowedOrigin`
//! matches the origin (case-sensitive, at most one `*` standing for any
//! run of characters), and — for a preflight — whose `AllowedHeader`
//! patterns match every requested header (case-insensitive, `*` as for
//! origins).

use hangar_model::bucket::CorsRule;
use s3s::dto::{CORSConfiguration, CORSRule};
use s3s::{S3Error, S3Result, s3_error};

/// Most rules in one configuration.
pub const MAX_RULES: usize = 100;
/// Largest configuration, counted as the text of its fields (S3: 64 KB).
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;
/// The methods a rule may allow.
pub const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// A character of an HTTP header name (an RFC 9110 token), or the `*`
/// of a pattern.
fn header_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn invalid_request(message: String) -> S3Error {
    S3Error::with_message(s3s::S3ErrorCode::InvalidRequest, message)
}

fn check_rule(rule: &CORSRule) -> S3Result<()> {
    if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
        return Err(crate::error::malformed_xml());
    }
    for origin in &rule.allowed_origins {
        if origin.matches('*').count() > 1 {
            return Err(invalid_request(format!(
                "AllowedOrigin \"{origin}\" can not have more than one wildcard."
            )));
        }
    }
    for method in &rule.allowed_methods {
        if !METHODS.contains(&method.as_str()) {
            return Err(invalid_request(format!(
                "Found unsupported HTTP method in CORS config. Unsupported method is {method}"
            )));
        }
    }
    for header in rule.allowed_headers.iter().flatten() {
        if header.matches('*').count() > 1 {
            return Err(invalid_request(format!(
                "AllowedHeader \"{header}\" can not have more than one wildcard."
            )));
        }
    }
    // S3 names both lists "AllowedHeader" in this message.
    let headers = rule.allowed_headers.iter().chain(&rule.expose_headers);
    for header in headers.flatten() {
        if header.is_empty() || !header.chars().all(header_char) {
            return Err(invalid_request(format!(
                "AllowedHeader \"{header}\" contains invalid character."
            )));
        }
    }
    Ok(())
}

/// The size of a configuration as bounded by [`MAX_CONFIG_BYTES`].
fn text_len(rules: &[CORSRule]) -> usize {
    let list = |l: &Option<Vec<String>>| l.iter().flatten().map(String::len).sum::<usize>();
    rules
        .iter()
        .map(|r| {
            r.id.as_ref().map_or(0, String::len)
                + r.allowed_origins.iter().map(String::len).sum::<usize>()
                + r.allowed_methods.iter().map(String::len).sum::<usize>()
                + list(&r.allowed_headers)
                + list(&r.expose_headers)
        })
        .sum()
}

/// The rules of a PutBucketCors body, checked in S3's order: the number of
/// rules, then each rule (origins and methods present, at most one `*` in
/// an origin or an allowed header, known methods, header names of token
/// characters).
pub fn from_xml(config: CORSConfiguration) -> S3Result<Vec<CorsRule>> {
    let rules = config.cors_rules;
    if rules.is_empty() {
        return Err(crate::error::malformed_xml());
    }
    if rules.len() > MAX_RULES {
        return Err(invalid_request(format!(
            "The number of CORS rules should not exceed allowed limit of {MAX_RULES} rules."
        )));
    }
    if text_len(&rules) > MAX_CONFIG_BYTES {
        return Err(s3_error!(
            MaxMessageLengthExceeded,
            "Your request was too big."
        ));
    }
    for rule in &rules {
        check_rule(rule)?;
    }
    Ok(rules
        .into_iter()
        .map(|r| CorsRule {
            id: r.id,
            allowed_origins: r.allowed_origins,
            allowed_methods: r.allowed_methods,
            allowed_headers: r.allowed_headers.unwrap_or_default(),
            expose_headers: r.expose_headers.unwrap_or_default(),
            max_age_seconds: r.max_age_seconds,
        })
        .collect())
}

/// The rules as GetBucketCors returns them.
pub fn to_xml(rules: &[CorsRule]) -> Vec<CORSRule> {
    let opt = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    rules
        .iter()
        .map(|r| CORSRule {
            id: r.id.clone(),
            allowed_origins: r.allowed_origins.clone(),
            allowed_methods: r.allowed_methods.clone(),
            allowed_headers: opt(&r.allowed_headers),
            expose_headers: opt(&r.expose_headers),
            max_age_seconds: r.max_age_seconds,
        })
        .collect()
}

/// Whether `value` matches `pattern`, whose one `*` (if any) stands for
/// any run of characters.
pub fn wildcard_match(pattern: &str, value: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == value,
        Some((prefix, suffix)) => {
            value.len() >= prefix.len() + suffix.len()
                && value.starts_with(prefix)
                && value.ends_with(suffix)
        }
    }
}

/// The first rule allowing `method` from `origin` and, for a preflight,
/// every header of `headers` (lower-case).
pub fn find<'a>(
    rules: &'a [CorsRule],
    origin: &str,
    method: &str,
    headers: Option<&[String]>,
) -> Option<&'a CorsRule> {
    rules.iter().find(|r| {
        r.allowed_methods.iter().any(|m| m == method)
            && r.allowed_origins.iter().any(|o| wildcard_match(o, origin))
            && headers.is_none_or(|hs| {
                hs.iter().all(|h| {
                    r.allowed_headers
                        .iter()
                        .any(|a| wildcard_match(&a.to_ascii_lowercase(), h))
                })
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CORSRule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        CORSRule {
            id: None,
            allowed_origins: v(origins),
            allowed_methods: v(methods),
            allowed_headers: (!headers.is_empty()).then(|| v(headers)),
            expose_headers: None,
            max_age_seconds: None,
        }
    }

    fn code(rules: Vec<CORSRule>) -> (String, String) {
        let e = from_xml(CORSConfiguration { cors_rules: rules }).unwrap_err();
        (
            e.code().as_str().to_owned(),
            e.message().unwrap_or("").to_owned(),
        )
    }

    #[test]
    fn configurations_are_checked_as_s3_does() {
        assert_eq!(code(vec![]).0, "MalformedXML");
        assert_eq!(code(vec![rule(&[], &["GET"], &[])]).0, "MalformedXML");
        assert_eq!(code(vec![rule(&["*"], &[], &[])]).0, "MalformedXML");
        assert_eq!(
            code(vec![rule(&["*example.com*"], &["GET"], &[])]),
            (
                "InvalidRequest".into(),
                "AllowedOrigin \"*example.com*\" can not have more than one wildcard.".into()
            )
        );
        assert_eq!(
            code(vec![rule(&["*"], &["get"], &[])]).1,
            "Found unsupported HTTP method in CORS config. Unsupported method is get"
        );
        assert_eq!(
            code(vec![rule(&["*"], &["GET"], &["x-*-*"])]).1,
            "AllowedHeader \"x-*-*\" can not have more than one wildcard."
        );
        assert_eq!(
            code(vec![rule(&["*"], &["GET"], &["Bad Header"])]).1,
            "AllowedHeader \"Bad Header\" contains invalid character."
        );
        let many = vec![rule(&["*"], &["GET"], &[]); 101];
        assert_eq!(
            code(many).1,
            "The number of CORS rules should not exceed allowed limit of 100 rules."
        );
        let ok = from_xml(CORSConfiguration {
            cors_rules: vec![rule(&["*"], &["GET"], &[]); 100],
        });
        assert_eq!(ok.unwrap().len(), 100);
        let big = rule(&[&"o".repeat(MAX_CONFIG_BYTES)], &["GET"], &[]);
        assert_eq!(code(vec![big]).0, "MaxMessageLengthExceeded");
    }

    #[test]
    fn the_first_matching_rule_wins() {
        let rules = from_xml(CORSConfiguration {
            cors_rules: vec![
                rule(&["https://*.example.com"], &["PUT"], &["Content-*"]),
                rule(&["http://a.test"], &["GET", "HEAD"], &["*"]),
                rule(&["*"], &["GET"], &[]),
            ],
        })
        .unwrap();
        let hs = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let at = |o, m, h: Option<&[String]>| {
            find(&rules, o, m, h).map(|r| rules.iter().position(|x| x == r).unwrap())
        };
        assert_eq!(
            at("https://x.example.com", "PUT", Some(&hs(&["content-type"]))),
            Some(0)
        );
        assert_eq!(
            at("https://x.example.com", "PUT", Some(&hs(&["x-amz-date"]))),
            None
        );
        assert_eq!(at("https://example.com", "PUT", None), None);
        assert_eq!(
            at("http://a.test", "GET", Some(&hs(&["x-anything"]))),
            Some(1)
        );
        assert_eq!(at("http://b.test", "GET", None), Some(2));
        assert_eq!(at("http://b.test", "GET", Some(&hs(&["x-a"]))), None);
        assert_eq!(at("http://b.test", "DELETE", None), None);
        // Origins are case-sensitive; a preflight asking no header matches.
        assert_eq!(at("HTTP://A.TEST", "HEAD", Some(&[])), None);
        assert_eq!(at("http://a.test", "HEAD", Some(&[])), Some(1));
        assert!(wildcard_match("a*a", "aa") && !wildcard_match("a*a", "a"));
    }
}
