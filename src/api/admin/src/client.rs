//! The CLI's side of the admin operations: a [`Request`] sent to a running
//! node through its local socket or its admin HTTP API (`--admin-url`),
//! with the same answer either way.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixStream};

use crate::proto::{AdminError, Request, Response};
use crate::routes::{Verb, encode};

/// Longest answer read over HTTP.
const MAX_ANSWER: usize = 16 << 20;
/// Longest wait for an operation's answer over HTTP (a layout apply that
/// pushes to every peer, a repair pass).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a call did not return the operation's result.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The node ran the operation and it failed.
    #[error("{0}")]
    Op(AdminError),
    /// The node could not be reached: nothing listens on the socket or
    /// the URL, or no answer came in time.
    #[error("{0}")]
    Unreachable(String),
    /// The admin API refused the call: no token, a wrong one, one too
    /// narrow for the operation, or the API is off on that node.
    #[error("{0}")]
    Refused(String),
    /// The answer could not be understood (not Hangar's admin API, or
    /// another version of it).
    #[error("{0}")]
    Protocol(String),
}

/// Where the admin operations are sent.
#[derive(Debug, Clone)]
pub enum AdminClient {
    /// The node's socket, `<metadata_dir>/admin.sock`.
    Socket(PathBuf),
    /// The node's admin HTTP API.
    Http(HttpTarget),
}

/// An admin API address (`http://host:port`, maybe with a path prefix)
/// and the bearer token to send.
#[derive(Clone)]
pub struct HttpTarget {
    authority: String,
    prefix: String,
    token: Option<String>,
}

impl std::fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.prefix)
    }
}

impl HttpTarget {
    /// Parses `url` (`http://` only; TLS belongs to a proxy in front).
    pub fn new(url: &str, token: Option<String>) -> Result<Self, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("--admin-url {url:?} is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "--admin-url {url:?}: only http:// is supported (put TLS in a proxy in front)"
            ));
        }
        let host = uri
            .host()
            .ok_or_else(|| format!("--admin-url {url:?} has no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        let authority = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(HttpTarget {
            authority,
            prefix: uri.path().trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// `http://host:port` and the prefix, for messages.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.authority, self.prefix)
    }

    /// A request to `path_and_query` under the prefix: its status and body.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), String> {
        let target = format!("{}{path_and_query}", self.prefix);
        let url = format!("http://{}{target}", self.authority);
        tokio::time::timeout(timeout, self.exchange(method, &target, body))
            .await
            .map_err(|_| format!("{url}: no answer within {} s", timeout.as_secs()))?
            .map_err(|e| format!("{url}: {e}"))
    }

    async fn exchange(
        &self,
        method: Method,
        target: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), String> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| format!("cannot connect: {e} (is the node running?)"))?;
        let _ = stream.set_nodelay(true);
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .method(method)
            .uri(target)
            .header(http::header::HOST, &self.authority)
            .header(http::header::USER_AGENT, "hangar-cli");
        if let Some(t) = &self.token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((status, body))
    }

    /// Sends `req` on its route and reads the operation's answer.
    pub async fn call(&self, req: &Request) -> Result<Value, ClientError> {
        let (route, fields) = encode(req);
        let (method, target, body) = match route.verb {
            Verb::Get => {
                let mut q = url_query(&fields);
                if !q.is_empty() {
                    q.insert(0, '?');
                }
                (Method::GET, format!("{}{q}", route.path), None)
            }
            Verb::Post => (
                Method::POST,
                route.path.to_owned(),
                Some(serde_json::to_vec(&fields).expect("fields encode")),
            ),
        };
        let (status, body) = self
            .send(method, &target, body, HTTP_TIMEOUT)
            .await
            .map_err(ClientError::Unreachable)?;
        answer(&self.url(), status, &body)
    }
}

