//! Sends the bucket notification events this node is due to send
//! (`hangar_model::notification::Notifications::due`) to their targets,
//! the operator's `[[notify_webhook]]`s: each event is one HTTP POST of
//! S3's event message (`{"Records": [...]}`), and counts as delivered once
//! the target answers 2xx.
//!
//! A target's events go out one at a time, oldest first, so that a key's
//! events arrive in the order of their sequencer; a failure stops that
//! target's events for this round and puts the target in a backoff (1 s,
//! doubling to 60 s) while the other targets go on. A target that is down
//! costs the PUTs nothing: their events wait in the queue, on disk.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hangar_model::Model;
use hangar_model::notification::{Queued, QueuedEvent};
use hangar_util::config::NotifyWebhook;
use hangar_util::worker::{WorkerHandle, WorkerState};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::json;

/// Events read from the queue in one round.
const ROUND: usize = 256;
/// How long a round waits when nothing was due.
const IDLE: Duration = Duration::from_millis(250);
/// How long a target has to accept a connection and answer one POST.
const TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The sender of one node's notification events, and its counters.
pub struct NotifyWorker {
    model: Arc<Model>,
    region: String,
    targets: BTreeMap<String, NotifyWebhook>,
    delivered: AtomicU64,
    failures: AtomicU64,
    queued: AtomicU64,
    dropped: AtomicU64,
}

/// When a failing target is tried again, and how long the next wait is.
struct Backoff {
    until: Instant,
    next: Duration,
}

