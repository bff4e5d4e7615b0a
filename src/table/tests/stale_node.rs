//! A node removed from the layout while it was down, started again from its
//! old disk after the others collected their tombstones (issue 27 §5): its
//! stale layout must not let it bring deleted rows back, and no node merges
//! rows of a partition it does not hold.

#[macro_use]
mod common;

use common::*;
use hangar_table::wire::WireRow;

/// Waits until every node of `nodes` has layout version `v` current and
/// `kept` versions kept.
async fn wait_layout(nodes: &[&Node], v: u64, kept: usize) {
    assert!(
        wait_for(Duration::from_secs(10), || nodes.iter().all(|n| {
            let h = n.cluster.layout().history();
            h.current().version == v && h.versions.len() == kept
        }))
        .await,
        "layout version {v} ({kept} kept) did not reach every node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_node_restarted_from_its_old_disk_brings_no_deleted_row_back() {
    let mut nodes = cluster_of(4).await;
    let d = nodes.pop().unwrap();
    let d_id = d.cluster.id();
    // A partition key that node 4 holds in version 1.
    let q = (0..10_000u32)
        .find(|q| {
            d.cluster
                .storage_nodes_of_partition(layout_partition_of(&pk(*q)))
                .nodes()
                .contains(&d_id)
        })
        .unwrap();
    let p = layout_partition_of(&pk(q));
    nodes[0].table.insert(rows_of(q, 3, 1)).await.unwrap();
    assert!(eventually!(
        Duration::from_secs(5),
        local_count(&d, q).await == 3
    ));
    // A pass as node 4's worker makes: it marks what it holds.
    let r = sync_pass(&d.cluster, &syncable(&d)).await;
    assert!(r.errors.is_empty(), "{:?}", r.errors);

    // Node 4 stops; while it is down the others remove it from the layout.
    d.mesh.shutdown().await;
    assert!(wait_for(Duration::from_secs(5), || !nodes[0].mesh.is_up(d_id)).await);
    let a = nodes[0].cluster.id();
    let ids: Vec<NodeId> = nodes.iter().map(|n| n.cluster.id()).collect();
    nodes[0]
        .cluster
        .layout()
        .update("remove node 4", |h| {
            let now = hangar_util::time::now_msec();
            h.stage_removal(a, now, d_id).map_err(|e| e.to_string())?;
            h.apply(2, a, now + 1)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    let live: Vec<&Node> = nodes.iter().collect();
    wait_layout(&live, 2, 2).await;
    // The rows reach the nodes of version 2, then they are deleted: a
    // tombstone for each, on every node of both versions but node 4.
    for n in &nodes {
        let r = sync_pass(&n.cluster, &syncable(n)).await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }
    let tombstones: Vec<_> = rows_of(q, 3, 2)
        .into_iter()
        .map(|(pk, s, _)| (pk, s, row(2, "")))
        .collect();
    nodes[0].table.insert(tombstones).await.unwrap();
    // Version 1 retires: every node acknowledged, synced and reads version
    // 2, node 4 skipped as dead (`layout skip-dead-nodes --allow-missing-data`).
    nodes[0]
        .cluster
        .layout()
        .update("retire version 1", |h| {
            for id in &ids {
                h.ack_version(*id, 2);
            }
            h.skip_dead_nodes(2, &[d_id], true)
                .map_err(|e| e.to_string())?;
            for id in &ids {
                h.mark_synced(*id, 2);
            }
            for id in ids.iter().chain([&d_id]) {
                h.ack_sync(*id, 2);
            }
            Ok(())
        })
        .await
        .unwrap();
    wait_layout(&live, 2, 1).await;
    // Every holder has the tombstones, which the collector then removes
    // (what the sharded tombstone collection commits: the row and its Merkle leaf go).
    for n in &nodes {
        let r = sync_pass(&n.cluster, &syncable(n)).await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }
    let sorts: Vec<Vec<u8>> = rows_of(q, 3, 2).into_iter().map(|(_, s, _)| s).collect();
    for n in &nodes {
        let held = n
            .table
            .local()
            .range(&pk(q), Bound::Unbounded, Bound::Unbounded, false, 10)
            .await
            .unwrap();
        assert!(held.iter().all(|(_, r)| r.val.is_empty()), "{held:?}");
        delete_locally(n, q, sorts.clone()).await;
        assert_eq!(local_count(n, q).await, 0);
    }

    // Node 4 starts again from its old disk: its layout file still says
    // version 1, where it holds partition `p`.
    let Node { dir, db, .. } = d;
    let d = start_node(dir, Some(db)).await;
    assert_eq!(d.cluster.id(), d_id);
    assert_eq!(d.cluster.layout().history().current().version, 1);
    assert_eq!(local_count(&d, q).await, 3);
    for n in &nodes {
        d.mesh.connect(&n.mesh.peer_addr()).await.unwrap();
    }
    assert!(
        wait_for(Duration::from_secs(5), || ids
            .iter()
            .all(|i| d.mesh.is_up(*i)))
        .await
    );
    // Its sync worker's pass, as soon as the peers are up.
    let report = sync_pass(&d.cluster, &syncable(&d)).await;
    for n in &nodes {
        assert_eq!(
            local_count(n, q).await,
            0,
            "node {} merged deleted rows back from the removed node ({report:?})",
            n.cluster.id().short()
        );
    }
    assert_eq!(report.rows_pushed, 0, "{report:?}");
    // It learnt the layout first: it holds nothing, and its rows left.
    assert_eq!(d.cluster.layout().history().current().version, 2);
    assert_eq!(report.rows_dropped, 3, "{report:?}");
    assert_eq!(local_count(&d, q).await, 0);
    assert_eq!(d.table.merkle_root(p).await.unwrap().count, 0);
    let mut all = nodes;
    all.push(d);
    shutdown(&all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_partition_a_node_does_not_hold_are_refused() {
    let nodes = cluster_of(4).await;
    let a = &nodes[0];
    let a_id = a.cluster.id();
    let holds = |q: u32| {
        a.cluster
            .storage_nodes_of_partition(layout_partition_of(&pk(q)))
            .nodes()
            .contains(&a_id)
    };
    let foreign = (0..10_000u32).find(|q| !holds(*q)).unwrap();
    let own = (0..10_000u32).find(|q| holds(*q)).unwrap();
    // A peer calling the update endpoint of table `t` (as a node with a
    // stale layout would).
    let dir = tempfile::tempdir().unwrap();
    let caller = start_mesh(dir.path()).await;
    caller.connect(&a.mesh.peer_addr()).await.unwrap();
    assert!(wait_for(Duration::from_secs(5), || caller.is_up(a_id)).await);
    let update = caller
        .endpoint::<UpdateRows, ()>("hangar/table/t/update")
        .unwrap();
    let wire = |q: u32| WireRow {
        key: ByteBuf::from(hangar_table::storage_key::<T>(&pk(q), b"k")),
        value: ByteBuf::from(hangar_table::encode::<T>(&row(1, "x"))),
    };
    let refused = update
        .call(
            a_id,
            UpdateRows {
                rows: vec![wire(foreign)],
            },
            hangar_net::CallOpts::background(),
        )
        .await;
    assert!(
        refused.is_err(),
        "a row of a partition node 0 does not hold was merged"
    );
    assert_eq!(local_count(a, foreign).await, 0);
    update
        .call(
            a_id,
            UpdateRows {
                rows: vec![wire(own)],
            },
            hangar_net::CallOpts::background(),
        )
        .await
        .unwrap();
    assert_eq!(local_count(a, own).await, 1);
    // A partition node 0 held in a version since retired (its sync worker
    // marked it held then): a coordinator that has not yet learnt of the
    // retirement still writes to it, and the row is merged (the next pass
    // drops it with the partition's other rows).
    hangar_table::merkle::mark_held(&a.db, "merkle:t", vec![layout_partition_of(&pk(foreign))])
        .await
        .unwrap();
    update
        .call(
            a_id,
            UpdateRows {
                rows: vec![wire(foreign)],
            },
            hangar_net::CallOpts::background(),
        )
        .await
        .unwrap();
    assert_eq!(local_count(a, foreign).await, 1);
    caller.shutdown().await;
    shutdown(&nodes).await;
}
