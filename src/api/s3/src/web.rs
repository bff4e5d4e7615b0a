//! The website endpoint (`[s3_web]`): anonymous GET and HEAD of the
//! objects of buckets that have a website configuration, addressed by
//! `Host: <bucket>.<root_domain>` (or a host that is the bucket's name),
//! with the index document, the error document, redirects and routing
//! rules of that configuration, and the bucket's CORS headers.

use std::sync::Arc;

use hangar_model::object::ObjectRow;
use hangar_model::website::WebsiteConfig;
use hangar_util::conn_limits::{ConnGate, ConnLimits};
use hangar_util::idle_io::IdleTimeout;
use http::{HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::S3Api;
use crate::cors::Cors;

/// What the website endpoint serves.
#[derive(Clone)]
pub struct WebEndpoint {
    api: S3Api,
    cors: Arc<Cors>,
    root_domain: Option<String>,
}

impl WebEndpoint {
    /// The website endpoint of `api`, for hosts under `root_domain`.
    pub fn new(api: S3Api, root_domain: Option<String>) -> WebEndpoint {
        let root_domain = root_domain.map(|d| d.trim_start_matches('.').to_ascii_lowercase());
        WebEndpoint {
            cors: Arc::new(Cors::new(api.model.clone(), None)),
            api,
            root_domain,
        }
    }

    /// The bucket a `Host` names.
    pub fn bucket_of(&self, host: &str) -> String {
        bucket_of(self.root_domain.as_deref(), host)
    }
}

/// The bucket a `Host` names: `<bucket>.<root_domain>`, else the host
/// itself (without its port), lowercased.
fn bucket_of(root_domain: Option<&str>, host: &str) -> String {
    let name = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    if let Some(root) = root_domain
        && let Some(b) = name.strip_suffix(root).and_then(|b| b.strip_suffix('.'))
        && !b.is_empty()
    {
        return b.to_owned();
    }
    name
}

type Body = s3s::Body;

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn redirect(location: &str, status: u16) -> Response<Body> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    let mut r = plain(status, format!("Redirecting to {location}\n"));
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(http::header::LOCATION, v);
    }
    r
}

/// One request to the website endpoint.
pub async fn handle<B>(web: &WebEndpoint, req: http::Request<B>) -> Response<Body> {
    let method = req.method().clone();
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bucket = web.bucket_of(&host);
    let cors_req = web.cors.actual_for(&req, &bucket);
    let mut resp = answer(web, &method, &host, &bucket, req.uri()).await;
    if let Some(c) = &cors_req {
        web.cors.decorate(c, &mut resp).await;
    }
    if method == Method::HEAD {
        *resp.body_mut() = Body::empty();
    }
    resp
}

async fn answer(
    web: &WebEndpoint,
    method: &Method,
    host: &str,
    bucket: &str,
    uri: &http::Uri,
) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("The website endpoint serves GET and HEAD only, not {method}.\n"),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let b = match web.api.model.buckets().get_bucket(bucket).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return plain(
                StatusCode::NOT_FOUND,
                format!("NoSuchBucket: the bucket {bucket} does not exist.\n"),
            );
        }
        Err(e) => {
            tracing::warn!("website of {bucket}: {e}");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service unavailable.\n".into(),
            );
        }
    };
    if web.api.model.awaiting_layout() {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", crate::auth::NO_LAYOUT_YET),
        );
    }
    let Some(w) = b.website().cloned() else {
        return plain(
            StatusCode::NOT_FOUND,
            format!(
                "NoSuchWebsiteConfiguration: the bucket {bucket} does not have a website \
                 configuration.\n"
            ),
        );
    };
    let path = uri.path().trim_start_matches('/');
    let path = urlencoding::decode(path)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| path.to_owned());
    // The request's own scheme: this endpoint is plain HTTP.
    let protocol = "http";
    if let Some(r) = &w.redirect_all {
        let proto = r.protocol.as_deref().unwrap_or(protocol);
        let location = match uri.query() {
            Some(q) => format!("{proto}://{}/{path}?{q}", r.host_name),
            None => format!("{proto}://{}/{path}", r.host_name),
        };
        return redirect(&location, 301);
    }
    let key = w.key_for(&path);
    if let Some(rule) = w.rule_for(&path, None) {
        let (location, code) = rule.location(&path, protocol, host);
        return redirect(&location, code);
    }
    match read(web, &b, &key).await {
        Ok(Some(obj)) => object(web, &obj, StatusCode::OK).await,
        Ok(None) => {
            // A "directory" without its trailing slash: S3 redirects to it.
            if !path.is_empty()
                && !path.ends_with('/')
                && let Some(s) = &w.index_suffix
                && let Ok(Some(_)) = read(web, &b, &format!("{path}/{s}")).await
            {
                return redirect(&format!("/{path}/"), 302);
            }
            error(web, &b, &w, &path, host, StatusCode::NOT_FOUND, &key).await
        }
        Err(e) => {
            tracing::warn!("website of {bucket}, key {key}: {e}");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service unavailable.\n".into(),
            )
        }
    }
}

