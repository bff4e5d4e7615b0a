//! Burial and collection of tombstones over a real 3-node mesh
//! (replication factor 3): a tombstone is buried only once every replica
//! holds it, is then read by no range (local or quorum) but by every get,
//! and still wins against an older row that arrives later; a pass of
//! either kind sends one message to each replica, whatever the partitions.

#[macro_use]
mod common;

use common::*;
use hangar_table::tombstones::{self, DueTombstone, Queue, TombstoneTree};

static TREES: &[TombstoneTree] = &[TombstoneTree::of::<T>()];

/// This node's burial queue entries due `ahead_msec` from now (those
/// queued this very millisecond included).
async fn due(n: &Node, ahead_msec: u64) -> Vec<DueTombstone> {
    let now = hangar_util::time::now_msec() + ahead_msec + 1;
    tombstones::due(&n.db, Queue::Burial, TREES, now, 0, 1000)
        .await
        .unwrap()
}

/// Buries what node `n` has due now.
async fn bury_due(n: &Node) -> hangar_table::sharded::BurialReport {
    n.table.bury_tombstones(due(n, 0).await).await.unwrap()
}

/// Writes the tombstone of `k000` of partition `p` through node `n`.
async fn delete_k000(n: &Node, p: u32) {
    n.table
        .insert(vec![(pk(p), b"k000".to_vec(), row(2, ""))])
        .await
        .unwrap();
}

/// Writes the tombstones of `k000` of each partition key of `keys` through
/// node 0 and waits until every node holds all of them.
async fn delete_k000_everywhere(nodes: &[Node], keys: &[u32]) {
    for p in keys {
        delete_k000(&nodes[0], *p).await;
    }
    for n in nodes {
        for p in keys {
            assert!(eventually!(
                Duration::from_secs(5),
                n.table.local().get(&pk(*p), b"k000").await.unwrap() == Some(row(2, ""))
            ));
        }
    }
}

async fn quorum_range(n: &Node, p: u32) -> Vec<(Vec<u8>, R)> {
    n.table
        .range(&pk(p), Bound::Unbounded, Bound::Unbounded, false, 1000)
        .await
        .unwrap()
}

