//! The S3 endpoint: the s3s service (with Hangar's auth, access control and
//! virtual-host parsing) served by hyper over TCP.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use s3s::S3Result;
use s3s::host::{S3Host, VirtualHost};
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::S3Api;
use crate::auth::{KeyAccess, KeyAuth};
use crate::expect_continue::{close_after, expects_continue, needs_close};
use crate::idle_io::IdleTimeout;
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
    b.set_config(crate::body_limits::s3s_config());
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
    let mut resp = call(&service, req.map(s3s::Body::from)).await?;
    if expect && needs_close(empty, resp.status()) {
        close_after(&mut resp);
    }
    metrics.record(&method, resp.status(), start.elapsed().as_secs_f64());
    Ok(resp)
}

/// Answers one request as the endpoint does, after hyper has parsed it:
/// Hangar's request fix-ups, then the s3s service, then Hangar's answer
/// corrections. (Public for the fuzz targets, which send requests without
/// a socket.)
pub async fn call(
    service: &S3Service,
    mut req: http::Request<s3s::Body>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError> {
    merge_content_encoding(req.headers_mut());
    let (req, mismatch) = crate::payload_hash::watch(req);
    let resp = service.call(req).await?;
    Ok(crate::payload_hash::correct(resp, mismatch.as_ref()))
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

/// The bounds a client cannot stretch.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once (`s3_max_connections`); one more is
    /// answered `503 SlowDown` at once and closed.
    pub max_connections: usize,
    /// Longest time to receive a request's head, counted from the first
    /// wait for it: a slow header, and an idle keep-alive connection
    /// (`s3_header_timeout_msec`).
    pub header_timeout: Duration,
    /// Longest time without a byte read or written while the connection
    /// waits on the client: a stalled body or a client that stopped
    /// reading (`s3_idle_timeout_msec`).
    pub idle_timeout: Duration,
}

/// The answer to a connection past the limit.
fn too_many() -> Vec<u8> {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>\
<Message>Too many connections to this node; retry.</Message></Error>";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
Retry-After: 1\r\nx-amz-retry-after: 1000\r\nConnection: close\r\n\
Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves S3 on `listener` until `shutdown` resolves, within `limits`.
pub async fn serve(
    listener: TcpListener,
    service: S3Service,
    metrics: Arc<S3Metrics>,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
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
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Refused at once rather than left in the backlog, where a
            // flood of idle connections would keep everyone waiting.
            metrics.refused_connections.inc();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut stream = stream;
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    stream.write_all(&too_many()).await?;
                    stream.shutdown().await
                })
                .await;
            });
            continue;
        };
        let service = service.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut conn = hyper::server::conn::http1::Builder::new();
            conn.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let handler = hyper::service::service_fn(move |req| {
                handle(service.clone(), metrics.clone(), req)
            });
            let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
            if let Err(e) = conn.serve_connection(io, handler).await {
                tracing::debug!("connection from {peer}: {e}");
            }
            drop(permit);
        });
    }
}
