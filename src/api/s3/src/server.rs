//! The S3 endpoint: the s3s service (with Hangar's auth, access control and
//! virtual-host parsing) and CORS around it, served by hyper over TCP.

use std::sync::Arc;

use hyper_util::rt::TokioIo;
use s3s::S3Result;
use s3s::host::{S3Host, VirtualHost};
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::net::TcpListener;

use crate::S3Api;
use crate::access_log::{AccessLogs, Line, LogSlot};
use crate::auth::{KeyAccess, KeyAuth};
use crate::cors::Cors;
use crate::counted_body::{Counted, Tally};
use crate::expect_continue::{ContinueIo, close_after, expects_continue, needs_close};
use crate::held_body::Held;
use crate::metrics::{Answered, RequestOp, S3Metrics};
use hangar_util::conn_limits::{ConnGate, ConnLimits};
use hangar_util::idle_io::IdleTimeout;
use http_body::Body as _;
use hyper::body::Incoming;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// A status an operation answers with instead of the one s3s's serializer
/// gives its output (s3s ignores `S3Response::status` but carries the
/// response's extensions): PutBucketTagging is `204` in S3, `200` in s3s.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatusOverride(pub http::StatusCode);

/// What the S3 endpoint serves: the s3s service, and CORS around it.
#[derive(Clone)]
pub struct Endpoint {
    s3: S3Service,
    cors: Arc<Cors>,
    /// POST forms are authorised before their file is read.
    post: Arc<crate::post_gate::PostGate>,
    /// `[s3_api] allow_signature_v2` ([`crate::request_time`]).
    allow_signature_v2: bool,
    /// Server access logs of the buckets that have logging on.
    logs: Arc<AccessLogs>,
    access_log_flush: std::time::Duration,
    /// The sender of the bucket notification events queued on this node.
    notify: Arc<crate::notify_worker::NotifyWorker>,
}

impl Endpoint {
    /// Starts writing the server access logs every `s3_access_log_flush_secs`,
    /// reporting to `worker`. Once per node: the S3 port and the console's
    /// proxy share one endpoint, so one flusher writes the lines of both.
    pub fn start_access_logs(&self, worker: hangar_util::worker::WorkerHandle) {
        tokio::spawn(self.logs.clone().run(self.access_log_flush, worker));
    }

    /// Starts sending the bucket notification events this node is due to
    /// send, reporting to `worker`. Once per node, as the access logs.
    pub fn start_notifications(&self, worker: hangar_util::worker::WorkerHandle) {
        tokio::spawn(self.notify.clone().run(worker));
    }

    /// Registers the access logs' and notifications' metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        crate::metrics::register_access_logs(registry, self.logs.clone());
        crate::metrics::register_notifications(registry, self.notify.clone());
    }
}

/// Builds the S3 endpoint of `api`: the s3s service (with Hangar's auth,
/// access control and host parsing) and its CORS handling.
pub fn service(api: S3Api) -> Endpoint {
    let model = api.model.clone();
    let root_domain = api.settings.root_domain.clone();
    let region = api.settings.region.clone();
    let allow_signature_v2 = api.settings.allow_signature_v2;
    let access_log_flush = api.settings.access_log_flush;
    let logs = Arc::new(AccessLogs::new(api.clone()));
    let notify = Arc::new(crate::notify_worker::NotifyWorker::new(
        model.clone(),
        region.clone(),
        &api.settings.notify_targets,
    ));
    let cors = Arc::new(Cors::new(model.clone(), root_domain.clone()));
    let post = Arc::new(crate::post_gate::PostGate::new(
        model.clone(),
        root_domain.clone(),
        allow_signature_v2,
    ));
    let mut b = S3ServiceBuilder::new(api);
    b.set_auth(KeyAuth(model.clone()));
    b.set_access(KeyAccess { model, region });
    b.set_config(crate::body_limits::s3s_config());
    if let Some(d) = root_domain {
        b.set_host(RootDomain(d.trim_start_matches('.').to_owned()));
    }
    Endpoint {
        s3: b.build(),
        cors,
        post,
        allow_signature_v2,
        logs,
        access_log_flush,
        notify,
    }
}

