//! Bucket notifications (S3's PutBucketNotificationConfiguration): a
//! bucket's rules, and the durable queue of the events they select.
//!
//! - A bucket's rules are a register of its row ([`NotificationRule`],
//!   row format 21). The bucket table's hook copies them, with the bucket's
//!   name, into this node's local index [`NOTIFY_RULES_TREE`] (bucket id →
//!   [`BucketRules`]), so that the object table's hook finds them by the
//!   object row's partition key in the row's own transaction.
//! - The object table's hook (`tx_queue_events`) turns each change of an
//!   object row into S3 event names (`ObjectRow::events_since`), matches them against
//!   the bucket's rules, and queues one [`QueuedEvent`] per matching rule in
//!   [`NOTIFY_QUEUE_TREE`], in the same transaction as the row: an event is
//!   queued exactly when its change is stored, and a crash loses neither.
//! - Every replica that merges the change queues it, under the same key
//!   (its time and a hash of what it is), so that an event has one id on
//!   every node. One node sends ([`Notifications::due`]): the first node of
//!   the partition's replica list that is up. It tells the others when an
//!   event was delivered ([`Notifications::delivered`]), and they drop their
//!   copy; a copy no one acknowledged is sent by its holder once the
//!   first replica has been down for [`TAKEOVER`], or after [`ORPHAN`] in
//!   any case (the sender may never have merged that change, or its target
//!   is down). A change merged more than [`LATE`] after it was made (a node
//!   back from an absence, by anti-entropy) queues nothing: the replicas
//!   that took it then queued it. So an event is delivered at least once;
//!   it is delivered more than once when a sender changes (one was down),
//!   an acknowledgement is lost, or a target stays down past [`ORPHAN`].
//! - The queue holds at most [`MAX_QUEUED`] events on a node: past that,
//!   events are counted as dropped (`hangar_notify_dropped_total`) rather
//!   than grow the store without bound while a target is down.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar_db::{Db, DbError, Tx};
use hangar_net::{Handler, HandlerError, Request, Response};
use serde::{Deserialize, Serialize};

use crate::version_keys::{VersionRef, split_sort_key};
use crate::{Result, VersionId};

/// Local index: bucket id (32 bytes) → [`BucketRules`] (MessagePack), for
/// the buckets with notification rules.
pub const NOTIFY_RULES_TREE: &str = "notify_rules";
/// The queue: target (8 bytes of a hash of its ARN) ++ time (ms, 8 bytes
/// BE) ++ event hash (16 bytes) → [`QueuedEvent`] (MessagePack): each
/// target's events in time order.
pub const NOTIFY_QUEUE_TREE: &str = "notify_queue";
/// Events this node knows were delivered: queue key → when it learnt it
/// (ms, u64 BE), kept [`ACKED_FOR`], so that a change this node merges
/// after its sender delivered the event (a lagging replica) does not queue
/// it again.
pub const NOTIFY_ACKED_TREE: &str = "notify_acked";

/// How long a delivered event's key is kept: longer than [`LATE`], past
/// which a late merge queues nothing anyway.
pub const ACKED_FOR: Duration = Duration::from_secs(600);

/// Counters of the queue: `count` (events queued) and `dropped` (events
/// not queued because the queue was full), u64 BE.
pub const NOTIFY_STATE_TREE: &str = "notify_state";

const COUNT: &[u8] = b"count";
const DROPPED: &[u8] = b"dropped";

/// Most events queued on one node.
pub const MAX_QUEUED: u64 = 1_000_000;
/// How long a copy waits, with its sender down, before its holder sends it.
pub const TAKEOVER: Duration = Duration::from_secs(30);
/// How long a copy waits, whatever the sender's state, before its holder
/// sends it.
pub const ORPHAN: Duration = Duration::from_secs(600);

/// How late after a change this node may merge it and still queue its
/// events.
pub const LATE: Duration = Duration::from_secs(300);

/// Most queued events [`Notifications::due`] looks at for one target in
/// one round.
pub const SCAN: usize = 4096;

/// Length of a queue key.
const KEY_LEN: usize = 8 + 8 + 16;

