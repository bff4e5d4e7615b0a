//! The admin endpoint's accept loop: the router of `http_api` served by
//! hyper within [`ConnLimits`], like the S3 endpoint, so that slow or idle
//! clients cannot take it from the operators and Prometheus.

use std::sync::Arc;

use hangar_util::conn_limits::{ConnGate, ConnLimits};
use hangar_util::idle_io::IdleTimeout;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use crate::http_api::{AdminEndpoint, router};
use crate::ops::AdminOps;

/// The answer to a connection past the limit.
fn too_many() -> Vec<u8> {
    let body =
        r#"{"code":"Unavailable","message":"too many connections to the admin endpoint; retry"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves the admin endpoint on `listener` within `limits` until
/// `shutdown` resolves.
pub async fn serve<H: AdminOps>(
    listener: TcpListener,
    ep: Arc<AdminEndpoint<H>>,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let app = router(ep);
    let gate = ConnGate::new(&limits, too_many());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer, permit) = tokio::select! {
            _ = &mut shutdown => return,
            c = gate.next(&listener, || {}) => c,
        };
        let svc = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let conn = hangar_api_s3::http_conn::http1(&limits);
            let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
            if let Err(e) = conn.serve_connection(io, svc).await {
                tracing::debug!("admin connection from {peer}: {e}");
            }
            drop(permit);
        });
    }
}
