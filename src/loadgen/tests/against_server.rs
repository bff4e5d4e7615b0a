//! `hangar-loadgen` against a real `hangar server`: every mode runs briefly, checks every
//! answer (GET bodies, STAT lengths, DeleteObjects results, listings), and reports no
//! errors; warp's spellings (`--host`, `--obj.size`, `WARP_*`) and summary work too.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use hangar_sdk_tests::TestServer;
use serde_json::Value;

/// Runs `hangar-loadgen <mode> <extra…>` for one second and returns its JSON report.
fn run(server: &TestServer, mode: &str, extra: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_hangar-loadgen"))
        .arg(mode)
        .args(["--endpoint", &server.endpoint])
        .args(["--access-key", &server.key.access_key_id])
        .args(["--secret-key", &server.key.secret_access_key])
        .args(["--bucket", "loadgen", "--duration", "1s", "--json"])
        .args(extra)
        .env_remove("WARP_HOST")
        .output()
        .expect("running hangar-loadgen");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "hangar-loadgen {mode} failed: {}\n{stdout}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("report {stdout:?}: {e}"))
}

fn op_counts(report: &Value) -> Vec<(String, u64)> {
    report["ops"]
        .as_array()
        .expect("ops")
        .iter()
        .map(|op| {
            assert_eq!(op["errors"], 0, "{op}");
            (
                op["op"].as_str().unwrap().to_owned(),
                op["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_mode_runs_clean() {
    let server = TestServer::start();
    let put = run(
        &server,
        "put",
        &["--obj-size", "64KiB", "--concurrent", "4"],
    );
    let counts = op_counts(&put);
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[0].0, "PUT");
    assert!(counts[0].1 > 0);
    assert_eq!(put["ops"][0]["bytes"].as_u64(), Some(counts[0].1 * 65536));

    let get = run(
        &server,
        "get",
        &["--obj-size", "1MiB", "--concurrent", "2", "--objects", "4"],
    );
    let counts = op_counts(&get);
    assert_eq!(counts[0].0, "GET");
    assert!(counts[0].1 > 0);

    let mixed = run(
        &server,
        "mixed",
        &["--obj-size", "4KiB", "--concurrent", "4", "--objects", "32"],
    );
    let ops: Vec<String> = op_counts(&mixed).into_iter().map(|(op, _)| op).collect();
    assert_eq!(ops, ["PUT", "GET", "STAT", "DELETE"]);

    // Overload mode reads every acknowledged PUT back; a lightly loaded server
    // accepts everything.
    let storm = run(
        &server,
        "overload",
        &[
            "--obj-size",
            "256KiB",
            "--concurrent",
            "8",
            "--objects",
            "4",
        ],
    );
    assert!(storm["accepted"].as_u64().unwrap() > 0, "{storm}");
    assert_eq!(storm["failed"], 0, "{storm}");
    assert_eq!(storm["mismatched"], 0, "{storm}");
    let acked = storm["acked_puts"].as_u64().unwrap();
    assert!(acked > 0, "{storm}");
    assert_eq!(
        storm["verified"]["checked"].as_u64(),
        Some(acked),
        "{storm}"
    );
    assert_eq!(storm["verified"]["intact"].as_u64(), Some(acked), "{storm}");
    let per_second: u64 = storm["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["put_ok"].as_u64().unwrap() + s["get_ok"].as_u64().unwrap())
        .sum();
    assert_eq!(Some(per_second), storm["accepted"].as_u64(), "{storm}");

    // PUTs with `Expect: 100-continue`, body after `100 Continue`: each
    // acknowledged one reads back intact.
    let expecting = run(
        &server,
        "overload",
        &[
            "--obj-size",
            "256KiB",
            "--concurrent",
            "4",
            "--objects",
            "4",
            "--expect-continue",
        ],
    );
    assert_eq!(expecting["failed"], 0, "{expecting}");
    let acked = expecting["acked_puts"].as_u64().unwrap();
    assert!(acked > 0, "{expecting}");
    assert_eq!(
        expecting["verified"]["intact"].as_u64(),
        Some(acked),
        "{expecting}"
    );

    // Every run deleted what it wrote.
    assert_eq!(objects_in(&server, "loadgen"), 0);
}

fn objects_in(server: &TestServer, bucket: &str) -> u64 {
    let listing = server.cli(&["bucket", "info", bucket, "--json"]);
    let info: Value = serde_json::from_str(&listing).unwrap();
    info["objects"].as_u64().unwrap_or_else(|| panic!("{info}"))
}

/// The one operation of a report, after the PUTs that prepared its objects.
fn prepared_then(report: &Value, op: &str, prepared: u64) -> (u64, u64) {
    let prepare = &report["prepare_ops"];
    assert_eq!(prepare[0]["op"], "PUT", "{report}");
    assert_eq!(prepare[0]["count"].as_u64(), Some(prepared), "{report}");
    assert_eq!(prepare[0]["errors"], 0, "{report}");
    let counts = op_counts(report);
    assert_eq!(counts.len(), 1, "{report}");
    assert_eq!(counts[0].0, op, "{report}");
    let objects = report["ops"][0]["objects"].as_u64().unwrap();
    (counts[0].1, objects)
}

#[test]
fn delete_list_and_stat_run_clean() {
    let server = TestServer::start();

    // 200 objects in batches of 10 with 2 workers: all deleted within the second.
    let delete = run(
        &server,
        "delete",
        &[
            "--obj-size",
            "1KiB",
            "--concurrent",
            "2",
            "--objects",
            "200",
            "--batch",
            "10",
        ],
    );
    let (requests, objects) = prepared_then(&delete, "DELETE", 200);
    assert_eq!(objects, requests * 10, "{delete}");
    assert_eq!(objects, 200, "{delete}");

    // 40 objects over 4 prefixes: every listing is of 10 keys.
    let list = run(
        &server,
        "list",
        &["--obj.size", "1KiB", "--concurrent", "4", "--objects", "40"],
    );
    let (requests, objects) = prepared_then(&list, "LIST", 40);
    assert!(requests > 0, "{list}");
    assert_eq!(objects, requests * 10, "{list}");

    let stat = run(
        &server,
        "stat",
        &["--obj.size", "4KiB", "--concurrent", "2", "--objects", "8"],
    );
    let (requests, objects) = prepared_then(&stat, "STAT", 8);
    assert!(requests > 0, "{stat}");
    assert_eq!(objects, requests, "{stat}");
    // No bytes moved by STAT, its throughput split is in objects.
    assert_eq!(stat["ops"][0]["bytes"], 0, "{stat}");

    // A delete with too few objects for its batches is refused before it starts.
    let output = loadgen(
        &server,
        &["delete", "--objects", "10", "--batch", "10"],
        false,
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("invalid --objects"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(objects_in(&server, "loadgen"), 0);
}

/// Runs `hangar-loadgen <args…>` the way warp is run: `--host` and the keys as
/// options, or (`env`) as `WARP_HOST`, `WARP_ACCESS_KEY` and `WARP_SECRET_KEY`.
fn loadgen(server: &TestServer, args: &[&str], env: bool) -> Output {
    let host = format!("127.0.0.1:{}", server.port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_hangar-loadgen"));
    command.args(args);
    if env {
        command
            .env("WARP_HOST", &host)
            .env("WARP_ACCESS_KEY", &server.key.access_key_id)
            .env("WARP_SECRET_KEY", &server.key.secret_access_key);
    } else {
        command
            .arg(format!("--host={host}"))
            .args(["--access-key", &server.key.access_key_id])
            .args(["--secret-key", &server.key.secret_access_key])
            .env_remove("WARP_HOST");
    }
    command.output().expect("running hangar-loadgen")
}

/// Runs a warp-style command that must succeed, and returns its summary.
fn warp_style(server: &TestServer, args: &[&str], env: bool) -> String {
    let output = loadgen(server, args, env);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "hangar-loadgen {args:?} failed: {}\n{stdout}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    stdout
}

#[test]
fn warp_commands_print_warps_summary() {
    let server = TestServer::start();

    // The seed's `warp get --host=… --objects 500 --obj.size 1MiB`, scaled down.
    let get = warp_style(
        &server,
        &[
            "get",
            "--objects",
            "8",
            "--obj.size",
            "64KiB",
            "--concurrent",
            "2",
            "--duration",
            "2s",
        ],
        false,
    );
    let rule = "----------------------------------------";
    assert!(
        get.starts_with(&format!("\n{rule}\nOperation: PUT\n* Average: ")),
        "{get}"
    );
    assert!(
        get.contains(&format!("\n{rule}\nOperation: GET\n* Average: ")),
        "{get}"
    );
    let get_block = get.split("Operation: GET").nth(1).unwrap();
    assert!(get_block.contains("MiB/s, "), "{get}");
    assert!(get_block.contains("\nThroughput, split into "), "{get}");
    for line in [" * Fastest: ", " * 50% Median: ", " * Slowest: "] {
        assert!(get_block.contains(line), "{get}");
    }

    // The seed's `warp mixed`, credentials from the environment as warp takes them.
    let mixed = warp_style(
        &server,
        &[
            "mixed",
            "--objects",
            "32",
            "--obj.size",
            "4KiB",
            "--concurrent",
            "4",
            "--duration",
            "2s",
        ],
        true,
    );
    assert!(
        mixed.starts_with("Mixed operations.\nOperation: DELETE, "),
        "{mixed}"
    );
    for op in ["GET", "PUT", "STAT"] {
        assert!(mixed.contains(&format!("\n\nOperation: {op}, ")), "{mixed}");
    }
    assert!(mixed.contains(", Concurrency: 4, Ran "), "{mixed}");
    assert!(mixed.contains("\n * Throughput: "), "{mixed}");
    assert!(mixed.contains("\n\nCluster Total: "), "{mixed}");
    assert!(!mixed.contains("Errors"), "{mixed}");

    // The seed's `warp put --autoterm`, with a tolerance loose enough for a
    // shared machine: it ends long before its 60 s.
    let started = Instant::now();
    let put = warp_style(
        &server,
        &[
            "put",
            "--obj.size",
            "4KiB",
            "--concurrent",
            "4",
            "--duration",
            "60s",
            "--autoterm",
            "--autoterm.dur",
            "1s",
            "--autoterm.pct",
            "90",
        ],
        false,
    );
    assert!(started.elapsed() < Duration::from_secs(50), "{put}");
    assert!(put.starts_with("Throughput "), "{put}");
    assert!(
        put.contains("within 90.000000% for ") && put.contains(
            "s. Assuming stability. Terminating benchmark.\n\n----------------------------------------\nOperation: PUT\n"
        ),
        "{put}"
    );

    // The runs used warp's default bucket, and deleted what they wrote.
    assert_eq!(objects_in(&server, "warp-benchmark-bucket"), 0);
}
