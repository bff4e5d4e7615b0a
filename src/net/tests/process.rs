//! A peer in another process, killed with SIGKILL and restarted on the same
//! port: node A (this process) marks it down from missed pings and up again
//! as soon as the new incarnation connects.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use hangar_net::{CallOpts, Mesh, PeerAddr};

/// A `hangar-net-bench serve` child, killed when dropped.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_server(dir: &Path, bind: &str) -> (Node, PeerAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hangar-net-bench"))
        .args(["serve", dir.to_str().unwrap(), bind])
        .env("HANGAR_NET_BENCH_SECRET", hex::encode(SECRET))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let node = Node(child);
    (
        node,
        line.trim().parse().expect("server prints <id>@<addr>"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_process_killed_is_marked_down_and_back_up_after_restart() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut cfg = test_config(da.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    cfg.ping_timeout = Duration::from_millis(400);
    let limit = cfg.ping_interval * cfg.ping_failures_down + cfg.ping_timeout;
    let a = Mesh::start(cfg).await.unwrap();

    let (b, b_addr) = spawn_server(db.path(), "127.0.0.1:0");
    a.connect(&b_addr).await.unwrap();
    assert!(
        wait_for(Duration::from_secs(5), || is_up(&a, b_addr.id))
            .await
            .is_some()
    );
    // Give B a moment to persist A, learnt from the incoming connection.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let killed = Instant::now();
    drop(b);
    let down = wait_for(Duration::from_secs(5), || !is_up(&a, b_addr.id))
        .await
        .expect("killed process never marked down");
    println!("marked down {down:?} after SIGKILL (bound {limit:?})");
    assert!(down <= limit + Duration::from_millis(400), "took {down:?}");

    let port: SocketAddr = b_addr.addr.parse().unwrap();
    let restart = Instant::now();
    let (_b2, b2_addr) = spawn_server(db.path(), &port.to_string());
    assert_eq!(b2_addr.id, b_addr.id, "node id survives a restart");
    let up = wait_for(Duration::from_secs(5), || is_up(&a, b_addr.id))
        .await
        .expect("restarted process never marked up");
    println!(
        "back up {up:?} after the new process printed its id ({:?} after restart, {:?} after kill)",
        restart.elapsed(),
        killed.elapsed()
    );
    assert!(up <= Duration::from_millis(1500), "took {up:?}");
    let small = a.endpoint::<u64, u64>("bench/small").unwrap();
    let r = small
        .call(
            b_addr.id,
            42,
            CallOpts::default().with_timeout(Duration::from_secs(2)),
        )
        .await;
    assert_eq!(r.unwrap(), 42);
    a.shutdown().await;
}
