//! Two-process benchmark and manual test tool for the mesh.
//!
//! ```text
//! hangar-net-bench serve  <metadata_dir> <bind addr>
//!     starts a node with the bench endpoints, prints `<id>@<addr>` on
//!     stdout, and runs until killed
//! hangar-net-bench client <metadata_dir> <id@addr> [seconds per run]
//!     connects to a server and measures: throughput of 1 MiB streamed
//!     bodies with 1, 4, 16, 64 concurrent calls (and CPU cost of both
//!     processes), then small-call latency p50/p99 idle and while a bulk
//!     transfer runs at background and at foreground priority
//! ```
//! The cluster secret is fixed (a bench runs on loopback or in the test
//! bed's namespaces only, doc/netlab.md); set
//! `HANGAR_NET_BENCH_SECRET` (64 hex) to change it. `HANGAR_NET_BENCH_UDP_BUFFER`,
//! `HANGAR_NET_BENCH_STREAM_WINDOW` and `HANGAR_NET_BENCH_CONN_WINDOW` (bytes)
//! override the flow-control defaults, for tuning (`HANGAR_NET_BENCH_MAX_WINDOW`
//! how far windows may grow: the connection window keeps them fixed);
//! `HANGAR_NET_BENCH_CC`
//! (`auto`, the default, `bbr`, `cubic` or `newreno`) the congestion controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use hangar_net::{
    Body, CallOpts, Handler, HandlerError, Mesh, MeshConfig, NodeId, PeerAddr, Request, Response,
};

const SINK: &str = "bench/sink";
const SMALL: &str = "bench/small";
const CPU: &str = "bench/cpu";
const BLOCK: usize = 1024 * 1024;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Reads the body, counting bytes, and answers with the count.
struct Sink;

#[async_trait]
impl Handler<u32, u64> for Sink {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u64>, HandlerError> {
        let mut n = 0u64;
        if let Some(mut body) = req.body {
            while let Some(chunk) = body.next().await {
                n += chunk.map_err(HandlerError::new)?.len() as u64;
            }
        }
        Ok(Response::new(n))
    }
}

/// Echoes a small message.
struct Small;

#[async_trait]
impl Handler<u64, u64> for Small {
    async fn handle(&self, req: Request<u64>) -> Result<Response<u64>, HandlerError> {
        Ok(Response::new(req.msg))
    }
}

/// Answers with this process's CPU time in seconds.
struct Cpu;

#[async_trait]
impl Handler<(), f64> for Cpu {
    async fn handle(&self, _req: Request<()>) -> Result<Response<f64>, HandlerError> {
        Ok(Response::new(cpu_seconds()))
    }
}

/// User + system CPU time of this process, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime is the
    // 12th and stime the 13th of those.
    let after = stat.rsplit_once(')').map(|(_, s)| s).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    let ticks = 100.0; // USER_HZ on Linux
    f.iter().sum::<u64>() as f64 / ticks
}

fn secret() -> Res<[u8; 32]> {
    match std::env::var("HANGAR_NET_BENCH_SECRET") {
        Ok(h) => Ok(hex::decode(h.trim())?
            .try_into()
            .map_err(|_| "secret must be 32 bytes")?),
        Err(_) => Ok([0x5a; 32]),
    }
}

async fn start(dir: &str, bind: &str) -> Res<Mesh> {
    let mut cfg = MeshConfig::new(secret()?, bind.parse()?, dir.into());
    cfg.rpc_timeout = Duration::from_secs(60);
    cfg.ping_timeout = Duration::from_secs(5);
    // Tuning knobs, to compare settings within one machine session.
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(v) = knob("HANGAR_NET_BENCH_UDP_BUFFER") {
        cfg.flow.udp_buffer = Some(v as usize);
    }
    if let Some(v) = knob("HANGAR_NET_BENCH_STREAM_WINDOW") {
        cfg.flow.stream_window = v as u32;
    }
    if let Some(v) = knob("HANGAR_NET_BENCH_CONN_WINDOW") {
        cfg.flow.connection_window = v as u32;
        cfg.flow.send_window = v;
    }
    if let Some(v) = knob("HANGAR_NET_BENCH_MAX_WINDOW") {
        cfg.flow.max_window = v;
    }
    match std::env::var("HANGAR_NET_BENCH_CC").as_deref() {
        Ok("auto") => cfg.flow.congestion = hangar_net::Congestion::Auto,
        Ok("cubic") => cfg.flow.congestion = hangar_net::Congestion::Cubic,
        Ok("bbr") => cfg.flow.congestion = hangar_net::Congestion::Bbr,
        Ok("newreno") => cfg.flow.congestion = hangar_net::Congestion::NewReno,
        _ => {}
    }
    let mesh = Mesh::start(cfg).await?;
    mesh.endpoint::<u32, u64>(SINK)?.set_handler(Sink, 4096);
    mesh.endpoint::<u64, u64>(SMALL)?.set_handler(Small, 4096);
    mesh.endpoint::<(), f64>(CPU)?.set_handler(Cpu, 16);
    Ok(mesh)
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: hangar-net-bench serve <dir> <bind> | client <dir> <id@addr> [seconds]";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match args.get(1).map(String::as_str) {
        Some("serve") if args.len() == 4 => rt.block_on(serve(&args[2], &args[3])),
        Some("client") if args.len() >= 4 => {
            let secs: u64 = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(5);
            rt.block_on(client(&args[2], &args[3], Duration::from_secs(secs)))
        }
        _ => Err(usage.into()),
    }
}

