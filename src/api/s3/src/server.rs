//! The S3 endpoint: the s3s service (with Hangar's auth, access control and
//! virtual-host parsing) served by hyper over TCP.

use std::sync::Arc;

use hyper_util::rt::TokioIo;
use s3s::S3Result;
use s3s::host::{S3Host, VirtualHost};
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::S3Api;
use crate::auth::{KeyAccess, KeyAuth};
use crate::expect_continue::{close_after, expects_continue, needs_close};
use crate::metrics::S3Metrics;
use http_body::Body as _;
use hyper::body::Incoming;

/// Virtual-host style: `<bucket>.<root_domain>` names a bucket; any other
/// host is path style. (s3s's `SingleDomain` would take any other valid
/// host name, such as `localhost`, for a bucket.)
struct RootDomain(String);

impl S3Host for RootDomain {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<VirtualHost<'a>> {
        let name = host.split(':').next().unwrap_or(host);
        match name.strip_suffix(self.0.as_str()) {
            Some(bucket) if bucket.len() > 1 && bucket.ends_with('.') => {
                let bucket = &bucket[..bucket.len() - 1];
                Ok(VirtualHost::new(name).with_bucket(bucket.to_ascii_lowercase()))
            }
            _ => Ok(VirtualHost::new(name)),
        }
    }
}

/// Builds the s3s service for `api`.
pub fn service(api: S3Api) -> S3Service {
    let model = api.model.clone();
    let root_domain = api.settings.root_domain.clone();
    let region = api.settings.region.clone();
    let mut b = S3ServiceBuilder::new(api);
    b.set_auth(KeyAuth(model.clone()));
    b.set_access(KeyAccess { model, region });
    if let Some(d) = root_domain {
        b.set_host(RootDomain(d.trim_start_matches('.').to_owned()));
    }
    b.build()
}

async fn handle(
    service: S3Service,
    metrics: Arc<S3Metrics>,
    req: http::Request<Incoming>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError> {
    let start = std::time::Instant::now();
    let method = req.method().clone();
    let expect = expects_continue(&req);
    let empty = req.body().is_end_stream();
    let mut req = req.map(s3s::Body::from);
    merge_content_encoding(req.headers_mut());
    let mut resp = service.call(req).await?;
    if expect && needs_close(empty, resp.status()) {
        close_after(&mut resp);
    }
    metrics.record(&method, resp.status(), start.elapsed().as_secs_f64());
    Ok(resp)
}

/// Joins repeated `Content-Encoding` lines into one, as HTTP allows and as
/// SigV4's canonical form already does: the AWS SDKs send the user's
/// encoding and `aws-chunked` as two lines, and s3s refuses repeated
/// headers.
fn merge_content_encoding(headers: &mut http::HeaderMap) {
    let values: Vec<_> = headers
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    if values.len() > 1
        && let Ok(v) = http::HeaderValue::from_str(&values.join(","))
    {
        headers.insert(http::header::CONTENT_ENCODING, v);
    }
}

/// Serves S3 on `listener` until `shutdown` resolves. At most
/// `max_connections` connections are served at once; further ones wait in
/// the kernel's accept backlog.
pub async fn serve(
    listener: TcpListener,
    service: S3Service,
    metrics: Arc<S3Metrics>,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            p = permits.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small responses must not wait for the client's delayed ACK.
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new();
            let handler = hyper::service::service_fn(move |req| {
                handle(service.clone(), metrics.clone(), req)
            });
            if let Err(e) = conn.serve_connection(TokioIo::new(stream), handler).await {
                tracing::debug!("connection from {peer}: {e}");
            }
            drop(permit);
        });
    }
}
