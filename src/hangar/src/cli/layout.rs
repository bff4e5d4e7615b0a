//! `hangar layout …`: the operator's side of the cluster layout (Garage's
//! commands and flags), sent to the local node over the admin socket and
//! printed as tables or, with `--json`, as the node's JSON.

use clap::Subcommand;
use hangar_util::size::Size;
use serde_json::Value;

use crate::cli::commands::{call, print_json, s};
use crate::cli::error::CliError;
use crate::cli::units::human;
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

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

fn size(v: &Value) -> String {
    v.as_u64().map(human).unwrap_or_else(|| "-".into())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(16)]
}

fn tags(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn role_text(r: &Value) -> String {
    if r.is_null() {
        return "(none)".into();
    }
    let cap = if r["capacity"].is_null() {
        "gateway".to_string()
    } else {
        size(&r["capacity"])
    };
    let t = tags(&r["tags"]);
    if t.is_empty() {
        format!("zone {} {cap}", s(r, "zone"))
    } else {
        format!("zone {} {cap} tags {t}", s(r, "zone"))
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
                print_applied(&v);
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
            for n in v["staged"].as_array().cloned().unwrap_or_default() {
                println!(
                    "Staged {}: {}",
                    short(&s(&n, "node")),
                    role_text(&n["role"])
                );
            }
            println!("Run `hangar layout show` to see what applying would do.");
        }
        Request::LayoutRemove { .. } => {
            println!("Staged the removal of {}.", short(&s(&v, "removed")));
            println!("Run `hangar layout show` to see what applying would do.");
        }
        Request::LayoutConfig { .. } => {
            println!("Staged zone redundancy {}.", s(&v, "zone_redundancy"));
        }
        Request::LayoutShow => print_show(&v),

        Request::LayoutRevert => {
            if v["reverted"] == Value::Bool(true) {
                println!("Staged changes dropped.");
            } else {
                println!("Nothing was staged.");
            }
        }
        Request::LayoutHistory => print_history(&v),
        Request::LayoutSkipDeadNodes { version, .. } => {
            let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
            for n in &nodes {
                println!("Skipped {}.", short(n.as_str().unwrap_or("")));
            }
            println!(
                "{} dead nodes, {} progress entries changed.",
                nodes.len(),
                s(&v, "changed")
            );
            match v["sync_ack"].as_str() {
                Some("when_synced") => println!(
                    "Version {version} is not synced yet, so their sync cannot be acknowledged: \
                     run this again once `hangar layout history` shows it synced, or the older \
                     versions will not retire."
                ),
                Some("blocked") => println!(
                    "Version {version} cannot sync while these nodes are down: they hold \
                     partitions in it. Bring them back, or assign their partitions to other \
                     nodes, or run this with --allow-missing-data to count them as synced \
                     (their partitions then keep only the copies the other nodes have)."
                ),
                _ => {}
            }
        }
        _ => unreachable!("only layout requests are sent here"),
    }
    Ok(())
}