async fn serve(dir: &str, bind: &str) -> Res<()> {
    let mesh = start(dir, bind).await?;
    println!("{}", mesh.peer_addr());
    // Runs until killed; the parent script owns the process.
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

async fn client(dir: &str, peer: &str, secs: Duration) -> Res<()> {
    let peer: PeerAddr = peer.parse()?;
    // Any local address: the server may be in another network namespace
    // (script/netlab), reached through a routed one.
    let mesh = start(dir, "0.0.0.0:0").await?;
    mesh.connect(&peer).await?;
    let to = peer.id;
    let sink = mesh.endpoint::<u32, u64>(SINK)?;
    let small = mesh.endpoint::<u64, u64>(SMALL)?;
    let cpu = mesh.endpoint::<(), f64>(CPU)?;
    let block = Bytes::from(vec![0xa5u8; BLOCK]);

    println!("## throughput: 1 MiB streamed bodies, client -> server, {secs:?} per run");
    println!(
        "| concurrent calls | MiB/s (= calls/s) | CPU client+server (cores) | MiB/s per core |"
    );
    println!("|---|---|---|---|");
    for conc in [1usize, 4, 16, 64] {
        let cpu0 = (cpu_seconds(), cpu.call(to, (), CallOpts::default()).await?);
        let t0 = Instant::now();
        let bytes = run_bulk(&sink, to, conc, &block, secs, CallOpts::default(), None).await?;
        let elapsed = t0.elapsed().as_secs_f64();
        let cpu1 = (cpu_seconds(), cpu.call(to, (), CallOpts::default()).await?);
        let cores = ((cpu1.0 - cpu0.0) + (cpu1.1 - cpu0.1)) / elapsed;
        let mibs = bytes as f64 / BLOCK as f64 / elapsed;
        println!(
            "| {conc} | {mibs:.0} | {cores:.2} | {:.0} |",
            mibs / cores.max(0.01)
        );
    }

    println!();
    println!("## foreground call latency: 8-byte message, and 1 MiB body, {secs:?} per run");
    println!("| load | small p50 | small p99 | 1 MiB p50 | 1 MiB p99 | rounds | bulk MiB/s |");
    println!("|---|---|---|---|---|---|---|");
    for (name, bulk) in [
        ("idle", None),
        (
            "16 bulk calls, background priority",
            Some(CallOpts::background()),
        ),
        (
            "16 bulk calls, foreground priority",
            Some(CallOpts::default()),
        ),
    ] {
        let stop = Arc::new(AtomicBool::new(false));
        let bulk_task = bulk.map(|opts| {
            let sink = sink.clone();
            let block = block.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                run_bulk(
                    &sink,
                    to,
                    16,
                    &block,
                    Duration::from_secs(3600),
                    opts,
                    Some(stop),
                )
                .await
            })
        });
        if bulk_task.is_some() {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let mut lat = vec![];
        let mut big = vec![];
        let t0 = Instant::now();
        while t0.elapsed() < secs {
            let t = Instant::now();
            small.call(to, 7, CallOpts::default()).await?;
            lat.push(t.elapsed());
            let t = Instant::now();
            sink.call_with_body(
                to,
                0,
                Some(Body::from_bytes(block.clone())),
                CallOpts::default(),
            )
            .await?;
            big.push(t.elapsed());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let bulk_rate = match bulk_task {
            Some(h) => format!(
                "{:.0}",
                h.await?? as f64 / BLOCK as f64 / t0.elapsed().as_secs_f64()
            ),
            None => "-".into(),
        };
        lat.sort();
        big.sort();
        let pct = |v: &[Duration], p: f64| {
            v[((v.len() as f64 * p) as usize).min(v.len() - 1)].as_secs_f64() * 1e3
        };
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {} | {bulk_rate} |",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            pct(&big, 0.5),
            pct(&big, 0.99),
            lat.len()
        );
    }
    mesh.shutdown().await;
    Ok(())
}

/// Runs `conc` loops of 1 MiB calls until `secs` pass or `stop` is set;
/// returns the bytes the server acknowledged.
async fn run_bulk(
    sink: &Arc<hangar_net::Endpoint<u32, u64>>,
    to: NodeId,
    conc: usize,
    block: &Bytes,
    secs: Duration,
    opts: CallOpts,
    stop: Option<Arc<AtomicBool>>,
) -> Res<u64> {
    let total = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + secs;
    let mut tasks = vec![];
    for _ in 0..conc {
        let (sink, block, total, stop) = (sink.clone(), block.clone(), total.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline
                && !stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
            {
                let n = sink
                    .call_with_body(to, 0, Some(Body::from_bytes(block.clone())), opts)
                    .await?
                    .msg;
                total.fetch_add(n, Ordering::Relaxed);
            }
            Ok::<(), hangar_net::NetError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(total.load(Ordering::Relaxed))
}