/// The first bytes of the queue keys of `target`'s events.
fn target_prefix(target: &str) -> [u8; 8] {
    let h = blake3::Hasher::new_derive_key("hangar 2026-12-08 notification target")
        .update(target.as_bytes())
        .finalize();
    h.as_bytes()[..8].try_into().expect("8 bytes")
}

/// The mesh path of [`DeliveredRequest`].
pub const PATH: &str = "hangar/notify/delivered";
const RPC_QUEUE: usize = 256;

/// Which element of the configuration named the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DestinationKind {
    Queue,
    Topic,
    CloudFunction,
}

/// One rule of a bucket's notification configuration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NotificationRule {
    /// The configuration's `Id`.
    pub id: String,
    pub kind: DestinationKind,
    /// The destination's ARN, as given (a target the operator configured).
    pub target: String,
    /// Event names or patterns (`s3:ObjectCreated:*`).
    pub events: Vec<String>,
    /// The key filter's `prefix` and `suffix` (empty: none).
    pub prefix: String,
    pub suffix: String,
}

impl NotificationRule {
    /// Whether this rule selects `event` (`s3:ObjectCreated:Put`) of `key`.
    pub fn selects(&self, event: &str, key: &str) -> bool {
        key.starts_with(&self.prefix)
            && key.ends_with(&self.suffix)
            && self.events.iter().any(|p| event_matches(p, event))
    }
}

/// Whether the event name or pattern `pattern` (`s3:ObjectCreated:*`)
/// covers `event` (`s3:ObjectCreated:Put`).
pub fn event_matches(pattern: &str, event: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => event.starts_with(prefix),
        None => pattern == event,
    }
}

/// What the local index holds for a bucket with rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRules {
    pub name: String,
    /// Whether versioning was ever enabled (events then name versions).
    pub versioned: bool,
    pub rules: Vec<NotificationRule>,
}

/// An event waiting to be delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedEvent {
    /// The bucket's name and id.
    pub bucket: String,
    #[serde(with = "serde_bytes")]
    pub bucket_id: Vec<u8>,
    pub key: String,
    /// The version's id, in a bucket that was ever versioned.
    pub version_id: Option<String>,
    /// `s3:ObjectCreated:Put`, …
    pub event: String,
    pub size: u64,
    /// Hex MD5 (or multipart ETag), without quotes; empty for removals.
    pub etag: String,
    /// When the change was made (ms since the epoch).
    pub time_msec: u64,
    /// The rule that selected it.
    pub rule_id: String,
    pub target: String,
    /// When this node queued it (ms): not part of its id.
    pub queued_msec: u64,
}

/// A change of an object row, as the object table's hook gives it.
pub(crate) struct Change<'a> {
    /// The row's partition key (its bucket's id) and sort key.
    pub bucket_id: &'a [u8],
    pub sort: &'a [u8],
    /// The row after the change: its version id, size and ETag.
    pub version: &'a VersionId,
    pub size: u64,
    pub etag: &'a str,
}

