//! `hangar layout …`: the operator's side of the cluster layout (Garage's
//! commands and flags), sent to the local node over the admin socket and
//! printed as tables or, with `--json`, as the node's JSON.

use clap::Subcommand;
use hangar_util::size::Size;
use serde_json::Value;

use crate::cli::commands::{call, print_json, typed};
use crate::cli::error::CliError;
use crate::cli::units::human;
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::layout_answers::{
    ApplyOutcome, DeadNodesSkipped, LayoutApplied, LayoutAssigned, LayoutConfigured,
    LayoutHistoryAnswer, LayoutRemoved, LayoutReverted, LayoutRole, LayoutShow, NodeTrackers,
    SyncAck,
};
use hangar_api_admin::proto::Request;
use hangar_layout::{AssignmentReport, NodeRole};

/// `hangar layout --help` examples.
pub const EXAMPLES: &str = "\
Examples:
  hangar layout assign f07e48ae -z dc1 -c 1T   stage a role (node id prefix from `hangar status`)
  hangar layout show                            what applying would do
  hangar layout apply --version 1 --wait        apply, then wait until every node holds its data
  hangar layout history";

/// Longest `layout apply --wait` waits by default.
const WAIT_DEFAULT_SECS: u64 = 3600;

#[derive(Subcommand, Debug)]
pub enum LayoutCmd {
    /// Stage a role for nodes: zone and capacity, or gateway. Fields not
    /// given keep the node's staged role.
    Assign {
        /// Node id prefixes (as `hangar status` shows them).
        #[arg(required = true)]
        nodes: Vec<String>,
        /// Zone (e.g. a datacenter name).
        #[arg(short = 'z', long)]
        zone: Option<String>,
        /// Storage capacity in bytes, or like 1T, 500G, 10GiB.
        #[arg(short = 'c', long, value_parser = parse_capacity)]
        capacity: Option<u64>,
        /// A gateway: stores nothing, serves requests.
        #[arg(short = 'g', long)]
        gateway: bool,
        /// Tags (repeat for several); replace the node's tags.
        #[arg(short = 't', long = "tag")]
        tags: Vec<String>,
    },
    /// Stage the removal of a node's role.
    Remove {
        /// Node id prefix.
        node: String,
    },
    /// Stage layout parameters.
    Config {
        /// Distinct zones each partition must span: a number or `maximum`.
        #[arg(short = 'r', long)]
        zone_redundancy: String,
    },
    /// The current layout, the staged changes and what applying them would do.
    Show,
    /// Make the staged changes the next layout version.
    Apply {
        /// The new version number: the current one + 1.
        #[arg(long)]
        version: u64,
        /// Then wait, showing the progress, until every node acknowledged
        /// the version, holds its data and reads from it (the old versions
        /// retired).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this many seconds (exit 5).
        #[arg(long, default_value_t = WAIT_DEFAULT_SECS, requires = "wait")]
        timeout: u64,
    },
    /// Drop the staged changes.
    Revert,
    /// The kept layout versions and each node's progress through them.
    History,
    /// Count the nodes that are down now as done with version N, so older
    /// versions do not wait for them forever.
    SkipDeadNodes {
        /// The version they are counted as having acknowledged.
        #[arg(long)]
        version: u64,
        /// Also count them as having synced it: reads move on even though
        /// their data may be missing.
        #[arg(long)]
        allow_missing_data: bool,
    },
}

fn parse_capacity(s: &str) -> Result<u64, String> {
    Size::parse(s).map(|s| s.0)
}

fn size(v: Option<u64>) -> String {
    v.map(human).unwrap_or_else(|| "-".into())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(16)]
}

fn role_text(r: Option<&NodeRole>) -> String {
    let Some(r) = r else {
        return "(none)".into();
    };
    let cap = match r.capacity {
        None => "gateway".to_string(),
        Some(c) => human(c),
    };
    if r.tags.is_empty() {
        format!("zone {} {cap}", r.zone)
    } else {
        format!("zone {} {cap} tags {}", r.zone, r.tags.join(","))
    }
}

