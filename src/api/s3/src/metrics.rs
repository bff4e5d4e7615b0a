//! Request metrics of the S3 endpoint (doc/metrics.md lists them).
//!
//! Every request is counted under its S3 operation (`op`, s3s's name for
//! it: `PutObject`, `GetObject`, ...), once the signature is checked and the
//! operation resolved ([`RequestOp`], set by the access check). A request
//! answered before that (a bad signature, a malformed request) is counted
//! as `op="unknown"`. An error answer is also counted by its S3 error code,
//! read from the XML body s3s made for it. Both label sets are bounded:
//! operations by s3s's list, codes by S3's (anything else is `Other`).

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::access_log::AccessLogs;
use crate::admission::RamBudget;
use crate::upload_gate::UploadGate;

/// The `op` label of a request answered before its operation was known.
pub const UNKNOWN_OP: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabel {
    op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    op: String,
    code: String,
}

/// The operation of one request, filled in by the access check (which
/// s3s runs for every request it resolved and authenticated) and read
/// when the answer is counted. Travels in the request's extensions.
#[derive(Clone, Default)]
pub struct RequestOp(Arc<OnceLock<String>>);

impl RequestOp {
    /// Records the request's operation (the first call wins).
    pub fn set(&self, op: &str) {
        let _ = self.0.set(op.to_owned());
    }

    fn get(&self) -> &str {
        self.0.get().map_or(UNKNOWN_OP, String::as_str)
    }

    /// The operation's name (`Unknown` before the access check named it).
    pub(crate) fn name(&self) -> &str {
        self.get()
    }
}

/// Counts, times and measures every S3 request by operation.
pub struct S3Metrics {
    requests: Family<OpLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: Family<OpLabel, Histogram>,
    received: Family<OpLabel, Counter>,
    sent: Family<OpLabel, Counter>,
    /// Connections past `s3_max_connections`, answered 503 and closed.
    pub(crate) refused_connections: Counter,
    /// Connections being served now.
    pub(crate) connections: Gauge,
}

impl Default for S3Metrics {
    fn default() -> Self {
        S3Metrics {
            requests: Family::default(),
            errors: Family::default(),
            // 100 µs to ~105 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-4, 2.0, 21))
            }),
            received: Family::default(),
            sent: Family::default(),
            refused_connections: Counter::default(),
            connections: Gauge::default(),
        }
    }
}

/// What a finished request contributes, once its answer's head is known.
pub(crate) struct Answered<'a> {
    pub op: &'a RequestOp,
    pub status: http::StatusCode,
    /// The answer's body when it is in memory (error answers are).
    pub body: Option<&'a [u8]>,
    pub secs: f64,
    /// Request body bytes read.
    pub received: u64,
}

impl S3Metrics {
    /// Adds the metrics to `registry`; `budget` is the S3 RAM budget and
    /// `uploads` the upload gate, whose refusals and use are read at each
    /// scrape.
    pub fn register(
        self: &Arc<Self>,
        registry: &mut Registry,
        budget: RamBudget,
        uploads: UploadGate,
    ) {
        registry.register(
            "hangar_s3_requests",
            "S3 requests answered, by operation",
            self.requests.clone(),
        );
        registry.register(
            "hangar_s3_errors",
            "S3 requests answered with an error (status 400 or more), by operation and S3 error code",
            self.errors.clone(),
        );
        registry.register(
            "hangar_s3_request_duration_seconds",
            "Time from request head to response head, by operation",
            self.duration.clone(),
        );
        registry.register(
            "hangar_s3_received_bytes",
            "Request body bytes read from clients (as sent, aws-chunked framing included), by operation",
            self.received.clone(),
        );
        registry.register(
            "hangar_s3_sent_bytes",
            "Response body bytes sent to clients, by operation",
            self.sent.clone(),
        );
        registry.register(
            "hangar_s3_connections",
            "S3 connections being served now",
            self.connections.clone(),
        );
        registry.register_collector(Box::new(BudgetCollector {
            budget,
            uploads,
            refused_connections: self.refused_connections.clone(),
        }));
    }

