//! Crash test of the metadata store (`script/crash-meta`, and a few rounds in
//! the test suite).
//!
//! `run` repeats: start `write` as a child process, kill -9 it at a random
//! moment, then start `check` as another child, which opens the store (it
//! must open without error, whatever recovery that takes) and looks up every
//! key the killed writer had acknowledged. Each phase is its own process so
//! that the store is opened fresh, as a node restarting after a crash would.
//!
//! * `write --engine E --dir D --run R --writers N --seconds S`: N concurrent
//!   writers through group commit with fsync; each acknowledged key is printed
//!   on its own line and flushed as soon as `Db::write` returns. Stops by
//!   itself after S seconds.
//! * `check --engine E --dir D --keys FILE`: every key of FILE must be in the
//!   store with its value.
//! * `run --engine E --dir D --iterations I [--writers N] [--max-kill-ms M]`.
//!
//! `--fsync false` (for `write` and `run`) turns off `metadata_fsync`: each
//! batch is then journalled without fsync before it is applied (the node's
//! way, `hangar_db::Journaled`), which must again lose nothing to a process
//! crash. Adding `--journal false` opens the engine without its journal, to
//! see that the check does catch lost writes: a killed process then loses
//! what the engine still held in memory. `--sync-acked true` makes each
//! writer call `Db::sync_async` after each write before announcing it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime};

use hangar_db::{Db, DbError, DbOptions, engine_path, open_engine, open_engine_at};
use hangar_util::config::DbEngine;

const TREE: &str = "crash";

fn value_of(key: &str) -> Vec<u8> {
    // Long enough that a torn write would show, and derived from the key so
    // that a value mixed up with another key's would too.
    key.as_bytes().repeat(8)
}

fn flags(args: &[String]) -> HashMap<String, String> {
    args.chunks(2)
        .filter_map(|c| match c {
            [k, v] if k.starts_with("--") => Some((k[2..].to_string(), v.clone())),
            _ => None,
        })
        .collect()
}

fn flag<T: std::str::FromStr>(f: &HashMap<String, String>, name: &str, default: Option<T>) -> T {
    match f.get(name) {
        Some(v) => v
            .parse()
            .unwrap_or_else(|_| fail(&format!("bad value for --{name}: {v}"))),
        None => default.unwrap_or_else(|| fail(&format!("missing --{name}"))),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("hangar-crash-meta: {msg}");
    std::process::exit(2)
}

fn engine_of(f: &HashMap<String, String>) -> DbEngine {
    let name: String = flag(f, "engine", None);
    DbEngine::parse(&name).unwrap_or_else(|e| fail(&e))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(cmd) = args.get(1) else {
        fail("usage: hangar-crash-meta write|check|run --engine sled|redb --dir DIR ...")
    };
    let f = flags(&args[2..]);
    let dir: PathBuf = flag(&f, "dir", None);
    match cmd.as_str() {
        "write" => write(engine_of(&f), &dir, &f),
        "check" => check(engine_of(&f), &dir, &flag::<PathBuf>(&f, "keys", None)),
        "run" => run(&args[0], &f, &dir),
        other => fail(&format!("unknown command {other}")),
    }
}

fn write(engine: DbEngine, dir: &Path, f: &HashMap<String, String>) -> ExitCode {
    let run: u64 = flag(f, "run", Some(0));
    let writers: u32 = flag(f, "writers", Some(32));
    let seconds: f64 = flag(f, "seconds", Some(20.0));
    let fsync: bool = flag(f, "fsync", Some(true));
    let sync_acked: bool = flag(f, "sync-acked", Some(false));
    let journal: bool = flag(f, "journal", Some(true));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let opened = if journal || fsync {
            open_engine(engine, dir, fsync)
        } else {
            open_engine_at(engine, &engine_path(engine, dir))
        };
        let e = opened.unwrap_or_else(|e| fail(&format!("open: {e}")));
        let db = Db::new(
            e,
            DbOptions {
                fsync,
                max_batch: 256,
                queue_len: 4096,
            },
        );
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut seq = 0u64;
                    while Instant::now() < deadline {
                        let key = format!("r{run}-w{w}-{seq}");
                        let k = key.clone();
                        db.write(move |tx| {
                            tx.put(TREE, k.as_bytes().to_vec(), value_of(&k));
                            Ok::<_, DbError>(())
                        })
                        .await
                        .unwrap_or_else(|e| fail(&format!("write: {e}")));
                        if sync_acked {
                            db.sync_async()
                                .await
                                .unwrap_or_else(|e| fail(&format!("sync: {e}")));
                        }
                        // Acknowledged: say so at once, in one line.
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "{key}").and_then(|_| out.flush()).ok();
                        seq += 1;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("writer task");
        }
    });
    ExitCode::SUCCESS
}

