//! The targets of bucket notifications as the config file gives them
//! (`[[notify_webhook]]`, `[[notify_redis]]`, `[[notify_nats]]`,
//! `[[notify_amqp]]`; doc/configuration.md), each named by an id that a
//! bucket's configuration refers to by ARN (`arn:hangar:sqs::<id>:<kind>`).
//! Their `Debug` never shows a token, a secret or an address's password.

use serde::{Deserialize, Serialize};

/// `[[notify_webhook]]`: receives each event as an HTTP POST of S3's event
/// JSON.
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifyWebhook {
    pub id: String,
    /// `http://host:port/path` (HTTPS is not built yet).
    pub endpoint: String,
    /// Sent as `Authorization: Bearer <auth_token>` when set.
    #[serde(default)]
    pub auth_token: Option<String>,
    /// When set, each message is signed: `X-Hangar-Signature:
    /// sha256=<hex of HMAC-SHA256(hmac_secret, body)>`.
    #[serde(default)]
    pub hmac_secret: Option<String>,
}

/// `[[notify_redis]]`: appends each event to a Redis stream (`XADD`).
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifyRedis {
    pub id: String,
    /// `redis://[:password@]host:port[/db]`.
    pub address: String,
    /// The stream's key.
    pub stream: String,
    /// When set, each `XADD` trims the stream to about this many entries
    /// (`MAXLEN ~`).
    #[serde(default)]
    pub max_len: Option<u64>,
}

/// `[[notify_nats]]`: publishes each event to a NATS subject that a
/// JetStream stream takes; delivered once the stream acknowledged it.
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifyNats {
    pub id: String,
    /// `nats://host:port`.
    pub address: String,
    /// The subject; a JetStream stream must take it.
    pub subject: String,
    /// The server's authentication token, if it wants one.
    #[serde(default)]
    pub auth_token: Option<String>,
}

/// `[[notify_amqp]]`: publishes each event to an AMQP 0-9-1 exchange,
/// persistent and mandatory; delivered once the broker confirmed it
/// (publisher confirms) and routed it to a queue.
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotifyAmqp {
    pub id: String,
    /// `amqp://[user:password@]host:port/<vhost, URL-encoded>`.
    pub address: String,
    /// The exchange (empty: the default exchange, which routes to the
    /// queue named by the routing key).
    #[serde(default)]
    pub exchange: String,
    pub routing_key: String,
}

/// The ARN a bucket's configuration names the target `id` of `kind` by.
fn arn(id: &str, kind: &str) -> String {
    format!("arn:hangar:sqs::{id}:{kind}")
}

impl NotifyWebhook {
    pub fn arn(&self) -> String {
        arn(&self.id, "webhook")
    }
}

impl NotifyRedis {
    pub fn arn(&self) -> String {
        arn(&self.id, "redis")
    }
}

impl NotifyNats {
    pub fn arn(&self) -> String {
        arn(&self.id, "nats")
    }
}

impl NotifyAmqp {
    pub fn arn(&self) -> String {
        arn(&self.id, "amqp")
    }
}

/// What `Debug` shows of a secret that may be set.
fn hidden(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "…")
}

/// An address with its user information (a password) left out.
fn without_userinfo(address: &str) -> String {
    match (address.split_once("://"), address.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://…@{host}"),
        _ => address.to_owned(),
    }
}

impl std::fmt::Debug for NotifyWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyWebhook")
            .field("id", &self.id)
            .field("endpoint", &self.endpoint)
            .field("auth_token", &hidden(&self.auth_token))
            .field("hmac_secret", &hidden(&self.hmac_secret))
            .finish()
    }
}

impl std::fmt::Debug for NotifyRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyRedis")
            .field("id", &self.id)
            .field("address", &without_userinfo(&self.address))
            .field("stream", &self.stream)
            .field("max_len", &self.max_len)
            .finish()
    }
}

impl std::fmt::Debug for NotifyNats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyNats")
            .field("id", &self.id)
            .field("address", &without_userinfo(&self.address))
            .field("subject", &self.subject)
            .field("auth_token", &hidden(&self.auth_token))
            .finish()
    }
}

impl std::fmt::Debug for NotifyAmqp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyAmqp")
            .field("id", &self.id)
            .field("address", &without_userinfo(&self.address))
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .finish()
    }
}

/// Checks the targets: ids unique among all of them and of letters,
/// digits, `-` and `_`; each address of its target's scheme, with a host;
/// a stream and a subject given. HTTPS webhooks are refused (not built).
pub(crate) fn validate(
    webhooks: &[NotifyWebhook],
    redis: &[NotifyRedis],
    nats: &[NotifyNats],
    amqp: &[NotifyAmqp],
) -> Result<(), String> {
    // (table, id, address, its scheme, whether the rest is given)
    let targets = webhooks
        .iter()
        .map(|w| ("notify_webhook", &w.id, &w.endpoint, "http://", true))
        .chain(redis.iter().map(|r| {
            let given = !r.stream.is_empty();
            ("notify_redis", &r.id, &r.address, "redis://", given)
        }))
        .chain(nats.iter().map(|n| {
            let given = !n.subject.is_empty();
            ("notify_nats", &n.id, &n.address, "nats://", given)
        }))
        .chain(
            amqp.iter()
                .map(|a| ("notify_amqp", &a.id, &a.address, "amqp://", true)),
        );
    let mut ids = std::collections::BTreeSet::new();
    for (table, id, address, scheme, given) in targets {
        let ok_id = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok_id || !ids.insert(id.as_str()) {
            return Err(format!(
                "[[{table}]] id {id:?} must be unique among the notification targets, of letters, digits, - and _"
            ));
        }
        if address.starts_with("https://") {
            return Err(format!(
                "[[{table}]] {id}: HTTPS endpoints are not supported yet"
            ));
        }
        let host = address.strip_prefix(scheme).unwrap_or("");
        if host.is_empty() || host.starts_with('/') || host.contains(char::is_whitespace) {
            return Err(format!(
                "[[{table}]] {id}: {address:?} is not a {scheme} URL with a host"
            ));
        }
        if !given {
            return Err(format!(
                "[[{table}]] {id}: the stream or subject is missing"
            ));
        }
    }
    Ok(())
}
