//! Sends the bucket notification events this node is due to send
//! (`hangar_model::notification::Notifications::due`) to their targets
//! ([`crate::notify_targets`]): each event is one S3 event message
//! (`{"Records": [...]}`), delivered once its target accepted it.
//!
//! A target's events go out one at a time, oldest first, so that a key's
//! events arrive in the order of their sequencer; a failure stops that
//! target's events for this round and puts the target in a backoff (1 s,
//! doubling to 60 s) while the other targets go on. Only the configured
//! targets are asked for: the events of a target removed from the
//! configuration stay queued until it comes back. A target that is down
//! costs the PUTs nothing: their events wait in the queue, on disk.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hangar_model::Model;
use hangar_model::notification::Queued;

use crate::notify_targets::NotifyTarget;
use hangar_util::worker::{WorkerHandle, WorkerState};
use serde_json::json;

/// Events read from the queue in one round.
const ROUND: usize = 256;
/// How long a round waits when nothing was due.
const IDLE: Duration = Duration::from_millis(250);
/// How often the keys of delivered events kept past their time are
/// forgotten.
const FORGET_EVERY: Duration = Duration::from_secs(60);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The sender of one node's notification events, and its counters.
pub struct NotifyWorker {
    model: Arc<Model>,
    region: String,
    targets: BTreeMap<String, NotifyTarget>,
    /// Events delivered and failed attempts, by target id.
    by_target: std::sync::Mutex<BTreeMap<String, Counts>>,
    queued: AtomicU64,
    dropped: AtomicU64,
}

/// A target's counters since the node started.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub delivered: u64,
    pub failures: u64,
}

/// When a failing target is tried again, and how long the next wait is.
struct Backoff {
    until: Instant,
    next: Duration,
}

impl NotifyWorker {
    pub fn new(model: Arc<Model>, region: String, targets: &[NotifyTarget]) -> NotifyWorker {
        NotifyWorker {
            model,
            region,
            targets: targets.iter().map(|t| (t.arn(), t.clone())).collect(),
            by_target: std::sync::Mutex::new(
                targets
                    .iter()
                    .map(|t| (t.id().to_owned(), Counts::default()))
                    .collect(),
            ),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Events queued on this node, and events dropped because the queue
    /// was full.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.queued.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }

    /// Events delivered and failed attempts of each target, by its id.
    pub fn by_target(&self) -> Vec<(String, Counts)> {
        let m = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    fn count(&self, target: &str, f: impl FnOnce(&mut Counts)) {
        let mut m = self.by_target.lock().unwrap_or_else(|e| e.into_inner());
        f(m.entry(target.to_owned()).or_default());
    }

    /// Runs until the process ends, reporting to `worker`
    /// (`hangar worker list`: events sent, failures, queue length).
    pub async fn run(self: Arc<Self>, worker: WorkerHandle) {
        let mut backoff: BTreeMap<String, Backoff> = BTreeMap::new();
        let mut forgot_at = Instant::now();
        loop {
            if forgot_at.elapsed() >= FORGET_EVERY {
                forgot_at = Instant::now();
                let now = hangar_util::time::now_msec();
                if let Err(e) = self.model.notifications().forget_delivered(now).await {
                    worker.record_error(format!("forgetting delivered events: {e}"));
                }
            }
            if let Ok((queued, dropped)) = self.model.notifications().counters().await {
                self.queued.store(queued, Ordering::Relaxed);
                self.dropped.store(dropped, Ordering::Relaxed);
                worker.set_queue_length(Some(queued));
            }
            let now = Instant::now();
            let mut sent = Vec::new();
            for (arn, target) in &self.targets {
                if backoff.get(arn).is_some_and(|b| b.until > now) {
                    continue;
                }
                let events = match self
                    .model
                    .notifications()
                    .due(arn, ROUND, hangar_util::time::now_msec())
                    .await
                {
                    Ok(d) => d,
                    Err(e) => {
                        worker.record_error(format!("reading the queue: {e}"));
                        continue;
                    }
                };
                if events.is_empty() {
                    continue;
                }
                worker.set_state(WorkerState::Busy);
                let arn = arn.clone();
                let messages: Vec<Vec<u8>> = events
                    .iter()
                    .map(|q| {
                        serde_json::to_vec(&json!({ "Records": [self.record(q)] }))
                            .expect("events encode")
                    })
                    .collect();
                let (accepted, err) = target.send(&events, messages).await;
                self.count(target.id(), |c| c.delivered += accepted as u64);
                sent.extend(events.into_iter().take(accepted));
                match err {
                    None => {
                        backoff.remove(&arn);
                    }
                    Some(e) => {
                        self.count(target.id(), |c| c.failures += 1);
                        worker.record_error(format!("{}: {e}", target.id()));
                        tracing::warn!("notify: target {} failed: {e}", target.id());
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
            if sent.is_empty() {
                worker.set_state(WorkerState::Idle);
                tokio::time::sleep(IDLE).await;
            } else {
                let n = sent.len() as u64;
                if let Err(e) = self.model.notifications().delivered(&sent).await {
                    worker.record_error(format!("recording deliveries: {e}"));
                }
                worker.add_processed(n);
                worker.set_progress(format!("{n} events sent"), None);
            }
        }
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

/// A key as S3's event messages write it: URL-encoded, spaces as `+`.
fn event_key(key: &str) -> String {
    urlencoding::encode(key)
        .replace("%20", "+")
        .replace("%2F", "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_url_encoded_with_plus_for_spaces() {
        assert_eq!(event_key("a b/c+d.txt"), "a+b/c%2Bd.txt");
    }
}
