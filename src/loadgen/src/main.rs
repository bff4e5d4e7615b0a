//! `hangar-loadgen`: a warp-like S3 load generator built on the official AWS Rust SDK.
//!
//! `put`, `get` and `mixed` run `--concurrent` workers against one bucket for
//! `--duration`, then report MiB/s, obj/s, latency percentiles and errors per
//! operation; every GET body is checked against the seed its key carries. `overload`
//! runs far more clients than the server can serve and reports, per second, what it
//! accepted and refused, then reads every acknowledged PUT back. `summary` prints one
//! table (with ratios) from several `--json` reports.

mod client;
mod cpu;
mod error;
mod expect;
mod ops;
mod outcome;
mod overload;
mod payload;
mod pool;
mod report;
mod run;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytesize::ByteSize;
use clap::{Args, Parser, Subcommand};

use crate::error::LoadgenError;
use crate::report::{Report, format_size};

/// Largest object size accepted: every worker holds one body in memory at a time.
const MAX_OBJ_SIZE: u64 = 1 << 30;

#[derive(Debug, Parser)]
#[command(
    name = "hangar-loadgen",
    version,
    about = "Warp-like S3 load generator (AWS Rust SDK)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Upload new objects for the whole duration.
    Put(BenchArgs),
    /// Upload --objects objects, then download random ones and check their content.
    Get(BenchArgs),
    /// Upload --objects objects, then run warp's mix: 45% GET, 15% PUT, 30% STAT, 10% DELETE.
    Mixed(BenchArgs),
    /// Upload --objects objects, then run PUTs of new objects and GETs of those with no
    /// retries, reporting per second what was accepted and what refused (`503
    /// SlowDown`; a refused client backs off before its next request as the SDKs'
    /// standard retry strategy would, unless --no-backoff); then read every
    /// acknowledged PUT back. Meant for far more --concurrent clients than the
    /// server can serve.
    Overload(OverloadArgs),
    /// Print one table, with ratios between runs, from reports written with --json.
    Summary {
        /// JSON report files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Clone, Args)]
struct BenchArgs {
    /// S3 endpoint URL (plain http).
    #[arg(long, default_value = "http://127.0.0.1:3900")]
    endpoint: String,
    /// Access key ID.
    #[arg(long)]
    access_key: String,
    /// Secret access key.
    #[arg(long)]
    secret_key: String,
    /// SigV4 region.
    #[arg(long, default_value = "garage")]
    region: String,
    /// Bucket to use; created if missing.
    #[arg(long, default_value = "hangar-loadgen")]
    bucket: String,
    /// Size of each object, e.g. 4KiB, 1MiB.
    #[arg(long, default_value = "1MiB")]
    obj_size: ByteSize,
    /// Operations in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrent: usize,
    /// How long to keep starting operations, e.g. 30s, 1m.
    #[arg(long, default_value = "30s")]
    duration: humantime::Duration,
    /// Objects uploaded before a get or mixed run.
    #[arg(long, default_value_t = 200)]
    objects: usize,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Leave the run's objects in the bucket instead of deleting them afterwards.
    #[arg(long)]
    no_cleanup: bool,
    /// Hand PUT bodies to the SDK as streams: it then sends them aws-chunked with an
    /// unsigned payload and the CRC32 in a trailer, instead of signing the payload's
    /// SHA-256 (what it does for bodies in memory).
    #[arg(long)]
    streaming: bool,
    /// Send each PUT with `Expect: 100-continue` and its body only after the
    /// server's `100 Continue`, as aws-cli, boto3 and the Java SDK do (a
    /// presigned request over a connection of its own; not with `--streaming`).
    #[arg(long, conflicts_with = "streaming")]
    expect_continue: bool,
    /// PID of the server process on this machine, to report its CPU time during the
    /// measured phase (read from /proc).
    #[arg(long)]
    server_pid: Option<u32>,
}

#[derive(Debug, Clone, Args)]
struct OverloadArgs {
    #[command(flatten)]
    bench: BenchArgs,
    /// Share of operations that are GETs, in percent (the rest are PUTs).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    get_percent: u8,
    /// A refused client sends its next request at once, instead of backing off
    /// as the AWS SDKs' standard retry strategy does.
    #[arg(long)]
    no_backoff: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Put,
    Get,
    Mixed,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Put => "put",
            Mode::Get => "get",
            Mode::Mixed => "mixed",
        }
    }
}

