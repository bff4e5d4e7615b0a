//! `hangar repair …` and `hangar block …`: the operator's commands on the
//! blocks of a running node (answered by `block_admin` over the admin
//! socket).

use clap::Subcommand;
use serde_json::Value;

use crate::cli::{call, s};
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

#[derive(Subcommand, Debug)]
pub enum RepairCmd {
    /// Queue every block this node references or has on disk for the
    /// resync worker (fetches what is missing, hands over what this node no
    /// longer stores).
    Blocks,
    /// Run one anti-entropy pass of every sharded table now.
    Tables,
    /// Empty the resync queue and its error list (blocks whose references
    /// change are queued again; `repair blocks` queues everything).
    ClearResyncQueue,
    /// Drive the scrub, which re-reads every block slowly and quarantines
    /// the corrupt ones: `start`, `pause`, `resume` or `cancel`.
    Scrub {
        #[arg(value_parser = ["start", "pause", "resume", "cancel"])]
        command: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum BlockCmd {
    /// Blocks whose last resync attempt failed, with the error and when
    /// they are tried again.
    ListErrors,
    /// Try failed blocks again now instead of after their backoff.
    RetryNow {
        /// One block's hash; without it, every failed block.
        hash: Option<String>,
        /// Every failed block (the default when no hash is given).
        #[arg(long, conflicts_with = "hash")]
        all: bool,
    },
    /// What this node knows of a block: references, count, file, the
    /// nodes that store it, its last resync error.
    Info { hash: String },
}

/// Prints `v` as JSON; a closed pipe (`| head`) ends the output quietly.
fn print(v: &Value) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(v).expect("json")
    );
}

/// Runs a repair command.
pub async fn repair(client: &AdminClient, cmd: RepairCmd, json: bool) -> Result<(), String> {
    let (req, what) = match cmd {
        RepairCmd::Blocks => (Request::RepairBlocks, "queued"),
        RepairCmd::Tables => (Request::RepairTables, ""),
        RepairCmd::ClearResyncQueue => (Request::ClearResyncQueue, "cleared"),
        RepairCmd::Scrub { command } => {
            let v = call(client, &Request::Scrub { command }).await?;
            if json {
                print(&v);
            } else {
                println!(
                    "Scrub {}: {} blocks checked, {} corrupt this pass.",
                    s(&v, "status"),
                    s(&v, "checked"),
                    s(&v, "corrupt")
                );
            }
            return Ok(());
        }
    };
    let v = call(client, &req).await?;
    if json || what.is_empty() {
        print(&v);
    } else {
        println!("{} blocks {what}.", s(&v, what));
    }
    Ok(())
}

/// Runs a block command.
pub async fn block(client: &AdminClient, cmd: BlockCmd, json: bool) -> Result<(), String> {
    match cmd {
        BlockCmd::ListErrors => {
            let v = call(client, &Request::BlockListErrors).await?;
            if json {
                print(&v);
                return Ok(());
            }
            let rows = v.as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                println!("No block resync errors.");
            }
            let now = hangar_util::time::now_msec();
            for r in rows {
                let next = r["next_msec"].as_u64().unwrap_or(0);
                println!(
                    "{}  {} tries, next in {} s: {}",
                    s(&r, "hash"),
                    s(&r, "tries"),
                    next.saturating_sub(now) / 1000,
                    s(&r, "error")
                );
            }
        }
        BlockCmd::RetryNow { hash, all: _ } => {
            let v = call(client, &Request::BlockRetryNow { hash }).await?;
            if json {
                print(&v);
            } else {
                println!("{} blocks will be tried again now.", s(&v, "retried"));
            }
        }
        BlockCmd::Info { hash } => print(&call(client, &Request::BlockInfo { hash }).await?),
    }
    Ok(())
}
