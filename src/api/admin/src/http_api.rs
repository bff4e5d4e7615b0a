//! The admin HTTP API (axum): one route per operation (`routes::ROUTES`),
//! each checked against the bearer tokens before anything else, decoded
//! into the same [`Request`] the local socket carries and run by the same
//! [`AdminOps`]; plus `GET /metrics`, `GET /health` and the web console
//! under `/console/` (`console`).
//!
//! A missing token is answered `401` with an empty body, an expired
//! signed one `401` with a body that says so, a wrong one or one of too
//! narrow a scope `403` with an empty body. An operation's failure is
//! its [`AdminError`] as JSON, with the status of its code.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

pub use crate::admin_endpoint::AdminEndpoint;
use crate::http_reply::{json, refusal};
use crate::ops::AdminOps;
use crate::proto::{AdminError, Request};
use crate::routes::{ROUTES, Route, Verb};

/// Largest request body accepted (the socket's request line bound too).
pub const MAX_BODY: usize = 64 * 1024;

type Ep<H> = State<Arc<AdminEndpoint<H>>>;

fn error(e: &AdminError) -> Response {
    json(e.code.http_status(), e)
}

async fn run<H: AdminOps>(ep: &AdminEndpoint<H>, req: Result<Request, AdminError>) -> Response {
    match req {
        Ok(req) => match ep.ops.call(req).await {
            Ok(v) => json(StatusCode::OK, &v),
            Err(e) => error(&e),
        },
        Err(e) => error(&e),
    }
}

async fn op_get<H: AdminOps>(
    ep: Arc<AdminEndpoint<H>>,
    route: &'static Route,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    if let Some(r) = refusal(ep.tokens.check_op(&headers, Verb::Get)) {
        return r;
    }
    let req = query
        .map_err(|e| AdminError::bad(format!("{}: {e}", route.path)))
        .and_then(|Query(pairs)| route.decode_query(pairs));
    run(&ep, req).await
}

async fn op_post<H: AdminOps>(
    ep: Arc<AdminEndpoint<H>>,
    route: &'static Route,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(r) = refusal(ep.tokens.check_op(&headers, Verb::Post)) {
        return r;
    }
    // Tokens are made with admin_token itself: a signed token that could
    // make others would outlive its own expiry through them.
    if route.op == "admin_token_create"
        && crate::auth::bearer(&headers).is_some_and(|t| t.starts_with(crate::auth::SIGNED_PREFIX))
    {
        return StatusCode::FORBIDDEN.into_response();
    }
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let status = e.status();
            let mut r = error(&AdminError::bad(format!(
                "{}: {}",
                route.path,
                e.body_text()
            )));
            *r.status_mut() = status;
            return r;
        }
    };
    run(&ep, route.decode_body(&body)).await
}

async fn metrics<H: AdminOps>(State(ep): Ep<H>, headers: HeaderMap) -> Response {
    if let Some(r) = refusal(ep.tokens.check_metrics(&headers)) {
        return r;
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match crate::exposition::render(&ep.registry, accept) {
        Ok((content_type, out)) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], out).into_response()
        }
        Err(e) => error(&AdminError::internal(format!("encoding the metrics: {e}"))),
    }
}

async fn health<H: AdminOps>(State(ep): Ep<H>) -> Response {
    let h = ep.ops.health().await;
    let status = if h.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, &h.body)
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error(&AdminError::not_found(format!(
        "no route {method} {}: doc/admin-api.yaml lists the admin API's routes",
        uri.path()
    )))
}

/// The admin endpoint's router.
pub fn router<H: AdminOps>(ep: Arc<AdminEndpoint<H>>) -> Router {
    let mut r: Router<Arc<AdminEndpoint<H>>> = Router::new();
    for route in ROUTES {
        let method = match route.verb {
            Verb::Get => axum::routing::get(
                move |State(ep): Ep<H>,
                      headers: HeaderMap,
                      q: Result<Query<Vec<(String, String)>>, QueryRejection>| {
                    op_get(ep, route, headers, q)
                },
            ),
            Verb::Post => axum::routing::post(
                move |State(ep): Ep<H>, headers: HeaderMap, body: Result<Bytes, BytesRejection>| {
                    op_post(ep, route, headers, body)
                },
            ),
        };
        r = r.route(route.path, method);
    }
    r.merge(crate::console::routes::<H>())
        .route("/metrics", axum::routing::get(metrics::<H>))
        .route("/health", axum::routing::get(health::<H>))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(ep)
}
