//! `hangar health`: asks the running node's admin endpoint for `GET /health`
//! and answers with one line and the exit code (0 healthy, 1 not), for
//! container health checks and service managers that have no HTTP client
//! (a `FROM scratch` image has no curl).
//!
//! The address is `[admin] api_bind_addr` from the config; an unspecified
//! bind address (`0.0.0.0`, `[::]`) is reached on the loopback address of
//! its family. The request is plain HTTP/1.1 over one TCP connection with
//! `Connection: close`, so nothing more than tokio is needed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hangar_util::config::Config;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The whole exchange (connect, request, answer) must fit in this.
pub const TIMEOUT: Duration = Duration::from_secs(4);
/// Longest answer read; `/health` answers with about a hundred bytes.
const MAX_ANSWER: u64 = 64 * 1024;

/// Runs `hangar health` with the node's config: prints the one-line
/// status and returns `Ok` when the node answered `200` with status `ok`.
pub async fn run(cfg: &Config, json: bool) -> Result<(), String> {
    let Some(bind) = cfg.admin.api_bind_addr.as_deref() else {
        return Err("no [admin] api_bind_addr in the config: /health is served there".into());
    };
    let addr = dial_addr(bind);
    let body = check(&addr, TIMEOUT).await?;
    if json {
        println!("{body}");
    } else {
        println!("{}", summary(&addr, &body));
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

/// `GET /health` on `addr`: the JSON body when the answer is `200` with
/// `"status": "ok"`, else why not, in one line.
pub async fn check(addr: &str, timeout: Duration) -> Result<Value, String> {
    let answer = tokio::time::timeout(timeout, exchange(addr))
        .await
        .map_err(|_| format!("http://{addr}/health: no answer within {timeout:?}"))??;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("http://{addr}/health: truncated answer"))?;
    let status_line = head.lines().next().unwrap_or_default();
    let code = status_line.split_whitespace().nth(1).unwrap_or_default();
    if code != "200" {
        return Err(format!(
            "http://{addr}/health answered {}",
            status_line
                .split_once(' ')
                .map_or(status_line, |(_, rest)| rest)
        ));
    }
    let v: Value = serde_json::from_str(body.trim())
        .map_err(|e| format!("http://{addr}/health: not JSON ({e})"))?;
    match v["status"].as_str() {
        Some("ok") => Ok(v),
        other => Err(format!(
            "http://{addr}/health: status {}",
            other.unwrap_or("missing")
        )),
    }
}

async fn exchange(addr: &str) -> Result<String, String> {
    let mut conn = TcpStream::connect(addr).await.map_err(|e| {
        format!("cannot connect to http://{addr}/health: {e} (is the node running?)")
    })?;
    let req = format!(
        "GET /health HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: hangar-health\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("http://{addr}/health: {e}"))?;
    let mut answer = Vec::new();
    conn.take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("http://{addr}/health: {e}"))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

fn summary(addr: &str, v: &Value) -> String {
    format!(
        "ok: node {} (admin http://{addr}), {} of {} known peers up",
        v["node"].as_str().unwrap_or("?"),
        v["peers_up"],
        v["known_peers"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers one connection with `answer` (after reading
    /// the request head) and closes it, or never answers when `answer` is
    /// `None`. The client reads until the close, as `Connection: close` asks.
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
             {\"status\":\"ok\",\"node\":\"ab12@10.0.0.1:3901\",\"known_peers\":2,\"peers_up\":1}",
        ))
        .await;
        let v = check(&addr, TIMEOUT).await.unwrap();
        assert_eq!(
            summary(&addr, &v),
            format!("ok: node ab12@10.0.0.1:3901 (admin http://{addr}), 1 of 2 known peers up")
        );
    }

    #[tokio::test]
    async fn error_status_is_reported() {
        let addr = serve_once(Some(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        ))
        .await;
        let e = check(&addr, TIMEOUT).await.unwrap_err();
        assert!(e.ends_with("answered 503 Service Unavailable"), "{e}");
    }

    #[tokio::test]
    async fn status_other_than_ok_is_unhealthy() {
        let addr = serve_once(Some("HTTP/1.1 200 OK\r\n\r\n{\"status\":\"failing\"}")).await;
        let e = check(&addr, TIMEOUT).await.unwrap_err();
        assert!(e.ends_with("status failing"), "{e}");
        let addr = serve_once(Some("HTTP/1.1 200 OK\r\n\r\nfine")).await;
        let e = check(&addr, TIMEOUT).await.unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }

    #[tokio::test]
    async fn nobody_listening() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = check(&addr, TIMEOUT).await.unwrap_err();
        assert!(e.starts_with("cannot connect to"), "{e}");
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        let addr = serve_once(None).await;
        let e = check(&addr, Duration::from_millis(200)).await.unwrap_err();
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
