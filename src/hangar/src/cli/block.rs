//! `hangar repair …` and `hangar block …`: the operator's commands on the
//! blocks of a running node (answered by `block_admin` over the admin
//! socket).

use clap::Subcommand;
use hangar_block::ScrubStatus;
use serde::Serialize;

use crate::cli::commands::{call, print_fields, print_json, typed};
use crate::cli::error::CliError;
use crate::cli::error::Exit;
use crate::cli::progress::Progress;
use hangar_api_admin::block_answers::{
    BlocksQueued, BlocksRetried, ResyncError, ResyncQueueCleared, ResyncStats, ScrubState,
    WorkerInfo,
};
use hangar_api_admin::client::AdminClient;
use hangar_api_admin::proto::Request;

/// `hangar repair --help` examples.
pub const REPAIR_EXAMPLES: &str = "\
Examples:
  hangar repair blocks --wait        queue every block, then show the resync until it is done
  hangar repair tables               one anti-entropy pass now (a spinner while it runs)
  hangar repair scrub start          then `hangar worker info block-scrub` shows where it is
  hangar repair scrub start --wait   start a pass and show its progress until it is done";

/// Longest `repair blocks --wait` waits by default.
const WAIT_DEFAULT_SECS: u64 = 3600;

/// `repair blocks --wait --json`: the blocks queued, then where the resync
/// ended.
#[derive(Debug, Serialize)]
struct BlocksRepaired {
    queued: u64,
    resync: ResyncDone,
}

/// Where `repair blocks --wait` left the resync: its queue (only blocks
/// waiting for a retry after an error when it is done), how many of them
/// failed, and the worker's counters.
#[derive(Debug, Serialize)]
struct ResyncDone {
    queued: u64,
    failed: u64,
    /// `None` (null) from a node whose `worker info` has no counters.
    stats: Option<ResyncStats>,
}

/// `repair scrub start|resume --wait --json`: the scrub's state after the
/// command, and after its pass.
#[derive(Debug, Serialize)]
struct ScrubPassDone {
    started: ScrubState,
    scrub: ScrubState,
}

/// A scrub status as the node's JSON names it.
fn status_name(s: ScrubStatus) -> &'static str {
    match s {
        ScrubStatus::Idle => "idle",
        ScrubStatus::Running => "running",
        ScrubStatus::Paused => "paused",
    }
}

