//! PUTs sent the way botocore (aws-cli, boto3) and the Java SDK send them:
//! with `Expect: 100-continue`, the body only once the server answered
//! `100 Continue`, so that a refusal costs the client no body. The Rust SDK
//! (and hyper's client under it) sends the body at once, so this path signs
//! the request with the SDK (a presigned URL: query-string SigV4, unsigned
//! payload) and speaks HTTP/1.1 itself, one connection per request.
//!
//! As botocore does, a client that has no interim answer within
//! [`CONTINUE_WAIT`] sends its body anyway (RFC 9110 §10.1.1 allows a server
//! that never answers `100`).

use std::time::{Duration, Instant};

use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::outcome::{FailureKind, OpFailure, Timed};
use crate::payload::ObjectSpec;

/// How long a client waits for `100 Continue` before it sends its body
/// anyway (botocore's wait).
const CONTINUE_WAIT: Duration = Duration::from_secs(1);
/// Longest response head read.
const MAX_HEAD: usize = 64 << 10;
/// Longest response body read (an error document).
const MAX_BODY: usize = 1 << 20;
/// Whole-request bound, as the SDK client's operation timeout.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);

/// A response head: status code and headers (names lower-case).
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Uploads `spec`'s body with `Expect: 100-continue`; timed from before the
/// connection is made until the final answer has been read.
pub async fn put(client: &Client, bucket: &str, spec: &ObjectSpec) -> Timed {
    let body = spec.body();
    let what = format!("PUT {}", spec.key);
    let presigned = match PresigningConfig::expires_in(Duration::from_secs(900)) {
        Ok(cfg) => {
            client
                .put_object()
                .bucket(bucket)
                .key(&spec.key)
                .content_length(body.len() as i64)
                .presigned(cfg)
                .await
        }
        Err(e) => return (Duration::ZERO, Err(other(&what, e))),
    };
    let presigned = match presigned {
        Ok(p) => p,
        Err(e) => return (Duration::ZERO, Err(other(&what, e))),
    };
    let start = Instant::now();
    let sent = tokio::time::timeout(OPERATION_TIMEOUT, async {
        send(presigned.uri(), presigned.headers(), &body).await
    })
    .await;
    let latency = start.elapsed();
    let result = match sent {
        Err(_) => Err(other(&what, "operation timed out")),
        Ok(Err(e)) => Err(other(&what, e)),
        Ok(Ok((head, _))) if head.status == 200 => Ok(spec.size),
        Ok(Ok((head, text))) => Err(refused(&what, &head, &text)),
    };
    (latency, result)
}

