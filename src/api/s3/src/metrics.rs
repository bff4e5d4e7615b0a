//! Request metrics of the S3 endpoint.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

/// Counts and times every S3 request by method and status.
pub struct S3Metrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<MethodLabel, Histogram>,
    /// Connections past `s3_max_connections`, answered 503 and closed.
    pub(crate) refused_connections: Counter,
}

impl Default for S3Metrics {
    fn default() -> Self {
        S3Metrics {
            requests: Family::default(),
            // 100 µs to ~105 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-4, 2.0, 21))
            }),
            refused_connections: Counter::default(),
        }
    }
}

impl S3Metrics {
    /// Adds the metrics to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "hangar_s3_requests",
            "S3 requests answered, by method and status",
            self.requests.clone(),
        );
        registry.register(
            "hangar_s3_request_duration_seconds",
            "Time from request head to response head, by method",
            self.duration.clone(),
        );
        registry.register(
            "hangar_s3_refused_connections",
            "Connections past s3_max_connections, answered 503 SlowDown and closed",
            self.refused_connections.clone(),
        );
    }

    pub(crate) fn record(&self, method: &http::Method, status: http::StatusCode, secs: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.as_str().to_owned(),
                status: status.as_u16(),
            })
            .inc();
        self.duration
            .get_or_create(&MethodLabel {
                method: method.as_str().to_owned(),
            })
            .observe(secs);
    }
}