/// The object table's part of the hook: queues the events of `change`
/// (`events`: the S3 events it is, with their times,
/// `ObjectRow::events_since`) that the bucket's rules select, in the row's
/// transaction. A bucket without rules costs one point read: `events` is
/// then not computed. Idempotent: a change merged twice queues the same
/// keys.
pub(crate) fn tx_queue_events(
    tx: &mut Tx<'_>,
    change: &Change<'_>,
    events: impl FnOnce() -> Vec<(&'static str, u64)>,
) -> std::result::Result<(), DbError> {
    let Change {
        bucket_id,
        sort,
        version,
        size,
        etag,
    } = *change;
    let Some(raw) = tx.get(NOTIFY_RULES_TREE, bucket_id)? else {
        return Ok(());
    };
    let Ok(rules) = rmp_serde::from_slice::<BucketRules>(&raw) else {
        return Ok(());
    };
    let now = hangar_util::time::now_msec();
    let (key_bytes, version_suffix) = split_sort_key(sort);
    let Ok(key) = std::str::from_utf8(key_bytes) else {
        return Ok(());
    };
    let version_id = match version_suffix {
        Some(_) => Some(VersionRef::of_row(sort, version).to_string()),
        None if rules.versioned => Some(VersionRef::Null.to_string()),
        None => None,
    };
    for (event, time_msec) in events() {
        // A change this node merges long after it was made (anti-entropy
        // after an absence) was queued by the replicas that took it then.
        if now.saturating_sub(time_msec) > LATE.as_millis() as u64 {
            continue;
        }
        for rule in rules.rules.iter().filter(|r| r.selects(event, key)) {
            let mut h = blake3::Hasher::new_derive_key("hangar 2026-12-07 notification event");
            for part in [
                bucket_id,
                sort,
                event.as_bytes(),
                rule.id.as_bytes(),
                &time_msec.to_be_bytes(),
                version,
            ] {
                h.update(&(part.len() as u64).to_be_bytes());
                h.update(part);
            }
            let mut k = target_prefix(&rule.target).to_vec();
            k.extend_from_slice(&time_msec.to_be_bytes());
            k.extend_from_slice(&h.finalize().as_bytes()[..16]);
            // Queued already, or delivered already (this node was told
            // before it merged the change).
            if tx.get(NOTIFY_QUEUE_TREE, &k)?.is_some() || tx.get(NOTIFY_ACKED_TREE, &k)?.is_some()
            {
                continue;
            }
            let count = counter(tx, COUNT)?;
            if count >= MAX_QUEUED {
                let dropped = counter(tx, DROPPED)?;
                tx.put(
                    NOTIFY_STATE_TREE,
                    DROPPED.to_vec(),
                    (dropped + 1).to_be_bytes().to_vec(),
                );
                continue;
            }
            let ev = QueuedEvent {
                bucket: rules.name.clone(),
                bucket_id: bucket_id.to_vec(),
                key: key.to_owned(),
                version_id: version_id.clone(),
                event: event.to_owned(),
                size,
                etag: etag.to_owned(),
                time_msec,
                rule_id: rule.id.clone(),
                target: rule.target.clone(),
                queued_msec: now,
            };
            let v = rmp_serde::to_vec_named(&ev).expect("events encode");
            tx.put(NOTIFY_QUEUE_TREE, k, v);
            tx.put(
                NOTIFY_STATE_TREE,
                COUNT.to_vec(),
                (count + 1).to_be_bytes().to_vec(),
            );
        }
    }
    Ok(())
}

/// The bucket table's part of the hook: keeps the local index of the
/// rules of bucket `id` in step with its row (`None`: a bucket deleted or
/// without rules).
pub(crate) fn tx_index_rules(
    tx: &mut Tx<'_>,
    id: [u8; 32],
    entry: Option<BucketRules>,
) -> std::result::Result<(), DbError> {
    match entry {
        Some(entry) => tx.put(
            NOTIFY_RULES_TREE,
            id.to_vec(),
            rmp_serde::to_vec_named(&entry).expect("rules encode"),
        ),
        None => {
            if tx.get(NOTIFY_RULES_TREE, &id)?.is_some() {
                tx.delete(NOTIFY_RULES_TREE, id.to_vec());
            }
        }
    }
    Ok(())
}

/// The layout partition of a bucket's object rows: the object table's
/// (the default of `hangar_table::Schema::layout_partition`; a test holds
/// them equal).
pub(crate) fn partition_of_bucket(bucket_id: &[u8]) -> hangar_layout::Partition {
    hangar_table::schema::layout_partition_of(bucket_id)
}

fn counter(tx: &Tx<'_>, name: &[u8]) -> std::result::Result<u64, DbError> {
    Ok(tx
        .get(NOTIFY_STATE_TREE, name)?
        .and_then(|v| Some(u64::from_be_bytes(v.as_slice().try_into().ok()?)))
        .unwrap_or(0))
}

/// Removes the queued events `keys` that are still there, in one
/// transaction.
async fn remove(db: &Db, keys: Vec<Vec<u8>>) -> Result<()> {
    let now = hangar_util::time::now_msec().to_be_bytes().to_vec();
    db.write(move |tx| {
        let mut removed = 0u64;
        for k in keys {
            tx.put(NOTIFY_ACKED_TREE, k.clone(), now.clone());
            if tx.get(NOTIFY_QUEUE_TREE, &k)?.is_some() {
                tx.delete(NOTIFY_QUEUE_TREE, k);
                removed += 1;
            }
        }
        let count = counter(tx, COUNT)?.saturating_sub(removed);
        tx.put(
            NOTIFY_STATE_TREE,
            COUNT.to_vec(),
            count.to_be_bytes().to_vec(),
        );
        Ok::<_, crate::ModelError>(())
    })
    .await
}

/// An event of the queue, with its key.
#[derive(Debug, Clone)]
pub struct Queued {
    pub key: Vec<u8>,
    pub event: QueuedEvent,
}

impl Queued {
    /// S3's `sequencer` of the event: its time, 16 hex digits (a key's
    /// row times strictly increase, so they order its events).
    pub fn sequencer(&self) -> String {
        format!("{:016X}", self.event.time_msec)
    }
}

/// Tells a replica that events were delivered: it drops its copies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliveredRequest {
    pub keys: Vec<serde_bytes::ByteBuf>,
}