/// The run `args` ask for; `prepares` says whether it uploads `--objects` first.
fn plan(args: &BenchArgs, prepares: bool) -> Result<run::Plan, LoadgenError> {
    let obj_size = args.obj_size.as_u64();
    if obj_size > MAX_OBJ_SIZE {
        return Err(LoadgenError::InvalidOption {
            option: "obj-size",
            reason: format!("at most {}", format_size(MAX_OBJ_SIZE)),
        });
    }
    if args.concurrent == 0 {
        return Err(LoadgenError::InvalidOption {
            option: "concurrent",
            reason: "must be at least 1".into(),
        });
    }
    let duration: Duration = args.duration.into();
    if duration.is_zero() {
        return Err(LoadgenError::InvalidOption {
            option: "duration",
            reason: "must be positive".into(),
        });
    }
    if prepares && args.objects == 0 {
        return Err(LoadgenError::InvalidOption {
            option: "objects",
            reason: "get, mixed and overload with GETs need at least 1 object".into(),
        });
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let nonce = now ^ (u64::from(std::process::id()) << 32);
    Ok(run::Plan {
        bucket: args.bucket.clone(),
        obj_size,
        concurrent: args.concurrent,
        duration,
        objects: if prepares { args.objects } else { 0 },
        prefix: format!("hangar-loadgen-{nonce:016x}"),
        nonce,
        body_kind: if args.streaming {
            ops::BodyKind::Streaming
        } else if args.expect_continue {
            ops::BodyKind::ExpectContinue
        } else {
            ops::BodyKind::InMemory
        },
    })
}

/// The client, the bucket and the prepared objects of a run.
async fn setup(
    args: &BenchArgs,
    plan: &run::Plan,
) -> Result<(aws_sdk_s3::Client, Vec<payload::ObjectSpec>), LoadgenError> {
    let client = client::build(&client::Target {
        endpoint: args.endpoint.clone(),
        access_key: args.access_key.clone(),
        secret_key: args.secret_key.clone(),
        region: args.region.clone(),
    });
    client::ensure_bucket(&client, &plan.bucket).await?;
    let prepared = if plan.objects > 0 {
        tracing::info!(
            "preparing {} objects of {}",
            plan.objects,
            format_size(plan.obj_size)
        );
        run::prepare(&client, plan).await?
    } else {
        Vec::new()
    };
    Ok((client, prepared))
}

async fn bench(args: BenchArgs, mode: Mode) -> Result<Report, LoadgenError> {
    let plan = plan(&args, mode != Mode::Put)?;
    let (client, prepared) = setup(&args, &plan).await?;
    tracing::info!(
        "{} {} x{} for {}",
        mode.name(),
        format_size(plan.obj_size),
        plan.concurrent,
        args.duration
    );
    let client_cpu = cpu::process_cpu(None);
    let server_cpu = args.server_pid.and_then(|pid| cpu::process_cpu(Some(pid)));
    let outcome = match mode {
        Mode::Put => run::run_put(&client, &plan).await,
        Mode::Get => run::run_get(&client, &plan, prepared).await,
        Mode::Mixed => run::run_mixed(&client, &plan, prepared).await,
    };
    let cpu_since = |before: Option<Duration>, pid: Option<u32>| {
        Some((cpu::process_cpu(pid)? - before?).as_secs_f64())
    };
    let client_cpu_s = cpu_since(client_cpu, None);
    let server_cpu_s = args
        .server_pid
        .and_then(|pid| cpu_since(server_cpu, Some(pid)));
    let cleanup_failed = if args.no_cleanup {
        0
    } else {
        tracing::info!("deleting {} objects", outcome.left.len());
        run::cleanup(&client, &plan.bucket, &outcome.left).await
    };
    let ops = outcome.recorder.summarize(outcome.elapsed);
    Ok(Report {
        mode: mode.name().to_owned(),
        endpoint: args.endpoint,
        bucket: plan.bucket,
        obj_size: plan.obj_size,
        concurrent: plan.concurrent,
        duration_s: plan.duration.as_secs_f64(),
        elapsed_s: outcome.elapsed.as_secs_f64(),
        prepared_objects: plan.objects,
        errors: ops.iter().map(|o| o.errors).sum(),
        ops,
        cleanup_failed,
        client_cpu_s,
        server_cpu_s,
        streaming: args.streaming,
    })
}

async fn overload(args: OverloadArgs) -> Result<overload::OverloadReport, LoadgenError> {
    let plan = plan(&args.bench, args.get_percent > 0)?;
    let (client, prepared) = setup(&args.bench, &plan).await?;
    tracing::info!(
        "overload {} x{} ({}% GET) for {}",
        format_size(plan.obj_size),
        plan.concurrent,
        args.get_percent,
        args.bench.duration
    );
    let (report, left) = overload::run(
        &client,
        &args.bench.endpoint,
        &plan,
        prepared,
        args.get_percent,
        if args.no_backoff {
            overload::AfterRefusal::Ignore
        } else {
            overload::AfterRefusal::BackOff
        },
    )
    .await;
    if !args.bench.no_cleanup {
        tracing::info!("deleting {} objects", left.len());
        let failed = run::cleanup(&client, &plan.bucket, &left).await;
        if failed > 0 {
            tracing::warn!("cleanup: {failed} objects left behind");
        }
    }
    Ok(report)
}

fn summary(files: &[PathBuf]) -> Result<String, LoadgenError> {
    let reports = files
        .iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(path).map_err(|source| LoadgenError::ReadReport {
                    path: path.display().to_string(),
                    source,
                })?;
            Ok(serde_json::from_str(&text)?)
        })
        .collect::<Result<Vec<Report>, LoadgenError>>()?;
    Ok(report::summary_table(&reports))
}

/// Prints a run's report (JSON or table) and gives the exit code: failure when
/// the run could not report or `judge` finds it failed, so that scripts notice.
fn finish<R: serde::Serialize>(
    outcome: Result<R, LoadgenError>,
    json: bool,
    judge: impl FnOnce(&R) -> (String, bool),
) -> ExitCode {
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            eprintln!("hangar-loadgen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (table, passed) = judge(&report);
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("hangar-loadgen: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{table}");
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let (args, mode) = match cli.command {
        Command::Put(args) => (args, Mode::Put),
        Command::Get(args) => (args, Mode::Get),
        Command::Mixed(args) => (args, Mode::Mixed),
        Command::Overload(args) => {
            let json = args.bench.json;
            return finish(overload(args).await, json, |r| (r.to_table(), r.intact()));
        }
        Command::Summary { files } => {
            return match summary(&files) {
                Ok(table) => {
                    print!("{table}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("hangar-loadgen: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    };
    let json = args.json;
    finish(bench(args, mode).await, json, |r| {
        (r.to_table(), r.errors == 0 && r.cleanup_failed == 0)
    })
}
