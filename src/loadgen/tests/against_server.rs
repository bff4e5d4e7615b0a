//! `hangar-loadgen` against a real `hangar server`: every mode runs briefly, checks every
//! GET body, and reports no errors.

use std::process::Command;

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
    let listing = server.cli(&["bucket", "info", "loadgen", "--json"]);
    let info: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(info["objects"], 0, "{info}");
}
