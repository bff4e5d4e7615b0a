//! CORS on the S3 endpoint, around s3s: a preflight (`OPTIONS`) is answered
//! here from the bucket's rules, without authentication, and every other
//! request that carries an `Origin` gets the CORS headers of the first rule
//! allowing its origin and method — on success and error responses alike,
//! as S3 sends them. Rules are read from the bucket row (a local read on
//! every node: bucket rows are on every node).

use std::sync::Arc;

use hangar_model::Model;
use hangar_model::bucket::CorsRule;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};

use crate::cors_rules::{self, METHODS};
use crate::xml_text;

/// What S3 sends in `Vary` with CORS headers.
const VARY: &str = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method";
/// Most headers a preflight may ask for (browsers ask for a few): bounds
/// the matching work, at most this many times the rules' patterns.
const MAX_REQUESTED_HEADERS: usize = 256;

const NOT_ENABLED: &str = "CORSResponse: CORS is not enabled for this bucket.";
const NOT_ALLOWED: &str = "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.";

/// CORS for one node's S3 endpoint.
pub struct Cors {
    model: Arc<Model>,
    /// `root_domain` (no leading dot): `<bucket>.<root_domain>` names a bucket.
    root_domain: Option<String>,
}

/// What CORS needs of a request with an `Origin`, read before s3s takes it.
pub struct CorsRequest {
    origin: String,
    method: String,
    bucket: Option<String>,
}

