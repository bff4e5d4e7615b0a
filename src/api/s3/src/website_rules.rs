//! S3's `WebsiteConfiguration` to and from [`WebsiteConfig`], with the
//! checks S3 makes on PutBucketWebsite (malformed XML is s3s's answer).

use hangar_model::website::{Redirect, RedirectAll, RoutingRule, WebsiteConfig};
use s3s::dto;
use s3s::{S3Result, s3_error};

fn invalid(msg: &str) -> s3s::S3Error {
    s3_error!(InvalidArgument, "{msg}")
}

fn protocol(p: Option<dto::Protocol>) -> S3Result<Option<String>> {
    match p.as_ref().map(|p| p.as_str()) {
        None => Ok(None),
        Some(p @ ("http" | "https")) => Ok(Some(p.to_owned())),
        Some(_) => Err(invalid("Invalid protocol, protocol can be http or https.")),
    }
}

fn code(
    text: Option<String>,
    range: std::ops::RangeInclusive<u16>,
    what: &str,
) -> S3Result<Option<u16>> {
    match text {
        None => Ok(None),
        Some(t) => match t.parse::<u16>() {
            Ok(c) if range.contains(&c) => Ok(Some(c)),
            _ => Err(invalid(&format!("The provided {what} is not valid: {t}"))),
        },
    }
}

/// The configuration of a PutBucketWebsite, checked.
pub(crate) fn from_xml(w: dto::WebsiteConfiguration) -> S3Result<WebsiteConfig> {
    if let Some(r) = w.redirect_all_requests_to {
        if w.index_document.is_some() || w.error_document.is_some() || w.routing_rules.is_some() {
            return Err(invalid(
                "RedirectAllRequestsTo cannot be provided in conjunction with other Routing Rules.",
            ));
        }
        if r.host_name.is_empty() {
            return Err(invalid(
                "A host name must be provided in RedirectAllRequestsTo.",
            ));
        }
        return Ok(WebsiteConfig {
            redirect_all: Some(RedirectAll {
                host_name: r.host_name,
                protocol: protocol(r.protocol)?,
            }),
            ..Default::default()
        });
    }
    let Some(index) = w.index_document else {
        return Err(invalid(
            "A value for IndexDocument Suffix must be provided if RedirectAllRequestsTo is empty",
        ));
    };
    if index.suffix.is_empty() || index.suffix.contains('/') {
        return Err(invalid(
            "The IndexDocument Suffix is not well formed: it must not be empty nor contain a slash",
        ));
    }
    let error_key = match w.error_document {
        Some(e) if e.key.is_empty() => {
            return Err(invalid("The ErrorDocument Key must not be empty"));
        }
        Some(e) => Some(e.key),
        None => None,
    };
    let mut routing_rules = Vec::new();
    for r in w.routing_rules.unwrap_or_default() {
        let (prefix, error) = match r.condition {
            Some(c) => (
                c.key_prefix_equals,
                code(
                    c.http_error_code_returned_equals,
                    400..=599,
                    "HttpErrorCodeReturnedEquals",
                )?,
            ),
            None => (None, None),
        };
        let d = r.redirect;
        if d.replace_key_with.is_some() && d.replace_key_prefix_with.is_some() {
            return Err(invalid(
                "You can only define ReplaceKeyPrefix or ReplaceKey but not both.",
            ));
        }
        let redirect = Redirect {
            host_name: d.host_name,
            protocol: protocol(d.protocol)?,
            replace_key_prefix_with: d.replace_key_prefix_with,
            replace_key_with: d.replace_key_with,
            http_redirect_code: code(d.http_redirect_code, 300..=399, "HttpRedirectCode")?,
        };
        if redirect == Redirect::default() {
            return Err(invalid(
                "The Redirect of a RoutingRule must contain at least one element.",
            ));
        }
        routing_rules.push(RoutingRule {
            key_prefix_equals: prefix,
            http_error_code_returned_equals: error,
            redirect,
        });
    }
    Ok(WebsiteConfig {
        index_suffix: Some(index.suffix),
        error_key,
        redirect_all: None,
        routing_rules,
    })
}

