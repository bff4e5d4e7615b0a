//! Times the assignment algorithm on a large cluster: a first layout, an
//! unchanged recomputation, one added node and one removed node.
//!
//! `cargo run --release -p hangar_layout --example layout_bench -- [nodes] [zones] [rf]`

use std::collections::BTreeMap;
use std::time::Instant;

use hangar_layout::*;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let nodes = args.first().copied().unwrap_or(100);
    let zones = args.get(1).copied().unwrap_or(5);
    let rf = args.get(2).copied().unwrap_or(3);
    // Deterministic, varied capacities: 1 to 8 TB.
    let mut roles = BTreeMap::new();
    for i in 0..nodes {
        let mut id = [0u8; 32];
        id[..8]
            .copy_from_slice(&((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
        let cap = (1 + (i * 7) % 8) as u64 * 1_000_000_000_000;
        roles.insert(
            NodeId(id),
            NodeRole::storage(format!("z{}", i % zones), cap),
        );
    }
    let params = LayoutParameters::default();
    let v0 = LayoutVersion::initial(rf);
    let first_ms = std::cell::Cell::new(0.0f64);
    let run = |label: &str, prev: &LayoutVersion, roles: &BTreeMap<NodeId, NodeRole>| {
        let t = Instant::now();
        let (v, r) =
            compute_assignment(prev, prev.version + 1, roles.clone(), params).expect("layout");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if first_ms.get() == 0.0 {
            first_ms.set(ms);
        }
        println!(
            "{label:<12} {nodes} nodes {zones} zones rf {rf}: {ms:>8.1} ms ({:.2}x first), {} moves, partition size {} B, usable {:.1}% of {} B",
            ms / first_ms.get(),
            r.moves,
            r.partition_size,
            100.0 * r.usable_capacity as f64 / r.total_capacity as f64,
            r.total_capacity
        );
        v
    };
    let v1 = run("first", &v0, &roles);
    let mut h = LayoutHistory::new(rf);
    h.versions = vec![v1.clone()];
    println!(
        "encoded: version {} bytes, history with it {} bytes (MessagePack)",
        rmp_serde::to_vec_named(&v1).expect("encodes").len(),
        h.encode().len()
    );
    let v2 = run("unchanged", &v1, &roles);
    let mut more = roles.clone();
    more.insert(
        NodeId([0xff; 32]),
        NodeRole::storage("z0", 4_000_000_000_000),
    );
    let v3 = run("add one", &v2, &more);
    let first = *roles.keys().next().expect("a node");
    more.remove(&first);
    run("remove one", &v3, &more);
}