/// Runs a layout command.
pub async fn run(client: &AdminClient, cmd: LayoutCmd, json: bool) -> Result<(), CliError> {
    let req = match cmd {
        LayoutCmd::Assign {
            nodes,
            zone,
            capacity,
            gateway,
            tags,
        } => Request::LayoutAssign {
            nodes,
            zone,
            capacity,
            gateway,
            tags,
        },
        LayoutCmd::Remove { node } => Request::LayoutRemove { node },
        LayoutCmd::Config { zone_redundancy } => Request::LayoutConfig { zone_redundancy },
        LayoutCmd::Show => Request::LayoutShow,
        LayoutCmd::Apply {
            version,
            wait,
            timeout,
        } => {
            let v = call(client, &Request::LayoutApply { version }).await?;
            if json && !wait {
                print_json(&v);
                return Ok(());
            }
            if !json {
                print_applied(&typed(&v)?);
            }
            if wait {
                let done = wait_synced(client, version, timeout).await?;
                if json {
                    print_json(&serde_json::json!({"applied": v, "synced": done}));
                }
            }
            return Ok(());
        }
        LayoutCmd::Revert => Request::LayoutRevert,
        LayoutCmd::History => Request::LayoutHistory,
        LayoutCmd::SkipDeadNodes {
            version,
            allow_missing_data,
        } => Request::LayoutSkipDeadNodes {
            version,
            allow_missing_data,
        },
    };
    let v = call(client, &req).await?;
    if json {
        print_json(&v);
        return Ok(());
    }
    match req {
        Request::LayoutAssign { .. } => {
            let a: LayoutAssigned = typed(&v)?;
            for n in &a.staged {
                println!("Staged {}: {}", n.node.short(), role_text(Some(&n.role)));
            }
            println!("Run `hangar layout show` to see what applying would do.");
        }
        Request::LayoutRemove { .. } => {
            let a: LayoutRemoved = typed(&v)?;
            println!("Staged the removal of {}.", a.removed.short());
            println!("Run `hangar layout show` to see what applying would do.");
        }
        Request::LayoutConfig { .. } => {
            let a: LayoutConfigured = typed(&v)?;
            println!("Staged zone redundancy {}.", a.zone_redundancy);
        }
        Request::LayoutShow => print_show(&typed(&v)?),
        Request::LayoutRevert => {
            let a: LayoutReverted = typed(&v)?;
            if a.reverted {
                println!("Staged changes dropped.");
            } else {
                println!("Nothing was staged.");
            }
        }
        Request::LayoutHistory => print_history(&typed(&v)?),
        Request::LayoutSkipDeadNodes { version, .. } => {
            let a: DeadNodesSkipped = typed(&v)?;
            for n in &a.nodes {
                println!("Skipped {}.", n.short());
            }
            println!(
                "{} dead nodes, {} progress entries changed.",
                a.nodes.len(),
                a.changed
            );
            match a.sync_ack {
                SyncAck::WhenSynced => println!(
                    "Version {version} is not synced yet, so their sync cannot be acknowledged: \
                     run this again once `hangar layout history` shows it synced, or the older \
                     versions will not retire."
                ),
                SyncAck::Blocked => println!(
                    "Version {version} cannot sync while these nodes are down: they hold \
                     partitions in it. Bring them back, or assign their partitions to other \
                     nodes, or run this with --allow-missing-data to count them as synced \
                     (their partitions then keep only the copies the other nodes have)."
                ),
                SyncAck::Set => {}
            }
        }
        _ => unreachable!("only layout requests are sent here"),
    }
    Ok(())
}

fn print_applied(a: &LayoutApplied) {
    println!("Layout version {} applied.", a.version);
    if let Some(r) = &a.report {
        println!("Partition replicas moved: {}", r.moves);
        print_zones(r);
    }
    println!(
        "Data moves to its new nodes in the background: `hangar status` shows each node's sync \
         (`layout apply --wait` waits for it)."
    );
}