impl NotifyWorker {
    pub fn new(model: Arc<Model>, region: String, targets: &[NotifyWebhook]) -> NotifyWorker {
        NotifyWorker {
            model,
            region,
            targets: targets.iter().map(|t| (t.arn(), t.clone())).collect(),
            delivered: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Events delivered, failed attempts, events queued on this node, and
    /// events dropped because the queue was full.
    pub fn counters(&self) -> (u64, u64, u64, u64) {
        (
            self.delivered.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
            self.queued.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }

    /// Runs until the process ends, reporting to `worker`
    /// (`hangar worker list`: events sent, failures, queue length).
    pub async fn run(self: Arc<Self>, worker: WorkerHandle) {
        let mut backoff: BTreeMap<String, Backoff> = BTreeMap::new();
        loop {
            if let Ok((queued, dropped)) = self.model.notifications().counters().await {
                self.queued.store(queued, Ordering::Relaxed);
                self.dropped.store(dropped, Ordering::Relaxed);
                worker.set_queue_length(Some(queued));
            }
            let now = Instant::now();
            let waiting = |e: &QueuedEvent| backoff.get(&e.target).is_some_and(|b| b.until > now);
            let due = match self
                .model
                .notifications()
                .due(ROUND, hangar_util::time::now_msec(), waiting)
                .await
            {
                Ok(d) => d,
                Err(e) => {
                    worker.record_error(format!("reading the queue: {e}"));
                    tokio::time::sleep(BACKOFF_MIN).await;
                    continue;
                }
            };
            if due.is_empty() {
                worker.set_state(WorkerState::Idle);
                tokio::time::sleep(IDLE).await;
                continue;
            }
            worker.set_state(WorkerState::Busy);
            let mut by_target: BTreeMap<String, Vec<Queued>> = BTreeMap::new();
            for q in due {
                by_target.entry(q.event.target.clone()).or_default().push(q);
            }
            let mut sent = Vec::new();
            for (arn, events) in by_target {
                let Some(target) = self.targets.get(&arn) else {
                    // Kept: the operator may configure the target again.
                    worker.record_error(format!("no [[notify_webhook]] is {arn}"));
                    backoff.insert(
                        arn,
                        Backoff {
                            until: Instant::now() + BACKOFF_MAX,
                            next: BACKOFF_MAX,
                        },
                    );
                    continue;
                };
                let (ok, err) = self.send_all(target, events).await;
                sent.extend(ok);
                match err {
                    None => {
                        backoff.remove(&arn);
                    }
                    Some(e) => {
                        self.failures.fetch_add(1, Ordering::Relaxed);
                        worker.record_error(format!("{}: {e}", target.id));
                        tracing::warn!("notify: target {} failed: {e}", target.id);
                        let next = backoff.get(&arn).map_or(BACKOFF_MIN, |b| b.next);
                        backoff.insert(
                            arn,
                            Backoff {
                                until: Instant::now() + next,
                                next: (next * 2).min(BACKOFF_MAX),
                            },
                        );
                    }
                }
            }
            if !sent.is_empty() {
                let n = sent.len() as u64;
                if let Err(e) = self.model.notifications().delivered(&sent).await {
                    worker.record_error(format!("recording deliveries: {e}"));
                }
                self.delivered.fetch_add(n, Ordering::Relaxed);
                worker.add_processed(n);
                worker.set_progress(format!("{n} events sent"), None);
            }
        }
    }

    /// Sends `events` to `target` in order over one connection; returns
    /// those it accepted, and the error that stopped the rest.
    async fn send_all(
        &self,
        target: &NotifyWebhook,
        events: Vec<Queued>,
    ) -> (Vec<Queued>, Option<String>) {
        let mut ok = Vec::new();
        let mut conn: Option<Conn> = None;
        for q in events {
            let body = serde_json::to_vec(&json!({ "Records": [self.record(&q)] }))
                .expect("events encode");
            let mut fresh = false;
            let status = loop {
                // A target may close the connection after any answer
                // (HTTP/1.0, `Connection: close`): a closed one is replaced
                // once, as nothing of the request was sent on it.
                let mut c = match conn.take() {
                    Some(c) if !c.send.is_closed() => c,
                    _ => {
                        fresh = true;
                        match tokio::time::timeout(TIMEOUT, connect(&target.endpoint)).await {
                            Ok(Ok(c)) => c,
                            Ok(Err(e)) => return (ok, Some(e)),
                            Err(_) => return (ok, Some("connection timed out".into())),
                        }
                    }
                };
                match tokio::time::timeout(TIMEOUT, c.post(target, body.clone())).await {
                    Ok(Ok(status)) => {
                        conn = Some(c);
                        break status;
                    }
                    Ok(Err(PostError::Closed)) if !fresh => continue,
                    Ok(Err(e)) => return (ok, Some(e.to_string())),
                    Err(_) => return (ok, Some("no answer in time".into())),
                }
            };
            if !status.is_success() {
                return (ok, Some(format!("answered {status}")));
            }
            ok.push(q);
        }
        (ok, None)
    }

    /// S3's event record of `q` (AWS S3 User Guide, "Event message
    /// structure", version 2.1). The requester and its address are not
    /// known (the event is made from the stored row): `principalId` is the
    /// empty string and `sourceIPAddress` absent.
    fn record(&self, q: &Queued) -> serde_json::Value {
        let e = &q.event;
        let mut object = json!({
            "key": event_key(&e.key),
            "sequencer": q.sequencer(),
        });
        if !e.event.starts_with("s3:ObjectRemoved:") {
            object["size"] = json!(e.size);
            object["eTag"] = json!(e.etag);
        }
        if let Some(v) = &e.version_id {
            object["versionId"] = json!(v);
        }
        json!({
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": self.region,
            "eventTime": crate::time::iso8601_msec(e.time_msec),
            "eventName": e.event.trim_start_matches("s3:"),
            "userIdentity": { "principalId": "" },
            "requestParameters": {},
            "responseElements": {},
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": e.rule_id,
                "bucket": {
                    "name": e.bucket,
                    "ownerIdentity": { "principalId": "" },
                    "arn": format!("arn:aws:s3:::{}", e.bucket),
                },
                "object": object,
            },
        })
    }
}

/// The `X-Hangar-Signature` of a message `body` sent with `secret`:
/// `sha256=` and the hex HMAC-SHA256 of the body, as webhook receivers
/// commonly check them.
fn signature(secret: &str, body: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A key as S3's event messages write it: URL-encoded, spaces as `+`.
fn event_key(key: &str) -> String {
    urlencoding::encode(key)
        .replace("%20", "+")
        .replace("%2F", "/")
}

/// An HTTP/1.1 connection to a target.
struct Conn {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: String,
    path: String,
}

async fn connect(endpoint: &str) -> Result<Conn, String> {
    let uri: http::Uri = endpoint.parse().map_err(|e| format!("bad endpoint: {e}"))?;
    let host = uri.host().ok_or("endpoint without a host")?.to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let path = uri
        .path_and_query()
        .map_or("/".to_owned(), |p| p.as_str().to_owned());
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    tokio::spawn(conn);
    let host = match uri.port_u16() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    };
    Ok(Conn { send, host, path })
}

/// Why a POST failed.
#[derive(Debug, thiserror::Error)]
enum PostError {
    /// The connection was closed before the request was sent.
    #[error("connection closed")]
    Closed,
    #[error("{0}")]
    Other(String),
}

impl Conn {
    async fn post(
        &mut self,
        target: &NotifyWebhook,
        body: Vec<u8>,
    ) -> Result<http::StatusCode, PostError> {
        self.send.ready().await.map_err(|_| PostError::Closed)?;
        let mut req = http::Request::post(self.path.as_str())
            .header(http::header::HOST, self.host.as_str())
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(t) = &target.auth_token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if let Some(secret) = &target.hmac_secret {
            req = req.header("x-hangar-signature", signature(secret, &body));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| PostError::Other(e.to_string()))?;
        let resp = self
            .send
            .send_request(req)
            .await
            .map_err(|e| PostError::Other(format!("no answer: {e}")))?;
        let status = resp.status();
        // Read to its end, so that the connection can carry the next one.
        let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn keys_are_url_encoded_with_plus_for_spaces() {
        assert_eq!(event_key("a b/c+d.txt"), "a+b/c%2Bd.txt");
    }
}
