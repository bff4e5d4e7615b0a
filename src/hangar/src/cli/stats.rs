//! `hangar stats`: per bucket its objects and bytes, per node its disks,
//! block files and the rows of each table, from the node's
//! `ClusterStatistics` operation.

use std::collections::BTreeSet;

use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;
use serde_json::Value;

use crate::cli::commands::{call, print_json, s};
use crate::cli::error::CliError;
use crate::cli::units::human;

/// `hangar stats --help` examples.
pub const EXAMPLES: &str = "\
Examples:
  hangar stats
  hangar stats --json | jq '.buckets[] | {name, objects, bytes}'
  hangar stats --json | jq '.nodes[] | {id, free: .report.data_disk.avail}'

Bucket counts come from a listing of each bucket (through the read quorum);
node figures are measured by each node when asked.";

fn size(v: &Value) -> String {
    v.as_u64().map(human).unwrap_or_else(|| "-".into())
}

fn disk(d: &Value) -> String {
    if d.is_null() {
        return "-".into();
    }
    format!("{} / {}", size(&d["avail"]), size(&d["total"]))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(16)]
}

/// Runs `hangar stats`.
pub async fn stats(client: &AdminClient, json: bool) -> Result<(), CliError> {
    let v = call(client, &Request::ClusterStatistics).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    println!("==== BUCKETS ====");
    println!(
        "{:<40} {:>12} {:>12} {:>16}",
        "NAME", "OBJECTS", "SIZE", "BYTES"
    );
    for b in v["buckets"].as_array().cloned().unwrap_or_default() {
        println!(
            "{:<40} {:>12} {:>12} {:>16}",
            s(&b, "name"),
            s(&b, "objects"),
            size(&b["bytes"]),
            s(&b, "bytes")
        );
    }
    let t = &v["totals"];
    println!(
        "{:<40} {:>12} {:>12} {:>16}",
        format!("total ({} buckets)", s(t, "buckets")),
        s(t, "objects"),
        size(&t["bytes"]),
        s(t, "bytes")
    );
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    println!();
    println!("==== NODES ====");
    println!(
        "{:<18} {:<14} {:<5} {:>22} {:>22} {:>9} {:>12}",
        "ID", "HOSTNAME", "UP", "DATA FREE / TOTAL", "META FREE / TOTAL", "BLOCKS", "BLOCK BYTES"
    );
    for n in &nodes {
        let r = &n["report"];
        let id = s(n, "id");
        let up = if n["is_up"] == Value::Bool(true) {
            "up"
        } else {
            "DOWN"
        };
        let host = match s(n, "hostname") {
            h if h.is_empty() => "?".to_owned(),
            h => h,
        };
        println!(
            "{:<18} {:<14} {:<5} {:>22} {:>22} {:>9} {:>12}",
            short(&id),
            host,
            up,
            disk(&r["data_disk"]),
            disk(&r["metadata_disk"]),
            r["blocks"]["count"]
                .as_u64()
                .map_or("-".into(), |c| c.to_string()),
            size(&r["blocks"]["bytes"])
        );
        if r.is_null() && !n["report_error"].is_null() && n["is_up"] == Value::Bool(true) {
            println!("  no report: {}", s(n, "report_error"));
        }
    }
    let tables: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n["report"]["tables"].as_object())
        .flat_map(|t| t.keys().cloned())
        .collect();
    println!();
    println!("==== TABLE ROWS PER NODE ====");
    print!("{:<12}", "TABLE");
    for n in &nodes {
        print!(" {:>17}", short(&s(n, "id")));
    }
    println!();
    for t in tables {
        print!("{t:<12}");
        for n in &nodes {
            let rows = n["report"]["tables"][&t]
                .as_u64()
                .map_or("-".into(), |r| r.to_string());
            print!(" {rows:>17}");
        }
        println!();
    }
    Ok(())
}
