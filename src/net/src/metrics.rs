//! The mesh's metrics, kept with `prometheus-client` so that the admin API
//! can register them in its registry and serve them on `/metrics`
//! (doc/metrics.md lists them).
//!
//! Label values are bounded: `endpoint` is the path of an endpoint this
//! node registered (a path a peer sends that names none is counted as
//! `unknown`), `peer` a node's short id (peers are the cluster's nodes).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::error::NetError;
use crate::identity::NodeId;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    endpoint: String,
    peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    endpoint: String,
    peer: String,
    kind: String,
}

/// The `endpoint` label of calls a peer made on a path no endpoint of
/// this node has: such paths are the peer's to choose, so they are not
/// labels.
pub(crate) const UNKNOWN_ENDPOINT: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PeerLabels {
    peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: String,
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~3.3 s, doubling.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// Counters, gauges and histograms of one node's mesh. Cheap to clone (the
/// families share their storage).
#[derive(Clone)]
pub struct NetMetrics {
    calls: Family<CallLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    timeouts: Family<CallLabels, Counter>,
    latency: Family<CallLabels, Histogram, fn() -> Histogram>,
    rejected: Family<EndpointLabels, Counter>,
    bytes_sent: Family<CallLabels, Counter>,
    bytes_received: Family<CallLabels, Counter>,
    peer_up: Family<PeerLabels, Gauge>,
    peer_rtt: Family<PeerLabels, Gauge<f64, AtomicU64>>,
    handshakes_pending: Gauge,
    window_growth: Gauge,
    handshakes_refused: Counter,
    handshakes_timed_out: Counter,
    handshakes_failed: Counter,
}

impl Default for NetMetrics {
    fn default() -> Self {
        NetMetrics {
            calls: Family::default(),
            errors: Family::default(),
            timeouts: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            rejected: Family::default(),
            bytes_sent: Family::default(),
            bytes_received: Family::default(),
            peer_up: Family::default(),
            peer_rtt: Family::default(),
            handshakes_pending: Gauge::default(),
            window_growth: Gauge::default(),
            handshakes_refused: Counter::default(),
            handshakes_timed_out: Counter::default(),
            handshakes_failed: Counter::default(),
        }
    }
}

fn call_labels(endpoint: &str, peer: &NodeId) -> CallLabels {
    CallLabels {
        endpoint: endpoint.to_string(),
        peer: peer.short(),
    }
}

pub(crate) fn peer_labels(peer: &NodeId) -> PeerLabels {
    PeerLabels { peer: peer.short() }
}

impl NetMetrics {
    /// Adds every metric of the mesh to `registry` (names prefixed
    /// `hangar_rpc_`).
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("hangar_rpc");
        r.register(
            "calls",
            "RPC calls this node made, per endpoint and peer",
            self.calls.clone(),
        );
        r.register(
            "errors",
            "RPC calls this node made that failed, per endpoint, peer and error kind",
            self.errors.clone(),
        );
        r.register(
            "timeouts",
            "RPC calls this node made that hit their deadline, per endpoint and peer",
            self.timeouts.clone(),
        );
        r.register(
            "call_duration_seconds",
            "Latency of the RPC calls this node made, per endpoint and peer",
            self.latency.clone(),
        );
        r.register(
            "rejected_overloaded",
            "Incoming RPC calls refused because the endpoint's handler queue was full",
            self.rejected.clone(),
        );
        r.register(
            "sent_bytes",
            "Message and body bytes sent to the peer, per endpoint (calls made and answers given)",
            self.bytes_sent.clone(),
        );
        r.register(
            "received_bytes",
            "Message and body bytes received from the peer, per endpoint (answers to calls made and calls served)",
            self.bytes_received.clone(),
        );
        r.register(
            "peer_up",
            "1 if the peer answers pings, else 0",
            self.peer_up.clone(),
        );
        r.register(
            "peer_rtt_seconds",
            "Average ping round-trip time to the peer",
            self.peer_rtt.clone(),
        );
        r.register(
            "handshakes_pending",
            "incoming handshakes in progress",
            self.handshakes_pending.clone(),
        );
        r.register(
            "flow_window_growth_bytes",
            "bytes by which the connections' flow-control windows have grown beyond the configured ones, together (at most the window budget)",
            self.window_growth.clone(),
        );
        r.register(
            "handshakes_refused",
            "incoming handshakes refused at once (too many in progress, in all or from one address)",
            self.handshakes_refused.clone(),
        );
        r.register(
            "handshakes_timed_out",
            "incoming handshakes dropped for not completing within the ping timeout",
            self.handshakes_timed_out.clone(),
        );
        r.register(
            "handshakes_failed",
            "incoming connections refused after their handshake began (timed out, TLS error, bad identity)",
            self.handshakes_failed.clone(),
        );
    }

    /// The metrics in Prometheus text format (for tests and the bench tool).
    pub fn encode_text(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }

    pub(crate) fn record_call(
        &self,
        endpoint: &str,
        peer: &NodeId,
        elapsed: Duration,
        error: Option<&NetError>,
    ) {
        let labels = call_labels(endpoint, peer);
        self.calls.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if let Some(e) = error {
            if matches!(e, NetError::Timeout { .. }) {
                self.timeouts.get_or_create(&labels).inc();
            }
            self.errors
                .get_or_create(&ErrorLabels {
                    endpoint: labels.endpoint,
                    peer: labels.peer,
                    kind: e.kind().to_string(),
                })
                .inc();
        }
    }

    pub(crate) fn record_rejected(&self, endpoint: &str) {
        self.rejected
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_string(),
            })
            .inc();
    }

    /// The counter of bytes sent to `peer` on `endpoint` (a registered
    /// path, or [`UNKNOWN_ENDPOINT`]).
    pub(crate) fn sent(&self, endpoint: &str, peer: &NodeId) -> Counter {
        self.bytes_sent
            .get_or_create(&call_labels(endpoint, peer))
            .clone()
    }

    /// The counter of bytes received from `peer` on `endpoint`.
    pub(crate) fn received(&self, endpoint: &str, peer: &NodeId) -> Counter {
        self.bytes_received
            .get_or_create(&call_labels(endpoint, peer))
            .clone()
    }

    pub(crate) fn set_peer_up(&self, peer: &NodeId, up: bool) {
        self.peer_up
            .get_or_create(&peer_labels(peer))
            .set(up as i64);
    }

    pub(crate) fn set_peer_rtt(&self, peer: &NodeId, rtt: Duration) {
        self.peer_rtt
            .get_or_create(&peer_labels(peer))
            .set(rtt.as_secs_f64());
    }

    pub(crate) fn set_window_growth(&self, bytes: u64) {
        self.window_growth.set(bytes as i64);
    }

    pub(crate) fn set_handshakes_pending(&self, pending: usize) {
        self.handshakes_pending.set(pending as i64);
    }

    pub(crate) fn handshake_refused(&self) {
        self.handshakes_refused.inc();
    }

    pub(crate) fn handshake_timed_out(&self) {
        self.handshakes_timed_out.inc();
    }

    pub(crate) fn handshake_failed(&self) {
        self.handshakes_failed.inc();
    }
}
