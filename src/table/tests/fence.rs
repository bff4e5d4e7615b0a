//! Fences (`hangar_table::fence`) over real meshes in one process: a
//! fenced partition key refuses writers' live rows and nothing else, a
//! fence finds the live rows a quorum holds, fences expire unless sealed,
//! and — what a bucket deletion relies on — a write racing a fence is
//! either seen by it or refused.

#[macro_use]
mod common;

use common::*;
use hangar_table::fence::{FenceAnswer, FenceOp, MAX_FENCES, apply_local};

const CLOSE: FenceOp = FenceOp::Close { ttl_msec: 60_000 };

fn fenced(r: Result<(), TableError>) -> bool {
    matches!(r, Err(TableError::Fenced { tree: "t" }))
}

/// Merges `r` as row (`p`, `sort`) into node `n`'s store alone, as
/// anti-entropy would (no fence check).
async fn put_local(n: &Node, p: u32, sort: &'static [u8], r: R) {
    n.db.write(move |tx| Replica::<T>::tx_insert(tx, &pk(p), sort, &r).map(|_| ()))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_key_refuses_writers_live_rows_only() {
    let nodes = cluster_of(3).await;
    let t = &nodes[0].table;
    assert_eq!(
        t.fence(&pk(1), 7, CLOSE).await.unwrap(),
        FenceAnswer { live: false }
    );
    // Through any node, a live row of the key is refused by every replica.
    for n in &nodes {
        let r = n
            .table
            .insert(vec![(pk(1), b"a".to_vec(), row(1, "x"))])
            .await;
        assert!(
            fenced(r.map(|_| ())),
            "live row admitted through {}",
            n.cluster.id()
        );
    }
    // Tombstones pass, and other keys are untouched.
    t.insert(vec![(pk(1), b"a".to_vec(), row(2, ""))])
        .await
        .unwrap();
    t.insert(vec![(pk(2), b"a".to_vec(), row(1, "y"))])
        .await
        .unwrap();
    assert_eq!(t.get(&pk(1), b"a").await.unwrap(), Some(row(2, "")));
    // Opened again, the key takes writes.
    t.fence(&pk(1), 7, FenceOp::Open).await.unwrap();
    t.insert(vec![(pk(1), b"a".to_vec(), row(3, "z"))])
        .await
        .unwrap();
    assert_eq!(t.get(&pk(1), b"a").await.unwrap(), Some(row(3, "z")));
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_finds_a_live_row_that_a_quorum_holds_and_ignores_tombstones() {
    let nodes = cluster_of(3).await;
    // A tombstone everywhere and a live row on two of three replicas (any
    // write quorum includes one of them).
    for n in &nodes {
        put_local(n, 1, b"dead", row(1, "")).await;
    }
    let t = &nodes[0].table;
    assert!(!t.fence(&pk(1), 1, CLOSE).await.unwrap().live);
    for n in &nodes[1..] {
        put_local(n, 1, b"live", row(1, "v")).await;
    }
    assert!(t.fence(&pk(1), 2, CLOSE).await.unwrap().live);
    assert!(t.fence(&pk(1), 2, FenceOp::Seal).await.unwrap().live);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_entropy_merges_rows_of_a_fenced_key() {
    let nodes = cluster_of(3).await;
    nodes[0].table.fence(&pk(1), 9, CLOSE).await.unwrap();
    // A row one replica stored before its fence (here: behind the fence's
    // back) reaches the others by anti-entropy: it acknowledges nothing,
    // and a refusal would keep the replicas apart forever.
    put_local(&nodes[1], 1, b"old", row(1, "v")).await;
    // Pulled by the fenced node's pass, and pushed by the holder's pass
    // without an error (the fenced peer refuses the push and pulls).
    let report = sync_pass(&nodes[1].cluster, &syncable(&nodes[1])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(local_count(&nodes[0], 1).await, 1);
    let report = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(local_count(&nodes[2], 1).await, 1);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_expires_a_seal_stays_and_open_removes_only_its_token() {
    let n = start_node(tempfile::tempdir().unwrap(), None).await;
    let local = n.table.local();
    let write = |v: &'static str| {
        let db = n.db.clone();
        async move {
            db.write(move |tx| {
                Replica::<T>::tx_insert_admitted(tx, &pk(1), b"k", &row(1, v)).map(|_| ())
            })
            .await
        }
    };
    // A close whose time is up refuses nothing.
    apply_local(local, &pk(1), 1, FenceOp::Close { ttl_msec: 0 })
        .await
        .unwrap();
    write("a").await.unwrap();
    // Two owners: opening one leaves the other's fence.
    apply_local(local, &pk(1), 2, CLOSE).await.unwrap();
    apply_local(local, &pk(1), 3, CLOSE).await.unwrap();
    assert!(fenced(write("b").await));
    apply_local(local, &pk(1), 2, FenceOp::Open).await.unwrap();
    assert!(fenced(write("b").await));
    // A seal outlives any close, and holds until opened.
    apply_local(local, &pk(1), 3, FenceOp::Seal).await.unwrap();
    assert!(fenced(write("b").await));
    apply_local(local, &pk(1), 3, FenceOp::Open).await.unwrap();
    write("b").await.unwrap();
    // One key holds a bounded number of fences.
    for token in 0..MAX_FENCES as u64 {
        apply_local(local, &pk(1), 100 + token, CLOSE)
            .await
            .unwrap();
    }
    let e = apply_local(local, &pk(1), 99, CLOSE).await.unwrap_err();
    assert!(matches!(e, TableError::TooManyFences { .. }), "{e}");
    n.mesh.shutdown().await;
}

/// The promise a bucket deletion relies on: rows written through one node
/// while another closes their key; every write that was acknowledged is
/// seen by the close (answer `live`), or the close saw none and no write
/// was acknowledged. Over rounds with the two started a random moment
/// apart, either one first (so both outcomes occur, whatever the load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_racing_a_close_is_seen_by_it_or_refused() {
    let nodes = cluster_of(3).await;
    let (mut seen, mut unseen) = (0, 0);
    for round in 0..30u32 {
        let key = 1000 + round;
        let lag = Duration::from_micros(u64::from(round % 15) * 700);
        let (writer_lag, close_lag) = if round % 2 == 0 {
            (lag, Duration::ZERO)
        } else {
            (Duration::ZERO, lag)
        };
        let writer = nodes[1].table.clone();
        let writes = tokio::spawn(async move {
            tokio::time::sleep(writer_lag).await;
            let mut acked = 0;
            for i in 0..20u32 {
                let sort = format!("k{i:02}").into_bytes();
                if writer
                    .insert(vec![(pk(key), sort, row(1, "v"))])
                    .await
                    .is_ok()
                {
                    acked += 1;
                }
            }
            acked
        });
        tokio::time::sleep(close_lag).await;
        let found = nodes[0]
            .table
            .fence(&pk(key), u64::from(round), CLOSE)
            .await
            .unwrap();
        let acked = writes.await.unwrap();
        if found.live {
            seen += 1;
        } else {
            assert_eq!(
                acked, 0,
                "round {round}: {acked} writes acknowledged, none seen by the close"
            );
            unseen += 1;
        }
    }
    assert!(seen > 0 && unseen > 0, "seen {seen}, unseen {unseen}");
    shutdown(&nodes).await;
}