struct DeliveredHandler {
    db: Db,
}

#[async_trait]
impl Handler<DeliveredRequest, ()> for DeliveredHandler {
    async fn handle(
        &self,
        req: Request<DeliveredRequest>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        // Anything but a queue key's length is not one of ours.
        let keys = req
            .msg
            .keys
            .into_iter()
            .map(|k| k.into_vec())
            .filter(|k| k.len() == KEY_LEN)
            .take(4096)
            .collect();
        remove(&self.db, keys).await.map_err(HandlerError::new)?;
        Ok(Response::new(()))
    }
}

/// The notification queue of one node, as the delivery worker sees it.
pub struct Notifications {
    db: Db,
    cluster: hangar_cluster::Cluster,
    delivered: Arc<hangar_net::Endpoint<DeliveredRequest, ()>>,
}

impl Notifications {
    pub(crate) fn start(db: Db, cluster: &hangar_cluster::Cluster) -> Result<Notifications> {
        let delivered = cluster
            .mesh()
            .endpoint(PATH)
            .map_err(hangar_table::TableError::from)?;
        delivered.set_handler(DeliveredHandler { db: db.clone() }, RPC_QUEUE);
        Ok(Notifications {
            db,
            cluster: cluster.clone(),
            delivered,
        })
    }

    /// Up to `limit` queued events of `target` this node should send
    /// now, oldest first: those of the partitions whose first live replica
    /// is this node (after [`TAKEOVER`] when that is not the first
    /// replica), and the copies no one acknowledged within [`ORPHAN`] (see
    /// the module's doc). It looks at no more than [`SCAN`] events, so
    /// that a long backlog (a target down, copies waiting for their
    /// sender's acknowledgement) costs each round a bounded read; a target
    /// in its backoff is not asked at all.
    pub async fn due(&self, target: &str, limit: usize, now_msec: u64) -> Result<Vec<Queued>> {
        use std::ops::Bound;
        let prefix = target_prefix(target);
        let mut end = prefix.to_vec();
        end.push(0xff);
        let me = self.cluster.id();
        let mut senders = std::collections::HashMap::new();
        let mut out = Vec::new();
        let page = self
            .db
            .range_async(
                NOTIFY_QUEUE_TREE,
                Bound::Included(prefix.to_vec()),
                Bound::Excluded(end),
                false,
                SCAN,
            )
            .await?;
        for (key, value) in page {
            let Ok(event) = rmp_serde::from_slice::<QueuedEvent>(&value) else {
                continue;
            };
            let age = Duration::from_millis(now_msec.saturating_sub(event.queued_msec));
            // A backlog is mostly a few buckets: each one's sender is
            // looked up once per round.
            let (first, sender) = *senders.entry(event.bucket_id.clone()).or_insert_with(|| {
                let nodes = self
                    .cluster
                    .read_nodes_of_partition(partition_of_bucket(&event.bucket_id));
                let sender = nodes.iter().copied().find(|n| self.cluster.is_up(*n));
                (nodes.first() == Some(&me), sender)
            });
            let send = match sender {
                Some(s) if s == me => first || age >= TAKEOVER,
                Some(_) => age >= ORPHAN,
                None => true,
            };
            if send {
                out.push(Queued { key, event });
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Drops `events`, delivered, from this node's queue, and tells the
    /// other replicas of their partitions to drop theirs (best effort: a
    /// replica that does not hear it sends its copy later, a duplicate).
    pub async fn delivered(&self, events: &[Queued]) -> Result<()> {
        remove(&self.db, events.iter().map(|q| q.key.clone()).collect()).await?;
        let me = self.cluster.id();
        let mut by_node: std::collections::BTreeMap<_, Vec<serde_bytes::ByteBuf>> =
            Default::default();
        for q in events {
            let p = partition_of_bucket(&q.event.bucket_id);
            for n in self.cluster.read_nodes_of_partition(p) {
                if n != me {
                    by_node
                        .entry(n)
                        .or_default()
                        .push(serde_bytes::ByteBuf::from(q.key.clone()));
                }
            }
        }
        let calls = by_node.into_iter().map(|(n, keys)| {
            let ep = self.delivered.clone();
            async move {
                let opts = hangar_net::CallOpts {
                    timeout: Some(Duration::from_secs(5)),
                    ..Default::default()
                };
                if let Err(e) = ep.call(n, DeliveredRequest { keys }, opts).await {
                    tracing::debug!("notify: node {n} did not hear of delivered events: {e}");
                }
            }
        });
        futures::future::join_all(calls).await;
        Ok(())
    }

    /// Forgets the delivered events' keys kept longer than [`ACKED_FOR`]
    /// (a pass over the kept keys, a page at a time); returns how many.
    pub async fn forget_delivered(&self, now_msec: u64) -> Result<u64> {
        use std::ops::Bound;
        let mut from = Bound::Unbounded;
        let mut forgotten = 0u64;
        loop {
            let page = self
                .db
                .range_async(
                    NOTIFY_ACKED_TREE,
                    from.clone(),
                    Bound::Unbounded,
                    false,
                    1024,
                )
                .await?;
            let n = page.len();
            let old: Vec<Vec<u8>> = page
                .into_iter()
                .filter_map(|(k, v)| {
                    from = Bound::Excluded(k.clone());
                    // A value that is no time is forgotten too.
                    let at = v.as_slice().try_into().map_or(0, u64::from_be_bytes);
                    (now_msec.saturating_sub(at) > ACKED_FOR.as_millis() as u64).then_some(k)
                })
                .collect();
            forgotten += old.len() as u64;
            if !old.is_empty() {
                self.db
                    .write(move |tx| {
                        for k in old {
                            tx.delete(NOTIFY_ACKED_TREE, k);
                        }
                        Ok::<_, crate::ModelError>(())
                    })
                    .await?;
            }
            if n < 1024 {
                return Ok(forgotten);
            }
        }
    }

    /// Events queued on this node, and events dropped because the queue
    /// was full, since the store was created.
    pub async fn counters(&self) -> Result<(u64, u64)> {
        let get = |name: &'static [u8]| async move {
            Ok::<_, crate::ModelError>(
                self.db
                    .get_async(NOTIFY_STATE_TREE, name.to_vec())
                    .await?
                    .and_then(|v| Some(u64::from_be_bytes(v.as_slice().try_into().ok()?)))
                    .unwrap_or(0),
            )
        };
        Ok((get(COUNT).await?, get(DROPPED).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_their_events() {
        assert!(event_matches("s3:ObjectCreated:*", "s3:ObjectCreated:Put"));
        assert!(event_matches(
            "s3:ObjectCreated:Put",
            "s3:ObjectCreated:Put"
        ));
        assert!(!event_matches(
            "s3:ObjectCreated:Put",
            "s3:ObjectCreated:Copy"
        ));
        assert!(!event_matches("s3:ObjectRemoved:*", "s3:ObjectCreated:Put"));
    }

    #[test]
    fn a_rule_selects_by_event_prefix_and_suffix() {
        let r = NotificationRule {
            id: "r".into(),
            kind: DestinationKind::Queue,
            target: "arn".into(),
            events: vec!["s3:ObjectCreated:*".into()],
            prefix: "images/".into(),
            suffix: ".jpg".into(),
        };
        assert!(r.selects("s3:ObjectCreated:Put", "images/a.jpg"));
        assert!(!r.selects("s3:ObjectCreated:Put", "images/a.png"));
        assert!(!r.selects("s3:ObjectCreated:Put", "docs/a.jpg"));
        assert!(!r.selects("s3:ObjectRemoved:Delete", "images/a.jpg"));
    }
}
