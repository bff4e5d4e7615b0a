//! Table (and Table's quorum read) over real meshes in one
//! process: nodes on 127.0.0.1 with short ping timings (as in
//! hangar_cluster's tests), a real layout applied through the live layout,
//! a sled store per node.

#[macro_use]
mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_insert_through_one_read_through_every_node() {
    let nodes = cluster_of(3).await;
    let mut rows = rows_of(1, 30, 1);
    rows.extend(rows_of(2, 5, 1));
    nodes[0].table.insert(rows).await.unwrap();
    for n in &nodes {
        assert_eq!(
            n.table.get(&pk(1), b"k007").await.unwrap(),
            Some(row(1, "1-7"))
        );
        assert_eq!(n.table.get(&pk(2), b"k009").await.unwrap(), None);
        let all = n
            .table
            .range(&pk(1), Bound::Unbounded, Bound::Unbounded, false, 100)
            .await
            .unwrap();
        assert_eq!(all.len(), 30);
        assert_eq!(all[0].0, b"k000");
        assert_eq!(all[29].0, b"k029");
        let last = n
            .table
            .range(&pk(1), Bound::Unbounded, Bound::Unbounded, true, 10)
            .await
            .unwrap();
        let keys: Vec<_> = last.iter().map(|(k, _)| k.clone()).collect();
        let expected: Vec<_> = (20..30)
            .rev()
            .map(|i| format!("k{i:03}").into_bytes())
            .collect();
        assert_eq!(keys, expected);
        let after = n
            .table
            .range(
                &pk(1),
                Bound::Excluded(b"k027"),
                Bound::Unbounded,
                false,
                100,
            )
            .await
            .unwrap();
        assert_eq!(after.len(), 2);
        let two = n
            .table
            .range(
                &pk(2),
                Bound::Unbounded,
                Bound::Excluded(b"k002"),
                false,
                100,
            )
            .await
            .unwrap();
        assert_eq!(two.len(), 2);
    }
    // The third replica gets every row in the background, and then every
    // replica's Merkle root of the partition is the same.
    assert!(eventually!(Duration::from_secs(5), {
        let mut all = true;
        for n in &nodes {
            all &= local_count(n, 1).await == 30;
        }
        all
    }));
    let refs: Vec<&Node> = nodes.iter().collect();
    assert!(roots_equal(&refs, layout_partition_of(&pk(1))).await);
    assert_eq!(
        nodes[0]
            .table
            .merkle_root(layout_partition_of(&pk(1)))
            .await
            .unwrap()
            .count,
        30 + if layout_partition_of(&pk(2)) == layout_partition_of(&pk(1)) {
            5
        } else {
            0
        }
    );
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_rf3_rows_live_on_their_partition_nodes() {
    let nodes = cluster_of(5).await;
    let mut rows = Vec::new();
    for p in 0..20 {
        rows.extend(rows_of(p, 3, 1));
    }
    nodes[0].table.insert(rows).await.unwrap();
    for n in &nodes {
        for p in 0..20 {
            assert_eq!(
                n.table.get(&pk(p), b"k001").await.unwrap(),
                Some(row(1, &format!("{p}-1")))
            );
            let got = n
                .table
                .range(&pk(p), Bound::Unbounded, Bound::Unbounded, false, 10)
                .await
                .unwrap();
            assert_eq!(
                got.len(),
                3,
                "partition key {p} through {}",
                n.cluster.id().short()
            );
        }
    }
    for p in 0..20 {
        let holders: BTreeSet<NodeId> = nodes[0]
            .cluster
            .storage_nodes_of_partition(layout_partition_of(&pk(p)))
            .nodes()
            .into_iter()
            .collect();
        assert_eq!(holders.len(), 3);
        assert!(eventually!(Duration::from_secs(5), {
            let mut right = true;
            for n in &nodes {
                let has = local_count(n, p).await == 3;
                right &= has == holders.contains(&n.cluster.id());
            }
            right
        }));
    }
    shutdown(&nodes).await;
}

/// Accepts calls and never answers.
struct Stall;

#[async_trait]
impl Handler<UpdateRows, ()> for Stall {
    async fn handle(&self, _: Request<UpdateRows>) -> Result<Response<()>, HandlerError> {
        std::future::pending().await
    }
}

#[async_trait]
impl Handler<ReadRow, Option<ByteBuf>> for Stall {
    async fn handle(&self, _: Request<ReadRow>) -> Result<Response<Option<ByteBuf>>, HandlerError> {
        std::future::pending().await
    }
}

#[async_trait]
impl Handler<ReadRange, RangeRows> for Stall {
    async fn handle(&self, _: Request<ReadRange>) -> Result<Response<RangeRows>, HandlerError> {
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_never_answers_does_not_delay_insert_or_reads() {
    let nodes = cluster_of(3).await;
    let m = &nodes[2].mesh;
    m.endpoint::<UpdateRows, ()>("hangar/table/t/update")
        .unwrap()
        .set_handler(Stall, 16);
    m.endpoint::<ReadRow, Option<ByteBuf>>("hangar/table/t/read")
        .unwrap()
        .set_handler(Stall, 16);
    m.endpoint::<ReadRange, RangeRows>("hangar/table/t/range")
        .unwrap()
        .set_handler(Stall, 16);
    let start = Instant::now();
    nodes[0].table.insert(rows_of(5, 10, 1)).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "insert took {:?}",
        start.elapsed()
    );
    for n in &nodes[..2] {
        let start = Instant::now();
        assert_eq!(
            n.table.get(&pk(5), b"k003").await.unwrap(),
            Some(row(1, "5-3"))
        );
        let got = n
            .table
            .range(&pk(5), Bound::Unbounded, Bound::Unbounded, false, 100)
            .await
            .unwrap();
        assert_eq!(got.len(), 10);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "reads took {:?}",
            start.elapsed()
        );
    }
    // Through the stalled node itself, too: its own handler is called like
    // any other replica's.
    let start = Instant::now();
    assert_eq!(
        nodes[2].table.get(&pk(5), b"k003").await.unwrap(),
        Some(row(1, "5-3"))
    );
    assert!(start.elapsed() < Duration::from_secs(1));
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_down_fails_fast_naming_the_nodes() {
    let nodes = cluster_of(3).await;
    nodes[1].mesh.shutdown().await;
    nodes[2].mesh.shutdown().await;
    let (a, b) = (nodes[1].cluster.id(), nodes[2].cluster.id());
    assert!(
        wait_for(Duration::from_secs(5), || !nodes[0].cluster.is_up(a)
            && !nodes[0].cluster.is_up(b))
        .await
    );
    let start = Instant::now();
    let e = nodes[0].table.insert(rows_of(1, 3, 1)).await.unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(200),
        "took {:?}",
        start.elapsed()
    );
    match &e {
        TableError::Replication(ReplicationError::Quorum {
            op: "insert",
            down,
            source,
            ..
        }) => {
            assert_eq!(down.iter().copied().collect::<BTreeSet<_>>(), [a, b].into());
            assert!(
                matches!(
                    **source,
                    QuorumError::NotEnoughNodes {
                        needed: 2,
                        up: 1,
                        ..
                    }
                ),
                "{source}"
            );
        }
        other => panic!("got {other}"),
    }
    assert!(e.to_string().contains("nodes down"), "{e}");
    // Nothing was stored, not even locally.
    assert_eq!(local_count(&nodes[0], 1).await, 0);
    let start = Instant::now();
    let e = nodes[0].table.get(&pk(1), b"k000").await.unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(200));
    assert!(e.to_string().contains("get on table t"), "{e}");
    let e = nodes[0]
        .table
        .range(&pk(1), Bound::Unbounded, Bound::Unbounded, false, 10)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("range on table t"), "{e}");
    // Alone, a node cannot know it holds every acknowledged write.
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert!(!report.complete, "{report:?}");
    nodes[0].mesh.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_that_lost_rows_converge_after_one_pass() {
    let nodes = cluster_of(3).await;
    let mut rows = Vec::new();
    for p in 0..4 {
        rows.extend(rows_of(p, 200, 1));
    }
    nodes[0].table.insert(rows).await.unwrap();
    assert!(eventually!(Duration::from_secs(5), {
        let mut all = true;
        for n in &nodes {
            for p in 0..4 {
                all &= local_count(n, p).await == 200;
            }
        }
        all
    }));
    // Node 2 loses 50 rows of key 0 and every row of key 1; node 0 loses
    // 20 others of key 0; node 1 holds a newer row that neither has.
    let sorts = |r: std::ops::Range<usize>| -> Vec<Vec<u8>> {
        r.map(|i| format!("k{i:03}").into_bytes()).collect()
    };
    delete_locally(&nodes[2], 0, sorts(0..50)).await;
    delete_locally(&nodes[2], 1, sorts(0..200)).await;
    delete_locally(&nodes[0], 0, sorts(100..120)).await;
    let key = pk(3);
    nodes[1]
        .db
        .write(move |tx| Replica::<T>::tx_insert(tx, &key, b"k000", &row(9, "newer")).map(|_| ()))
        .await
        .unwrap();
    let ps: BTreeSet<Partition> = (0..4).map(|p| layout_partition_of(&pk(p))).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    let mut differing = 0;
    for p in &ps {
        differing += usize::from(!roots_equal(&refs, *p).await);
    }
    assert!(differing > 0);

    let report = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.complete, "{report:?}");
    // What node 2 lacked (50 + 200 rows, one newer row), and possibly the
    // older copy of that row from whichever peer still held it.
    assert!((251..=252).contains(&report.rows_pulled), "{report:?}");
    assert!(report.rows_pushed >= 20, "{report:?}");
    // Node 2 now agrees with both peers on every partition except, for
    // node 0, the newer row's if node 2 compared with node 0 before it
    // learnt that row from node 1: node 0's own pass settles that.
    let newer = layout_partition_of(&pk(3));
    for p in &ps {
        assert!(
            roots_equal(&[&nodes[1], &nodes[2]], *p).await,
            "partition {p}"
        );
        if *p != newer {
            assert!(roots_equal(&refs, *p).await, "partition {p}");
        }
    }
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert!(report.complete, "{report:?}");
    assert!(report.rows_pulled <= 1, "{report:?}");
    for p in &ps {
        assert!(roots_equal(&refs, *p).await, "partition {p}");
    }
    for n in &nodes {
        for p in 0..4 {
            assert_eq!(local_count(n, p).await, 200);
        }
        assert_eq!(
            n.table.local().get(&pk(3), b"k000").await.unwrap(),
            Some(row(9, "newer"))
        );
    }
    // A second pass finds nothing to do.
    let again = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    assert_eq!((again.partitions_differed, again.rows_pulled), (0, 0));
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_larger_than_a_leaf_batch_is_settled_below_its_root() {
    use hangar_table::sharded::sync::LEAF_BATCH;
    let nodes = cluster_of(3).await;
    let n = 2 * LEAF_BATCH as usize + 500;
    let rows = rows_of(0, n, 1);
    for chunk in rows.chunks(1000) {
        nodes[0].table.insert(chunk.to_vec()).await.unwrap();
    }
    assert!(eventually!(
        Duration::from_secs(10),
        local_count(&nodes[2], 0).await == n
    ));
    // Every 50th row lost on node 2: the root covers more than a leaf
    // batch, so the pass goes down to the children that differ.
    let lost: Vec<Vec<u8>> = (0..n)
        .step_by(50)
        .map(|i| format!("k{i:03}").into_bytes())
        .collect();
    delete_locally(&nodes[2], 0, lost.clone()).await;
    let report = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.complete, "{report:?}");
    // From the first peer compared; the second then compares equal.
    assert_eq!(report.rows_pulled, lost.len() as u64, "{report:?}");
    assert_eq!(local_count(&nodes[2], 0).await, n);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert!(roots_equal(&refs, layout_partition_of(&pk(0))).await);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_written_while_a_node_was_down_reaches_it() {
    let mut nodes = cluster_of(3).await;
    nodes[0].table.insert(rows_of(7, 3, 1)).await.unwrap();
    assert!(eventually!(
        Duration::from_secs(5),
        local_count(&nodes[2], 7).await == 3
    ));
    let down = nodes.pop().unwrap();
    let id = down.cluster.id();
    down.mesh.shutdown().await;
    assert!(wait_for(Duration::from_secs(5), || !nodes[0].cluster.is_up(id)).await);
    nodes[0]
        .table
        .insert(vec![(pk(7), b"k001".to_vec(), row(2, ""))])
        .await
        .unwrap();
    // With one node of three down, the two others hold every acknowledged
    // write between them: a pass is complete.
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert!(report.complete, "{report:?}");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // The node comes back on its directory and store, and its sync worker
    // runs a pass as soon as it sees its peers up.
    let Node { dir, db, .. } = down;
    let back = start_node(dir, Some(db)).await;
    assert_eq!(back.cluster.id(), id);
    for n in &nodes {
        back.mesh.connect(&n.mesh.peer_addr()).await.unwrap();
    }
    assert_eq!(
        back.table.local().get(&pk(7), b"k001").await.unwrap(),
        Some(row(1, "7-1"))
    );
    let workers = WorkerRegistry::default();
    let (task, status) = spawn_sharded_sync_worker(
        back.cluster.clone(),
        syncable(&back),
        &workers,
        Duration::from_secs(3600),
    );
    assert!(eventually!(
        Duration::from_secs(10),
        back.table.local().get(&pk(7), b"k001").await.unwrap() == Some(row(2, ""))
    ));
    assert!(wait_for(Duration::from_secs(5), || status.passes() >= 1).await);
    let w = workers.list();
    assert_eq!(w[0].name, "sharded-sync");
    assert!(w[0].processed >= 1, "{w:?}");
    nodes.push(back);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert!(eventually!(
        Duration::from_secs(5),
        roots_equal(&refs, layout_partition_of(&pk(7))).await
    ));
    task.abort();
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_node_inserts_reach_both_versions_sync_reports_the_new_one_and_old_holders_drop_what_moved()
 {
    let mut nodes = cluster_of(3).await;
    // Rows written under version 1 only.
    let mut rows = Vec::new();
    for p in 0..40 {
        rows.extend(rows_of(p, 2, 1));
    }
    nodes[0].table.insert(rows).await.unwrap();

    nodes.push(start_node(tempfile::tempdir().unwrap(), None).await);
    connect_all(&nodes).await;
    let v2 = apply_layout(&nodes, 3).await;
    assert_eq!(v2, 2);
    let new = nodes[3].cluster.id();
    let h = nodes[0].cluster.layout().history();
    assert_eq!(h.versions.iter().filter(|v| v.is_assigned()).count(), 2);

    // A partition key whose partition the new node takes in version 2.
    let p = (100..10_000u32)
        .find(|p| {
            let sets = nodes[0]
                .cluster
                .storage_nodes_of_partition(layout_partition_of(&pk(*p)))
                .sets;
            sets.len() == 2 && sets[1].nodes.contains(&new) && !sets[0].nodes.contains(&new)
        })
        .expect("the new node takes some partition");
    nodes[0].table.insert(rows_of(p, 1, 1)).await.unwrap();
    // At return, each version's set has its write quorum of copies.
    let sets = nodes[0]
        .cluster
        .storage_nodes_of_partition(layout_partition_of(&pk(p)))
        .sets;
    for s in &sets {
        let mut copies = 0;
        for id in &s.nodes {
            copies += usize::from(local_count(node_of(&nodes, *id), p).await == 1);
        }
        assert!(copies >= 2, "version {}: {copies} copies", s.version);
    }

    // Once every node acknowledged version 2, one pass on the new node
    // brings it every older row of its partitions and reports version 2.
    let ids: Vec<NodeId> = nodes.iter().map(|n| n.cluster.id()).collect();
    nodes[0]
        .cluster
        .layout()
        .update("test ack", |h| {
            for id in &ids {
                h.ack_version(*id, v2);
            }
            Ok(())
        })
        .await
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || nodes[3]
            .cluster
            .layout()
            .history()
            .sync_may_start(v2))
        .await
    );
    let report = sync_pass(&nodes[3].cluster, &syncable(&nodes[3])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.synced(), Some(2), "{report:?}");
    let status = ShardedSyncStatus::default();
    let mut changes = status.subscribe();
    status.record(&report);
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), 2);
    assert_eq!(status.synced_version(), 2);
    let mine: BTreeSet<Partition> = nodes[3]
        .cluster
        .layout()
        .history()
        .current()
        .partitions_of_node(new)
        .into_iter()
        .collect();
    for q in 0..40 {
        let held = local_count(&nodes[3], q).await;
        let expected = if mine.contains(&layout_partition_of(&pk(q))) {
            2
        } else {
            0
        };
        assert_eq!(held, expected, "partition key {q}");
    }

    // While version 1 is active, node 0 keeps every row it holds in it.
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert_eq!(report.rows_dropped, 0, "{report:?}");
    for q in 0..40 {
        assert_eq!(local_count(&nodes[0], q).await, 2, "partition key {q}");
    }
    // Reads still go to version 1: version 2 is not synced yet.
    assert_eq!(nodes[0].cluster.layout().read_version().version, 1);
    // Every node synced and reading version 2: version 1 retires, and a
    // pass on node 0 deletes the rows of the partitions it no longer holds,
    // and only those.
    nodes[0]
        .cluster
        .layout()
        .update("test sync", |h| {
            for id in &ids {
                assert!(h.mark_synced(*id, v2));
            }
            for id in &ids {
                assert!(h.ack_sync(*id, v2));
            }
            Ok(())
        })
        .await
        .unwrap();
    let old = nodes[0].cluster.id();
    assert!(
        wait_for(Duration::from_secs(10), || {
            let h = nodes[0].cluster.layout().history();
            h.versions.len() == 1 && h.current().version == v2
        })
        .await
    );
    // The read version the live layout published with the change is the
    // one the history gives.
    let layout = nodes[0].cluster.layout();
    assert_eq!(layout.read_version().version, v2);
    assert_eq!(*layout.read_version(), *layout.history().read_version());
    let kept: BTreeSet<Partition> = nodes[0]
        .cluster
        .layout()
        .history()
        .current()
        .partitions_of_node(old)
        .into_iter()
        .collect();
    let moved = (0..40)
        .filter(|q| !kept.contains(&layout_partition_of(&pk(*q))))
        .count();
    assert!(moved > 0, "node 0 lost no partition key of the 40");
    let mut lost_rows = 0;
    for q in (0..=Partition::MAX).filter(|q| !kept.contains(q)) {
        lost_rows += nodes[0].table.merkle_root(q).await.unwrap().count;
    }
    assert!(lost_rows >= 2 * moved as u64);
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.rows_dropped, lost_rows, "{report:?}");
    for q in 0..40 {
        let p = layout_partition_of(&pk(q));
        let expected = if kept.contains(&p) { 2 } else { 0 };
        assert_eq!(
            local_count(&nodes[0], q).await,
            expected,
            "partition key {q}"
        );
        if !kept.contains(&p) {
            assert_eq!(nodes[0].table.merkle_root(p).await.unwrap().count, 0);
            // The rows are still readable: the new holders have them.
            let got = nodes[0]
                .table
                .range(&pk(q), Bound::Unbounded, Bound::Unbounded, false, 100)
                .await
                .unwrap();
            assert_eq!(got.len(), 2, "partition key {q} through the new holders");
        }
    }
    // A second pass finds nothing more to drop.
    let report = sync_pass(&nodes[0].cluster, &syncable(&nodes[0])).await;
    assert_eq!(report.rows_dropped, 0);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_repair_replicas_that_lack_a_row_or_hold_an_older_one() {
    let nodes = cluster_of(3).await;
    nodes[0].table.insert(rows_of(4, 10, 1)).await.unwrap();
    assert!(eventually!(
        Duration::from_secs(5),
        local_count(&nodes[1], 4).await == 10
    ));
    // Node 2 never answers reads: every read's quorum is nodes 0 and 1.
    stall_reads(&nodes[2]);
    let sorts = (0..5).map(|i| format!("k{i:03}").into_bytes()).collect();
    delete_locally(&nodes[1], 4, sorts).await;
    let key = pk(4);
    nodes[0]
        .db
        .write(move |tx| Replica::<T>::tx_insert(tx, &key, b"k009", &row(5, "newer")).map(|_| ()))
        .await
        .unwrap();
    assert_eq!(
        nodes[1].table.get(&pk(4), b"k000").await.unwrap(),
        Some(row(1, "4-0"))
    );
    assert!(eventually!(
        Duration::from_secs(5),
        nodes[1]
            .table
            .local()
            .get(&pk(4), b"k000")
            .await
            .unwrap()
            .is_some()
    ));
    let got = nodes[1]
        .table
        .range(&pk(4), Bound::Unbounded, Bound::Unbounded, false, 100)
        .await
        .unwrap();
    assert_eq!(got.len(), 10);
    assert_eq!(got[9].1, row(5, "newer"));
    assert!(eventually!(Duration::from_secs(5), {
        local_count(&nodes[1], 4).await == 10
            && nodes[1].table.local().get(&pk(4), b"k009").await.unwrap() == Some(row(5, "newer"))
    }));
    let p = layout_partition_of(&pk(4));
    assert!(roots_equal(&[&nodes[0], &nodes[1]], p).await);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_rows_are_cut_into_messages_and_answers_by_bytes() {
    let nodes = cluster_of(3).await;
    // 12 rows of 900 KiB: more than one message's byte budget (8 MiB).
    let big = "x".repeat(900 << 10);
    let rows: Vec<_> = (0..12)
        .map(|i| {
            (
                pk(8),
                format!("k{i:03}").into_bytes(),
                row(1, &format!("{i}{big}")),
            )
        })
        .collect();
    nodes[0].table.insert(rows).await.unwrap();
    for reverse in [false, true] {
        let got = nodes[1]
            .table
            .range(&pk(8), Bound::Unbounded, Bound::Unbounded, reverse, 100)
            .await
            .unwrap();
        let mut expected: Vec<Vec<u8>> = (0..12).map(|i| format!("k{i:03}").into_bytes()).collect();
        if reverse {
            expected.reverse();
        }
        assert_eq!(
            got.into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            expected
        );
    }
    assert!(eventually!(
        Duration::from_secs(10),
        local_count(&nodes[2], 8).await == 12
    ));
    // Read repairs of the reads above (node 2 may have answered before the
    // insert reached it) are still on their way: let them land first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Anti-entropy pulls them back in answers of about 8 MiB.
    let sorts = (0..12).map(|i| format!("k{i:03}").into_bytes()).collect();
    delete_locally(&nodes[2], 8, sorts).await;
    let report = sync_pass(&nodes[2].cluster, &syncable(&nodes[2])).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // All 12, unless a late read repair brought some back first.
    assert!((1..=12).contains(&report.rows_pulled), "{report:?}");
    assert_eq!(local_count(&nodes[2], 8).await, 12);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert!(roots_equal(&refs, layout_partition_of(&pk(8))).await);
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_worker_repairs_every_interval() {
    let nodes = cluster_of(3).await;
    nodes[0].table.insert(rows_of(6, 20, 1)).await.unwrap();
    assert!(eventually!(
        Duration::from_secs(5),
        local_count(&nodes[1], 6).await == 20
    ));
    let workers = WorkerRegistry::default();
    let (task, status) = spawn_sharded_sync_worker(
        nodes[1].cluster.clone(),
        syncable(&nodes[1]),
        &workers,
        Duration::from_millis(300),
    );
    assert!(wait_for(Duration::from_secs(5), || status.passes() >= 1).await);
    // No peer comes up from now on: only the interval can start a pass.
    let sorts = (0..20).map(|i| format!("k{i:03}").into_bytes()).collect();
    delete_locally(&nodes[1], 6, sorts).await;
    assert_eq!(local_count(&nodes[1], 6).await, 0);
    assert!(eventually!(
        Duration::from_secs(5),
        local_count(&nodes[1], 6).await == 20
    ));
    // The rows land during the pass; its count is reported when it ends.
    assert!(
        eventually!(Duration::from_secs(5), workers.list()[0].processed >= 20),
        "{:?}",
        workers.list()[0]
    );
    let w = &workers.list()[0];
    assert!(w.progress.contains("layout version 1"), "{w:?}");
    task.abort();
    shutdown(&nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_table_quorum_read_sees_a_newer_row_this_node_lacks() {
    let nodes = cluster_of(3).await;
    let full: Vec<Table<F>> = nodes
        .iter()
        .map(|n| Table::<F>::new(n.db.clone(), n.cluster.clone()).unwrap())
        .collect();
    // Node 0 holds an old row; a write quorum (nodes 1 and 2) a newer one.
    put_local_f(&nodes[0], row(1, "old")).await;
    put_local_f(&nodes[1], row(5, "new")).await;
    put_local_f(&nodes[2], row(5, "new")).await;
    // A plain read answers from this node's rows; a quorum read asks.
    assert_eq!(full[0].get(b"", b"row").await.unwrap(), Some(row(1, "old")));
    assert_eq!(
        full[0].get_quorum(b"", b"row").await.unwrap(),
        Some(row(5, "new"))
    );
    // Repaired here.
    assert_eq!(
        full[0].local().get(b"", b"row").await.unwrap(),
        Some(row(5, "new"))
    );
    // Absent everywhere: none, after a quorum said so.
    assert_eq!(full[1].get_quorum(b"", b"other").await.unwrap(), None);
    // Alone, a node cannot answer a quorum read.
    nodes[1].mesh.shutdown().await;
    nodes[2].mesh.shutdown().await;
    let (a, b) = (nodes[1].cluster.id(), nodes[2].cluster.id());
    assert!(
        wait_for(Duration::from_secs(5), || !nodes[0].cluster.is_up(a)
            && !nodes[0].cluster.is_up(b))
        .await
    );
    let e = full[0].get_quorum(b"", b"row").await.unwrap_err();
    assert!(
        matches!(
            e,
            TableError::Replication(ReplicationError::NoReadQuorum { .. })
        ),
        "{e}"
    );
    nodes[0].mesh.shutdown().await;
}

/// A replica's read endpoints that answer from its own rows, or never
/// while `stalled` is set: which nodes make a read's quorum is the test's
/// choice, and can change between two reads.
struct Gate {
    table: Replica<T>,
    stalled: Arc<std::sync::atomic::AtomicBool>,
}

impl Gate {
    async fn wait(&self) {
        while self.stalled.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[async_trait]
impl Handler<ReadRow, Option<ByteBuf>> for Gate {
    async fn handle(
        &self,
        req: Request<ReadRow>,
    ) -> Result<Response<Option<ByteBuf>>, HandlerError> {
        self.wait().await;
        let key = req.msg.key.to_vec();
        let (p, s) = key.split_at(T::PARTITION_LEN);
        let found = self
            .table
            .range_raw(
                p,
                Bound::Included(s.to_vec()),
                Bound::Included(s.to_vec()),
                false,
                1,
            )
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(
            found.into_iter().next().map(|(_, v)| ByteBuf::from(v)),
        ))
    }
}

#[async_trait]
impl Handler<ReadRange, RangeRows> for Gate {
    async fn handle(&self, req: Request<ReadRange>) -> Result<Response<RangeRows>, HandlerError> {
        self.wait().await;
        // The test reads whole partitions of one row: bounds and limits
        // need no honouring.
        let m = req.msg;
        let rows = self
            .table
            .range_raw(
                &m.partition,
                Bound::Unbounded,
                Bound::Unbounded,
                m.reverse,
                100,
            )
            .await
            .map_err(HandlerError::new)?
            .into_iter()
            .map(|(k, v)| hangar_table::wire::WireRow {
                key: ByteBuf::from(k),
                value: ByteBuf::from(v),
            })
            .collect();
        Ok(Response::new(RangeRows { rows, more: false }))
    }
}

/// A replica's update endpoint that merges rows half a second late, as a
/// busy replica would: a read repair sent in the background has not
/// landed when the next read comes.
struct SlowUpdate(Db);

#[async_trait]
impl Handler<UpdateRows, ()> for SlowUpdate {
    async fn handle(&self, req: Request<UpdateRows>) -> Result<Response<()>, HandlerError> {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rows = req.msg.rows;
        self.0
            .write(move |tx| {
                for r in &rows {
                    let (p, s) = r.key.split_at(T::PARTITION_LEN);
                    let row = hangar_table::decode::<T>(&r.value)?;
                    Replica::<T>::tx_insert(tx, p, s, &row)?;
                }
                Ok::<_, TableError>(())
            })
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(()))
    }
}

/// Partitions `ps` each hold row `k000` on every node, then a newer one on
/// node 0 only: a write that reached one replica of three.
async fn newer_on_node_0_only(nodes: &[Node], ps: &[u32]) {
    for &p in ps {
        nodes[0].table.insert(rows_of(p, 1, 1)).await.unwrap();
    }
    assert!(eventually!(Duration::from_secs(5), {
        let mut all = true;
        for n in nodes {
            for &p in ps {
                all &= local_count(n, p).await == 1;
            }
        }
        all
    }));
    for &p in ps {
        let key = pk(p);
        nodes[0]
            .db
            .write(move |tx| {
                Replica::<T>::tx_insert(tx, &key, b"k000", &row(5, "newer")).map(|_| ())
            })
            .await
            .unwrap();
    }
}

/// Puts node `n`'s read endpoints behind a [`Gate`] that holds them while
/// the returned flag is set (it starts set).
fn gate_reads(n: &Node) -> Arc<std::sync::atomic::AtomicBool> {
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let gate = || Gate {
        table: n.table.local().clone(),
        stalled: stalled.clone(),
    };
    n.mesh
        .endpoint::<ReadRow, Option<ByteBuf>>("hangar/table/t/read")
        .unwrap()
        .set_handler(gate(), 16);
    n.mesh
        .endpoint::<ReadRange, RangeRows>("hangar/table/t/range")
        .unwrap()
        .set_handler(gate(), 16);
    stalled
}

/// Makes node `n` never answer a read.
fn stall_reads(n: &Node) {
    n.mesh
        .endpoint::<ReadRow, Option<ByteBuf>>("hangar/table/t/read")
        .unwrap()
        .set_handler(Stall, 16);
    n.mesh
        .endpoint::<ReadRange, RangeRows>("hangar/table/t/range")
        .unwrap()
        .set_handler(Stall, 16);
}

/// A write that reached one replica of three (the others crashed before
/// it reached them, or its coordinator did): a read whose quorum holds
/// that replica answers it, and from then on every read through any node
/// must answer it too — quorum reads are monotonic only if the first read
/// puts the row on a write quorum before it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_one_replica_holds_once_read_is_read_through_every_quorum() {
    let nodes = cluster_of(3).await;
    newer_on_node_0_only(&nodes, &[6, 7]).await;
    let stalled = gate_reads(&nodes[2]);
    nodes[1]
        .mesh
        .endpoint::<UpdateRows, ()>("hangar/table/t/update")
        .unwrap()
        .set_handler(SlowUpdate(nodes[1].db.clone()), 16);
    // Node 2 does not answer: the first reads' quorum is nodes 0 and 1.
    assert_eq!(
        nodes[0].table.get(&pk(6), b"k000").await.unwrap(),
        Some(row(5, "newer"))
    );
    let first = nodes[0]
        .table
        .range(&pk(7), Bound::Unbounded, Bound::Unbounded, false, 10)
        .await
        .unwrap();
    assert_eq!(first[0].1, row(5, "newer"));
    // Now node 0 does not answer and node 2 does: the next reads' quorum
    // is nodes 1 and 2, neither of which held the row before.
    stall_reads(&nodes[0]);
    stalled.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        nodes[2].table.get(&pk(6), b"k000").await.unwrap(),
        Some(row(5, "newer")),
        "a read through nodes 1 and 2 went back to the older row"
    );
    let second = nodes[2]
        .table
        .range(&pk(7), Bound::Unbounded, Bound::Unbounded, false, 10)
        .await
        .unwrap();
    assert_eq!(
        second[0].1,
        row(5, "newer"),
        "a listing through nodes 1 and 2 went back to the older row"
    );
    shutdown(&nodes).await;
}

/// A blocking read repair does not wait on the stale replica that answered
/// when it is slow to write: the replica the read did not ask takes the row
/// and gives it its write quorum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_repair_goes_around_a_replica_slow_to_write() {
    let nodes = cluster_of(3).await;
    newer_on_node_0_only(&nodes, &[8]).await;
    // Node 2 answers no read, so the read's quorum is nodes 0 and 1; node 1
    // never finishes a write.
    let stalled = gate_reads(&nodes[2]);
    nodes[1]
        .mesh
        .endpoint::<UpdateRows, ()>("hangar/table/t/update")
        .unwrap()
        .set_handler(Stall, 16);
    let t0 = Instant::now();
    let got = nodes[0].table.get(&pk(8), b"k000").await.unwrap();
    assert_eq!(got, Some(row(5, "newer")));
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "the read waited {:?} for the slow replica",
        t0.elapsed()
    );
    assert_eq!(
        nodes[2].table.local().get(&pk(8), b"k000").await.unwrap(),
        Some(row(5, "newer")),
        "the replica that was not asked took the row"
    );
    stalled.store(false, std::sync::atomic::Ordering::SeqCst);
    shutdown(&nodes).await;
}
