//! The object browser's way to S3: `ANY /console/s3/<path>?<query>` is the
//! S3 request `<path>?<query>` with `Host: <X-Hangar-S3-Host>`, answered
//! in-process by this node's S3 endpoint — the same code, signature check,
//! permission check and metrics as on the S3 port. The console gets each URL
//! presigned from `/v2/PresignObject`, so this route adds no authority of
//! its own: it only makes the browser's S3 calls same-origin, so that the
//! S3 endpoint needs no CORS rule for the console and need not even be
//! reachable from the operator's browser (doc/security.md).
//!
//! It takes the full admin token as well (`Authorization: Bearer`, which
//! is not passed on), like every console call. What it answers is served
//! as inert data: `Content-Security-Policy: sandbox` and `nosniff`, so an
//! uploaded HTML file can never run as the console's origin.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::Response;

use crate::admin_endpoint::AdminEndpoint;
use crate::http_reply::{json, refusal};
use crate::ops::AdminOps;
use crate::proto::AdminError;
use crate::routes::Verb;

/// The header that names the `Host` the URL was signed for.
const S3_HOST: &str = "x-hangar-s3-host";
const PREFIX: &str = "/console/s3";
/// The CSP of everything the proxy answers: nothing in it may run.
const SANDBOX: &str = "sandbox; default-src 'none'; frame-ancestors 'none'";

fn refuse(e: &AdminError) -> Response {
    super::secure(json(e.code.http_status(), e), SANDBOX)
}

/// Answers one proxied S3 request.
pub async fn s3<H: AdminOps>(State(ep): State<Arc<AdminEndpoint<H>>>, req: Request) -> Response {
    // Full scope whatever the method: the URLs it carries are minted by a
    // POST route.
    if let Some(r) = refusal(ep.tokens.check_op(req.headers(), Verb::Post)) {
        return super::secure(r, SANDBOX);
    }
    let Some(s3) = ep.s3.as_ref() else {
        return refuse(&AdminError::not_found(
            "this node serves no S3 API ([s3_api] api_bind_addr is not set)",
        ));
    };
    let (mut parts, body) = req.into_parts();
    let Some(host) = parts.headers.remove(S3_HOST) else {
        return refuse(&AdminError::bad(format!(
            "{S3_HOST} is missing: the host the URL was signed for"
        )));
    };
    let rest = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .and_then(|pq| pq.strip_prefix(PREFIX))
        .filter(|rest| rest.starts_with('/'));
    let Some(uri) = rest.and_then(|r| r.parse::<http::Uri>().ok()) else {
        return refuse(&AdminError::bad("not an S3 path under /console/s3/"));
    };
    parts.uri = uri;
    // What the browser adds for the admin endpoint is not S3's business.
    for name in [
        header::AUTHORIZATION,
        header::COOKIE,
        header::ORIGIN,
        header::REFERER,
    ] {
        parts.headers.remove(name);
    }
    parts.headers.insert(header::HOST, host);
    let req = http::Request::from_parts(parts, body);
    let resp = match hangar_api_s3::server::call_counted(&s3.endpoint, &s3.metrics, req).await {
        Ok(resp) => resp.map(Body::new),
        Err(e) => {
            tracing::debug!("console S3 request failed: {e:?}");
            // s3s answers S3 errors as S3 does; this is a request it could
            // not answer at all, as hyper would drop the connection.
            return refuse(&AdminError::bad(
                "the S3 code could not answer this request",
            ));
        }
    };
    let mut resp = super::secure(resp, SANDBOX);
    resp.headers_mut().remove(header::SET_COOKIE);
    resp
}
