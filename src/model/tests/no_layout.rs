//! A node of a cluster with replication factor 3 that has no layout yet
//! (joining, or replacing a node, in the moment before the layout reaches
//! it) refuses to read or write object rows instead of using its own
//! store, which holds none of the cluster's: a read there would call an
//! object absent, and an admin's DeleteBucket would find a bucket empty
//! whose objects other nodes hold. Three real meshes in one process, no
//! layout applied.

mod common;

use std::sync::Arc;

use hangar_block::{BlockFiles, BlockManager, ReplicatedBlocks, ReplicatedConfig, ResyncSettings};
use hangar_cluster::Cluster;
use hangar_db::{Db, DbOptions, RedbEngine};
use hangar_layout::LayoutHistory;
use hangar_model::object::{ObjectData, ObjectRow, ObjectTable};
use hangar_model::{Model, ModelError};
use hangar_net::Mesh;
use hangar_table::full_table::ReplicationError;
use hangar_table::{Table, TableError};
use hangar_util::config::ConsistencyMode;

struct Node {
    _dir: tempfile::TempDir,
    mesh: Mesh,
    db: Db,
    model: Arc<Model>,
}

async fn start_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mesh = common::start_mesh(dir.path(), [7; 32]).await;
    let engine = RedbEngine::open(&dir.path().join("db"), 4 << 20).unwrap();
    let db = Db::new(Arc::new(engine), DbOptions::default());
    let data = dir.path().join("data");
    let files = BlockFiles::new(vec![data.clone()], Some(1), false, true).unwrap();
    let blocks = BlockManager::new(files, db.clone(), 60_000);
    let cluster = Cluster::start(
        mesh.clone(),
        LayoutHistory::new(3),
        ConsistencyMode::Consistent,
        dir.path().to_path_buf(),
        vec![data],
    )
    .unwrap();
    let replicated = ReplicatedBlocks::new(
        blocks.clone(),
        cluster.clone(),
        ReplicatedConfig::new(64 << 20, 1 << 20),
        Arc::new(ResyncSettings::new(4, 0, 0)),
    )
    .unwrap();
    let model =
        Model::with_cluster(db.clone(), blocks, false, Some((&cluster, replicated))).unwrap();
    Node {
        _dir: dir,
        mesh,
        db,
        model,
    }
}

async fn three_unlaid_nodes() -> Vec<Node> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(start_node().await);
    }
    common::connect_all(&nodes.iter().map(|n| &n.mesh).collect::<Vec<_>>()).await;
    nodes
}

fn no_layout_yet<T>(r: &hangar_model::Result<T>) -> bool {
    matches!(
        r,
        Err(ModelError::Table(TableError::Replication(
            ReplicationError::NoLayoutYet { .. }
        )))
    )
}

#[tokio::test]
async fn a_node_without_a_layout_neither_reads_its_own_object_rows_nor_empties_a_bucket() {
    let nodes = three_unlaid_nodes().await;
    // Buckets are control rows, on every node: they can be made before a
    // layout (an operator preparing a cluster does).
    let bucket = nodes[0].model.create_bucket("full", None).await.unwrap();
    // An object of the bucket that another node holds: the cluster's rows
    // are on other nodes than this one.
    let mut row = ObjectRow::tombstone([1; 16], 1_000);
    row.data = ObjectData::Inline(b"kept".to_vec());
    row.size = 4;
    let part = bucket.id_bytes();
    nodes[1]
        .db
        .write(move |tx| Table::<ObjectTable>::tx_insert(tx, &part, b"k", &row))
        .await
        .unwrap();

    let got = nodes[0].model.get_object(&bucket, "k").await;
    assert!(no_layout_yet(&got), "{got:?}");
    let listed = nodes[0]
        .model
        .list_objects(&bucket, std::ops::Bound::Unbounded, 10)
        .await;
    assert!(no_layout_yet(&listed), "{listed:?}");
    let deleted = nodes[0].model.delete_bucket("full").await;
    assert!(no_layout_yet(&deleted), "{deleted:?}");
    for n in &nodes {
        assert!(
            n.model.get_bucket("full").await.unwrap().is_some(),
            "the bucket is still there"
        );
    }
}