/// The configuration as GetBucketWebsite answers it.
pub(crate) fn to_xml(w: &WebsiteConfig) -> dto::GetBucketWebsiteOutput {
    dto::GetBucketWebsiteOutput {
        index_document: w
            .index_suffix
            .clone()
            .map(|suffix| dto::IndexDocument { suffix }),
        error_document: w.error_key.clone().map(|key| dto::ErrorDocument { key }),
        redirect_all_requests_to: w.redirect_all.as_ref().map(|r| dto::RedirectAllRequestsTo {
            host_name: r.host_name.clone(),
            protocol: r.protocol.clone().map(dto::Protocol::from),
        }),
        routing_rules: (!w.routing_rules.is_empty()).then(|| {
            w.routing_rules
                .iter()
                .map(|r| dto::RoutingRule {
                    condition: (r.key_prefix_equals.is_some()
                        || r.http_error_code_returned_equals.is_some())
                    .then(|| dto::Condition {
                        key_prefix_equals: r.key_prefix_equals.clone(),
                        http_error_code_returned_equals: r
                            .http_error_code_returned_equals
                            .map(|c| c.to_string()),
                    }),
                    redirect: dto::Redirect {
                        host_name: r.redirect.host_name.clone(),
                        protocol: r.redirect.protocol.clone().map(dto::Protocol::from),
                        replace_key_prefix_with: r.redirect.replace_key_prefix_with.clone(),
                        replace_key_with: r.redirect.replace_key_with.clone(),
                        http_redirect_code: r.redirect.http_redirect_code.map(|c| c.to_string()),
                    },
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(s: &str) -> Option<dto::IndexDocument> {
        Some(dto::IndexDocument { suffix: s.into() })
    }

    fn code_of(r: S3Result<WebsiteConfig>) -> String {
        r.unwrap_err().code().as_str().to_owned()
    }

    #[test]
    fn an_index_or_a_redirect_is_required_not_both() {
        assert_eq!(
            code_of(from_xml(dto::WebsiteConfiguration::default())),
            "InvalidArgument"
        );
        for bad in ["", "a/b"] {
            let w = dto::WebsiteConfiguration {
                index_document: index(bad),
                ..Default::default()
            };
            assert_eq!(code_of(from_xml(w)), "InvalidArgument");
        }
        let both = dto::WebsiteConfiguration {
            index_document: index("index.html"),
            redirect_all_requests_to: Some(dto::RedirectAllRequestsTo {
                host_name: "example.com".into(),
                protocol: None,
            }),
            ..Default::default()
        };
        assert_eq!(code_of(from_xml(both)), "InvalidArgument");
    }

    #[test]
    fn rules_are_checked_and_round_trip() {
        let rule = |code: &str, redirect_code: &str, proto: &str| dto::RoutingRule {
            condition: Some(dto::Condition {
                key_prefix_equals: Some("docs/".into()),
                http_error_code_returned_equals: Some(code.into()),
            }),
            redirect: dto::Redirect {
                host_name: Some("h".into()),
                protocol: Some(dto::Protocol::from(proto.to_owned())),
                http_redirect_code: Some(redirect_code.into()),
                replace_key_prefix_with: Some("d/".into()),
                replace_key_with: None,
            },
        };
        let w = |r| dto::WebsiteConfiguration {
            index_document: index("index.html"),
            error_document: Some(dto::ErrorDocument {
                key: "e.html".into(),
            }),
            routing_rules: Some(vec![r]),
            ..Default::default()
        };
        for bad in [
            rule("200", "301", "http"),
            rule("404", "200", "http"),
            rule("404", "301", "ftp"),
        ] {
            assert_eq!(code_of(from_xml(w(bad))), "InvalidArgument");
        }
        let ok = from_xml(w(rule("404", "302", "https"))).unwrap();
        assert_eq!(
            ok.routing_rules[0].http_error_code_returned_equals,
            Some(404)
        );
        assert_eq!(ok.routing_rules[0].redirect.http_redirect_code, Some(302));
        let back = to_xml(&ok);
        assert_eq!(
            back.routing_rules.unwrap()[0]
                .redirect
                .http_redirect_code
                .as_deref(),
            Some("302")
        );
        assert_eq!(back.error_document.unwrap().key, "e.html");
    }
}