async fn handle(
    endpoint: Endpoint,
    metrics: Arc<S3Metrics>,
    peer: std::net::SocketAddr,
    continued: bool,
    mut req: http::Request<Incoming>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError> {
    // For `aws:SourceIp`: the socket's peer, never a header a client sets.
    req.extensions_mut().insert(crate::access::PeerAddr(peer));
    let start = std::time::Instant::now();
    let head = req.method() == http::Method::HEAD;
    if crate::cors::is_preflight(&req) {
        // No authentication: a browser sends no credentials with it.
        let mut resp = endpoint.cors.preflight(&req).await;
        crate::request_id::stamp(&mut resp, &crate::request_id::new_id());
        let op = RequestOp::default();
        op.set("PreflightCors");
        let in_memory = resp.body().bytes();
        metrics.record(Answered {
            op: &op,
            status: resp.status(),
            body: in_memory.as_deref(),
            secs: start.elapsed().as_secs_f64(),
            received: 0,
        });
        return Ok(resp);
    }
    let cors = endpoint.cors.actual(&req);
    let expect = expects_continue(&req);
    let empty = req.body().is_end_stream();
    let received = Arc::new(AtomicU64::new(0));
    let log_slot = LogSlot::default();
    req.extensions_mut().insert(log_slot.clone());
    let req = req.map(|b| s3s::Body::http_body(Counted::new(b, Tally::Request(received.clone()))));
    let (op, mut resp) = call_op(&endpoint, req).await?;
    if let Some(c) = &cors {
        endpoint.cors.decorate(c, &mut resp).await;
    }
    log(&endpoint, &log_slot, &op, &resp, &received, head, start);
    if expect && needs_close(empty, continued, resp.status()) {
        close_after(&mut resp);
    }
    Ok(counted(&metrics, &op, resp, start, head, &received))
}

/// [`call`] with the [`RequestOp`] the operation names itself by.
async fn call_op(
    endpoint: &Endpoint,
    mut req: http::Request<s3s::Body>,
) -> Result<(RequestOp, http::Response<s3s::Body>), s3s::HttpError> {
    let op = RequestOp::default();
    req.extensions_mut().insert(op.clone());
    Ok((op, call(endpoint, req).await?))
}

/// Answers one S3 request that reached this node another way than its S3
/// port — the web console's proxy on the admin endpoint — as the port
/// does, counted in `metrics` the same way; without CORS, which that way
/// does not need.
pub async fn call_counted<B>(
    endpoint: &Endpoint,
    metrics: &S3Metrics,
    req: http::Request<B>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    Box<dyn std::error::Error + Send + Sync>: From<B::Error>,
{
    let start = std::time::Instant::now();
    let head = req.method() == http::Method::HEAD;
    let received = Arc::new(AtomicU64::new(0));
    let log_slot = LogSlot::default();
    let mut req =
        req.map(|b| s3s::Body::http_body_unsync(Counted::new(b, Tally::Request(received.clone()))));
    req.extensions_mut().insert(log_slot.clone());
    let (op, resp) = call_op(endpoint, req).await?;
    log(endpoint, &log_slot, &op, &resp, &received, head, start);
    Ok(counted(metrics, &op, resp, start, head, &received))
}

/// Queues the server access log line of `resp` when its bucket logs
/// requests (the access check filled `slot`).
fn log(
    endpoint: &Endpoint,
    slot: &LogSlot,
    op: &RequestOp,
    resp: &http::Response<s3s::Body>,
    received: &AtomicU64,
    head: bool,
    start: std::time::Instant,
) {
    let Some(logged) = slot.get() else {
        return;
    };
    let in_memory = resp.body().bytes();
    let line = Line {
        logged,
        answered: crate::access_log::Answered {
            op: op.name(),
            status: resp.status().as_u16(),
            headers: resp.headers(),
            body: in_memory.as_deref(),
            received: received.load(Ordering::Relaxed),
            head,
            elapsed: start.elapsed(),
        },
    }
    .format();
    endpoint.logs.record(logged, line);
}

/// `resp` recorded in `metrics` (operation, status, latency, bytes in),
/// its body counted as it is sent.
fn counted(
    metrics: &S3Metrics,
    op: &RequestOp,
    resp: http::Response<s3s::Body>,
    start: std::time::Instant,
    head: bool,
    received: &AtomicU64,
) -> http::Response<s3s::Body> {
    let in_memory = resp.body().bytes();
    metrics.record(Answered {
        op,
        status: resp.status(),
        body: in_memory.as_deref(),
        secs: start.elapsed().as_secs_f64(),
        received: received.load(Ordering::Relaxed),
    });
    let sent = metrics.sent_counter(op);
    match in_memory {
        // Counted now; left as it is, so hyper still sees its length. The
        // answer to a HEAD has no body on the wire.
        Some(b) => {
            if !head {
                sent.inc_by(b.len() as u64);
            }
            resp
        }
        None => resp.map(|b| s3s::Body::http_body_unsync(Counted::new(b, Tally::Counter(sent)))),
    }
}

/// Answers one request as the endpoint does, after hyper has parsed it:
/// Hangar's request fix-ups, then the s3s service, then Hangar's answer
/// corrections, the answer stamped with a new request id
/// ([`crate::request_id`]). (Public for the fuzz targets, which send
/// requests without a socket.)
pub async fn call(
    endpoint: &Endpoint,
    req: http::Request<s3s::Body>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError> {
    let id = crate::request_id::new_id();
    let method = req.method().clone();
    let mut resp = answer(endpoint, req).await?;
    if resp.status().is_server_error() {
        // What an operator looks for when a user reports the id an SDK
        // showed them.
        tracing::info!(request_id = %id, %method, status = %resp.status(), "S3 request failed");
    }
    crate::request_id::stamp(&mut resp, &id);
    Ok(resp)
}

/// [`call`] before the request id.
async fn answer(
    endpoint: &Endpoint,
    mut req: http::Request<s3s::Body>,
) -> Result<http::Response<s3s::Body>, s3s::HttpError> {
    if let Some(e) = crate::header_limits::check(req.headers()) {
        return Ok(refused_unread(e));
    }
    let now = i64::try_from(hangar_util::time::now_msec() / 1000).unwrap_or(i64::MAX);
    let query = req.uri().query().unwrap_or("");
    if let Err(e) =
        crate::request_time::check(endpoint.allow_signature_v2, req.headers(), query, now)
    {
        return Ok(refused_unread(e));
    }
    merge_content_encoding(req.headers_mut());
    let post_form = crate::post_errors::is_post_form(&req);
    let req = if post_form {
        match endpoint.post.admit(req).await {
            Ok(req) => req,
            Err(e) => return Ok(refused_unread(e)),
        }
    } else {
        req
    };
    let (req, mismatch) = crate::payload_hash::watch(req);
    let mut resp = endpoint.s3.call(req).await?;
    if post_form
        && resp.status().is_client_error()
        && let Some((status, body)) = resp
            .body()
            .bytes()
            .and_then(|b| crate::post_errors::reword(&b))
    {
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(body.len()),
        );
        *resp.body_mut() = s3s::Body::from(body);
    }
    if let Some(StatusOverride(status)) = resp.extensions_mut().remove() {
        *resp.status_mut() = status;
    }
    if let Some(crate::ops_versioning::XmlBody(body)) = resp.extensions_mut().remove() {
        let h = resp.headers_mut();
        h.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/xml"),
        );
        h.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(body.len()),
        );
        *resp.body_mut() = s3s::Body::from(body);
    }
    Ok(crate::payload_hash::correct(resp, mismatch.as_ref()))
}

