//! The targets bucket notifications are sent to, as the operator
//! configured them (`[[notify_webhook]]`, `[[notify_redis]]`), and how one
//! takes a target's events: in order, each accepted before the next is
//! sent.
//!
//! - A webhook takes each message as an HTTP POST (`Content-Type:
//!   application/json`, the target's bearer token and HMAC signature) and
//!   accepts it with a 2xx answer.
//! - A Redis stream takes each as an entry `XADD <stream> [MAXLEN ~ n] *
//!   event <name> key <bucket>/<key> records <message>`, accepted once
//!   Redis answers the entry's id (the redis crate, a maintained client).
//! - A NATS subject takes each as a message published through JetStream
//!   (headers `Hangar-Event` and `Nats-Msg-Id`, the event's queue key, so
//!   that the stream drops a duplicate sent within its duplicate window),
//!   accepted once the stream acknowledged it (async-nats).
//! - An AMQP 0-9-1 exchange takes each as a persistent, mandatory message
//!   (`application/json`, header `Hangar-Event`), accepted once the broker
//!   confirmed it and routed it to a queue (lapin, publisher confirms).

use std::time::Duration;

use bytes::Bytes;
use hangar_model::notification::Queued;
use hangar_util::config::{NotifyAmqp, NotifyNats, NotifyRedis, NotifyWebhook};
use http_body_util::Full;
use hyper_util::rt::TokioIo;

/// How long a target has to accept a connection and take one message.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One target of bucket notifications.
#[derive(Debug, Clone)]
pub enum NotifyTarget {
    Webhook(NotifyWebhook),
    Redis(NotifyRedis),
    Nats(NotifyNats),
    Amqp(NotifyAmqp),
}

impl NotifyTarget {
    /// Every target of the configuration.
    pub fn all(
        webhooks: &[NotifyWebhook],
        redis: &[NotifyRedis],
        nats: &[NotifyNats],
        amqp: &[NotifyAmqp],
    ) -> Vec<NotifyTarget> {
        webhooks
            .iter()
            .cloned()
            .map(NotifyTarget::Webhook)
            .chain(redis.iter().cloned().map(NotifyTarget::Redis))
            .chain(nats.iter().cloned().map(NotifyTarget::Nats))
            .chain(amqp.iter().cloned().map(NotifyTarget::Amqp))
            .collect()
    }

    /// The ARN a bucket's configuration names it by.
    pub fn arn(&self) -> String {
        match self {
            NotifyTarget::Webhook(w) => w.arn(),
            NotifyTarget::Redis(r) => r.arn(),
            NotifyTarget::Nats(n) => n.arn(),
            NotifyTarget::Amqp(a) => a.arn(),
        }
    }

    /// Its id in the configuration.
    pub fn id(&self) -> &str {
        match self {
            NotifyTarget::Webhook(w) => &w.id,
            NotifyTarget::Redis(r) => &r.id,
            NotifyTarget::Nats(n) => &n.id,
            NotifyTarget::Amqp(a) => &a.id,
        }
    }

    /// Sends `messages` (the messages of `events`, in order) one at a
    /// time; returns how many were accepted, and the error that stopped
    /// the rest.
    pub(crate) async fn send(
        &self,
        events: &[Queued],
        messages: Vec<Vec<u8>>,
    ) -> (usize, Option<String>) {
        match self {
            NotifyTarget::Webhook(w) => send_webhook(w, messages).await,
            NotifyTarget::Redis(r) => send_redis(r, events, messages).await,
            NotifyTarget::Nats(n) => send_nats(n, events, messages).await,
            NotifyTarget::Amqp(a) => send_amqp(a, events, messages).await,
        }
    }
}

/// POSTs `messages` to webhook `target` over one connection (replaced if
/// the target closes it).
async fn send_webhook(target: &NotifyWebhook, messages: Vec<Vec<u8>>) -> (usize, Option<String>) {
    let mut ok = 0;
    let mut conn: Option<Conn> = None;
    for body in messages {
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
        ok += 1;
    }
    (ok, None)
}