/// The bucket a request addresses, and whether it names an object in it.
fn target(
    root_domain: Option<&str>,
    uri: &http::Uri,
    headers: &HeaderMap,
) -> Option<(String, bool)> {
    let path = uri.path().trim_start_matches('/');
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.host())
        .unwrap_or("");
    let name = host.split(':').next().unwrap_or(host);
    if let Some(root) = root_domain
        && let Some(bucket) = name.strip_suffix(root).and_then(|b| b.strip_suffix('.'))
        && !bucket.is_empty()
    {
        return Some((bucket.to_ascii_lowercase(), !path.is_empty()));
    }
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    (!bucket.is_empty()).then(|| (bucket.to_owned(), !key.is_empty()))
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// An S3 error response built here (a preflight never reaches s3s).
fn error(status: StatusCode, code: &str, message: &str, extra: &str) -> http::Response<s3s::Body> {
    let body = xml_text::error_document(code, message, extra);
    let mut resp = http::Response::new(s3s::Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    resp
}

/// S3's 403 for a preflight no rule allows.
fn forbidden(message: &str, method: &str, object: bool) -> http::Response<s3s::Body> {
    let extra = format!(
        "<Method>{}</Method><ResourceType>{}</ResourceType>",
        xml_text::escape(method),
        if object { "OBJECT" } else { "BUCKET" }
    );
    error(StatusCode::FORBIDDEN, "AccessForbidden", message, &extra)
}

/// Sets the CORS headers of `rule` for `origin` (and, for a preflight, the
/// headers it asked for).
fn set_headers(h: &mut HeaderMap, rule: &CorsRule, origin: &str, requested: Option<&[String]>) {
    let mut set = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    if rule.allowed_origins.iter().any(|o| o == "*") {
        set("access-control-allow-origin", "*");
    } else {
        // Credentials may be allowed only with the origin named.
        set("access-control-allow-origin", origin);
        set("access-control-allow-credentials", "true");
    }
    set(
        "access-control-allow-methods",
        &rule.allowed_methods.join(", "),
    );
    if let Some(hs) = requested.filter(|hs| !hs.is_empty()) {
        set("access-control-allow-headers", &hs.join(", "));
    }
    if !rule.expose_headers.is_empty() {
        set(
            "access-control-expose-headers",
            &rule.expose_headers.join(", "),
        );
    }
    if let Some(age) = rule.max_age_seconds {
        set("access-control-max-age", &age.to_string());
    }
    h.append(http::header::VARY, HeaderValue::from_static(VARY));
}

impl Cors {
    pub fn new(model: Arc<Model>, root_domain: Option<String>) -> Cors {
        Cors {
            model,
            root_domain: root_domain.map(|d| d.trim_start_matches('.').to_owned()),
        }
    }

    /// The rules of bucket `name`: `Ok(None)` if there is no such bucket.
    async fn rules(&self, name: &str) -> Result<Option<Vec<CorsRule>>, s3s::S3Error> {
        let bucket = self
            .model
            .buckets()
            .get_bucket(name)
            .await
            .map_err(crate::error::model_error)?;
        Ok(bucket.map(|b| b.cors_rules().to_vec()))
    }

    /// What the CORS headers of the response to `req` depend on; `None`
    /// when it has no `Origin` (nothing to add).
    pub fn actual<B>(&self, req: &http::Request<B>) -> Option<CorsRequest> {
        let origin = header(req.headers(), "origin")?;
        Some(CorsRequest {
            origin,
            method: req.method().as_str().to_owned(),
            bucket: target(self.root_domain.as_deref(), req.uri(), req.headers()).map(|t| t.0),
        })
    }

    /// [`Cors::actual`] for a request to bucket `bucket` of the website
    /// endpoint, which names it by its host only.
    pub fn actual_for<B>(&self, req: &http::Request<B>, bucket: &str) -> Option<CorsRequest> {
        let origin = header(req.headers(), "origin")?;
        Some(CorsRequest {
            origin,
            method: req.method().as_str().to_owned(),
            bucket: Some(bucket.to_owned()),
        })
    }

    /// Adds the CORS headers of the first rule allowing `r` to `resp`, if
    /// any does. A failed look-up of the rules adds none.
    pub async fn decorate(&self, r: &CorsRequest, resp: &mut http::Response<s3s::Body>) {
        let Some(bucket) = &r.bucket else { return };
        let rules = match self.rules(bucket).await {
            Ok(Some(rules)) => rules,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("CORS rules of {bucket}: {e}");
                return;
            }
        };
        if let Some(rule) = cors_rules::find(&rules, &r.origin, &r.method, None) {
            set_headers(resp.headers_mut(), rule, &r.origin, None);
        }
    }

    /// Answers a preflight `OPTIONS` from the rules of the bucket it
    /// addresses: 200 with the CORS headers of the first rule allowing the
    /// origin, the method and every requested header; S3's 400 without an
    /// `Origin` or a valid `Access-Control-Request-Method`, 404 for a
    /// missing bucket, 403 when no rule allows it.
    pub async fn preflight<B>(&self, req: &http::Request<B>) -> http::Response<s3s::Body> {
        let h = req.headers();
        let Some(origin) = header(h, "origin") else {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "Insufficient information. Origin request header needed.",
                "",
            );
        };
        let method = header(h, "access-control-request-method");
        let Some(method) = method.filter(|m| METHODS.contains(&m.as_str())) else {
            let shown = header(h, "access-control-request-method");
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!(
                    "Invalid Access-Control-Request-Method: {}",
                    shown.as_deref().unwrap_or("null")
                ),
                "",
            );
        };
        let requested: Vec<String> = h
            .get_all("access-control-request-headers")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .take(MAX_REQUESTED_HEADERS + 1)
            .collect();
        if requested.len() > MAX_REQUESTED_HEADERS {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "Too many headers in Access-Control-Request-Headers.",
                "",
            );
        }
        let Some((bucket, object)) = target(self.root_domain.as_deref(), req.uri(), h) else {
            return forbidden(NOT_ENABLED, &method, false);
        };
        let rules = match self.rules(&bucket).await {
            Ok(Some(rules)) => rules,
            Ok(None) => {
                return error(
                    StatusCode::NOT_FOUND,
                    "NoSuchBucket",
                    "The specified bucket does not exist",
                    &format!("<BucketName>{}</BucketName>", xml_text::escape(&bucket)),
                );
            }
            Err(e) => {
                let status = e.status_code().unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return error(status, e.code().as_str(), e.message().unwrap_or(""), "");
            }
        };
        if rules.is_empty() {
            return forbidden(NOT_ENABLED, &method, object);
        }
        let Some(rule) = cors_rules::find(&rules, &origin, &method, Some(&requested)) else {
            return forbidden(NOT_ALLOWED, &method, object);
        };
        let mut resp = http::Response::new(s3s::Body::empty());
        set_headers(resp.headers_mut(), rule, &origin, Some(&requested));
        resp.headers_mut()
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        resp
    }
}

/// Whether `req` is a CORS preflight (every `OPTIONS` on the S3 endpoint is
/// answered as one: S3 has no other `OPTIONS`).
pub fn is_preflight<B>(req: &http::Request<B>) -> bool {
    req.method() == Method::OPTIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(root: Option<&str>, uri: &str, host: &str) -> Option<(String, bool)> {
        let mut h = HeaderMap::new();
        h.insert(http::header::HOST, HeaderValue::from_str(host).unwrap());
        target(root, &uri.parse().unwrap(), &h)
    }

    #[test]
    fn the_bucket_is_found_in_the_path_or_the_host() {
        assert_eq!(t(None, "/b/k/x", "h:3900"), Some(("b".into(), true)));
        assert_eq!(t(None, "/b", "h"), Some(("b".into(), false)));
        assert_eq!(t(None, "/b/", "h"), Some(("b".into(), false)));
        assert_eq!(t(None, "/", "h"), None);
        let root = Some("s3.test");
        assert_eq!(
            t(root, "/k", "Photos.s3.test:3900"),
            Some(("photos".into(), true))
        );
        assert_eq!(
            t(root, "/", "photos.s3.test"),
            Some(("photos".into(), false))
        );
        assert_eq!(t(root, "/b/k", "s3.test"), Some(("b".into(), true)));
    }
}