fn print_applied(v: &Value) {
    let r = &v["report"];
    println!("Layout version {} applied.", s(v, "version"));
    println!("Partition replicas moved: {}", s(r, "moves"));
    print_zones(r);
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

fn sync_counts(history: &Value, roles: &[Value], version: u64) -> SyncCounts {
    let at = |node: &str, k: &str| history["trackers"][node][k].as_u64().unwrap_or(0) >= version;
    let mut c = SyncCounts {
        acked: 0,
        synced: 0,
        reading: 0,
        nodes: roles.len() as u64,
        storage: 0,
        retired: false,
    };
    for r in roles {
        let id = s(r, "id");
        c.acked += at(&id, "ack") as u64;
        c.reading += at(&id, "sync_ack") as u64;
        if r["gateway"] != Value::Bool(true) {
            c.storage += 1;
            c.synced += at(&id, "sync") as u64;
        }
    }
    let versions: Vec<u64> = history["versions"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["version"].as_u64()).collect())
        .unwrap_or_default();
    c.retired = versions.iter().all(|&x| x >= version);
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
    let show = call(client, &Request::LayoutShow).await?;
    let roles = show["current"]["roles"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_secs);
    let mut bar = crate::cli::progress::Progress::new();
    loop {
        let h = call(client, &Request::LayoutHistory).await?;
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

fn print_zones(r: &Value) {
    println!(
        "Partition size: {}; usable capacity {} of {} ({} zones per partition at least)",
        size(&r["partition_size"]),
        size(&r["usable_capacity"]),
        size(&r["total_capacity"]),
        s(r, "zone_redundancy")
    );
    println!(
        "  {:<16} {:>5} {:>12} {:>12} {:>10}",
        "ZONE", "NODES", "CAPACITY", "USABLE", "PARTITIONS"
    );
    for z in r["zones"].as_array().cloned().unwrap_or_default() {
        println!(
            "  {:<16} {:>5} {:>12} {:>12} {:>10}",
            s(&z, "zone"),
            s(&z, "nodes"),
            size(&z["capacity"]),
            size(&z["usable"]),
            s(&z, "partitions")
        );
    }
}

fn print_show(v: &Value) {
    let cur = &v["current"];
    println!(
        "==== CURRENT CLUSTER LAYOUT: version {} (replication factor {}, zone redundancy {}) ====",
        s(cur, "version"),
        s(v, "replication_factor"),
        s(cur, "zone_redundancy")
    );
    let roles = cur["roles"].as_array().cloned().unwrap_or_default();
    if roles.is_empty() {
        println!("No nodes have a role yet.");
    } else {
        println!(
            "{:<18} {:<12} {:>12} {:>10}  TAGS",
            "ID", "ZONE", "CAPACITY", "PARTITIONS"
        );
        for r in roles {
            let cap = if r["gateway"] == Value::Bool(true) {
                "gateway".into()
            } else {
                size(&r["capacity"])
            };
            println!(
                "{:<18} {:<12} {:>12} {:>10}  {}",
                short(&s(&r, "id")),
                s(&r, "zone"),
                cap,
                s(&r, "partitions"),
                tags(&r["tags"])
            );
        }
    }
    if !cur["report"].is_null() {
        print_zones(&cur["report"]);
    }
    if let Some(c) = v["conflicts"].as_object()
        && !c.is_empty()
    {
        println!();
        println!(
            "WARNING: layout versions applied twice with different content (the larger hash was kept everywhere; changes only in the other one must be staged again):"
        );
        for (ver, hashes) in c {
            println!("  version {ver}: {}", tags(hashes));
        }
    }
    let staged = &v["staged"];
    let sroles = staged["roles"].as_array().cloned().unwrap_or_default();
    println!();
    if sroles.is_empty() && staged["parameters"].is_null() {
        println!("No staged changes.");
        return;
    }
    println!("==== STAGED CHANGES ====");
    for r in sroles {
        println!(
            "{:<18} {} -> {}",
            short(&s(&r, "node")),
            role_text(&r["current"]),
            if r["staged"].is_null() {
                "(removed)".into()
            } else {
                role_text(&r["staged"])
            }
        );
    }
    if !staged["parameters"].is_null() {
        let p = &staged["parameters"];
        println!("zone redundancy: {} -> {}", s(p, "current"), s(p, "staged"));
    }
    println!();
    let outcome = &v["outcome"];
    if outcome.is_null() {
        println!("The staged changes add up to the current layout: applying would change nothing.");
        println!("Drop them with `hangar layout revert`.");
    } else if !outcome["error"].is_null() {
        println!("==== APPLYING IS IMPOSSIBLE ====");
        println!("{}", s(outcome, "error"));
    } else {
        let r = &outcome["ok"];
        println!(
            "==== WHAT APPLYING WOULD DO: version {} ====",
            s(r, "version")
        );
        println!("Partition replicas moved: {}", s(r, "moves"));
        print_zones(r);
        println!(
            "  {:<18} {:<12} {:>12} {:>10} {:>12}",
            "NODE", "ZONE", "CAPACITY", "PARTITIONS", "USABLE"
        );
        for n in r["nodes"].as_array().cloned().unwrap_or_default() {
            println!(
                "  {:<18} {:<12} {:>12} {:>10} {:>12}",
                short(&s(&n, "id")),
                s(&n, "zone"),
                size(&n["capacity"]),
                s(&n, "partitions"),
                size(&n["usable"])
            );
        }
        println!();
        println!(
            "To apply: hangar layout apply --version {}",
            s(r, "version")
        );
        println!("To drop:  hangar layout revert");
    }
}

fn print_history(v: &Value) {
    println!(
        "{:>8} {:<9} {:>8} {:>9} {:>14}  HASH",
        "VERSION", "STATUS", "STORAGE", "GATEWAYS", "PARTITION SIZE"
    );
    for x in v["versions"].as_array().cloned().unwrap_or_default() {
        println!(
            "{:>8} {:<9} {:>8} {:>9} {:>14}  {}",
            s(&x, "version"),
            s(&x, "status"),
            s(&x, "storage_nodes"),
            s(&x, "gateways"),
            size(&x["partition_size"]),
            short(&s(&x, "hash"))
        );
    }
    let none0 = |k: &str| match v[k].as_u64() {
        Some(0) | None => "none".to_string(),
        Some(x) => x.to_string(),
    };
    if v["retired_below"].as_u64().unwrap_or(0) > 0 {
        println!("Versions below {} are retired.", s(v, "retired_below"));
    }
    println!(
        "Progress reported by the data layers: acknowledged by every node: {}; synced: {}; read from by every node: {}.",
        none0("min_ack"),
        none0("synced_version"),
        none0("min_sync_ack")
    );
    if let Some(c) = v["conflicts"].as_object()
        && !c.is_empty()
    {
        for (ver, hashes) in c {
            println!("Version {ver} was applied twice: {}", tags(hashes));
        }
    }
    if let Some(t) = v["trackers"].as_object() {
        println!("Per node (latest version acknowledged / synced / read from):");
        for (node, x) in t {
            println!(
                "  {}  {} / {} / {}",
                short(node),
                none_or(&x["ack"]),
                none_or(&x["sync"]),
                none_or(&x["sync_ack"])
            );
        }
    }
}

fn none_or(v: &Value) -> String {
    v.as_u64().map_or("none".into(), |x| x.to_string())
}
