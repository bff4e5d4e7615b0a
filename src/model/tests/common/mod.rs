//! Meshes in one process for the model's tests: started on 127.0.0.1 with
//! short ping settings, and connected to each other; model nodes of a
//! cluster (replication factor 3) over them, with or without a layout.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hangar_cluster::Cluster;
use hangar_db::{Db, RedbEngine};
use hangar_layout::NodeRole;
use hangar_model::Model;
use hangar_net::Mesh;

/// Connects every mesh to every other and waits until each sees all up.
pub async fn connect_all(meshes: &[&Mesh]) {
    for (a, m) in meshes.iter().enumerate() {
        for o in &meshes[a + 1..] {
            m.connect(&o.peer_addr()).await.unwrap();
        }
    }
    let start = Instant::now();
    while !meshes
        .iter()
        .all(|m| meshes.iter().all(|o| m.is_up(o.id())))
    {
        assert!(start.elapsed() < Duration::from_secs(5), "meshes not up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A model node, on its own mesh, store and block directory.
pub struct ModelNode {
    pub _dir: tempfile::TempDir,
    pub mesh: Mesh,
    pub db: Db,
    pub cluster: Cluster,
    pub model: Arc<Model>,
}

/// Starts a model node with no layout yet.
pub async fn start_model_node() -> ModelNode {
    start_node(3).await
}

/// A lone node: replication factor 1 and no layout, the model of one node
/// (on the same path as a cluster's).
pub async fn lone_node() -> ModelNode {
    start_node(1).await
}

async fn start_node(replication_factor: usize) -> ModelNode {
    let dir = tempfile::tempdir().unwrap();
    let engine = RedbEngine::open(&dir.path().join("db"), 8 << 20).unwrap();
    let n =
        hangar_model::testkit::start_node(dir.path(), Arc::new(engine), replication_factor).await;
    ModelNode {
        _dir: dir,
        mesh: n.mesh,
        db: n.db,
        cluster: n.cluster,
        model: n.model,
    }
}

/// Three connected model nodes with no layout.
pub async fn three_model_nodes() -> Vec<ModelNode> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(start_model_node().await);
    }
    connect_all(&nodes.iter().map(|n| &n.mesh).collect::<Vec<_>>()).await;
    nodes
}

/// Applies, through node 0, a layout version of every node in `nodes` (one
/// zone each) and waits until each has it.
pub async fn apply_layout(nodes: &[ModelNode]) {
    let me = nodes[0].cluster.id();
    let ids: Vec<_> = nodes.iter().map(|n| n.cluster.id()).collect();
    let version = nodes[0].cluster.layout().history().current().version + 1;
    nodes[0]
        .cluster
        .layout()
        .update("test layout", |h| {
            let now = hangar_util::time::now_msec();
            for (i, id) in ids.iter().enumerate() {
                h.stage_role(me, now, *id, NodeRole::storage(format!("z{i}"), 1 << 40))
                    .map_err(|e| e.to_string())?;
            }
            h.apply(version, me, now + 1)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    let start = Instant::now();
    while !nodes
        .iter()
        .all(|n| n.cluster.layout().history().current().version == version)
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "layout not applied everywhere"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