    /// Counts a request whose answer's head is ready.
    pub(crate) fn record(&self, a: Answered<'_>) {
        let op = OpLabel {
            op: a.op.get().to_owned(),
        };
        self.requests.get_or_create(&op).inc();
        self.duration.get_or_create(&op).observe(a.secs);
        if a.received > 0 {
            self.received.get_or_create(&op).inc_by(a.received);
        }
        if a.status.as_u16() >= 400 {
            self.errors
                .get_or_create(&ErrorLabels {
                    op: op.op.clone(),
                    code: error_code(a.status, a.body),
                })
                .inc();
        }
    }

    /// The counter of response bytes of `op`.
    pub(crate) fn sent_counter(&self, op: &RequestOp) -> Counter {
        self.sent
            .get_or_create(&OpLabel {
                op: op.get().to_owned(),
            })
            .clone()
    }
}

/// The S3 error code of an error answer: the `<Code>` of its XML body; an
/// answer without one (none is expected) is named by its status class.
fn error_code(status: http::StatusCode, body: Option<&[u8]>) -> String {
    let code = body
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| {
            let start = s.find("<Code>")? + "<Code>".len();
            let len = s[start..].find("</Code>")?;
            Some(&s[start..start + len])
        });
    match code {
        // S3's codes are short CamelCase words; anything else must not
        // become a label value.
        Some(c)
            if !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            c.to_owned()
        }
        Some(_) => "Other".to_owned(),
        None if status.is_server_error() => "Unknown5xx".to_owned(),
        None => "Unknown4xx".to_owned(),
    }
}

/// Registers the counters of the server access logs `logs` in `registry`,
/// read at each scrape.
pub fn register_access_logs(registry: &mut Registry, logs: Arc<AccessLogs>) {
    registry.register_collector(Box::new(AccessLogCollector(logs)));
}

struct AccessLogCollector(Arc<AccessLogs>);

impl std::fmt::Debug for AccessLogCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessLogCollector")
    }
}

impl Collector for AccessLogCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        for (name, help, v) in [
            (
                "hangar_s3_access_log_lines_written",
                "Server access log lines written into their target buckets",
                self.0.written(),
            ),
            (
                "hangar_s3_access_log_lines_dropped",
                "Server access log lines dropped: past the memory bound of the lines waiting for a flush, or their target could not be written",
                self.0.dropped(),
            ),
        ] {
            let c = ConstCounter::new(v);
            c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        let g = ConstGauge::new(self.0.waiting_bytes() as i64);
        g.encode(e.encode_descriptor(
            "hangar_s3_access_log_waiting_bytes",
            "Bytes of server access log lines waiting for the next flush (lost if the process dies)",
            None,
            g.metric_type(),
        )?)
    }
}

/// Registers the bucket notifications' counters in `registry`.
pub fn register_notifications(
    registry: &mut Registry,
    notify: Arc<crate::notify_worker::NotifyWorker>,
) {
    registry.register_collector(Box::new(NotifyCollector(notify)));
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabel {
    target: String,
}

struct NotifyCollector(Arc<crate::notify_worker::NotifyWorker>);

impl std::fmt::Debug for NotifyCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NotifyCollector")
    }
}