/// Appends `messages` to the Redis stream of `target`, one `XADD` each.
async fn send_redis(
    target: &NotifyRedis,
    events: &[Queued],
    messages: Vec<Vec<u8>>,
) -> (usize, Option<String>) {
    let client = match redis::Client::open(target.address.as_str()) {
        Ok(c) => c,
        Err(e) => return (0, Some(format!("bad address: {e}"))),
    };
    let mut con =
        match tokio::time::timeout(TIMEOUT, client.get_multiplexed_async_connection()).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return (0, Some(format!("cannot connect: {e}"))),
            Err(_) => return (0, Some("connection timed out".into())),
        };
    let mut ok = 0;
    for (q, body) in events.iter().zip(messages) {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&target.stream);
        if let Some(n) = target.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*")
            .arg("event")
            .arg(&q.event.event)
            .arg("key")
            .arg(format!("{}/{}", q.event.bucket, q.event.key))
            .arg("records")
            .arg(body);
        match tokio::time::timeout(TIMEOUT, cmd.query_async::<String>(&mut con)).await {
            Ok(Ok(_id)) => ok += 1,
            Ok(Err(e)) => return (ok, Some(format!("XADD failed: {e}"))),
            Err(_) => return (ok, Some("no answer in time".into())),
        }
    }
    (ok, None)
}

/// Publishes `messages` to the subject of `target` through JetStream, one
/// at a time, each acknowledged by its stream before the next.
async fn send_nats(
    target: &NotifyNats,
    events: &[Queued],
    messages: Vec<Vec<u8>>,
) -> (usize, Option<String>) {
    let mut options = async_nats::ConnectOptions::new().connection_timeout(TIMEOUT);
    if let Some(t) = &target.auth_token {
        options = options.token(t.clone());
    }
    let client = match tokio::time::timeout(TIMEOUT, options.connect(target.address.as_str())).await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return (0, Some(format!("cannot connect: {e}"))),
        Err(_) => return (0, Some("connection timed out".into())),
    };
    let js = async_nats::jetstream::new(client.clone());
    let mut ok = 0;
    let mut err = None;
    for (q, body) in events.iter().zip(messages) {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Hangar-Event", q.event.event.as_str());
        headers.insert("Nats-Msg-Id", hex::encode(&q.key).as_str());
        let published = async {
            js.publish_with_headers(target.subject.clone(), headers, Bytes::from(body))
                .await
                .map_err(|e| format!("publish failed: {e}"))?
                .await
                .map_err(|e| format!("no acknowledgement from a stream: {e}"))
        };
        match tokio::time::timeout(TIMEOUT, published).await {
            Ok(Ok(_ack)) => ok += 1,
            Ok(Err(e)) => {
                err = Some(e);
                break;
            }
            Err(_) => {
                err = Some("no acknowledgement in time".into());
                break;
            }
        }
    }
    // Ends the connection's task; what was acknowledged is in the stream.
    let _ = client.drain().await;
    (ok, err)
}

/// Publishes `messages` to the exchange of `target`, one at a time, each
/// confirmed by the broker before the next.
async fn send_amqp(
    target: &NotifyAmqp,
    events: &[Queued],
    messages: Vec<Vec<u8>>,
) -> (usize, Option<String>) {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
    let opened = async {
        let conn =
            lapin::Connection::connect(&target.address, lapin::ConnectionProperties::default())
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel: {e}"))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("publisher confirms refused: {e}"))?;
        Ok::<_, String>((conn, channel))
    };
    let (conn, channel) = match tokio::time::timeout(TIMEOUT, opened).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return (0, Some(e)),
        Err(_) => return (0, Some("connection timed out".into())),
    };
    let mut ok = 0;
    let mut err = None;
    for (q, body) in events.iter().zip(messages) {
        let mut headers = FieldTable::default();
        headers.insert(
            ShortString::from("Hangar-Event"),
            AMQPValue::LongString(LongString::from(q.event.event.as_str())),
        );
        let properties = lapin::BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2)
            .with_headers(headers);
        let published = async {
            let confirm = channel
                .basic_publish(
                    ShortString::from(target.exchange.as_str()),
                    ShortString::from(target.routing_key.as_str()),
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    &body,
                    properties,
                )
                .await
                .map_err(|e| format!("publish failed: {e}"))?
                .await
                .map_err(|e| format!("no confirmation: {e}"))?;
            if !confirm.is_ack() {
                return Err("the broker refused the message".to_owned());
            }
            if confirm.take_message().is_some() {
                return Err(format!(
                    "no queue takes routing key {:?} of exchange {:?}",
                    target.routing_key, target.exchange
                ));
            }
            Ok(())
        };
        match tokio::time::timeout(TIMEOUT, published).await {
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                err = Some(e);
                break;
            }
            Err(_) => {
                err = Some("no confirmation in time".into());
                break;
            }
        }
    }
    let _ = conn.close(200, ShortString::from("done")).await;
    (ok, err)
}

/// The `X-Hangar-Signature` of a message `body` sent with `secret`:
/// `sha256=` and the hex HMAC-SHA256 of the body, as webhook receivers
/// commonly check them.
fn signature(secret: &str, body: &[u8]) -> String {
    let mac = crate::presign::hmac(secret.as_bytes(), body);
    format!("sha256={}", hex::encode(mac))
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
}