/// The fields of a `GET` route as a query string (they are strings).
fn url_query(fields: &serde_json::Map<String, Value>) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{}={}", urlencoding::encode(k), urlencoding::encode(&v))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// What an HTTP answer means for the operation.
fn answer(url: &str, status: StatusCode, body: &[u8]) -> Result<Value, ClientError> {
    if status.is_success() {
        return serde_json::from_slice(body)
            .map_err(|e| ClientError::Protocol(format!("{url}: unreadable answer: {e}")));
    }
    if let Ok(e) = serde_json::from_slice::<AdminError>(body) {
        return Err(ClientError::Op(e));
    }
    let refused = |why: String| ClientError::Refused(format!("the admin API at {url} {why}"));
    Err(match status {
        StatusCode::UNAUTHORIZED => refused(match serde_json::from_slice::<Value>(body) {
            Ok(v) if v["message"].is_string() => v["message"].as_str().unwrap_or("").to_owned(),
            _ => "needs a token: give --admin-token or set HANGAR_ADMIN_TOKEN".to_owned(),
        }),
        StatusCode::FORBIDDEN => refused(match serde_json::from_slice::<Value>(body) {
            Ok(v) if v["message"].is_string() => v["message"].as_str().unwrap_or("").to_owned(),
            _ => "refused the token (wrong, or read-only for this operation: a change needs admin_token)".to_owned(),
        }),
        s => ClientError::Protocol(format!(
            "the admin API at {url} answered {s}: {}",
            String::from_utf8_lossy(body).trim()
        )),
    })
}

impl AdminClient {
    /// Sends one request and returns the operation's JSON result.
    pub async fn call(&self, req: &Request) -> Result<Value, ClientError> {
        match self {
            AdminClient::Http(t) => t.call(req).await,
            AdminClient::Socket(path) => {
                let t = |e: std::io::Error| ClientError::Unreachable(format!("admin socket: {e}"));
                let stream = UnixStream::connect(path).await.map_err(|e| {
                    ClientError::Unreachable(format!(
                        "cannot reach the node through {}: {e} (is `hangar server` running with this config?)",
                        path.display()
                    ))
                })?;
                let (r, mut w) = stream.into_split();
                let mut line = serde_json::to_vec(req).expect("requests encode");
                line.push(b'\n');
                w.write_all(&line).await.map_err(t)?;
                let mut answer = String::new();
                BufReader::new(r).read_line(&mut answer).await.map_err(t)?;
                match serde_json::from_str::<Response>(&answer) {
                    Ok(Response::Ok(v)) => Ok(v),
                    Ok(Response::Error(e)) => Err(ClientError::Op(e)),
                    Err(e) => Err(ClientError::Protocol(format!(
                        "unreadable answer from the node: {e}"
                    ))),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = HttpTarget::new("http://127.0.0.1:3903", None).unwrap();
        assert_eq!(t.url(), "http://127.0.0.1:3903");
        let t = HttpTarget::new("http://node1/admin/", None).unwrap();
        assert_eq!(t.url(), "http://node1:80/admin");
        let t = HttpTarget::new("http://[::1]:3903", None).unwrap();
        assert_eq!(t.url(), "http://[::1]:3903");
        assert!(HttpTarget::new("https://x:1", None).is_err());
        assert!(HttpTarget::new("x y", None).is_err());
    }

    #[test]
    fn answers() {
        let e = answer("u", StatusCode::UNAUTHORIZED, b"").unwrap_err();
        assert!(matches!(e, ClientError::Refused(_)), "{e}");
        assert!(e.to_string().contains("--admin-token"), "{e}");
        let e = answer("u", StatusCode::FORBIDDEN, b"").unwrap_err();
        assert!(matches!(e, ClientError::Refused(_)), "{e}");
        assert!(e.to_string().contains("refused the token"), "{e}");
        let e = answer("u", StatusCode::BAD_GATEWAY, b"proxy down").unwrap_err();
        assert!(matches!(e, ClientError::Protocol(_)), "{e}");
        let e = answer(
            "u",
            StatusCode::NOT_FOUND,
            br#"{"code":"NotFound","message":"bucket b does not exist"}"#,
        )
        .unwrap_err();
        assert!(matches!(e, ClientError::Op(ref a) if a.message == "bucket b does not exist"));
        assert_eq!(
            answer("u", StatusCode::OK, b"[1]").unwrap(),
            serde_json::json!([1])
        );
    }
}