impl Collector for NotifyCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let (queued, dropped) = self.0.counters();
        let by_target = self.0.by_target();
        for (name, help, delivered) in [
            (
                "hangar_notify_delivered",
                "Bucket notification events this node delivered, by target id",
                true,
            ),
            (
                "hangar_notify_failures",
                "Failed attempts to deliver bucket notification events, by target id (each stops its target for a backoff)",
                false,
            ),
        ] {
            let c = ConstCounter::new(0u64);
            let mut f = e.encode_descriptor(name, help, None, c.metric_type())?;
            for (target, counts) in &by_target {
                let v = if delivered {
                    counts.delivered
                } else {
                    counts.failures
                };
                ConstCounter::new(v).encode(f.encode_family(&TargetLabel {
                    target: target.clone(),
                })?)?;
            }
        }
        let c = ConstCounter::new(dropped);
        c.encode(e.encode_descriptor(
            "hangar_notify_dropped",
            "Bucket notification events not queued because this node's queue was full",
            None,
            c.metric_type(),
        )?)?;
        let g = ConstGauge::new(queued as i64);
        g.encode(e.encode_descriptor(
            "hangar_notify_queued",
            "Bucket notification events queued on this node, waiting to be delivered (or for their sender to say they were)",
            None,
            g.metric_type(),
        )?)
    }
}

/// The S3 RAM budget and the refusals, read at scrape time.
#[derive(Debug)]
struct BudgetCollector {
    budget: RamBudget,
    uploads: UploadGate,
    refused_connections: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

impl Collector for BudgetCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let c = ConstCounter::new(0u64);
        let mut f = e.encode_descriptor(
            "hangar_s3_rejections",
            "S3 requests and connections refused with 503 SlowDown, by reason: ram_budget (no share of s3_ram_buffer_max within s3_admission_wait_msec), max_connections (past s3_max_connections), block_overload (an upload arriving within s3_shed_after_overload_msec of a block put that failed for overload), upload_latency (an upload arriving while its blocks would wait longer than s3_upload_latency_target_msec).",
            None,
            c.metric_type(),
        )?;
        for (reason, v) in [
            ("ram_budget", self.budget.rejected()),
            ("max_connections", self.refused_connections.get()),
            ("block_overload", self.budget.shed_count()),
            ("upload_latency", self.uploads.refused()),
        ] {
            ConstCounter::new(v).encode(f.encode_family(&ReasonLabel { reason })?)?;
        }
        for (name, help, v) in [
            (
                "hangar_s3_ram_budget_bytes",
                "The S3 RAM budget for block buffers of requests in flight (s3_ram_buffer_max, in whole blocks).",
                self.budget.capacity_bytes(),
            ),
            (
                "hangar_s3_ram_budget_in_use_bytes",
                "Bytes of the S3 RAM budget held by requests in flight now.",
                self.budget.in_use_bytes(),
            ),
            (
                "hangar_s3_upload_queue_bytes",
                "Bytes of upload blocks handed to the store and not yet stored, plus one block reserved by each upload admitted within the last second that has none queued yet.",
                self.uploads.queued_bytes(),
            ),
            (
                "hangar_s3_upload_limit_bytes",
                "Queued upload bytes past which an upload with Expect: 100-continue is refused: what the node stores in s3_upload_latency_target_msec at its measured rate, at least eight blocks; 0 when the gate is off or no rate is measured yet.",
                self.uploads.limit_bytes(),
            ),
        ] {
            let g = ConstGauge::new(v as i64);
            g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn error_codes_come_from_the_xml_body_and_stay_bounded() {
        let xml =
            b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>x</Message></Error>";
        assert_eq!(error_code(StatusCode::NOT_FOUND, Some(xml)), "NoSuchKey");
        assert_eq!(
            error_code(StatusCode::BAD_REQUEST, Some(b"<Code>a\"b</Code>")),
            "Other"
        );
        assert_eq!(error_code(StatusCode::NOT_FOUND, Some(b"")), "Unknown4xx");
        assert_eq!(error_code(StatusCode::BAD_GATEWAY, None), "Unknown5xx");
    }

    #[test]
    fn a_request_without_a_resolved_operation_is_unknown() {
        let op = RequestOp::default();
        assert_eq!(op.get(), UNKNOWN_OP);
        op.set("PutObject");
        op.set("GetObject");
        assert_eq!(op.get(), "PutObject");
    }
}
