//! `hangar-loadgen`: a warp-like S3 load generator built on the official AWS Rust SDK.
//!
//! It takes warp's benchmark names and options, so that warp's command lines run
//! as written (`hangar-loadgen get --host=localhost:3991 --objects 500 --obj.size
//! 1MiB --autoterm`), and prints warp's summary. `put`, `get`, `mixed`, `delete`,
//! `list` and `stat` run `--concurrent` workers against one bucket for
//! `--duration` (or, with `--autoterm`, until throughput is stable), then report
//! per operation its average throughput and its throughput split into 1-second
//! segments (fastest, median, slowest), or for mixed each operation's share and
//! the cluster total. Every answer is checked: GET bodies against the seed their
//! key carries, STAT lengths, DeleteObjects results, whole listings. Latency
//! percentiles are printed with `--analyze.v` (as warp) or `--table` (a column
//! table with CPU use), and are in the `--json` report.
//!
//! `overload` runs far more clients than the server can serve and reports, per
//! second, what it accepted and refused, then reads every acknowledged PUT back.
//! `summary` prints one table (with ratios) from several `--json` reports.

mod autoterm;
mod cli;
mod client;
mod cpu;
mod error;
mod expect;
mod mix;
mod modes;
mod ops;
mod outcome;
mod overload;
mod payload;
mod pool;
mod report;
mod run;
mod scale;
mod stats;
mod timeline;
mod warp_report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;

use crate::cli::{BenchArgs, Cli, Command, Mode, OverloadArgs, ScaleArgs, ScaleStep};
use crate::error::LoadgenError;
use crate::mix::Mix;
use crate::modes::Benchmark;
use crate::report::{Report, format_size};

/// Largest object size accepted: every worker holds one body in memory at a time.
const MAX_OBJ_SIZE: u64 = 1 << 30;

fn invalid(option: &'static str, reason: impl Into<String>) -> LoadgenError {
    LoadgenError::InvalidOption {
        option,
        reason: reason.into(),
    }
}

