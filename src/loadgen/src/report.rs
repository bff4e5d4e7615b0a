//! Run reports: the JSON document written with `--json`, the column table of
//! `--table`, and the combined summary (with ratios between runs) that
//! `script/bench` prints. The default summary, in warp's shape, is
//! `crate::warp_report`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::OpSummary;

/// Everything one run measured, with the parameters that produced it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// `put`, `get`, `mixed`, `delete`, `list` or `stat`.
    pub mode: String,
    /// The S3 endpoint measured.
    pub endpoint: String,
    /// The bucket used.
    pub bucket: String,
    /// Object size in bytes.
    pub obj_size: u64,
    /// Parallel workers.
    pub concurrent: usize,
    /// Requested duration, in seconds.
    pub duration_s: f64,
    /// Measured wall time, in seconds (the duration plus the operations still in flight).
    pub elapsed_s: f64,
    /// Objects uploaded before measuring (all but put).
    pub prepared_objects: usize,
    /// Per-operation results.
    pub ops: Vec<OpSummary>,
    /// Failed operations, all kinds together.
    pub errors: u64,
    /// Objects the cleanup could not delete.
    pub cleanup_failed: usize,
    /// CPU seconds (user + system) the load generator used during the measured phase.
    #[serde(default)]
    pub client_cpu_s: Option<f64>,
    /// CPU seconds the server used during the measured phase (with `--server-pid`).
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
    /// PUT bodies were streamed (aws-chunked, unsigned payload, CRC32 trailer) rather
    /// than given in memory (signed payload, CRC32 header).
    #[serde(default)]
    pub streaming: bool,
    /// The uploads that prepared the objects (get, delete, list, stat), which
    /// warp reports as a PUT operation before the measured one.
    #[serde(default)]
    pub prepare_ops: Vec<OpSummary>,
    /// Uploads in flight at once while preparing.
    #[serde(default)]
    pub prepare_concurrency: usize,
    /// Warp's line when `--autoterm` ended the run early.
    #[serde(default)]
    pub autoterm: Option<String>,
}

impl Report {
    /// The mode as shown in tables: `put`, or `put~s` for streamed PUT bodies.
    fn label(&self) -> String {
        if self.streaming {
            format!("{}~s", self.mode)
        } else {
            self.mode.clone()
        }
    }
}

/// `cpu_s` as a percentage of one core over `elapsed_s`, or `-` when unknown.
fn core_percent(cpu_s: Option<f64>, elapsed_s: f64) -> String {
    match cpu_s {
        Some(cpu) => format!("{:.0}", cpu / elapsed_s.max(f64::EPSILON) * 100.0),
        None => "-".to_owned(),
    }
}

/// `4KiB`, `1MiB`, or plain bytes when the size is not a whole number of either.
pub fn format_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{}KiB", bytes / KIB)
    } else {
        format!("{bytes}B")
    }
}

const HEADER: &str = "op        count  errors     MiB/s     obj/s   p50 ms   p99 ms   max ms";

fn op_line(out: &mut String, label: &str, op: &OpSummary) {
    let _ = writeln!(
        out,
        "{label:<7} {:>7} {:>7} {:>9.2} {:>9.1} {:>8.2} {:>8.2} {:>8.2}",
        op.count,
        op.errors,
        op.mib_per_s,
        op.obj_per_s,
        op.latency_ms.p50,
        op.latency_ms.p99,
        op.latency_ms.max
    );
}

impl Report {
    /// The human-readable table of one run, with the first error messages if any.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} {} x{} for {:.0}s (elapsed {:.2}s), bucket {} at {}",
            self.label(),
            format_size(self.obj_size),
            self.concurrent,
            self.duration_s,
            self.elapsed_s,
            self.bucket,
            self.endpoint
        );
        let _ = writeln!(out, "{HEADER}");
        for op in &self.ops {
            op_line(&mut out, &op.op, op);
        }
        if self.ops.len() > 1 {
            let count: u64 = self.ops.iter().map(|o| o.count).sum();
            let mib: f64 = self.ops.iter().map(|o| o.mib_per_s).sum();
            let _ = writeln!(
                out,
                "total   {count:>7} {:>7} {mib:>9.2} {:>9.1}",
                self.errors,
                count as f64 / self.elapsed_s.max(f64::EPSILON)
            );
        }
        let _ = writeln!(
            out,
            "cpu (% of one core): client {}, server {}",
            core_percent(self.client_cpu_s, self.elapsed_s),
            core_percent(self.server_cpu_s, self.elapsed_s)
        );
        for op in &self.ops {
            for sample in &op.error_samples {
                let _ = writeln!(out, "  error: {sample}");
            }
        }
        if self.cleanup_failed > 0 {
            let _ = writeln!(
                out,
                "  cleanup: {} objects left behind",
                self.cleanup_failed
            );
        }
        out
    }
}