#[derive(Subcommand, Debug)]
pub enum RepairCmd {
    /// Queue every block this node references or has on disk for the
    /// resync worker (fetches what is missing, hands over what this node no
    /// longer stores).
    Blocks {
        /// Then wait, showing the progress, until the resync queue is
        /// empty (exit 1 if blocks are left waiting after errors).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this many seconds (exit 5).
        #[arg(long, default_value_t = WAIT_DEFAULT_SECS, requires = "wait")]
        timeout: u64,
    },
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
        /// With start or resume: then wait, showing the progress, until
        /// the pass is done (exit 1 if it is cancelled meanwhile).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this many seconds (exit 5); the
        /// scrub goes on.
        #[arg(long, default_value_t = WAIT_DEFAULT_SECS, requires = "wait")]
        timeout: u64,
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

/// Runs a repair command.
pub async fn repair(client: &AdminClient, cmd: RepairCmd, json: bool) -> Result<(), CliError> {
    match cmd {
        RepairCmd::Blocks { wait, timeout } => {
            let v = call(client, &Request::RepairBlocks).await?;
            let queued = typed::<BlocksQueued>(&v)?.queued;
            if !json {
                println!("{queued} blocks queued.");
            } else if !wait {
                print_json(&v);
            }
            if wait {
                let resync = wait_resync(client, queued, timeout).await?;
                if json {
                    print_json(&to_json(&BlocksRepaired { queued, resync }));
                }
            }
        }
        RepairCmd::Tables => {
            let v = with_spinner("anti-entropy pass of every sharded table", async {
                call(client, &Request::RepairTables).await
            })
            .await?;
            if json {
                print_json(&v);
            } else {
                print_fields(&v, 0);
            }
        }
        RepairCmd::ClearResyncQueue => {
            let v = call(client, &Request::ClearResyncQueue).await?;
            if json {
                print_json(&v);
            } else {
                let cleared = typed::<ResyncQueueCleared>(&v)?.cleared;
                println!("{cleared} blocks cleared.");
            }
        }
        RepairCmd::Scrub {
            command,
            wait: true,
            timeout,
        } => {
            if command != "start" && command != "resume" {
                return Err(format!(
                    "--wait goes with `repair scrub start` or `resume`, not {command}"
                )
                .into());
            }
            let v = call(client, &Request::Scrub { command }).await?;
            let started = typed::<ScrubState>(&v)?;
            let done = wait_scrub(client, &started, timeout).await?;
            if json {
                print_json(&to_json(&ScrubPassDone {
                    started,
                    scrub: done,
                }));
            } else {
                println!(
                    "Scrub done: {} blocks checked, {} corrupt.",
                    done.checked, done.corrupt
                );
            }
        }
        RepairCmd::Scrub { command, .. } => {
            let v = call(client, &Request::Scrub { command }).await?;
            if json {
                print_json(&v);
            } else {
                let st = typed::<ScrubState>(&v)?;
                println!(
                    "Scrub {}: {} blocks checked, {} corrupt this pass.",
                    status_name(st.status),
                    st.checked,
                    st.corrupt
                );
            }
        }
    }
    Ok(())
}

/// The JSON the CLI prints for an output of its own.
fn to_json(out: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(out).expect("the CLI's outputs serialize")
}

/// Runs a block command.
pub async fn block(client: &AdminClient, cmd: BlockCmd, json: bool) -> Result<(), CliError> {
    match cmd {
        BlockCmd::ListErrors => {
            let v = call(client, &Request::BlockListErrors).await?;
            if json {
                print_json(&v);
                return Ok(());
            }
            let rows = typed::<Vec<ResyncError>>(&v)?;
            if rows.is_empty() {
                println!("No block resync errors.");
            }
            let now = hangar_util::time::now_msec();
            for r in rows {
                println!(
                    "{}  {} tries, next in {} s: {}",
                    r.hash,
                    r.tries,
                    r.next_msec.saturating_sub(now) / 1000,
                    r.error
                );
            }
        }
        BlockCmd::RetryNow { hash, all: _ } => {
            let v = call(client, &Request::BlockRetryNow { hash }).await?;
            if json {
                print_json(&v);
            } else {
                let retried = typed::<BlocksRetried>(&v)?.retried;
                println!("{retried} blocks will be tried again now.");
            }
        }
        BlockCmd::Info { hash } => {
            let v = call(client, &Request::BlockInfo { hash }).await?;
            if json {
                print_json(&v);
            } else {
                print_fields(&v, 0);
            }
        }
    }
    Ok(())
}

/// Runs `fut` with a spinner (on a terminal) or a start and an end line
/// (piped), for an operation that answers only when it is done.
async fn with_spinner<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    let mut bar = Progress::new();
    let started = std::time::Instant::now();
    bar.update(0, None, &format!("{what}: running"));
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    tokio::pin!(fut);
    let r = loop {
        tokio::select! {
            r = &mut fut => break r,
            _ = tick.tick() => bar.update(0, None, &format!("{what}: running")),
        }
    };
    let secs = started.elapsed().as_secs_f64();
    match &r {
        Ok(_) => bar.finish(&format!("{what}: done in {secs:.1} s")),
        Err(_) => bar.finish(&format!("{what}: failed after {secs:.1} s")),
    }
    r
}

/// How far a scrub pass is through the hash space, in thousandths (the
/// position of its cursor, the last hash checked: blocks are visited in
/// hash order).
fn scrub_permille(state: &ScrubState) -> u64 {
    let top = state
        .cursor
        .as_deref()
        .and_then(|c| c.get(..8))
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .unwrap_or(0);
    u64::from(top) * 1000 / u64::from(u32::MAX)
}

