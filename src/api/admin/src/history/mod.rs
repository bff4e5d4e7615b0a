//! A node's recent history, for the web console's plots: a bounded ring
//! in memory of what the node's metrics said every [`INTERVAL_SECS`] over
//! the last hour, and of the usage counters of the buckets it stores every
//! [`BUCKET_INTERVAL_SECS`]. No database: the history is gone with the
//! process, and a node that restarts draws from its start.
//!
//! Points are taken at wall-clock multiples of the interval, so that the
//! points of different nodes line up and a bucket's counters, held by
//! several nodes, merge slot by slot. Memory is bounded: [`CAPACITY`]
//! points of at most [`point::MAX_OPS`] operations each, and at most
//! [`MAX_BUCKETS`] buckets of [`BUCKET_CAPACITY`] points.
//!
//! Other nodes' histories are asked over the mesh ([`rpc`]), so one node's
//! admin API answers for the whole cluster; an answer over a long window
//! is thinned to coarser points ([`thin`]).

pub mod point;
pub mod progress;
pub mod rpc;
pub mod scrape;
pub mod thin;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_db::Db;
use prometheus_client::registry::Registry;

use crate::history_answers::{NodeHistory, NodePoint, UsagePoint};
use scrape::Scrape;

/// Time between two points of a node's history.
pub const INTERVAL_SECS: u64 = 5;
/// Points kept: one hour.
pub const CAPACITY: usize = 720;
/// Time between two points of a bucket's usage.
pub const BUCKET_INTERVAL_SECS: u64 = 30;
/// Usage points kept per bucket: one hour.
pub const BUCKET_CAPACITY: usize = 120;
/// Buckets whose usage is followed; more are not (the first ones seen
/// stay followed).
pub const MAX_BUCKETS: usize = 1000;

#[derive(Default)]
struct Rings {
    points: VecDeque<NodePoint>,
    buckets: BTreeMap<Vec<u8>, VecDeque<UsagePoint>>,
}

/// This node's history, shared by its sampler and its readers.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Rings>>);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Sleeps until the next wall-clock multiple of `every` seconds; returns it.
async fn next_slot(every: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let slot = (now.as_secs() / every + 1) * every;
    tokio::time::sleep(Duration::from_secs(slot).saturating_sub(now)).await;
    slot
}

impl History {
    /// Starts following `registry` (the node's metrics) and the bucket
    /// counters in `db`, until the process ends.
    pub fn start(&self, registry: Arc<Registry>, db: Db) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut prev: Option<(Scrape, Instant)> = None;
            loop {
                let t = next_slot(INTERVAL_SECS).await;
                let mut text = String::new();
                if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
                    tracing::warn!("history: encoding the metrics: {e}");
                    continue;
                }
                let cur = Scrape::parse(&text, point::FAMILIES);
                let at = Instant::now();
                if let Some((p, then)) = &prev {
                    let secs = at.duration_since(*then).as_secs_f64();
                    me.push(point::point(p, &cur, secs, t));
                }
                prev = Some((cur, at));
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let t = next_slot(BUCKET_INTERVAL_SECS).await;
                match hangar_model::usage::local_all(&db).await {
                    Ok(all) => me.push_usage(t, &all),
                    Err(e) => tracing::debug!("history: bucket counters: {e}"),
                }
            }
        });
    }

    fn rings(&self) -> std::sync::MutexGuard<'_, Rings> {
        self.0.lock().expect("history lock")
    }

    fn push(&self, p: NodePoint) {
        let mut r = self.rings();
        if r.points.len() == CAPACITY {
            r.points.pop_front();
        }
        r.points.push_back(p);
    }

    fn push_usage(&self, t: u64, all: &BTreeMap<Vec<u8>, hangar_model::usage::Usage>) {
        let mut r = self.rings();
        // A followed bucket absent from the counters stores nothing here
        // any more (emptied, or its partition left this node).
        for (id, ring) in r.buckets.iter_mut() {
            if !all.contains_key(id) {
                ring.push_back(UsagePoint {
                    t,
                    ..UsagePoint::default()
                });
            }
        }
        for (id, u) in all {
            if !r.buckets.contains_key(id) && r.buckets.len() >= MAX_BUCKETS {
                continue;
            }
            r.buckets
                .entry(id.clone())
                .or_default()
                .push_back(UsagePoint {
                    t,
                    objects: u.objects,
                    bytes: u.bytes,
                });
        }
        r.buckets.retain(|_, ring| {
            while ring.len() > BUCKET_CAPACITY {
                ring.pop_front();
            }
            ring.iter().any(|p| p.objects > 0 || p.bytes > 0)
        });
    }

    /// The points of the last `secs` seconds, at most
    /// [`thin::MAX_ANSWER_POINTS`] of them (coarser for long windows), and
    /// the tasks they show.
    pub fn node(&self, secs: u64) -> NodeHistory {
        let since = now_secs().saturating_sub(secs);
        let window: Vec<NodePoint> = self
            .rings()
            .points
            .iter()
            .filter(|p| p.t > since)
            .cloned()
            .collect();
        let tasks = progress::tasks(&window);
        let step = thin::step(secs, INTERVAL_SECS);
        NodeHistory {
            interval_secs: step,
            points: thin::thin(window, INTERVAL_SECS, step),
            tasks,
        }
    }

    /// The usage points of bucket `id` over the last `secs` seconds.
    pub fn bucket(&self, id: &[u8], secs: u64) -> Vec<UsagePoint> {
        let since = now_secs().saturating_sub(secs);
        self.rings()
            .buckets
            .get(id)
            .map(|ring| ring.iter().filter(|p| p.t > since).copied().collect())
            .unwrap_or_default()
    }
}

