//! Metadata commit benchmark (`script/bench-meta`): commits/s and commit
//! latency of `Db::write` (each a read and a write of one 128-byte row, as a
//! table insert merging into the stored row does) with 1, 8, 32 and 128
//! concurrent writers, for
//! per-write fsync, group commit with fsync (the serial committer, which
//! syncs each batch before starting the next, and the pipelined one of
//! `Db::new`) and no fsync, on each engine.
//!
//! Every cell runs on a fresh store under `--dir` (use a real disk, not
//! tmpfs), in a child process of its own, so that no cell pays for closing
//! the store of the one before (sled writes out unflushed data in background
//! threads shared by every store of a process). All cells run in one
//! invocation so that their ratios are comparable on a shared, noisy machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hangar_db::{Db, DbError, DbOptions, Engine, Pipelining, RedbEngine, SledEngine};

struct Args {
    dir: PathBuf,
    seconds: f64,
    engines: Vec<String>,
    writers: Vec<usize>,
    /// Rounds over every cell; the table reports the median.
    repeat: usize,
    /// `ENGINE:MODE:WRITERS`: run this one cell and print it (child mode).
    cell: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: hangar-bench-meta [--dir DIR] [--seconds S] [--repeat N] [--engines sled,redb] [--writers 1,8,32,128]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("target/bench-meta"),
        seconds: 2.0,
        engines: vec!["sled".into(), "redb".into()],
        writers: vec![1, 8, 32, 128],
        repeat: 3,
        cell: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(v) = it.next() else { usage() };
        match flag.as_str() {
            "--dir" => a.dir = PathBuf::from(v),
            "--seconds" => a.seconds = v.parse().unwrap_or_else(|_| usage()),
            "--engines" => a.engines = v.split(',').map(String::from).collect(),
            "--writers" => {
                a.writers = v
                    .split(',')
                    .map(|n| n.parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "--repeat" => a.repeat = v.parse::<usize>().unwrap_or_else(|_| usage()).max(1),
            "--cell" => a.cell = Some(v),
            _ => usage(),
        }
    }
    a
}

/// One way of running the committer.
#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    opts: DbOptions,
    pipelining: Pipelining,
}

const MODES: [Mode; 4] = [
    Mode {
        name: "per-write fsync",
        opts: DbOptions {
            fsync: true,
            max_batch: 1,
            queue_len: 4096,
        },
        pipelining: Pipelining::On,
    },
    Mode {
        name: "group commit+fsync, serial",
        opts: DbOptions {
            fsync: true,
            max_batch: 256,
            queue_len: 4096,
        },
        pipelining: Pipelining::Off,
    },
    Mode {
        name: "group commit+fsync",
        opts: DbOptions {
            fsync: true,
            max_batch: 256,
            queue_len: 4096,
        },
        pipelining: Pipelining::On,
    },
    Mode {
        name: "no fsync",
        opts: DbOptions {
            fsync: false,
            max_batch: 256,
            queue_len: 4096,
        },
        pipelining: Pipelining::On,
    },
];

struct Cell {
    commits_per_s: f64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    mean_batch: f64,
}

fn open(engine: &str, dir: &Path) -> Arc<dyn Engine> {
    std::fs::create_dir_all(dir).expect("create bench dir");
    match engine {
        "sled" => Arc::new(SledEngine::open(&dir.join("db.sled"), 64 << 20).expect("open sled")),
        "redb" => Arc::new(RedbEngine::open(&dir.join("db.redb"), 64 << 20).expect("open redb")),
        other => {
            eprintln!("unknown engine {other}");
            usage()
        }
    }
}

async fn run_cell(engine: Arc<dyn Engine>, mode: Mode, writers: usize, secs: f64) -> Cell {
    let closed = Arc::downgrade(&engine);
    let db = Db::with_pipelining(engine, mode.opts, mode.pipelining);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers as u32)
        .map(|w| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut seq = 0u64;
                while Instant::now() < deadline {
                    let mut key = w.to_be_bytes().to_vec();
                    key.extend_from_slice(&seq.to_be_bytes());
                    let t = Instant::now();
                    db.write(move |tx| {
                        // Like a table insert, which merges the new row into
                        // the stored one: read, then write.
                        let old = tx.get("bench", &key)?;
                        let mut row = old.unwrap_or_default();
                        row.resize(128, 0x5a);
                        tx.put("bench", key, row);
                        Ok::<_, DbError>(())
                    })
                    .await
                    .expect("bench write");
                    lat.push(t.elapsed().as_micros() as u64);
                    seq += 1;
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("writer task"));
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() - 1) as f64 * p) as usize];
    let s = db.stats();
    let batches = s.batches.load(Ordering::Relaxed).max(1);
    let mean_batch = s.writes.load(Ordering::Relaxed) as f64 / batches as f64;
    // Wait until the committer has dropped the engine, so that closing this
    // store (sled flushes on drop) does not slow down the next cell.
    drop(db);
    for _ in 0..600 {
        if closed.strong_count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Cell {
        commits_per_s: all.len() as f64 / elapsed,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        max_us: pct(1.0),
        mean_batch,
    }
}

