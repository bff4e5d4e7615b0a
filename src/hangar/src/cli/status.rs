//! `hangar status`: every known node at a glance — the layout's view
//! (address, zone, capacity, partitions, up/down, disks) and what each node
//! says it is doing (its layout version and sync, resync queue, scrub) —
//! and the cluster health.

use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;
use serde_json::Value;

use crate::cli::commands::{call, print_json, s};
use crate::cli::error::CliError;

/// `hangar status --help` examples.
pub const EXAMPLES: &str = "\
Examples:
  hangar status
  hangar status --json | jq '.peers[] | select(.is_up | not) | .id'   the nodes that are down
  hangar --admin-url http://node2:3903 status";

/// Runs `hangar status`.
pub async fn status(client: &AdminClient, json: bool) -> Result<(), CliError> {
    let v = call(client, &Request::Status).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    let now = hangar_util::time::now_msec();
    let size = |x: &Value| {
        x.as_u64()
            .map(crate::cli::units::human)
            .unwrap_or_else(|| "-".into())
    };
    let free = |d: &Value| {
        if d.is_null() {
            "-".to_string()
        } else {
            let (a, t) = (
                d["avail"].as_u64().unwrap_or(0),
                d["total"].as_u64().unwrap_or(0),
            );
            let pct = if t == 0 {
                0.0
            } else {
                a as f64 * 100.0 / t as f64
            };
            format!("{} ({pct:.0}%)", size(&d["avail"]))
        }
    };
    println!(
        "==== NODES (layout version {}, replication factor {}) ====",
        s(&v, "layout_version"),
        s(&v, "replication_factor")
    );
    println!(
        "{:<18} {:<14} {:<22} {:<8} {:>10} {:>5} {:<5} {:>10} {:>8} {:>16} {:>16}",
        "ID",
        "HOSTNAME",
        "ADDRESS",
        "ZONE",
        "CAPACITY",
        "PARTS",
        "UP",
        "LAST SEEN",
        "RTT",
        "DATA FREE",
        "META FREE"
    );
    let mut refused = Vec::new();
    for p in v["peers"].as_array().cloned().unwrap_or_default() {
        let id = s(&p, "id");
        let short = if p["is_self"] == Value::Bool(true) {
            format!("{}*", &id[..id.len().min(16)])
        } else {
            id[..id.len().min(16)].to_owned()
        };
        let seen = if p["is_self"] == Value::Bool(true) {
            "-".into()
        } else {
            p["last_seen_msec"]
                .as_u64()
                .map(|t| format!("{:.1}s ago", now.saturating_sub(t) as f64 / 1000.0))
                .unwrap_or_else(|| "never".into())
        };
        let rtt = p["rtt_msec"]
            .as_f64()
            .filter(|_| p["is_self"] != Value::Bool(true))
            .map(|r| format!("{r:.2}ms"))
            .unwrap_or_else(|| "-".into());
        let cap = if p["gateway"] == Value::Bool(true) {
            "gateway".into()
        } else {
            size(&p["capacity"])
        };
        let zone = match s(&p, "zone") {
            z if z.is_empty() => "-".to_string(),
            z => z,
        };
        let host = match s(&p, "hostname") {
            h if h.is_empty() => "?".to_string(),
            h => h,
        };
        println!(
            "{:<18} {:<14} {:<22} {:<8} {:>10} {:>5} {:<5} {:>10} {:>8} {:>16} {:>16}",
            short,
            host,
            s(&p, "addr"),
            zone,
            cap,
            s(&p, "partitions"),
            if p["is_up"] == Value::Bool(true) {
                "up"
            } else {
                "DOWN"
            },
            seen,
            rtt,
            free(&p["data_disk"]),
            free(&p["metadata_disk"]),
        );
        if let Some(why) = p["layout_refused"].as_str() {
            refused.push(format!("{}: {why}", &id[..id.len().min(16)]));
        }
    }
    if v["staged_changes"] == Value::Bool(true) {
        println!("There are staged layout changes: see `hangar layout show`.");
    }
    for r in refused {
        println!("Layout exchange refused with {r}");
    }
    print_activity(&v);
    let h = &v["health"];
    println!();
    if s(h, "status") == "no layout applied" {
        println!(
            "Cluster health: no layout applied yet (`hangar layout assign`, then `hangar layout apply`)."
        );
    } else {
        println!(
            "Cluster health: {} ({} mode, write quorum {} of {}): {} partitions healthy, {} degraded, {} unavailable, of {}",
            s(h, "status").to_uppercase(),
            s(h, "consistency_mode"),
            s(h, "write_quorum"),
            s(&v, "replication_factor"),
            s(h, "healthy"),
            s(h, "degraded"),
            s(h, "unavailable"),
            s(h, "partitions"),
        );
    }
    Ok(())
}

/// A short node id, `*` after this node's.
fn short_id(p: &Value) -> String {
    let id = s(p, "id");
    let short = &id[..id.len().min(16)];
    if p["is_self"] == Value::Bool(true) {
        format!("{short}*")
    } else {
        short.to_owned()
    }
}

/// The second table: what each node reports it is doing.
fn print_activity(v: &Value) {
    println!();
    println!("==== WHAT EACH NODE IS DOING ====");
    println!(
        "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
        "ID", "UP", "LAYOUT", "LAYOUT SYNC", "RESYNC Q", "IN FLIGHT", "SCRUB"
    );
    for p in v["peers"].as_array().cloned().unwrap_or_default() {
        let up = if p["is_up"] == Value::Bool(true) {
            "up"
        } else {
            "DOWN"
        };
        let ls = &p["layout_sync"];
        let sync = match s(ls, "state").as_str() {
            "syncing" => format!(
                "syncing (ack {}, sync {})",
                num_or_none(&ls["ack"]),
                num_or_none(&ls["sync"])
            ),
            "" => "-".to_owned(),
            other => other.to_owned(),
        };
        let r = &p["report"];
        if r.is_null() {
            let why = match s(&p, "report_error") {
                e if e.is_empty() || e == "node is down" => "-".to_owned(),
                e => format!("no report: {e}"),
            };
            println!(
                "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
                short_id(&p),
                up,
                "-",
                sync,
                "-",
                "-",
                why
            );
            continue;
        }
        let sc = &r["scrub"];
        let scrub = match s(sc, "status").as_str() {
            "" => "-".to_owned(),
            "idle" => "idle".to_owned(),
            st => format!(
                "{st} {:.1}% ({} blocks)",
                sc["progress"].as_f64().unwrap_or(0.0) * 100.0,
                s(sc, "checked")
            ),
        };
        println!(
            "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
            short_id(&p),
            up,
            s(r, "layout_version"),
            sync,
            s(&r["resync"], "queue"),
            s(&r["resync"], "in_flight"),
            scrub
        );
    }
}

fn num_or_none(v: &Value) -> String {
    v.as_u64().map_or("none".into(), |x| x.to_string())
}