/// Several nodes' usage points of one bucket as one series: per slot, the
/// largest of each counter (replicas that disagree while they sync, as a
/// usage read takes them).
pub fn merge_usage(series: impl IntoIterator<Item = Vec<UsagePoint>>) -> Vec<UsagePoint> {
    let mut by_t: BTreeMap<u64, UsagePoint> = BTreeMap::new();
    for s in series {
        for p in s {
            let e = by_t.entry(p.t).or_insert(UsagePoint {
                t: p.t,
                ..UsagePoint::default()
            });
            e.objects = e.objects.max(p.objects);
            e.bytes = e.bytes.max(p.bytes);
        }
    }
    by_t.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_model::usage::Usage;

    #[test]
    fn the_ring_keeps_an_hour() {
        let h = History::default();
        let now = now_secs() / INTERVAL_SECS * INTERVAL_SECS;
        for i in 0..(CAPACITY as u64 + 10) {
            h.push(NodePoint {
                t: now - (CAPACITY as u64 + 10 - i) * INTERVAL_SECS,
                ..NodePoint::default()
            });
        }
        assert_eq!(h.rings().points.len(), CAPACITY);
        let last_minute = h.node(60);
        assert_eq!(
            last_minute.points.len(),
            11,
            "{:?}",
            last_minute.points.len()
        );
        assert_eq!(last_minute.interval_secs, INTERVAL_SECS);
        let hour = h.node(3600);
        assert_eq!(hour.interval_secs, 20);
        assert!(
            (170..=thin::MAX_ANSWER_POINTS as usize + 1).contains(&hour.points.len()),
            "{}",
            hour.points.len()
        );
    }

    #[test]
    fn buckets_are_bounded_and_forgotten_once_empty() {
        let h = History::default();
        let usage = |n: u64| Usage {
            objects: n,
            bytes: n * 10,
        };
        let all: BTreeMap<Vec<u8>, Usage> = (0..(MAX_BUCKETS as u64 + 5))
            .map(|i| (i.to_be_bytes().to_vec(), usage(i + 1)))
            .collect();
        let t = now_secs();
        h.push_usage(t, &all);
        assert_eq!(h.rings().buckets.len(), MAX_BUCKETS);
        let id = 3u64.to_be_bytes().to_vec();
        assert_eq!(
            h.bucket(&id, 3600),
            vec![UsagePoint {
                t,
                objects: 4,
                bytes: 40
            }]
        );
        // Emptied: zero points until no point of the window holds data.
        for i in 1..=(BUCKET_CAPACITY as u64 + 1) {
            h.push_usage(t + i, &BTreeMap::new());
        }
        assert!(h.rings().buckets.is_empty());
    }

    #[test]
    fn usage_of_several_nodes_merges_slot_by_slot() {
        let p = |t, objects| UsagePoint {
            t,
            objects,
            bytes: objects,
        };
        let merged = merge_usage([vec![p(30, 1), p(60, 5)], vec![p(60, 4), p(90, 6)]]);
        assert_eq!(merged, vec![p(30, 1), p(60, 5), p(90, 6)]);
    }
}
