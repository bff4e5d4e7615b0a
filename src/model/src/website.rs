//! A bucket's static website configuration (S3's `WebsiteConfiguration`,
//! checked by the S3 layer before it is stored) and the decisions the
//! website endpoint takes from it: which key a path names, which routing
//! rule applies, where a redirect goes.

use serde::{Deserialize, Serialize};

/// Put/GetBucketWebsite. Either `redirect_all` is set (and nothing else),
/// or `index_suffix` is (with optional error document and routing rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WebsiteConfig {
    /// `IndexDocument/Suffix`: served for a path ending in `/`.
    pub index_suffix: Option<String>,
    /// `ErrorDocument/Key`: served, with the error's status, on a 4xx.
    pub error_key: Option<String>,
    /// `RedirectAllRequestsTo`.
    pub redirect_all: Option<RedirectAll>,
    /// `RoutingRules`, in order: the first that matches applies.
    pub routing_rules: Vec<RoutingRule>,
}

/// `RedirectAllRequestsTo`: every request goes to `protocol://host/path`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RedirectAll {
    pub host_name: String,
    /// `http` or `https`; the request's own when absent.
    pub protocol: Option<String>,
}

/// One `RoutingRule`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RoutingRule {
    /// `Condition/KeyPrefixEquals`.
    pub key_prefix_equals: Option<String>,
    /// `Condition/HttpErrorCodeReturnedEquals`.
    pub http_error_code_returned_equals: Option<u16>,
    pub redirect: Redirect,
}

/// A rule's `Redirect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Redirect {
    pub host_name: Option<String>,
    pub protocol: Option<String>,
    pub replace_key_prefix_with: Option<String>,
    pub replace_key_with: Option<String>,
    /// 301 when absent.
    pub http_redirect_code: Option<u16>,
}

impl WebsiteConfig {
    /// The object key a request path (without its leading `/`, decoded)
    /// names: the index document for a "directory" (empty, or ending in `/`).
    pub fn key_for(&self, path: &str) -> String {
        match &self.index_suffix {
            Some(s) if path.is_empty() || path.ends_with('/') => format!("{path}{s}"),
            _ => path.to_owned(),
        }
    }

    /// The first routing rule that applies to `key`: before the object is
    /// read (`error` = `None`), the rules without an error-code condition;
    /// after it failed with status `error`, the rules whose code is that.
    pub fn rule_for(&self, key: &str, error: Option<u16>) -> Option<&RoutingRule> {
        self.routing_rules.iter().find(|r| {
            r.key_prefix_equals
                .as_deref()
                .is_none_or(|p| key.starts_with(p))
                && r.http_error_code_returned_equals == error
        })
    }
}

impl RoutingRule {
    /// Where the rule sends a request for `key` that came with `protocol`
    /// and `host`: the `Location` and the status.
    pub fn location(&self, key: &str, protocol: &str, host: &str) -> (String, u16) {
        let r = &self.redirect;
        let new_key = if let Some(k) = &r.replace_key_with {
            k.clone()
        } else if let Some(p) = &r.replace_key_prefix_with {
            let prefix = self.key_prefix_equals.as_deref().unwrap_or("");
            format!("{p}{}", key.strip_prefix(prefix).unwrap_or(key))
        } else {
            key.to_owned()
        };
        let proto = r.protocol.as_deref().unwrap_or(protocol);
        let host = r.host_name.as_deref().unwrap_or(host);
        (
            format!("{proto}://{host}/{new_key}"),
            r.http_redirect_code.unwrap_or(301),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(prefix: Option<&str>, code: Option<u16>, redirect: Redirect) -> RoutingRule {
        RoutingRule {
            key_prefix_equals: prefix.map(str::to_owned),
            http_error_code_returned_equals: code,
            redirect,
        }
    }

    #[test]
    fn index_document_for_directories_only() {
        let w = WebsiteConfig {
            index_suffix: Some("index.html".into()),
            ..Default::default()
        };
        assert_eq!(w.key_for(""), "index.html");
        assert_eq!(w.key_for("docs/"), "docs/index.html");
        assert_eq!(w.key_for("docs/a.css"), "docs/a.css");
    }

    #[test]
    fn first_matching_rule_by_prefix_and_error_code() {
        let to = |h: &str| Redirect {
            host_name: Some(h.into()),
            ..Default::default()
        };
        let w = WebsiteConfig {
            index_suffix: Some("index.html".into()),
            routing_rules: vec![
                rule(Some("docs/"), None, to("a")),
                rule(None, Some(404), to("b")),
                rule(Some("d"), None, to("c")),
            ],
            ..Default::default()
        };
        let host = |r: Option<&RoutingRule>| r.and_then(|r| r.redirect.host_name.clone());
        assert_eq!(host(w.rule_for("docs/x", None)), Some("a".into()));
        assert_eq!(host(w.rule_for("dx", None)), Some("c".into()));
        assert_eq!(host(w.rule_for("x", None)), None);
        assert_eq!(host(w.rule_for("x", Some(404))), Some("b".into()));
        assert_eq!(host(w.rule_for("docs/x", Some(403))), None);
    }

    #[test]
    fn redirect_replaces_prefix_or_key() {
        let r = rule(
            Some("docs/"),
            None,
            Redirect {
                replace_key_prefix_with: Some("documents/".into()),
                http_redirect_code: Some(302),
                ..Default::default()
            },
        );
        assert_eq!(
            r.location("docs/a.html", "http", "h.example"),
            ("http://h.example/documents/a.html".into(), 302)
        );
        let r = rule(
            None,
            Some(404),
            Redirect {
                host_name: Some("other.example".into()),
                protocol: Some("https".into()),
                replace_key_with: Some("404.html".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            r.location("x/y", "http", "h.example"),
            ("https://other.example/404.html".into(), 301)
        );
    }
}
