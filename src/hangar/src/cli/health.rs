//! `hangar health`: asks the running node's admin endpoint for `GET /health`
//! and answers with one line and the exit code (0 healthy, 1 not), for
//! container health checks and service managers that have no HTTP client
//! (a `FROM scratch` image has no curl).
//!
//! The address is `--admin-url`, else `[admin] api_bind_addr` from the
//! config; an unspecified bind address (`0.0.0.0`, `[::]`) is reached on
//! the loopback address of its family.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hangar_api_admin::client::HttpTarget;
use hangar_api_admin::layout_answers::NodeHealth;
use hangar_util::config::Config;
use http::{Method, StatusCode};
use serde_json::Value;

/// The whole exchange (connect, request, answer) must fit in this.
pub const TIMEOUT: Duration = Duration::from_secs(4);

/// Where `hangar health` asks: `--admin-url`, else the config's
/// `[admin] api_bind_addr`.
pub fn target(admin_url: Option<&str>, cfg: Option<&Config>) -> Result<HttpTarget, String> {
    if let Some(url) = admin_url {
        return HttpTarget::new(url, None);
    }
    let bind = cfg
        .and_then(|c| c.admin.api_bind_addr.as_deref())
        .ok_or("no [admin] api_bind_addr in the config: /health is served there")?;
    HttpTarget::new(&format!("http://{}", dial_addr(bind)), None)
}

/// Runs `hangar health`: prints the one-line status and returns `Ok` when
/// the node answered `200`.
pub async fn run(target: &HttpTarget, json: bool) -> Result<(), String> {
    let body = check(target, TIMEOUT).await?;
    if json {
        println!("{body}");
    } else {
        println!("{}", summary(&target.url(), &body));
    }
    Ok(())
}

/// Where to connect for a node bound to `bind`.
pub fn dial_addr(bind: &str) -> String {
    match bind.parse::<SocketAddr>() {
        Ok(sa) if sa.ip().is_unspecified() => {
            let ip = match sa.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            };
            SocketAddr::new(ip, sa.port()).to_string()
        }
        _ => bind.to_owned(),
    }
}

/// `GET /health`: the JSON body when the answer is `200`, else why not,
/// in one line.
pub async fn check(target: &HttpTarget, timeout: Duration) -> Result<Value, String> {
    let url = format!("{}/health", target.url());
    let (status, body) = target.send(Method::GET, "/health", None, timeout).await?;
    let v: Result<Value, _> = serde_json::from_slice(&body);
    if status != StatusCode::OK {
        let reason = v
            .ok()
            .and_then(|v| serde_json::from_value::<NodeHealth>(v).ok())
            .filter(|h| !h.reason.is_empty())
            .map(|h| format!(": {}", h.reason))
            .unwrap_or_default();
        return Err(format!("{url} answered {status}{reason}"));
    }
    v.map_err(|e| format!("{url}: not JSON ({e})"))
}

fn summary(url: &str, v: &Value) -> String {
    let h: NodeHealth = serde_json::from_value(v.clone()).unwrap_or_default();
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "?".to_owned()
        } else {
            s.to_owned()
        }
    };
    format!(
        "ok: node {} (admin {url}), {} of {} known peers up; {}: {}",
        or_unknown(&h.node),
        h.peers_up,
        h.known_peers,
        or_unknown(&h.status),
        h.reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn t(addr: &str) -> HttpTarget {
        HttpTarget::new(&format!("http://{addr}"), None).unwrap()
    }

    /// A server that answers one connection with `answer` (after reading
    /// the request head) and closes it, or never answers when `answer` is
    /// `None`. The answers have no length, so the client reads until the close.
    async fn serve_once(answer: Option<&'static str>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0, "client closed before the end of its request");
                head.extend_from_slice(&buf[..n]);
            }
            assert!(head.starts_with(b"GET /health HTTP/1.1\r\n"));
            match answer {
                Some(a) => s.write_all(a.as_bytes()).await.unwrap(),
                None => tokio::time::sleep(Duration::from_secs(60)).await,
            }
        });
        addr
    }

    #[tokio::test]
    async fn healthy_node() {
        let addr = serve_once(Some(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n\
             {\"status\":\"degraded\",\"reason\":\"1 of 256 partitions miss a replica\",\"node\":\"ab12@10.0.0.1:3901\",\"known_peers\":2,\"peers_up\":1}",
        ))
        .await;
        let v = check(&t(&addr), TIMEOUT).await.unwrap();
        assert_eq!(
            summary(&t(&addr).url(), &v),
            format!(
                "ok: node ab12@10.0.0.1:3901 (admin http://{addr}), 1 of 2 known peers up; \
                 degraded: 1 of 256 partitions miss a replica"
            )
        );
    }

    #[tokio::test]
    async fn error_status_is_reported() {
        let addr = serve_once(Some(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        ))
        .await;
        let e = check(&t(&addr), TIMEOUT).await.unwrap_err();
        assert!(e.ends_with("answered 503 Service Unavailable"), "{e}");
        let body = r#"{"status":"unavailable","reason":"no quorum"}"#;
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let addr = serve_once(Some(Box::leak(answer.into_boxed_str()))).await;
        let e = check(&t(&addr), TIMEOUT).await.unwrap_err();
        assert!(
            e.ends_with("answered 503 Service Unavailable: no quorum"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_an_error() {
        let addr = serve_once(Some("HTTP/1.1 200 OK\r\n\r\nfine")).await;
        let e = check(&t(&addr), TIMEOUT).await.unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }

    #[tokio::test]
    async fn nobody_listening() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = check(&t(&addr), TIMEOUT).await.unwrap_err();
        assert!(e.contains("/health: cannot connect"), "{e}");
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        let addr = serve_once(None).await;
        let e = check(&t(&addr), Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(e.contains("no answer within"), "{e}");
    }

    #[test]
    fn unspecified_bind_addresses_are_dialed_on_loopback() {
        assert_eq!(dial_addr("0.0.0.0:3903"), "127.0.0.1:3903");
        assert_eq!(dial_addr("[::]:3903"), "[::1]:3903");
        assert_eq!(dial_addr("10.1.2.3:3903"), "10.1.2.3:3903");
        assert_eq!(dial_addr("node1:3903"), "node1:3903");
    }
}
