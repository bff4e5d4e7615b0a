//! `hangar status`: every known node at a glance — the layout's view
//! (address, zone, capacity, partitions, up/down, disks) and what each node
//! says it is doing (its layout version and sync, resync queue, scrub) —
//! and the cluster health.

use hangar_api_admin::answers::{ClusterStatus, Disk, PeerRow};
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;
use hangar_block::scrub::ScrubStatus;

use crate::cli::commands::{call, print_json, typed};
use crate::cli::error::CliError;

/// `hangar status --help` examples.
pub const EXAMPLES: &str = "\
Examples:
  hangar status
  hangar status --json | jq '.peers[] | select(.is_up | not) | .id'   the nodes that are down
  hangar --admin-url http://node2:3903 status";

/// Runs `hangar status`.
pub async fn status(client: &AdminClient, json: bool) -> Result<(), CliError> {
    let raw = call(client, &Request::Status).await?;
    if json {
        print_json(&raw);
        return Ok(());
    }
    let v: ClusterStatus = typed(&raw)?;
    let now = hangar_util::time::now_msec();
    let size = |x: Option<u64>| {
        x.map(crate::cli::units::human)
            .unwrap_or_else(|| "-".into())
    };
    let free = |d: Option<Disk>| match d {
        None => "-".to_string(),
        Some(d) => {
            let pct = if d.total == 0 {
                0.0
            } else {
                d.avail as f64 * 100.0 / d.total as f64
            };
            format!("{} ({pct:.0}%)", size(Some(d.avail)))
        }
    };
    println!(
        "==== NODES (layout version {}, replication factor {}) ====",
        v.layout_version, v.replication_factor
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
    for p in &v.peers {
        let seen = if p.peer.is_self {
            "-".into()
        } else {
            p.peer
                .last_seen_msec
                .map(|t| format!("{:.1}s ago", now.saturating_sub(t) as f64 / 1000.0))
                .unwrap_or_else(|| "never".into())
        };
        let rtt = p
            .peer
            .rtt_msec
            .filter(|_| !p.peer.is_self)
            .map(|r| format!("{r:.2}ms"))
            .unwrap_or_else(|| "-".into());
        let cap = if p.gateway == Some(true) {
            "gateway".into()
        } else {
            size(p.capacity)
        };
        let zone = match p.zone.as_deref() {
            None | Some("") => "-",
            Some(z) => z,
        };
        let host = match p.hostname.as_deref() {
            None | Some("") => "?",
            Some(h) => h,
        };
        println!(
            "{:<18} {:<14} {:<22} {:<8} {:>10} {:>5} {:<5} {:>10} {:>8} {:>16} {:>16}",
            short_id(p),
            host,
            p.peer.addr.as_deref().unwrap_or_default(),
            zone,
            cap,
            p.partitions,
            if p.peer.is_up { "up" } else { "DOWN" },
            seen,
            rtt,
            free(p.data_disk),
            free(p.metadata_disk),
        );
        if let Some(why) = &p.layout_refused {
            refused.push(format!("{}: {why}", p.peer.id.short()));
        }
    }
    if v.staged_changes {
        println!("There are staged layout changes: see `hangar layout show`.");
    }
    for r in refused {
        println!("Layout exchange refused with {r}");
    }
    print_activity(&v);
    let h = &v.health;
    println!();
    if h.status == "no layout applied" {
        println!(
            "Cluster health: no layout applied yet (`hangar layout assign`, then `hangar layout apply`)."
        );
    } else {
        let mode = serde_json::to_value(h.consistency_mode)
            .ok()
            .and_then(|m| m.as_str().map(str::to_owned))
            .unwrap_or_default();
        println!(
            "Cluster health: {} ({mode} mode, write quorum {} of {}): {} partitions healthy, {} degraded, {} unavailable, of {}",
            h.status.to_uppercase(),
            h.write_quorum,
            v.replication_factor,
            h.healthy,
            h.degraded,
            h.unavailable,
            h.partitions,
        );
    }
    Ok(())
}

/// A short node id, `*` after this node's.
fn short_id(p: &PeerRow) -> String {
    if p.peer.is_self {
        format!("{}*", p.peer.id.short())
    } else {
        p.peer.id.short()
    }
}

/// The second table: what each node reports it is doing.
fn print_activity(v: &ClusterStatus) {
    println!();
    println!("==== WHAT EACH NODE IS DOING ====");
    println!(
        "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
        "ID", "UP", "LAYOUT", "LAYOUT SYNC", "RESYNC Q", "IN FLIGHT", "SCRUB"
    );
    for p in &v.peers {
        let up = if p.peer.is_up { "up" } else { "DOWN" };
        let ls = &p.layout_sync;
        let sync = match ls.state.as_str() {
            "syncing" => format!(
                "syncing (ack {}, sync {})",
                num_or_none(ls.ack),
                num_or_none(ls.sync)
            ),
            "" => "-".to_owned(),
            other => other.to_owned(),
        };
        let Some(r) = &p.report else {
            let why = match p.report_error.as_deref() {
                None | Some("") | Some("node is down") => "-".to_owned(),
                Some(e) => format!("no report: {e}"),
            };
            println!(
                "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
                short_id(p),
                up,
                "-",
                sync,
                "-",
                "-",
                why
            );
            continue;
        };
        let scrub = match &r.scrub {
            None => "-".to_owned(),
            Some(sc) if sc.status == ScrubStatus::Idle => "idle".to_owned(),
            Some(sc) => format!(
                "{} {:.1}% ({} blocks)",
                serde_json::to_value(sc.status)
                    .ok()
                    .and_then(|s| s.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                sc.progress * 100.0,
                sc.checked
            ),
        };
        println!(
            "{:<18} {:<5} {:>7} {:<24} {:>9} {:>9} {:<22}",
            short_id(p),
            up,
            r.layout_version,
            sync,
            r.resync.queue,
            r.resync.in_flight,
            scrub
        );
    }
}

fn num_or_none(v: Option<u64>) -> String {
    v.map_or("none".into(), |x| x.to_string())
}