/// Runs one cell in this process and prints it as `CELL` and six numbers.
fn child(args: &Args, spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [engine, mode, writers] = parts[..] else {
        usage()
    };
    let mode: usize = mode.parse().unwrap_or_else(|_| usage());
    let writers: usize = writers.parse().unwrap_or_else(|_| usage());
    let dir = args.dir.join(format!("{engine}-{mode}-{writers}"));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let e = open(engine, &dir);
    let c = rt.block_on(run_cell(e, MODES[mode], writers, args.seconds));
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "CELL {} {} {} {} {}",
        c.commits_per_s, c.p50_us, c.p99_us, c.max_us, c.mean_batch
    );
}

/// Runs `spec` in a child process and reads its result.
fn run_child(args: &Args, spec: &str) -> Cell {
    let out = std::process::Command::new(std::env::current_exe().expect("current exe"))
        .arg("--dir")
        .arg(&args.dir)
        .args(["--seconds", &args.seconds.to_string(), "--cell", spec])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run bench cell");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CELL "))
        .unwrap_or_else(|| panic!("cell {spec} failed: {}", out.status));
    let n: Vec<f64> = line
        .split(' ')
        .map(|x| x.parse().expect("cell number"))
        .collect();
    Cell {
        commits_per_s: n[0],
        p50_us: n[1] as u64,
        p99_us: n[2] as u64,
        max_us: n[3] as u64,
        mean_batch: n[4],
    }
}

fn main() {
    let args = parse_args();
    if let Some(spec) = &args.cell {
        child(&args, spec);
        return;
    }
    println!(
        "metadata commits: {} s per cell, {} rounds (each round runs every cell once; \
         the table gives the round with the median commits/s), stores under {}",
        args.seconds,
        args.repeat,
        args.dir.display()
    );
    let mut specs = Vec::new();
    for engine in &args.engines {
        for mi in 0..MODES.len() {
            for &w in &args.writers {
                specs.push((engine.clone(), mi, w));
            }
        }
    }
    let mut runs: Vec<Vec<Cell>> = specs.iter().map(|_| Vec::new()).collect();
    for _ in 0..args.repeat {
        for (i, (engine, mi, w)) in specs.iter().enumerate() {
            runs[i].push(run_child(&args, &format!("{engine}:{mi}:{w}")));
        }
    }
    println!(
        "| engine | mode | writers | commits/s | min..max commits/s | p50 ms | p99 ms | max ms | writes/batch |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    // commits/s of each round, in round order, by (engine, mode, writers).
    let mut by_round = Vec::new();
    for ((engine, mi, w), mut cells) in specs.iter().zip(runs) {
        by_round.push((
            (engine.clone(), *mi, *w),
            cells.iter().map(|c| c.commits_per_s).collect::<Vec<_>>(),
        ));
        cells.sort_by(|a, b| a.commits_per_s.total_cmp(&b.commits_per_s));
        let (lo, hi) = (cells[0].commits_per_s, cells[cells.len() - 1].commits_per_s);
        let cell = cells.swap_remove(cells.len() / 2);
        println!(
            "| {engine} | {} | {w} | {:.0} | {lo:.0}..{hi:.0} | {:.2} | {:.2} | {:.1} | {:.1} |",
            MODES[*mi].name,
            cell.commits_per_s,
            cell.p50_us as f64 / 1000.0,
            cell.p99_us as f64 / 1000.0,
            cell.max_us as f64 / 1000.0,
            cell.mean_batch
        );
    }
    println!();
    // Ratios are taken within each round (cells run a few seconds apart)
    // and the median over rounds is reported, which holds up better on a
    // shared machine than a ratio of medians.
    let rounds = |engine: &str, mi: usize| {
        by_round
            .iter()
            .find(|((e, m, w), _)| e == engine && *m == mi && *w == 32)
            .map(|(_, r)| r.clone())
    };
    let ratio = |num: &[f64], den: &[f64]| {
        let mut r: Vec<f64> = num.iter().zip(den).map(|(n, d)| n / d).collect();
        r.sort_by(f64::total_cmp);
        let lo = r[0];
        let hi = r[r.len() - 1];
        format!("{:.2}x (rounds {lo:.2}..{hi:.2})", r[r.len() / 2])
    };
    for engine in &args.engines {
        let (Some(per), Some(serial), Some(group), Some(nofsync)) = (
            rounds(engine, 0),
            rounds(engine, 1),
            rounds(engine, 2),
            rounds(engine, 3),
        ) else {
            continue;
        };
        println!(
            "{engine} at 32 writers: group commit+fsync / per-write fsync = {} (target >= 5x); \
             no fsync / group commit+fsync = {} (target <= 2x); \
             pipelined / serial group commit = {}",
            ratio(&group, &per),
            ratio(&nofsync, &group),
            ratio(&group, &serial)
        );
    }
}
