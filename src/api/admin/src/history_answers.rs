//! Typed answers of the history operations (`GetClusterHistory`,
//! `GetBucketHistory`): the series the web console draws, as the node's
//! history ring keeps them ([`crate::history`]). The same structs travel
//! between nodes on `hangar/admin/history` (MessagePack) and to the
//! console (JSON); every field has a default when read.

use serde::{Deserialize, Serialize};

/// One node's recent history: a point every `interval_secs`, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeHistory {
    pub interval_secs: u64,
    pub points: Vec<NodePoint>,
    /// The long tasks under way on the node, from the same points.
    pub tasks: Vec<TaskProgress>,
}

/// What a node did over one interval, and its state at the interval's end.
/// Rates are per second over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodePoint {
    /// The interval's end, Unix seconds, a multiple of the interval.
    pub t: u64,
    /// S3 requests answered.
    pub requests: f64,
    /// S3 answers with a status of 400 or more, `SlowDown` included.
    pub errors: f64,
    /// `503 SlowDown` answers (overload refusals).
    pub slowdowns: f64,
    /// Request body bytes read.
    pub bytes_in: f64,
    /// Response body bytes sent.
    pub bytes_out: f64,
    /// Per operation answered in the interval, its latency.
    pub latency: Vec<OpLatency>,
    pub data_avail: Option<u64>,
    pub data_total: Option<u64>,
    pub metadata_avail: Option<u64>,
    pub metadata_total: Option<u64>,
    /// Blocks queued for the resync worker.
    pub resync_queue: Option<u64>,
    /// Blocks the resync worker checked (fetched, handed over or found in
    /// place).
    pub resync_checked: f64,
    /// Share of the hash space the scrub pass under way covered, 0 to 1.
    pub scrub_progress: Option<f64>,
    /// Partitions whose tables the last anti-entropy pass found behind
    /// (rebalancing after a layout change, or a node catching up).
    pub partitions_pending: Option<u64>,
    /// Each background worker: items handled per second, and its queue.
    pub workers: Vec<WorkerPoint>,
}

/// One operation's latency over an interval, from its histogram.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpLatency {
    pub op: String,
    /// Requests per second.
    pub rate: f64,
    pub p50_secs: f64,
    pub p99_secs: f64,
}

/// A background worker over an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerPoint {
    pub name: String,
    pub processed: f64,
    pub queue: Option<u64>,
}

/// A long task's progress, rate and time left, as the console's workers
/// page draws it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskProgress {
    /// `resync`, `scrub`, `rebalance`, or a worker's name.
    pub name: String,
    /// What `remaining` and `rate` count (`blocks`, `partitions`, `items`,
    /// or `pass` for a share of a scrub pass).
    pub unit: String,
    /// Done of the work seen in the window, 0 to 1; `None` when unknown.
    pub done: Option<f64>,
    /// Units per second over the last minute.
    pub rate: f64,
    pub remaining: Option<f64>,
    /// `remaining / rate`; `None` when nothing moves.
    pub eta_secs: Option<f64>,
}

/// `GetClusterHistory`: every node's history over the window asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterHistory {
    pub window_secs: u64,
    pub nodes: Vec<NodeSeries>,
}

/// One node of [`ClusterHistory`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeSeries {
    /// The node id, 64 hex digits.
    pub id: String,
    pub hostname: Option<String>,
    pub is_up: bool,
    pub is_self: bool,
    pub history: Option<NodeHistory>,
    /// Why there is no history: down, or no answer in time.
    pub error: Option<String>,
}

/// A bucket's stored objects and bytes at one time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsagePoint {
    /// Unix seconds, a multiple of the bucket interval.
    pub t: u64,
    pub objects: u64,
    pub bytes: u64,
}

/// `GetBucketHistory`: a bucket's usage over the window asked, and its
/// quotas (the lines the console draws over it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketHistory {
    pub bucket: String,
    pub id: String,
    pub interval_secs: u64,
    pub points: Vec<UsagePoint>,
    pub max_size: Option<u64>,
    pub max_objects: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi_check::{fields, properties_in_doc, required_in_doc};

    /// doc/admin-api.yaml describes each history answer field by field:
    /// every field the type writes is listed, required, and nothing else.
    #[test]
    fn the_document_has_every_field_of_every_history_answer() {
        let cases: Vec<(Vec<String>, &[&str])> = vec![
            (fields(ClusterHistory::default()), &["ClusterHistory"]),
            (fields(NodeSeries::default()), &["ClusterHistory", "nodes"]),
            (fields(NodeHistory::default()), &["NodeHistory"]),
            (fields(NodePoint::default()), &["NodePoint"]),
            (fields(OpLatency::default()), &["NodePoint", "latency"]),
            (fields(WorkerPoint::default()), &["NodePoint", "workers"]),
            (fields(TaskProgress::default()), &["TaskProgress"]),
            (fields(BucketHistory::default()), &["BucketHistory"]),
            (fields(UsagePoint::default()), &["BucketHistory", "points"]),
        ];
        for (written, path) in cases {
            assert_eq!(written, required_in_doc(path), "required of {path:?}");
            assert_eq!(written, properties_in_doc(path), "properties of {path:?}");
        }
    }
}