/// The current version of `key`, if it is an object.
async fn read(
    web: &WebEndpoint,
    b: &hangar_model::bucket::BucketRow,
    key: &str,
) -> Result<Option<ObjectRow>, hangar_model::ModelError> {
    if key.is_empty() {
        return Ok(None);
    }
    let found = web.api.model.objects().find_version(b, key, None).await?;
    // An SSE-C object cannot be served without its key, which an anonymous
    // website request has no way to send: it is answered as absent. So is
    // an SSE-KMS one, as by S3's website endpoints; SSE-S3 is served.
    let servable = |r: &ObjectRow| match &r.sse_c {
        None => true,
        Some(rec) => rec.managed.as_ref().is_some_and(|m| m.kms_key.is_none()),
    };
    Ok(found
        .map(|f| f.row)
        .filter(|r| !r.is_delete_marker() && !r.is_deleted() && servable(r)))
}

/// The answer to an error `status`: a routing rule for that code, else the
/// error document (with `status`), else a plain text body.
async fn error(
    web: &WebEndpoint,
    b: &hangar_model::bucket::BucketRow,
    w: &WebsiteConfig,
    path: &str,
    host: &str,
    status: StatusCode,
    key: &str,
) -> Response<Body> {
    if let Some(rule) = w.rule_for(path, Some(status.as_u16())) {
        let (location, code) = rule.location(path, "http", host);
        return redirect(&location, code);
    }
    if let Some(e) = &w.error_key
        && let Ok(Some(obj)) = read(web, b, e).await
    {
        return object(web, &obj, status).await;
    }
    plain(
        status,
        format!("NoSuchKey: the key {key} does not exist.\n"),
    )
}

/// `obj` in full, with status `status`.
async fn object(web: &WebEndpoint, obj: &ObjectRow, status: StatusCode) -> Response<Body> {
    let key = crate::sse_c::for_read(&web.api.settings.sse_master_key, obj.sse_c.as_ref(), None);
    let body = match async { web.api.body(obj, 0..obj.size, key?.as_ref()).await }.await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("website body: {e}");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service unavailable.\n".into(),
            );
        }
    };
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    for (name, value) in &obj.headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.insert(n, v);
        }
    }
    if !h.contains_key(http::header::CONTENT_TYPE) {
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("binary/octet-stream"),
        );
    }
    h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(obj.size));
    if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", obj.etag)) {
        h.insert(http::header::ETAG, v);
    }
    let modified = std::time::UNIX_EPOCH + std::time::Duration::from_millis(obj.timestamp_msec);
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(modified)) {
        h.insert(http::header::LAST_MODIFIED, v);
    }
    r
}

/// The answer to a connection past the limit.
fn too_many() -> Vec<u8> {
    let body = "Too many connections to this node; retry.\n";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves the website endpoint on `listener` until `shutdown`, within
/// `limits` (the S3 endpoint's).
pub async fn serve(
    listener: TcpListener,
    web: WebEndpoint,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let gate = ConnGate::new(&limits, too_many());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer, permit) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            c = gate.next(&listener, || {}) => c,
        };
        let web = web.clone();
        tokio::spawn(async move {
            let conn = crate::http_conn::http1(&limits);
            let handler = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                let web = web.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&web, req).await) }
            });
            let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
            if let Err(e) = conn.serve_connection(io, handler).await {
                tracing::debug!("website connection from {peer}: {e}");
            }
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hosts_name_buckets() {
        use super::bucket_of;
        assert_eq!(bucket_of(Some("web.local"), "site.web.local:3902"), "site");
        assert_eq!(bucket_of(Some("web.local"), "Site.Web.Local"), "site");
        assert_eq!(bucket_of(Some("web.local"), "web.local"), "web.local");
        assert_eq!(
            bucket_of(Some("web.local"), "www.example.com"),
            "www.example.com"
        );
        assert_eq!(bucket_of(None, "Site:80"), "site");
    }
}