/// Sends one request and returns the final answer's head and body.
async fn send<'a>(
    uri: &str,
    headers: impl Iterator<Item = (&'a str, &'a str)>,
    body: &[u8],
) -> std::io::Result<(Head, String)> {
    let rest = uri
        .strip_prefix("http://")
        .ok_or_else(|| invalid(format!("not an http:// endpoint: {uri}")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let mut conn = TcpStream::connect(authority).await?;
    conn.set_nodelay(true)?;
    let mut request = format!(
        "PUT {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-length: {}\r\nexpect: 100-continue\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if lower != "host" && lower != "content-length" {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut buf = Vec::new();
    let first = match tokio::time::timeout(CONTINUE_WAIT, read_head(&mut conn, &mut buf)).await {
        Ok(head) => Some(head?),
        Err(_) => None,
    };
    let head = match first {
        Some(h) if h.status != 100 => h,
        _ => {
            conn.write_all(body).await?;
            loop {
                let h = read_head(&mut conn, &mut buf).await?;
                if h.status != 100 {
                    break h;
                }
            }
        }
    };
    let text = read_body(&mut conn, &mut buf, &head).await?;
    Ok((head, text))
}

/// Headers a response head may have.
const MAX_HEADERS: usize = 64;

/// Reads one response head; bytes read past it stay in `buf`.
async fn read_head(conn: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Head> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head {
                    status: resp.code.unwrap_or_default(),
                    headers: resp
                        .headers
                        .iter()
                        .map(|h| {
                            let value = String::from_utf8_lossy(h.value).trim().to_owned();
                            (h.name.to_ascii_lowercase(), value)
                        })
                        .collect(),
                };
                buf.drain(..len);
                return Ok(head);
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(invalid(format!("bad response head: {e}"))),
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("response head too long".into()));
        }
        let mut chunk = [0u8; 8192];
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads the final answer's body: its `content-length`, else to the
/// connection's end (`connection: close`), at most [`MAX_BODY`].
async fn read_body(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
    head: &Head,
) -> std::io::Result<String> {
    let want = head
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .map(|n| n.min(MAX_BODY));
    let mut chunk = [0u8; 8192];
    while want.is_none_or(|w| buf.len() < w) && buf.len() < MAX_BODY {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(String::from_utf8_lossy(buf).into_owned())
}

/// The failure of a non-200 answer: `SlowDown` (with whether it carried a
/// retry hint) for a 503, else its status and S3 error code.
fn refused(what: &str, head: &Head, body: &str) -> OpFailure {
    let code = body
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(c, _)| c.to_owned())
        .unwrap_or_default();
    let number = |name: &str| head.header(name).and_then(|v| v.parse::<u64>().ok());
    let kind = if head.status == 503 || code == "SlowDown" {
        FailureKind::SlowDown {
            retry_hint: head.header("retry-after").is_some()
                || head.header("x-amz-retry-after").is_some(),
        }
    } else {
        FailureKind::Other
    };
    OpFailure {
        kind,
        message: format!("{what}: HTTP {} {code}", head.status),
        retry_after: number("x-amz-retry-after")
            .map(Duration::from_millis)
            .or_else(|| number("retry-after").map(Duration::from_secs)),
    }
}

fn other(what: &str, e: impl std::fmt::Display) -> OpFailure {
    OpFailure {
        kind: FailureKind::Other,
        message: format!("{what}: {e}"),
        retry_after: None,
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers the request head with `answer` and returns
    /// the head it read and the bytes the client sent after it; after a
    /// `100 Continue` it reads `body_len` bytes and answers `200`.
    async fn server(
        answer: &'static str,
        body_len: usize,
    ) -> (String, tokio::task::JoinHandle<(String, Vec<u8>)>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let end = loop {
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end + 4;
                }
                let n = conn.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut after = buf.split_off(end);
            conn.write_all(answer.as_bytes()).await.unwrap();
            if answer.starts_with("HTTP/1.1 100") {
                while after.len() < body_len {
                    let n = conn.read(&mut chunk).await.unwrap();
                    after.extend_from_slice(&chunk[..n]);
                }
                conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
            }
            // Whatever else the client sends until it closes.
            loop {
                let n = conn.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                after.extend_from_slice(&chunk[..n]);
            }
            (head, after)
        });
        (format!("http://{addr}/b/k?X-Amz-Signature=x"), task)
    }

    #[tokio::test]
    async fn a_refusal_before_continue_costs_no_body() {
        let (uri, task) = server(
            "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 36\r\n\r\n<Error><Code>SlowDown</Code></Error>",
            0,
        )
        .await;
        let (head, text) = send(&uri, std::iter::empty(), &[7u8; 4096]).await.unwrap();
        assert_eq!(head.status, 503);
        let failure = refused("PUT k", &head, &text);
        assert_eq!(failure.kind, FailureKind::SlowDown { retry_hint: true });
        assert_eq!(failure.retry_after, Some(Duration::from_secs(1)));
        let (request, sent_after) = task.await.unwrap();
        assert!(request.contains("expect: 100-continue"), "{request}");
        assert!(
            request.starts_with("PUT /b/k?X-Amz-Signature=x HTTP/1.1"),
            "{request}"
        );
        assert!(
            sent_after.is_empty(),
            "{} body bytes sent",
            sent_after.len()
        );
    }

    #[tokio::test]
    async fn the_body_follows_100_continue() {
        let body = vec![9u8; 100_000];
        let (uri, task) = server("HTTP/1.1 100 Continue\r\n\r\n", body.len()).await;
        let (head, _) = send(&uri, std::iter::empty(), &body).await.unwrap();
        assert_eq!(head.status, 200);
        let (_, sent_after) = task.await.unwrap();
        assert_eq!(sent_after, body);
    }
}
