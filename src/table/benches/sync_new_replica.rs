//! How fast one anti-entropy pass ([`sync_pass`]) brings a replica back:
//! three nodes in one process over a real QUIC mesh on 127.0.0.1, rows of a
//! sharded table written through node 0 to all three, then node 2 loses
//! them (all of them: a new or wiped replica; or every tenth row: a node
//! that missed writes while it was down) and runs one pass. Prints rows
//! pulled, seconds and rows per second; `script/bench-table-sync` runs it.
//!
//! `BENCH_KEYS` partition keys (default 2 000) of `BENCH_ROWS_PER_KEY` rows
//! (default 10) each.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Removes, on `n` only, the rows of `keys` whose index `lose` picks.
async fn lose_rows(n: &Node, keys: u32, per_key: usize, lose: impl Fn(usize) -> bool) -> usize {
    let mut lost = 0;
    for p in 0..keys {
        let sorts: Vec<Vec<u8>> = (0..per_key)
            .filter(|i| lose(p as usize * per_key + i))
            .map(|i| format!("k{i:03}").into_bytes())
            .collect();
        lost += sorts.len();
        delete_locally(n, p, sorts).await;
    }
    lost
}

async fn scenario(name: &str, keys: u32, per_key: usize, lose: impl Fn(usize) -> bool) {
    let nodes = cluster_of(3).await;
    let rows: Vec<_> = (0..keys).flat_map(|p| rows_of(p, per_key, 1)).collect();
    for chunk in rows.chunks(1000) {
        nodes[0].table.insert(chunk.to_vec()).await.unwrap();
    }
    let lost = lose_rows(&nodes[2], keys, per_key, lose).await;
    let started = Instant::now();
    let report = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    let secs = started.elapsed().as_secs_f64();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.complete, "{report:?}");
    assert_eq!(report.rows_pulled as usize, lost, "{report:?}");
    println!(
        "{name:<16} {:>7} rows lost of {:>7}: pass {secs:>7.2} s, {:>7} pulled, {:>9.0} rows/s, {} partitions differed",
        lost,
        rows.len(),
        report.rows_pulled,
        report.rows_pulled as f64 / secs,
        report.partitions_differed,
    );
    shutdown(&nodes).await;
}

fn main() {
    let keys = env("BENCH_KEYS", 2000) as u32;
    let per_key = env("BENCH_ROWS_PER_KEY", 10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        scenario("empty replica", keys, per_key, |_| true).await;
        scenario("every 10th lost", keys, per_key, |i| i % 10 == 0).await;
    });
}
