//! `hangar stats`: per bucket its objects and bytes, per node its disks,
//! block files and the rows of each table, from the node's
//! `ClusterStatistics` operation.

use std::collections::BTreeSet;

use hangar_api_admin::answers::{ClusterStats, Disk};
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

use crate::cli::commands::{call, print_json, typed};
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

fn size(v: Option<u64>) -> String {
    v.map(human).unwrap_or_else(|| "-".into())
}

fn disk(d: Option<Disk>) -> String {
    match d {
        None => "-".into(),
        Some(d) => format!("{} / {}", size(Some(d.avail)), size(Some(d.total))),
    }
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
    let st: ClusterStats = typed(&v)?;
    println!("==== BUCKETS ====");
    println!(
        "{:<40} {:>12} {:>12} {:>16}",
        "NAME", "OBJECTS", "SIZE", "BYTES"
    );
    for b in &st.buckets {
        println!(
            "{:<40} {:>12} {:>12} {:>16}",
            b.name,
            b.objects,
            size(Some(b.bytes)),
            b.bytes
        );
    }
    let t = &st.totals;
    println!(
        "{:<40} {:>12} {:>12} {:>16}",
        format!("total ({} buckets)", t.buckets),
        t.objects,
        size(Some(t.bytes)),
        t.bytes
    );
    println!();
    println!("==== NODES ====");
    println!(
        "{:<18} {:<14} {:<5} {:>22} {:>22} {:>9} {:>12}",
        "ID", "HOSTNAME", "UP", "DATA FREE / TOTAL", "META FREE / TOTAL", "BLOCKS", "BLOCK BYTES"
    );
    for n in &st.nodes {
        let r = n.report.as_ref();
        let up = if n.is_up { "up" } else { "DOWN" };
        let host = match n.hostname.as_deref() {
            None | Some("") => "?",
            Some(h) => h,
        };
        let blocks = r.and_then(|r| r.blocks);
        println!(
            "{:<18} {:<14} {:<5} {:>22} {:>22} {:>9} {:>12}",
            short(&n.id),
            host,
            up,
            disk(r.and_then(|r| r.data_disk)),
            disk(r.and_then(|r| r.metadata_disk)),
            blocks.map_or("-".into(), |b| b.count.to_string()),
            size(blocks.map(|b| b.bytes))
        );
        if r.is_none()
            && n.is_up
            && let Some(e) = &n.report_error
        {
            println!("  no report: {e}");
        }
    }
    let tables: BTreeSet<&String> = st
        .nodes
        .iter()
        .filter_map(|n| n.report.as_ref())
        .flat_map(|r| r.tables.keys())
        .collect();
    println!();
    println!("==== TABLE ROWS PER NODE ====");
    print!("{:<12}", "TABLE");
    for n in &st.nodes {
        print!(" {:>17}", short(&n.id));
    }
    println!();
    for t in tables {
        print!("{t:<12}");
        for n in &st.nodes {
            let rows = n
                .report
                .as_ref()
                .and_then(|r| r.tables.get(t))
                .map_or("-".into(), |r| r.to_string());
            print!(" {rows:>17}");
        }
        println!();
    }
    Ok(())
}