/// One table over many runs, then each single-worker run's throughput set against the
/// same run at higher concurrency, and GET against PUT at equal size and concurrency:
/// ratios measured in one session on one machine, which mean more than absolute figures
/// on a shared, noisy host.
pub fn summary_table(reports: &[Report]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mode   size    conc  op        count  errors     MiB/s     obj/s   p50 ms   p99 ms   max ms  cli%  srv%"
    );
    let mut obj_rate: BTreeMap<(String, u64, String, usize), f64> = BTreeMap::new();
    for report in reports {
        for op in &report.ops {
            let mut line = String::new();
            op_line(&mut line, &op.op, op);
            let _ = writeln!(
                out,
                "{:<6} {:<7} {:>4}  {} {:>5} {:>5}",
                report.label(),
                format_size(report.obj_size),
                report.concurrent,
                line.trim_end(),
                core_percent(report.client_cpu_s, report.elapsed_s),
                core_percent(report.server_cpu_s, report.elapsed_s)
            );
            obj_rate.insert(
                (
                    report.label(),
                    report.obj_size,
                    op.op.clone(),
                    report.concurrent,
                ),
                op.obj_per_s,
            );
        }
    }
    let mut ratios = Vec::new();
    for ((mode, size, op, conc), rate) in &obj_rate {
        if *conc > 1
            && let Some(single) = obj_rate.get(&(mode.clone(), *size, op.clone(), 1))
            && *single > 0.0
        {
            ratios.push(format!(
                "{mode} {op} {}: x{conc} / x1 = {:.2}",
                format_size(*size),
                rate / single
            ));
        }
        if mode == "put~s"
            && let Some(signed) = obj_rate.get(&("put".to_owned(), *size, op.clone(), *conc))
            && *signed > 0.0
        {
            ratios.push(format!(
                "PUT streamed / in memory {} x{conc} = {:.2}",
                format_size(*size),
                rate / signed
            ));
        }
        if mode == "get"
            && op == "GET"
            && let Some(put) = obj_rate.get(&("put".to_owned(), *size, "PUT".to_owned(), *conc))
            && *put > 0.0
        {
            ratios.push(format!(
                "GET / PUT {} x{conc} = {:.2}",
                format_size(*size),
                rate / put
            ));
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(out, "\nratios (obj/s, same session):");
        for ratio in ratios {
            let _ = writeln!(out, "  {ratio}");
        }
    }
    for report in reports {
        for op in &report.ops {
            for sample in &op.error_samples {
                let _ = writeln!(
                    out,
                    "error in {} {} x{} {}: {sample}",
                    report.label(),
                    format_size(report.obj_size),
                    report.concurrent,
                    op.op
                );
            }
        }
        if report.cleanup_failed > 0 {
            let _ = writeln!(
                out,
                "cleanup of {} {} x{} left {} objects",
                report.label(),
                format_size(report.obj_size),
                report.concurrent,
                report.cleanup_failed
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyMs;

    fn report(mode: &str, op: &str, concurrent: usize, obj_per_s: f64) -> Report {
        Report {
            mode: mode.into(),
            endpoint: "http://127.0.0.1:1".into(),
            bucket: "b".into(),
            obj_size: 4096,
            concurrent,
            duration_s: 1.0,
            elapsed_s: 1.0,
            prepared_objects: 0,
            ops: vec![OpSummary {
                op: op.into(),
                count: obj_per_s as u64,
                errors: 0,
                bytes: 0,
                objects: obj_per_s as u64,
                ran_s: 1.0,
                split: None,
                mib_per_s: 0.0,
                obj_per_s,
                latency_ms: LatencyMs {
                    mean: 1.0,
                    p50: 1.0,
                    p90: 1.0,
                    p99: 1.0,
                    max: 1.0,
                    min: 1.0,
                },
                error_samples: vec![],
            }],
            errors: 0,
            cleanup_failed: 0,
            client_cpu_s: Some(0.5),
            server_cpu_s: None,
            streaming: false,
            prepare_ops: vec![],
            prepare_concurrency: 0,
            autoterm: None,
        }
    }

    #[test]
    fn sizes_are_named() {
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(1 << 20), "1MiB");
        assert_eq!(format_size((1 << 20) + 1), "1048577B");
        assert_eq!(format_size(0), "0B");
    }

    #[test]
    fn summary_gives_ratios() {
        let mut streamed = report("put", "PUT", 16, 600.0);
        streamed.streaming = true;
        let reports = [
            report("put", "PUT", 1, 100.0),
            report("put", "PUT", 16, 400.0),
            report("get", "GET", 16, 800.0),
            streamed,
        ];
        let table = summary_table(&reports);
        assert!(table.contains("put PUT 4KiB: x16 / x1 = 4.00"), "{table}");
        assert!(table.contains("GET / PUT 4KiB x16 = 2.00"), "{table}");
        assert!(
            table.contains("PUT streamed / in memory 4KiB x16 = 1.50"),
            "{table}"
        );
        assert!(table.contains("\nput~s  4KiB      16  PUT"), "{table}");
        // Client CPU 0.5 s over 1 s; server CPU unknown.
        assert!(
            table.lines().nth(1).unwrap().ends_with("   50     -"),
            "{table}"
        );
        let json = serde_json::to_string(&reports[0]).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back.ops[0].obj_per_s, 100.0);
    }
}