/// The answer to a request refused before its body was read: the error's
/// XML, and the connection closed after it (what is left of the body is
/// not read).
fn refused_unread(e: s3s::S3Error) -> http::Response<s3s::Body> {
    let mut resp = e.to_http_response().unwrap_or_else(|_| {
        let mut r = http::Response::new(s3s::Body::empty());
        *r.status_mut() = http::StatusCode::BAD_REQUEST;
        r
    });
    resp.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    resp
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
    service: Endpoint,
    metrics: Arc<S3Metrics>,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let gate = ConnGate::making_room(&limits, too_many());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer, mut slot) = tokio::select! {
            _ = &mut shutdown => {
                // The lines of the last interval, written as the node stops.
                service.logs.flush().await;
                return Ok(());
            }
            c = gate.next(&listener, || {
                metrics.refused_connections.inc();
            }) => c,
        };
        let service = service.clone();
        let metrics = metrics.clone();
        let open = metrics.connections.clone();
        open.inc();
        let slot_use = slot.user();
        tokio::spawn(async move {
            let conn = crate::http_conn::http1(&limits);
            let (io, continuer) = ContinueIo::new(IdleTimeout::new(stream, limits.idle_timeout));
            let handler = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                // Inside a request until its answer is sent: never closed
                // to make room meanwhile.
                let busy = slot_use.request();
                // hyper sends no `100 Continue` for an empty body: S3 does.
                let wants_continue = expects_continue(&req) && req.body().is_end_stream();
                let (answering, continued) = continuer.answer(wants_continue);
                let answer = handle(service.clone(), metrics.clone(), peer, continued, req);
                async move {
                    let resp = answer.await?;
                    Ok::<_, s3s::HttpError>(
                        resp.map(|b| s3s::Body::http_body_unsync(Held::new(b, (busy, answering)))),
                    )
                }
            });
            let io = TokioIo::new(io);
            tokio::select! {
                r = conn.serve_connection(io, handler) => {
                    if let Err(e) = r {
                        tracing::debug!("connection from {peer}: {e}");
                    }
                }
                () = slot.evicted() => {
                    tracing::debug!("connection from {peer} closed to make room for another");
                }
            }
            open.dec();
            drop(slot);
        });
    }
}