/// `repair scrub start|resume --wait`: polls the scrub worker every second,
/// with a progress display, until the pass that `started` (the command's
/// answer) began is done; answers the scrub's last state. A pass cancelled
/// meanwhile fails (exit 1); a paused one is waited for.
async fn wait_scrub(
    client: &AdminClient,
    started: &ScrubState,
    timeout_secs: u64,
) -> Result<ScrubState, CliError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_secs);
    let since = started.pass_started_msec.unwrap_or(0);
    let mut bar = Progress::new();
    // Where the command left the pass, before the first poll.
    bar.update(
        scrub_permille(started),
        Some(1000),
        &format!(
            "scrub {}: {} blocks checked, {} corrupt, {} bytes read",
            status_name(started.status),
            started.checked,
            started.corrupt,
            started.bytes
        ),
    );
    loop {
        let w = call(
            client,
            &Request::WorkerInfo {
                name: "block-scrub".into(),
            },
        )
        .await?;
        let st = typed::<WorkerInfo>(&w)?.scrub.ok_or_else(|| {
            CliError::from("the node's `worker info block-scrub` has no scrub state")
        })?;
        let status = status_name(st.status);
        if st.status == ScrubStatus::Idle {
            let finished = st.last_pass_done_msec.is_some_and(|t| t >= since);
            if finished {
                bar.finish(&format!(
                    "scrub: pass done, {} blocks checked, {} corrupt, {} bytes read",
                    st.checked, st.corrupt, st.bytes
                ));
                return Ok(st);
            }
            bar.finish("scrub: cancelled");
            return Err(CliError::failed(
                "the scrub was cancelled before its pass ended: `hangar repair scrub start` starts a new one",
            ));
        }
        let msg = format!(
            "scrub {status}: {} blocks checked, {} corrupt, {} bytes read",
            st.checked, st.corrupt, st.bytes
        );
        bar.update(scrub_permille(&st), Some(1000), &msg);
        if std::time::Instant::now() >= deadline {
            bar.finish(&msg);
            return Err(CliError::new(
                Exit::Unavailable,
                format!(
                    "the scrub is not done after {timeout_secs} s (it goes on): `hangar worker info block-scrub` shows where it is"
                ),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// `repair blocks --wait`: polls the resync worker every second, with a
/// progress display, until its queue holds nothing but blocks waiting for
/// a retry after an error and no transfer runs (seen twice in a row).
async fn wait_resync(
    client: &AdminClient,
    queued: u64,
    timeout_secs: u64,
) -> Result<ResyncDone, CliError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_secs);
    let mut bar = Progress::new();
    let mut total = queued;
    let mut idle_seen = 0;
    loop {
        let w = call(
            client,
            &Request::WorkerInfo {
                name: "block-resync".into(),
            },
        )
        .await?;
        let w = typed::<WorkerInfo>(&w)?;
        let errors = call(client, &Request::BlockListErrors).await?;
        let failed = typed::<Vec<ResyncError>>(&errors)?.len() as u64;
        let queue = w.status.queue_length.unwrap_or(0);
        let stats = w.stats.unwrap_or_default();
        let in_flight = stats.in_flight;
        total = total.max(queue);
        let left = queue.saturating_sub(failed);
        let msg = format!(
            "block resync: {queue} queued, {in_flight} in flight, {} fetched, {} handed over, {failed} failed",
            stats.blocks_fetched, stats.blocks_handed_over
        );
        if left == 0 && in_flight == 0 {
            idle_seen += 1;
        } else {
            idle_seen = 0;
        }
        if idle_seen >= 2 {
            let out = ResyncDone {
                queued: queue,
                failed,
                stats: w.stats,
            };
            if failed > 0 {
                bar.finish(&msg);
                return Err(CliError::new(
                    Exit::Failed,
                    format!(
                        "{failed} blocks wait for a retry after errors: `hangar block list-errors` shows why, `hangar block retry-now` retries them"
                    ),
                ));
            }
            bar.finish("Block resync done: the queue is empty.");
            return Ok(out);
        }
        bar.update(total - left.min(total), Some(total), &msg);
        if std::time::Instant::now() >= deadline {
            bar.finish(&msg);
            return Err(CliError::new(
                Exit::Unavailable,
                format!(
                    "the resync queue is not empty after {timeout_secs} s: `hangar worker info block-resync` shows its progress"
                ),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
