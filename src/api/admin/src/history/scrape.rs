//! The node's own `/metrics` text read back into numbers: the history
//! records what the node already exports, through the one code that
//! exports it, so that a plot and a Prometheus query of the same family
//! cannot disagree.
//!
//! The parser reads only what `prometheus-client` writes (OpenMetrics
//! text: `name{label="value",...} number`). That crate writes label values
//! as they are, unescaped; Hangar's are fixed identifiers (operations,
//! workers, directories, reasons), and the parser also reads the escapes
//! `\\`, `\"` and `\n` of the format. A line it cannot read is skipped. A
//! full exposition parser crate would read more than this one producer
//! ever writes.

use std::collections::BTreeMap;

/// One sample's labels, in the order written.
pub type Labels = Vec<(String, String)>;

/// The samples of the families asked for, by sample name.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Scrape {
    pub samples: BTreeMap<String, Vec<(Labels, f64)>>,
}

impl Scrape {
    /// Reads the samples whose name starts with one of `prefixes`.
    pub fn parse(text: &str, prefixes: &[&str]) -> Scrape {
        let mut samples: BTreeMap<String, Vec<(Labels, f64)>> = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || !prefixes.iter().any(|p| line.starts_with(p)) {
                continue;
            }
            if let Some((name, labels, v)) = parse_line(line) {
                samples.entry(name).or_default().push((labels, v));
            }
        }
        Scrape { samples }
    }

    /// The sum of every sample named `name` (0 when there is none).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .get(name)
            .map_or(0.0, |s| s.iter().map(|(_, v)| v).sum())
    }

    /// The first sample named `name` whose labels include `label`.
    pub fn value(&self, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
        self.samples.get(name)?.iter().find_map(|(ls, v)| {
            let ok = label.is_none_or(|(k, want)| ls.iter().any(|(n, x)| n == k && x == want));
            ok.then_some(*v)
        })
    }

    /// Every sample named `name`, by the value of its label `key`, summed
    /// over its other labels.
    pub fn by_label(&self, name: &str, key: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (ls, v) in self.samples.get(name).into_iter().flatten() {
            if let Some((_, k)) = ls.iter().find(|(n, _)| n == key) {
                *out.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        out
    }
}

fn parse_line(line: &str) -> Option<(String, Labels, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (ls, after) = parse_labels(body)?;
        labels = ls;
        rest = after;
    }
    let value = rest.trim().split(' ').next()?;
    let v = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name.to_owned(), labels, v))
}

/// Reads `k="v",...}`; returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut out = Vec::new();
    loop {
        if let Some(after) = s.strip_prefix('}') {
            return Some((out, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim_start_matches(',').to_owned();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.push((key, value));
        s = s[end + 1..].trim_start_matches(',');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_prometheus_client_writes() {
        use prometheus_client::metrics::counter::Counter;
        use prometheus_client::metrics::family::Family;
        use prometheus_client::metrics::histogram::Histogram;
        let mut r = prometheus_client::registry::Registry::default();
        let reqs = Family::<Vec<(String, String)>, Counter>::default();
        r.register("hangar_demo_requests", "Requests", reqs.clone());
        let h = Histogram::new([0.1, 1.0]);
        r.register("hangar_demo_seconds", "Latency", h.clone());
        reqs.get_or_create(&vec![("op".into(), "GetObject".into())])
            .inc_by(3);
        reqs.get_or_create(&vec![("op".into(), "Put".into())]).inc();
        h.observe(0.5);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        let s = Scrape::parse(&text, &["hangar_demo_"]);
        assert_eq!(s.sum("hangar_demo_requests_total"), 4.0);
        assert_eq!(
            s.value("hangar_demo_requests_total", Some(("op", "GetObject"))),
            Some(3.0)
        );
        let by = s.by_label("hangar_demo_seconds_bucket", "le");
        assert_eq!(by.get("1.0"), Some(&1.0));
        assert_eq!(by.get("0.1"), Some(&0.0));
        assert_eq!(by.get("+Inf"), Some(&1.0));
        assert!(Scrape::parse(&text, &["other_"]).samples.is_empty());
    }

    #[test]
    fn reads_escaped_label_values() {
        let s = Scrape::parse(
            "hangar_a{op=\"Get\\\"Object\\\\\\n\",le=\"1\"} 3\n",
            &["hangar_"],
        );
        assert_eq!(
            s.value("hangar_a", Some(("op", "Get\"Object\\\n"))),
            Some(3.0)
        );
        assert_eq!(s.value("hangar_a", Some(("le", "1"))), Some(3.0));
    }

    #[test]
    fn skips_lines_it_cannot_read() {
        let s = Scrape::parse(
            "hangar_a 1\nhangar_b{x=\"1\" 2\nhangar_c{x=\"1\"} nope\nhangar_d{} 4\n",
            &["hangar_"],
        );
        assert_eq!(s.sum("hangar_a"), 1.0);
        assert_eq!(s.sum("hangar_d"), 4.0);
        assert_eq!(s.samples.len(), 2);
    }
}
