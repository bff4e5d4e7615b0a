//! The admin HTTP server.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

/// What the admin endpoint serves.
pub struct AdminEndpoint {
    pub registry: Registry,
    /// Bearer token required for `/metrics`; `None`: public.
    pub metrics_token: Option<String>,
    pub mesh: hangar_net::Mesh,
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

fn bearer_ok(req: &Request<Incoming>, token: &str) -> bool {
    req.headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        // Constant time: the token is a secret.
        .is_some_and(|t| bool::from(t.trim().as_bytes().ct_eq(token.as_bytes())))
}

fn route(ep: &AdminEndpoint, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    }
    match req.uri().path() {
        "/metrics" => {
            if let Some(t) = &ep.metrics_token
                && !bearer_ok(req, t)
            {
                return reply(
                    StatusCode::UNAUTHORIZED,
                    "text/plain",
                    "metrics_token required\n",
                );
            }
            let accept = req
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            match crate::exposition::render(&ep.registry, accept) {
                Ok((content_type, out)) => reply(StatusCode::OK, content_type, out),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    e.to_string(),
                ),
            }
        }
        "/health" => {
            let peers = ep.mesh.peer_status();
            let up = peers.iter().filter(|p| p.is_up && !p.is_self).count();
            let body = serde_json::json!({
                "status": "ok",
                "node": ep.mesh.peer_addr().to_string(),
                "known_peers": peers.len().saturating_sub(1),
                "peers_up": up,
            });
            reply(StatusCode::OK, "application/json", body.to_string())
        }
        p if p.starts_with("/v") => reply(
            StatusCode::NOT_IMPLEMENTED,
            "application/json",
            r#"{"code":"NotImplemented","message":"the admin API is not built yet; use the hangar CLI"}"#,
        ),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

/// Serves the admin endpoint on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    ep: Arc<AdminEndpoint>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("admin accept: {e}");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let ep = ep.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let resp = route(&ep, &req);
                async move { Ok::<_, std::convert::Infallible>(resp) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