/// The run `args` ask for in `mode`; `prepares` says whether it uploads
/// `--objects` first.
fn plan(args: &BenchArgs, mode: Mode, prepares: bool) -> Result<run::Plan, LoadgenError> {
    let options = args.resolved(mode);
    if options.obj_size > MAX_OBJ_SIZE {
        return Err(invalid(
            "obj.size",
            format!("at most {}", format_size(MAX_OBJ_SIZE)),
        ));
    }
    if options.concurrent == 0 {
        return Err(invalid("concurrent", "must be at least 1"));
    }
    if options.duration.is_zero() {
        return Err(invalid("duration", "must be positive"));
    }
    if prepares && options.objects == 0 {
        return Err(invalid(
            "objects",
            "this benchmark needs at least 1 object to work on",
        ));
    }
    let autoterm = if args.autoterm {
        let min_stable: Duration = args.autoterm_dur.into();
        if min_stable.is_zero() {
            return Err(invalid("autoterm.dur", "must be positive"));
        }
        if !(args.autoterm_pct > 0.0 && args.autoterm_pct.is_finite()) {
            return Err(invalid("autoterm.pct", "must be positive"));
        }
        Some(autoterm::Config {
            min_stable,
            pct: args.autoterm_pct,
        })
    } else {
        None
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let nonce = now ^ (u64::from(std::process::id()) << 32);
    Ok(run::Plan {
        bucket: args.bucket.clone(),
        obj_size: options.obj_size,
        concurrent: options.concurrent,
        duration: options.duration,
        objects: if prepares { options.objects } else { 0 },
        prefix: format!("hangar-loadgen-{nonce:016x}"),
        prefixes: if mode == Mode::List {
            options.concurrent
        } else {
            1
        },
        nonce,
        body_kind: if args.streaming {
            ops::BodyKind::Streaming
        } else if args.expect_continue {
            ops::BodyKind::ExpectContinue
        } else {
            ops::BodyKind::InMemory
        },
        autoterm,
    })
}

/// The client, the bucket and the prepared objects of a run.
async fn setup(
    args: &BenchArgs,
    endpoint: &str,
    plan: &run::Plan,
) -> Result<(aws_sdk_s3::Client, Option<run::Prepared>), LoadgenError> {
    let client = client::build(&client::Target {
        endpoint: endpoint.to_owned(),
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
        Some(run::prepare(&client, plan).await?)
    } else {
        None
    };
    Ok((client, prepared))
}

async fn bench(args: BenchArgs, benchmark: Benchmark) -> Result<Report, LoadgenError> {
    let mode = benchmark.mode();
    let endpoint = args.endpoint()?;
    let plan = plan(&args, mode, mode != Mode::Put)?;
    match benchmark {
        Benchmark::Mixed(mix) => mix.check().map_err(|reason| invalid("*-distrib", reason))?,
        Benchmark::Delete { batch } => {
            if batch == 0 {
                return Err(invalid("batch", "must be at least 1"));
            }
            // As warp: fewer objects would end the run before it measured much.
            let want = batch * plan.concurrent * 4;
            if plan.objects < want {
                return Err(invalid(
                    "objects",
                    format!(
                        "with --batch {batch} and --concurrent {}, at least {want}",
                        plan.concurrent
                    ),
                ));
            }
        }
        _ => {}
    }
    let (client, prepared) = setup(&args, &endpoint, &plan).await?;
    tracing::info!(
        "{} {} x{} for {}",
        mode.name(),
        format_size(plan.obj_size),
        plan.concurrent,
        humantime::format_duration(plan.duration)
    );
    let client_cpu = cpu::process_cpu(None);
    let server_cpu = args.server_pid.and_then(|pid| cpu::process_cpu(Some(pid)));
    let specs = prepared
        .as_ref()
        .map(|p| p.specs.clone())
        .unwrap_or_default();
    let outcome = benchmark.run(&client, &plan, specs).await;
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
    // Warp shows the upload of the objects first, except for mixed.
    let (prepare_ops, prepare_concurrency) = match prepared {
        Some(p) if mode != Mode::Mixed => (p.recorder.summarize(p.elapsed), p.workers),
        _ => (Vec::new(), 0),
    };
    Ok(Report {
        mode: mode.name().to_owned(),
        endpoint,
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
        prepare_ops,
        prepare_concurrency,
        autoterm: outcome.verdict.map(|v| v.to_string()),
    })
}

async fn overload(args: OverloadArgs) -> Result<overload::OverloadReport, LoadgenError> {
    if args.bench.autoterm {
        return Err(invalid(
            "autoterm",
            "not for overload, which runs its full duration",
        ));
    }
    let endpoint = args.bench.endpoint()?;
    let plan = plan(&args.bench, Mode::Overload, args.get_percent > 0)?;
    let (client, prepared) = setup(&args.bench, &endpoint, &plan).await?;
    tracing::info!(
        "overload {} x{} ({}% GET) for {}",
        format_size(plan.obj_size),
        plan.concurrent,
        args.get_percent,
        humantime::format_duration(plan.duration)
    );
    let (report, left) = overload::run(
        &client,
        &endpoint,
        &plan,
        prepared.map(|p| p.specs).unwrap_or_default(),
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

/// Runs one step of `scale` and gives its report as JSON.
async fn scale(args: ScaleArgs) -> Result<serde_json::Value, LoadgenError> {
    let b = &args.bench;
    let client = client::build(&client::Target {
        endpoint: b.endpoint()?,
        access_key: b.access_key.clone(),
        secret_key: b.secret_key.clone(),
        region: b.region.clone(),
    });
    let size = b.obj_size.unwrap_or(0);
    let concurrent = b.concurrent.unwrap_or(32);
    let objects = b.objects.unwrap_or(0) as u64;
    Ok(match args.step {
        ScaleStep::Fill => {
            if args.to < args.from {
                return Err(invalid("to", "must not be below --from"));
            }
            client::ensure_bucket(&client, &b.bucket).await?;
            serde_json::to_value(
                scale::fill(&client, &b.bucket, args.from, args.to, size, concurrent).await?,
            )?
        }
        ScaleStep::Delete => serde_json::to_value(
            scale::delete(
                &client,
                &b.bucket,
                args.from,
                args.to,
                args.keep_every,
                concurrent,
            )
            .await?,
        )?,
        ScaleStep::Walk => {
            serde_json::to_value(scale::walk(&client, &b.bucket, objects, args.keep_every).await?)?
        }
        ScaleStep::Probe => serde_json::to_value(
            scale::probe(
                &client,
                &b.bucket,
                objects,
                args.keep_every,
                size,
                args.samples,
                concurrent,
            )
            .await?,
        )?,
    })
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

/// Prints a run's report (JSON or text) and gives the exit code: failure when
/// the run could not report or `judge` finds it failed, so that scripts notice.
/// `judge` gives the text, whether the run passed, and what to say on stderr.
fn finish<R: serde::Serialize>(
    outcome: Result<R, LoadgenError>,
    json: bool,
    judge: impl FnOnce(&R) -> (String, bool, String),
) -> ExitCode {
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            eprintln!("hangar-loadgen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (text, passed, notes) = judge(&report);
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("hangar-loadgen: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{text}");
    }
    eprint!("{notes}");
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What a benchmark's report leaves to stderr: the autoterm line when stdout
/// is JSON, and the first errors and objects left behind when stdout does not
/// show them (only `--table` shows both, `--analyze.v` the errors).
fn bench_notes(report: &Report, json: bool, table: bool, verbose: bool) -> String {
    let shows_errors = table || verbose;
    let mut notes = String::new();
    if json && let Some(line) = &report.autoterm {
        notes.push_str(line);
        notes.push('\n');
    }
    if !shows_errors {
        for op in report.prepare_ops.iter().chain(&report.ops) {
            for sample in &op.error_samples {
                notes.push_str(&format!("hangar-loadgen: {} error: {sample}\n", op.op));
            }
        }
    }
    if report.cleanup_failed > 0 && !table {
        notes.push_str(&format!(
            "hangar-loadgen: cleanup: {} objects left behind\n",
            report.cleanup_failed
        ));
    }
    notes
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
    let (args, benchmark) = match cli.command {
        Command::Put(args) => (args, Benchmark::Put),
        Command::Get(args) => (args, Benchmark::Get),
        Command::Mixed(m) => (
            m.bench,
            Benchmark::Mixed(Mix {
                get: m.get,
                stat: m.stat,
                put: m.put,
                delete: m.delete,
            }),
        ),
        Command::Delete(d) => (d.bench, Benchmark::Delete { batch: d.batch }),
        Command::List(args) => (args, Benchmark::List),
        Command::Stat(args) => (args, Benchmark::Stat),
        Command::Overload(args) => {
            let json = args.bench.json;
            return finish(overload(args).await, json, |r| {
                (r.to_table(), r.intact(), String::new())
            });
        }
        Command::Scale(args) => {
            return finish(scale(args).await, true, |_| {
                (String::new(), true, String::new())
            });
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
    let (json, table, verbose) = (args.json, args.table, args.analyze_v);
    finish(bench(args, benchmark).await, json, |r| {
        let text = if table {
            r.to_table()
        } else {
            warp_report::render(r, verbose)
        };
        let passed = r.errors == 0 && r.cleanup_failed == 0;
        (text, passed, bench_notes(r, json, table, verbose))
    })
}