/// How far the cluster is through `version`: nodes that acknowledged it,
/// storage nodes that synced it, nodes that read from it, and whether the
/// older versions are retired.
struct SyncCounts {
    acked: u64,
    synced: u64,
    reading: u64,
    nodes: u64,
    storage: u64,
    retired: bool,
}

fn sync_counts(history: &LayoutHistoryAnswer, roles: &[LayoutRole], version: u64) -> SyncCounts {
    let at = |node: &LayoutRole, k: fn(&NodeTrackers) -> Option<u64>| {
        history
            .trackers
            .get(&node.id.to_string())
            .and_then(k)
            .unwrap_or(0)
            >= version
    };
    let mut c = SyncCounts {
        acked: 0,
        synced: 0,
        reading: 0,
        nodes: roles.len() as u64,
        storage: 0,
        retired: false,
    };
    for r in roles {
        c.acked += at(r, |t| t.ack) as u64;
        c.reading += at(r, |t| t.sync_ack) as u64;
        if !r.gateway {
            c.storage += 1;
            c.synced += at(r, |t| t.sync) as u64;
        }
    }
    c.retired = history.versions.iter().all(|x| x.version >= version);
    c
}

/// `layout apply --wait`: polls the history every second, with a progress
/// display, until the versions before `version` are retired; exit 5 after
/// `timeout_secs`.
async fn wait_synced(
    client: &AdminClient,
    version: u64,
    timeout_secs: u64,
) -> Result<Value, CliError> {
    let show: LayoutShow = typed(&call(client, &Request::LayoutShow).await?)?;
    let roles = show.current.roles;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_secs);
    let mut bar = crate::cli::progress::Progress::new();
    loop {
        let h: LayoutHistoryAnswer = typed(&call(client, &Request::LayoutHistory).await?)?;
        let c = sync_counts(&h, &roles, version);
        let msg = format!(
            "layout version {version}: acknowledged by {}/{} nodes, synced by {}/{} storage nodes, read from by {}/{}",
            c.acked, c.nodes, c.synced, c.storage, c.reading, c.nodes
        );
        let total = 2 * c.nodes + c.storage;
        let done = c.acked + c.synced + c.reading;
        if c.retired {
            bar.finish(&format!(
                "Layout version {version} synced: every node holds its data and reads from it."
            ));
            return Ok(serde_json::json!({
                "version": version, "acknowledged": c.acked, "synced": c.synced,
                "reading": c.reading, "nodes": c.nodes, "storage_nodes": c.storage,
            }));
        }
        bar.update(done, Some(total), &msg);
        if std::time::Instant::now() >= deadline {
            bar.finish(&msg);
            return Err(CliError::new(
                crate::cli::error::Exit::Unavailable,
                format!(
                    "layout version {version} is not synced after {timeout_secs} s: `hangar layout history` \
                     shows which nodes lag, `hangar status` which are down (`hangar layout skip-dead-nodes` \
                     for nodes that will not come back)"
                ),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

fn print_zones(r: &AssignmentReport) {
    println!(
        "Partition size: {}; usable capacity {} of {} ({} zones per partition at least)",
        human(r.partition_size),
        human(r.usable_capacity),
        human(r.total_capacity),
        r.zone_redundancy
    );
    println!(
        "  {:<16} {:>5} {:>12} {:>12} {:>10}",
        "ZONE", "NODES", "CAPACITY", "USABLE", "PARTITIONS"
    );
    for z in &r.zones {
        println!(
            "  {:<16} {:>5} {:>12} {:>12} {:>10}",
            z.zone,
            z.nodes,
            human(z.capacity),
            human(z.usable),
            z.partitions
        );
    }
}

fn print_show(v: &LayoutShow) {
    let cur = &v.current;
    println!(
        "==== CURRENT CLUSTER LAYOUT: version {} (replication factor {}, zone redundancy {}) ====",
        cur.version, v.replication_factor, cur.zone_redundancy
    );
    if cur.roles.is_empty() {
        println!("No nodes have a role yet.");
    } else {
        println!(
            "{:<18} {:<12} {:>12} {:>10}  TAGS",
            "ID", "ZONE", "CAPACITY", "PARTITIONS"
        );
        for r in &cur.roles {
            let cap = if r.gateway {
                "gateway".into()
            } else {
                size(r.capacity)
            };
            println!(
                "{:<18} {:<12} {:>12} {:>10}  {}",
                r.id.short(),
                r.zone,
                cap,
                r.partitions,
                r.tags.join(",")
            );
        }
    }
    if let Some(r) = &cur.report {
        print_zones(r);
    }
    if !v.conflicts.is_empty() {
        println!();
        println!(
            "WARNING: layout versions applied twice with different content (the larger hash was kept everywhere; changes only in the other one must be staged again):"
        );
        for (ver, hashes) in &v.conflicts {
            println!("  version {ver}: {}", hashes.join(","));
        }
    }
    let staged = &v.staged;
    println!();
    if staged.roles.is_empty() && staged.parameters.is_none() {
        println!("No staged changes.");
        return;
    }
    println!("==== STAGED CHANGES ====");
    for r in &staged.roles {
        println!(
            "{:<18} {} -> {}",
            r.node.short(),
            role_text(r.current.as_ref()),
            match &r.staged {
                None => "(removed)".into(),
                Some(s) => role_text(Some(s)),
            }
        );
    }
    if let Some(p) = &staged.parameters {
        println!("zone redundancy: {} -> {}", p.current, p.staged);
    }
    println!();
    match &v.outcome {
        None => {
            println!(
                "The staged changes add up to the current layout: applying would change nothing."
            );
            println!("Drop them with `hangar layout revert`.");
        }
        Some(ApplyOutcome::Error(e)) => {
            println!("==== APPLYING IS IMPOSSIBLE ====");
            println!("{e}");
        }
        Some(ApplyOutcome::Ok(r)) => {
            println!("==== WHAT APPLYING WOULD DO: version {} ====", r.version);
            println!("Partition replicas moved: {}", r.moves);
            print_zones(r);
            println!(
                "  {:<18} {:<12} {:>12} {:>10} {:>12}",
                "NODE", "ZONE", "CAPACITY", "PARTITIONS", "USABLE"
            );
            for n in &r.nodes {
                println!(
                    "  {:<18} {:<12} {:>12} {:>10} {:>12}",
                    n.id.short(),
                    n.zone,
                    human(n.capacity),
                    n.partitions,
                    human(n.usable)
                );
            }
            println!();
            println!("To apply: hangar layout apply --version {}", r.version);
            println!("To drop:  hangar layout revert");
        }
    }
}

fn print_history(v: &LayoutHistoryAnswer) {
    println!(
        "{:>8} {:<9} {:>8} {:>9} {:>14}  HASH",
        "VERSION", "STATUS", "STORAGE", "GATEWAYS", "PARTITION SIZE"
    );
    for x in &v.versions {
        println!(
            "{:>8} {:<9} {:>8} {:>9} {:>14}  {}",
            x.version,
            x.status,
            x.storage_nodes,
            x.gateways,
            human(x.partition_size),
            short(&x.hash)
        );
    }
    let none0 = |x: u64| match x {
        0 => "none".to_string(),
        x => x.to_string(),
    };
    if v.retired_below > 0 {
        println!("Versions below {} are retired.", v.retired_below);
    }
    println!(
        "Progress reported by the data layers: acknowledged by every node: {}; synced: {}; read from by every node: {}.",
        none0(v.min_ack),
        none0(v.synced_version),
        none0(v.min_sync_ack)
    );
    for (ver, hashes) in &v.conflicts {
        println!("Version {ver} was applied twice: {}", hashes.join(","));
    }
    println!("Per node (latest version acknowledged / synced / read from):");
    for (node, x) in &v.trackers {
        println!(
            "  {}  {} / {} / {}",
            short(node),
            none_or(x.ack),
            none_or(x.sync),
            none_or(x.sync_ack)
        );
    }
}

fn none_or(v: Option<u64>) -> String {
    v.map_or("none".into(), |x| x.to_string())
}