/// Merges rows into node `n`'s own replica only (a write that reached it
/// alone).
async fn put_local(n: &Node, rows: Vec<(Vec<u8>, Vec<u8>, R)>) {
    n.db.write(move |tx| {
        for (p, s, r) in &rows {
            Replica::<T>::tx_insert(tx, p, s, r)?;
        }
        Ok::<_, TableError>(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_every_replica_holds_are_buried_and_left_out_of_ranges_only() {
    let nodes = cluster_of(3).await;
    nodes[0].table.insert(rows_of(7, 10, 1)).await.unwrap();
    // Delete k001..k008 and wait until every replica holds the tombstones.
    let deletes: Vec<_> = (1..9)
        .map(|i| (pk(7), format!("k{i:03}").into_bytes(), row(2, "")))
        .collect();
    nodes[0].table.insert(deletes).await.unwrap();
    for n in &nodes {
        assert!(eventually!(
            Duration::from_secs(5),
            n.table.local().get(&pk(7), b"k008").await.unwrap() == Some(row(2, ""))
        ));
        assert_eq!(
            local_count(n, 7).await,
            10,
            "tombstones are read before burial"
        );
    }
    let root_before = nodes[0]
        .table
        .merkle_root(layout_partition_of(&pk(7)))
        .await
        .unwrap();
    for n in &nodes {
        let report = bury_due(n).await;
        assert_eq!(report.buried, 8, "{report:?}");
        assert!(due(n, 120_000).await.is_empty(), "queue entries ended");
    }
    for n in &nodes {
        assert_eq!(local_count(n, 7).await, 2);
        let keys: Vec<Vec<u8>> = quorum_range(n, 7)
            .await
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![b"k000".to_vec(), b"k009".to_vec()]);
        assert_eq!(
            n.table.get(&pk(7), b"k003").await.unwrap(),
            Some(row(2, "")),
            "a quorum get still reads the buried tombstone"
        );
    }
    // The Merkle index did not change: anti-entropy sees the same rows.
    let refs: Vec<&Node> = nodes.iter().collect();
    let p = layout_partition_of(&pk(7));
    assert!(roots_equal(&refs, p).await);
    assert_eq!(nodes[0].table.merkle_root(p).await.unwrap(), root_before);

    // An older write arriving late (a delayed message) is merged into the
    // buried tombstone and changes nothing; a newer one brings the key back.
    nodes[1]
        .table
        .insert(vec![(pk(7), b"k003".to_vec(), row(1, "late"))])
        .await
        .unwrap();
    nodes[1]
        .table
        .insert(vec![(pk(7), b"k004".to_vec(), row(3, "again"))])
        .await
        .unwrap();
    for n in &nodes {
        let got = quorum_range(n, 7).await;
        let keys: Vec<&[u8]> = got.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, vec![&b"k000"[..], b"k004", b"k009"]);
        assert_eq!(got[1].1, row(3, "again"));
    }
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_one_replica_lacks_is_not_buried_until_it_has_it() {
    let nodes = cluster_of(3).await;
    nodes[0].table.insert(rows_of(9, 2, 1)).await.unwrap();
    for n in &nodes {
        assert!(eventually!(
            Duration::from_secs(5),
            local_count(n, 9).await == 2
        ));
    }
    // The delete reached nodes 0 and 1 only.
    let tomb = vec![(pk(9), b"k000".to_vec(), row(2, ""))];
    put_local(&nodes[0], tomb.clone()).await;
    put_local(&nodes[1], tomb.clone()).await;
    let report = bury_due(&nodes[0]).await;
    assert_eq!((report.buried, report.deferred), (0, 1), "{report:?}");
    assert_eq!(local_count(&nodes[0], 9).await, 2, "still read by ranges");
    // Queued again, a minute later.
    assert!(due(&nodes[0], 0).await.is_empty());
    let again = due(&nodes[0], hangar_table::sharded::BURIAL_RETRY_MSEC + 1_000).await;
    assert_eq!(again.len(), 1);
    // Once node 2 has it (anti-entropy, here a direct merge), it is buried.
    put_local(&nodes[2], tomb).await;
    let report = nodes[0].table.bury_tombstones(again).await.unwrap();
    assert_eq!(report.buried, 1, "{report:?}");
    assert_eq!(local_count(&nodes[0], 9).await, 1);
    // Node 1 buries its own copy from its own queue.
    let report = bury_due(&nodes[1]).await;
    assert_eq!(report.buried, 1, "{report:?}");
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_written_again_before_its_burial_is_not_buried() {
    let nodes = cluster_of(3).await;
    delete_k000(&nodes[0], 5).await;
    nodes[0]
        .table
        .insert(vec![(pk(5), b"k000".to_vec(), row(3, "back"))])
        .await
        .unwrap();
    let report = bury_due(&nodes[0]).await;
    assert_eq!((report.buried, report.stale), (0, 1), "{report:?}");
    assert_eq!(quorum_range(&nodes[0], 5).await.len(), 1);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_node_down_nothing_is_asked_and_the_entry_waits_longer() {
    let mut nodes = cluster_of(3).await;
    let down = nodes.pop().unwrap();
    let id = down.cluster.id();
    down.mesh.shutdown().await;
    assert!(wait_for(Duration::from_secs(5), || !nodes[0].cluster.is_up(id)).await);
    delete_k000(&nodes[0], 3).await;
    let report = bury_due(&nodes[0]).await;
    assert_eq!((report.buried, report.deferred), (0, 1), "{report:?}");
    use hangar_table::sharded::{BURIAL_RETRY_DOWN_MSEC, BURIAL_RETRY_MSEC};
    assert!(due(&nodes[0], BURIAL_RETRY_MSEC + 1_000).await.is_empty());
    assert_eq!(
        due(&nodes[0], BURIAL_RETRY_DOWN_MSEC + 1_000).await.len(),
        1
    );
    shutdown(&nodes).await;
}

/// The `hangar/table/t/gc` calls node `n` made so far, to every peer.
fn gc_calls(n: &Node) -> u64 {
    n.mesh
        .metrics()
        .encode_text()
        .lines()
        .filter(|l| {
            l.starts_with("hangar_rpc_calls_total{") && l.contains("endpoint=\"hangar/table/t/gc\"")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_asks_each_replica_once_and_commits_once_whatever_the_partitions() {
    let nodes = cluster_of(3).await;
    // Tombstones of 64 partition keys, spread over many layout partitions,
    // all of which the same three nodes store.
    let keys: Vec<u32> = (100..164).collect();
    let partitions: std::collections::BTreeSet<_> =
        keys.iter().map(|p| layout_partition_of(&pk(*p))).collect();
    assert!(partitions.len() > 32, "{} partitions", partitions.len());
    delete_k000_everywhere(&nodes, &keys).await;
    let (calls, writes) = (
        gc_calls(&nodes[0]),
        nodes[0]
            .db
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    let report = bury_due(&nodes[0]).await;
    assert_eq!(report.buried, keys.len(), "{report:?}");
    assert_eq!(
        gc_calls(&nodes[0]) - calls,
        2,
        "one check to each other replica"
    );
    assert_eq!(
        nodes[0]
            .db
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed)
            - writes,
        1,
        "one transaction"
    );
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_pass_removes_from_every_replica_in_one_round_of_messages() {
    let nodes = cluster_of(3).await;
    let keys: Vec<u32> = (200..264).collect();
    delete_k000_everywhere(&nodes, &keys).await;
    let now = hangar_util::time::now_msec() + 1;
    let due = tombstones::due(&nodes[0].db, Queue::Collect, TREES, now, 0, 1000)
        .await
        .unwrap();
    assert_eq!(due.len(), keys.len());
    let calls = gc_calls(&nodes[0]);
    let report = nodes[0].table.collect_tombstones(due).await.unwrap();
    assert_eq!(report.removed, keys.len(), "{report:?}");
    // A check here and on each other replica, then a removal on each.
    assert_eq!(gc_calls(&nodes[0]) - calls, 6);
    for n in &nodes {
        for p in &keys {
            assert_eq!(n.table.local().get(&pk(*p), b"k000").await.unwrap(), None);
        }
    }
    shutdown(&nodes).await;
}
