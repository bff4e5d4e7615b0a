//! The summary a run prints by default, in warp's shape: per operation its
//! average and its throughput split into 1-second segments (put, get, delete,
//! list, stat; the PUTs that prepared the objects first), or for mixed the
//! share, concurrency, duration and throughput of each operation and the
//! cluster total. With `--analyze.v`, as warp, each operation also gets its
//! request latencies and first errors.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::Report;
use crate::stats::OpSummary;
use crate::timeline::Rate;

const MIB: f64 = 1024.0 * 1024.0;
const RULE: &str = "----------------------------------------";

/// `d` as Go's `time.Duration` prints it: `4m45s`, `5m0s`, `16.457s`, `1h0m0s`,
/// `250ms`, `1.5µs`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 1_000_000));
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, secs / 60 % 60);
    let s = fraction(
        u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// `value / unit` in decimal, without trailing zeros in the fraction.
fn fraction(value: u128, unit: u128) -> String {
    let (whole, rest) = (value / unit, value % unit);
    if rest == 0 {
        return whole.to_string();
    }
    let digits = unit.ilog10() as usize;
    let frac = format!("{rest:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// Bytes per second as warp prints a segment's throughput: one decimal, in the
/// largest unit the value is at least two of (`12.3MiB/s`, `498.4KiB/s`), GiB
/// only from 10 GiB/s on.
pub fn throughput(bytes_per_s: f64) -> String {
    const KIB: f64 = 1024.0;
    let t = bytes_per_s;
    if t < 2.0 * KIB {
        format!("{t:.1}B/s")
    } else if t < 2.0 * MIB {
        format!("{:.1}KiB/s", t / KIB)
    } else if t < 10.0 * MIB * KIB {
        format!("{:.1}MiB/s", t / MIB)
    } else if t < 10.0 * MIB * MIB {
        format!("{:.2}GiB/s", t / (MIB * KIB))
    } else {
        format!("{:.2}TiB/s", t / (MIB * MIB))
    }
}

/// An average as warp prints it: `2.06 MiB/s, 2.06 obj/s`, or only the objects
/// for operations that move no data.
fn average(rate: Rate) -> String {
    if rate.bytes_per_s > 0.0 {
        format!(
            "{:.2} MiB/s, {:.2} obj/s",
            rate.bytes_per_s / MIB,
            rate.obj_per_s
        )
    } else {
        format!("{:.2} obj/s", rate.obj_per_s)
    }
}

/// A segment as warp prints it: `12.3MiB/s, 12.29 obj/s`, or only the objects.
fn segment(rate: Rate) -> String {
    if rate.bytes_per_s > 0.0 {
        format!(
            "{}, {:.2} obj/s",
            throughput(rate.bytes_per_s),
            rate.obj_per_s
        )
    } else {
        format!("{:.2} obj/s", rate.obj_per_s)
    }
}

/// An operation kind's throughput over its own span.
fn op_rate(op: &OpSummary) -> Rate {
    let secs = op.ran_s.max(f64::EPSILON);
    if op.ran_s <= 0.0 {
        return Rate::default();
    }
    Rate {
        bytes_per_s: op.bytes as f64 / secs,
        obj_per_s: op.objects as f64 / secs,
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// A latency in milliseconds, to the tenth, as a Go duration.
fn latency(ms: f64) -> String {
    go_duration(Duration::from_micros((ms * 10.0).round() as u64 * 100))
}

/// Warp's `--analyze.v` request block and first errors.
fn details(out: &mut String, op: &OpSummary) {
    if !op.error_samples.is_empty() {
        let _ = writeln!(out, "First Errors:");
        for sample in &op.error_samples {
            let _ = writeln!(out, " * {sample}");
        }
    }
    let l = &op.latency_ms;
    let _ = writeln!(out, "\nRequests considered: {}:", op.count);
    let _ = writeln!(
        out,
        " * Avg: {}, 50%: {}, 90%: {}, 99%: {}, Fastest: {}, Slowest: {}",
        latency(l.mean),
        latency(l.p50),
        latency(l.p90),
        latency(l.p99),
        latency(l.min),
        latency(l.max)
    );
}

/// One operation of a single-operation benchmark.
fn op_block(out: &mut String, op: &OpSummary, concurrency: usize, verbose: bool) {
    let _ = writeln!(out, "\n{RULE}");
    if verbose {
        // Warp names the objects per request of batches and listings.
        let per_op = if op.objects != op.count && op.count > 0 {
            format!(" Objects per operation: {}.", op.objects / op.count)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "Operation: {} ({}). Ran {}.{per_op} Concurrency: {concurrency}.",
            op.op,
            op.count,
            go_duration(truncate_to_second(op.ran_s))
        );
    } else {
        let _ = writeln!(out, "Operation: {}", op.op);
    }
    if op.errors > 0 {
        let _ = writeln!(out, "Errors: {}", op.errors);
    }
    if verbose {
        details(out, op);
        let _ = writeln!(out, "\nThroughput:");
    }
    let _ = writeln!(out, "* Average: {}", average(op_rate(op)));
    if verbose && op.objects != op.count && op.ran_s > 0.0 {
        let _ = writeln!(out, "* Requests: {:.2} ops/s", op.count as f64 / op.ran_s);
    }
    match &op.split {
        Some(split) => {
            let _ = writeln!(
                out,
                "\nThroughput, split into {} x {}:",
                split.segments,
                go_duration(secs(split.segment_s))
            );
            let _ = writeln!(out, " * Fastest: {}", segment(split.fastest));
            let _ = writeln!(out, " * 50% Median: {}", segment(split.median));
            let _ = writeln!(out, " * Slowest: {}", segment(split.slowest));
        }
        None => {
            let _ = writeln!(
                out,
                "Skipping {} too few samples. Longer benchmark run required for reliable results.",
                op.op
            );
        }
    }
}

fn truncate_to_second(s: f64) -> Duration {
    Duration::from_secs(s.max(0.0) as u64)
}

/// The mixed benchmark's summary, operations in alphabetical order as warp's.
fn mixed(out: &mut String, report: &Report, verbose: bool) {
    let _ = writeln!(out, "Mixed operations.");
    let mut ops: Vec<&OpSummary> = report.ops.iter().collect();
    ops.sort_by(|a, b| a.op.cmp(&b.op));
    let total: u64 = ops.iter().map(|o| o.count).sum();
    for (index, op) in ops.iter().enumerate() {
        if index > 0 {
            let _ = writeln!(out);
        }
        let pct = if total > 0 {
            100.0 * op.count as f64 / total as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "Operation: {}, {}%, Concurrency: {}, Ran {}.",
            op.op,
            (pct + 0.5) as u64,
            report.concurrent,
            go_duration(truncate_to_second(op.ran_s))
        );
        if op.errors > 0 {
            let _ = writeln!(out, "Errors: {}", op.errors);
        }
        let _ = writeln!(out, " * Throughput: {}", average(op_rate(op)));
        if verbose {
            details(out, op);
        }
    }
    let elapsed = report.elapsed_s.max(f64::EPSILON);
    let cluster = Rate {
        bytes_per_s: ops.iter().map(|o| o.bytes).sum::<u64>() as f64 / elapsed,
        obj_per_s: ops.iter().map(|o| o.objects).sum::<u64>() as f64 / elapsed,
    };
    let errors = if report.errors > 0 {
        format!(", {} errors", report.errors)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\nCluster Total: {}{errors} over {}.",
        average(cluster),
        go_duration(Duration::from_secs(report.elapsed_s.max(0.0).round() as u64))
    );
    if report.errors > 0 {
        let _ = writeln!(out, "Total Errors:{}.", report.errors);
    }
}

/// The whole summary of `report`; `verbose` adds latencies and first errors
/// (`--analyze.v`).
pub fn render(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    if let Some(line) = &report.autoterm {
        let _ = writeln!(out, "{line}");
    }
    if report.mode == "mixed" {
        mixed(&mut out, report, verbose);
    } else {
        for op in &report.prepare_ops {
            op_block(&mut out, op, report.prepare_concurrency, verbose);
        }
        for op in &report.ops {
            op_block(&mut out, op, report.concurrent, verbose);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyMs;
    use crate::timeline::Split;

    #[test]
    fn durations_print_as_go_does() {
        let s = Duration::from_secs;
        assert_eq!(go_duration(s(285)), "4m45s");
        assert_eq!(go_duration(s(300)), "5m0s");
        assert_eq!(go_duration(s(3600)), "1h0m0s");
        assert_eq!(go_duration(s(3725)), "1h2m5s");
        assert_eq!(go_duration(Duration::from_millis(16_457)), "16.457s");
        assert_eq!(go_duration(Duration::from_millis(27_104)), "27.104s");
        assert_eq!(go_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(go_duration(s(1)), "1s");
        assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(go_duration(Duration::from_micros(12_300)), "12.3ms");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(
            go_duration(Duration::from_nanos(60_000_000_001)),
            "1m0.000000001s"
        );
    }

    #[test]
    fn sizes_print_as_warp_does() {
        // The seed's values: obj/s of 1 MiB objects.
        assert_eq!(throughput(12.29 * MIB), "12.3MiB/s");
        assert_eq!(throughput(0.4867 * MIB), "498.4KiB/s");
        assert_eq!(throughput(1.0172 * MIB), "1041.6KiB/s");
        assert_eq!(throughput(1.657 * MIB), "1696.8KiB/s");
        assert_eq!(throughput(3.12 * MIB), "3.1MiB/s");
        assert_eq!(throughput(2.0 * MIB), "2.0MiB/s");
        assert_eq!(throughput(1000.0), "1000.0B/s");
        assert_eq!(throughput(9000.0 * MIB), "9000.0MiB/s");
        assert_eq!(throughput(20.0 * 1024.0 * MIB), "20.00GiB/s");
        let rate = Rate {
            bytes_per_s: 2.06 * MIB,
            obj_per_s: 2.06,
        };
        assert_eq!(average(rate), "2.06 MiB/s, 2.06 obj/s");
        assert_eq!(segment(rate), "2.1MiB/s, 2.06 obj/s");
        let objects_only = Rate {
            bytes_per_s: 0.0,
            obj_per_s: 1030.014,
        };
        assert_eq!(average(objects_only), "1030.01 obj/s");
        assert_eq!(segment(objects_only), "1030.01 obj/s");
    }

    fn op(name: &str, count: u64, bytes_each: u64, ran_s: f64, errors: u64) -> OpSummary {
        OpSummary {
            op: name.to_owned(),
            count,
            errors,
            bytes: count * bytes_each,
            objects: count,
            ran_s,
            mib_per_s: 0.0,
            obj_per_s: 0.0,
            latency_ms: LatencyMs {
                mean: 12.34,
                p50: 10.0,
                p90: 20.0,
                p99: 40.0,
                max: 80.0,
                min: 0.52,
            },
            error_samples: Vec::new(),
            split: None,
        }
    }

    fn report(mode: &str, ops: Vec<OpSummary>, elapsed_s: f64) -> Report {
        Report {
            mode: mode.to_owned(),
            endpoint: "http://localhost:3991".into(),
            bucket: "warp-benchmark-bucket".into(),
            obj_size: 1 << 20,
            concurrent: 20,
            duration_s: 300.0,
            elapsed_s,
            prepared_objects: 500,
            errors: ops.iter().map(|o| o.errors).sum(),
            ops,
            cleanup_failed: 0,
            client_cpu_s: None,
            server_cpu_s: None,
            streaming: false,
            prepare_ops: Vec::new(),
            prepare_concurrency: 20,
            autoterm: None,
        }
    }

    #[test]
    fn mixed_has_warps_shape() {
        let r = report(
            "mixed",
            vec![
                op("PUT", 5019, 1 << 20, 300.0, 0),
                op("GET", 15066, 1 << 20, 300.0, 5),
                op("STAT", 10041, 0, 299.9, 0),
                op("DELETE", 3348, 0, 299.9, 0),
            ],
            300.2,
        );
        let text = render(&r, false);
        assert_eq!(
            text,
            "Mixed operations.
Operation: DELETE, 10%, Concurrency: 20, Ran 4m59s.
 * Throughput: 11.16 obj/s

Operation: GET, 45%, Concurrency: 20, Ran 5m0s.
Errors: 5
 * Throughput: 50.22 MiB/s, 50.22 obj/s

Operation: PUT, 15%, Concurrency: 20, Ran 5m0s.
 * Throughput: 16.73 MiB/s, 16.73 obj/s

Operation: STAT, 30%, Concurrency: 20, Ran 4m59s.
 * Throughput: 33.48 obj/s

Cluster Total: 66.91 MiB/s, 111.51 obj/s, 5 errors over 5m0s.
Total Errors:5.
"
        );
    }

    #[test]
    fn listings_count_objects_and_requests() {
        let mut list = op("LIST", 100, 0, 4.0, 0);
        list.objects = 50_000;
        let r = report("list", vec![list], 4.0);
        let text = render(&r, false);
        assert!(
            text.contains("Operation: LIST\n* Average: 12500.00 obj/s\n"),
            "{text}"
        );
        let verbose = render(&r, true);
        assert!(
            verbose.contains(
                "Operation: LIST (100). Ran 4s. Objects per operation: 500. Concurrency: 20.\n"
            ),
            "{verbose}"
        );
        assert!(verbose.contains("* Requests: 25.00 ops/s\n"), "{verbose}");
    }

    #[test]
    fn get_has_warps_shape() {
        let mut prepare = op("PUT", 500, 1 << 20, 22.12, 0);
        prepare.split = Some(Split {
            segment_s: 1.0,
            segments: 5,
            fastest: Rate {
                bytes_per_s: 31.28 * MIB,
                obj_per_s: 31.28,
            },
            median: Rate {
                bytes_per_s: 25.29 * MIB,
                obj_per_s: 25.29,
            },
            slowest: Rate {
                bytes_per_s: 13.94 * MIB,
                obj_per_s: 13.94,
            },
        });
        let get = op("GET", 12_000, 1 << 20, 58.0, 0);
        let mut r = report("get", vec![get], 58.0);
        r.prepare_ops = vec![prepare];
        r.autoterm = Some("Throughput 297.5MiB/s within 7.500000% for 16.457s. Assuming stability. Terminating benchmark.".into());
        let text = render(&r, false);
        assert_eq!(
            text,
            "Throughput 297.5MiB/s within 7.500000% for 16.457s. Assuming stability. Terminating benchmark.

----------------------------------------
Operation: PUT
* Average: 22.60 MiB/s, 22.60 obj/s

Throughput, split into 5 x 1s:
 * Fastest: 31.3MiB/s, 31.28 obj/s
 * 50% Median: 25.3MiB/s, 25.29 obj/s
 * Slowest: 13.9MiB/s, 13.94 obj/s

----------------------------------------
Operation: GET
* Average: 206.90 MiB/s, 206.90 obj/s
Skipping GET too few samples. Longer benchmark run required for reliable results.
"
        );
        let verbose = render(&r, true);
        assert!(
            verbose.contains("Operation: GET (12000). Ran 58s. Concurrency: 20.\n"),
            "{verbose}"
        );
        assert!(
            verbose.contains(
                "Requests considered: 12000:\n * Avg: 12.3ms, 50%: 10ms, 90%: 20ms, 99%: 40ms, Fastest: 500µs, Slowest: 80ms\n"
            ),
            "{verbose}"
        );
    }
}
