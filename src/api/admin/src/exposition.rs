//! The `/metrics` answer in the format the scraper asks for: OpenMetrics
//! text (what `prometheus-client` writes) when the `Accept` header names
//! `application/openmetrics-text`, as Prometheus does; otherwise the
//! Prometheus text format 0.0.4, which every other reader of metrics
//! understands (`curl`, `promtool check metrics`, older agents).
//!
//! The 0.0.4 text is the OpenMetrics text with three differences, made
//! line by line: a counter family's `# HELP` and `# TYPE` name it with
//! its `_total` suffix, as its samples are named; OpenMetrics-only types
//! become `untyped`; the `# UNIT` and `# EOF` lines are dropped. Hangar's
//! families use no exemplars and no `_created` samples.

use prometheus_client::registry::Registry;

/// The content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition of `registry` for a request with `accept`, and its
/// content type.
pub fn render(
    registry: &Registry,
    accept: Option<&str>,
) -> Result<(&'static str, String), std::fmt::Error> {
    let mut om = String::new();
    prometheus_client::encoding::text::encode(&mut om, registry)?;
    if wants_openmetrics(accept.unwrap_or("")) {
        Ok((OPENMETRICS, om))
    } else {
        Ok((PROMETHEUS_TEXT, to_prometheus_text(&om)))
    }
}

/// Whether an `Accept` header takes OpenMetrics text (with a weight above 0).
fn wants_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
}

/// OpenMetrics text as `prometheus-client` writes it, in the Prometheus
/// text format 0.0.4.
pub fn to_prometheus_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    // prometheus-client writes HELP before TYPE; the HELP line waits for
    // the TYPE line that says how to name the family.
    let mut help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                _ => (name.to_owned(), "untyped"),
            };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;

    fn registry() -> Registry {
        let mut r = Registry::default();
        let c = Counter::<u64>::default();
        c.inc_by(3);
        r.register("demo_requests", "Requests answered", c);
        let g = Gauge::<i64>::default();
        g.set(7);
        r.register("demo_size_bytes", "A size", g);
        let h = Histogram::new([0.5, 1.0]);
        h.observe(0.7);
        r.register("demo_duration_seconds", "A time", h);
        r
    }

    #[test]
    fn prometheus_text_names_counters_with_their_suffix() {
        let (ct, text) = render(&registry(), Some("*/*")).unwrap();
        assert_eq!(ct, PROMETHEUS_TEXT);
        assert_eq!(
            text,
            "# HELP demo_requests_total Requests answered.\n\
             # TYPE demo_requests_total counter\n\
             demo_requests_total 3\n\
             # HELP demo_size_bytes A size.\n\
             # TYPE demo_size_bytes gauge\n\
             demo_size_bytes 7\n\
             # HELP demo_duration_seconds A time.\n\
             # TYPE demo_duration_seconds histogram\n\
             demo_duration_seconds_sum 0.7\n\
             demo_duration_seconds_count 1\n\
             demo_duration_seconds_bucket{le=\"0.5\"} 0\n\
             demo_duration_seconds_bucket{le=\"1.0\"} 1\n\
             demo_duration_seconds_bucket{le=\"+Inf\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_when_asked_for() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let (ct, text) = render(&registry(), Some(prom)).unwrap();
        assert_eq!(ct, OPENMETRICS);
        assert!(text.contains("# TYPE demo_requests counter\ndemo_requests_total 3\n"));
        assert!(text.ends_with("# EOF\n"));
        assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
        assert!(!wants_openmetrics(""));
        assert_eq!(render(&registry(), None).unwrap().0, PROMETHEUS_TEXT);
    }
}