fn check(engine: DbEngine, dir: &Path, keys: &Path) -> ExitCode {
    let e = match open_engine(engine, dir, true) {
        Ok(e) => e,
        Err(e) => {
            println!("open failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = std::fs::read_to_string(keys).unwrap_or_else(|e| fail(&format!("keys: {e}")));
    let mut missing = 0usize;
    let mut checked = 0usize;
    for key in text.lines() {
        checked += 1;
        match e.get(TREE, key.as_bytes()) {
            Ok(Some(v)) if v == value_of(key) => {}
            Ok(Some(_)) => {
                println!("wrong value for acknowledged key {key}");
                missing += 1;
            }
            Ok(None) => {
                println!("acknowledged key {key} is missing");
                missing += 1;
            }
            Err(err) => {
                println!("reading {key}: {err}");
                missing += 1;
            }
        }
    }
    println!("checked {checked} missing {missing}");
    if missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A small xorshift generator: kill moments need no better randomness.
struct Rng(u64);

impl Rng {
    fn new() -> Self {
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Rng(t ^ (u64::from(std::process::id()) << 32) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn run(me: &str, f: &HashMap<String, String>, dir: &Path) -> ExitCode {
    let engine = engine_of(f);
    let iterations: u64 = flag(f, "iterations", Some(3));
    let writers: u32 = flag(f, "writers", Some(32));
    let max_kill_ms: u64 = flag(f, "max-kill-ms", Some(600));
    let fsync: bool = flag(f, "fsync", Some(true));
    let sync_acked: bool = flag(f, "sync-acked", Some(false));
    let journal: bool = flag(f, "journal", Some(true));
    std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
    let keys_file = dir.join("acked-keys");
    let mut rng = Rng::new();
    let (mut acked_total, mut empty_rounds, mut failures) = (0u64, 0u64, 0u64);
    let mut unfinished_snapshots = 0u64;
    let mut previous: Vec<String> = Vec::new();
    let started = Instant::now();
    for i in 0..iterations {
        let mut child = Command::new(me)
            .args(["write", "--engine", engine.name(), "--run", &i.to_string()])
            .args(["--writers", &writers.to_string(), "--seconds", "30"])
            .args(["--fsync", &fsync.to_string()])
            .args(["--sync-acked", &sync_acked.to_string()])
            .args(["--journal", &journal.to_string()])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| fail(&format!("spawn writer: {e}")));
        let stdout = child.stdout.take().expect("piped stdout");
        // Only whole lines count: a line cut by the kill was never fully
        // announced, so its key may or may not be there.
        let reader = std::thread::spawn(move || {
            let mut keys = Vec::new();
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(k) = line.strip_suffix('\n') {
                    keys.push(k.to_string());
                }
                line.clear();
            }
            keys
        });
        std::thread::sleep(Duration::from_millis(rng.below(max_kill_ms)));
        // Child::kill sends SIGKILL.
        child.kill().ok();
        child.wait().ok();
        let keys = reader.join().expect("reader thread");
        if keys.is_empty() {
            empty_rounds += 1;
        }
        acked_total += keys.len() as u64;
        // Check this round's keys and the round before's: a later crash must
        // not lose what an earlier recovery kept.
        let mut text = String::new();
        for k in previous.iter().chain(keys.iter()) {
            text.push_str(k);
            text.push('\n');
        }
        std::fs::write(&keys_file, text).unwrap_or_else(|e| fail(&format!("keys file: {e}")));
        if has_unfinished_snapshot(&dir.join("db.sled")) {
            unfinished_snapshots += 1;
        }
        let out = Command::new(me)
            .args(["check", "--engine", engine.name()])
            .arg("--dir")
            .arg(dir)
            .arg("--keys")
            .arg(&keys_file)
            .output()
            .unwrap_or_else(|e| fail(&format!("spawn checker: {e}")));
        if !out.status.success() {
            failures += 1;
            let report = String::from_utf8_lossy(&out.stdout);
            let head: Vec<&str> = report.lines().take(5).collect();
            eprintln!(
                "round {i}: {} acknowledged keys, check FAILED: {}",
                keys.len(),
                head.join(" | ")
            );
        }
        previous = keys;
    }
    println!(
        "engine={} fsync={fsync} journal={journal} rounds={iterations} acknowledged_keys={acked_total} rounds_killed_before_first_ack={empty_rounds} sled_unfinished_snapshots={unfinished_snapshots} failed_rounds={failures} seconds={:.0}",
        engine.name(),
        started.elapsed().as_secs_f64()
    );
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Whether a killed sled left a snapshot it was still writing (which sled
/// 0.34 cannot open by itself; see `SledEngine::open`).
fn has_unfinished_snapshot(sled_dir: &Path) -> bool {
    std::fs::read_dir(sled_dir)
        .map(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("snap.") && name.ends_with(".generating")
            })
        })
        .unwrap_or(false)
}
