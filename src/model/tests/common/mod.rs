//! Meshes in one process for the model's tests: started on 127.0.0.1 with
//! short ping settings, and connected to each other; model nodes of a
//! cluster (replication factor 3) over them, with or without a layout.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hangar_block::{BlockFiles, BlockManager, ReplicatedBlocks, ReplicatedConfig, ResyncSettings};
use hangar_cluster::Cluster;
use hangar_db::{Db, DbOptions, RedbEngine};
use hangar_layout::{LayoutHistory, NodeRole};
use hangar_model::Model;
use hangar_net::{Mesh, MeshConfig};
use hangar_util::config::ConsistencyMode;

/// A mesh on 127.0.0.1 keeping its state in `dir`, with the cluster secret
/// `secret`.
pub async fn start_mesh(dir: &Path, secret: [u8; 32]) -> Mesh {
    let mut cfg = MeshConfig::new(secret, "127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    Mesh::start(cfg).await.unwrap()
}

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

/// A model node of a cluster with replication factor 3, on its own mesh,
/// store and block directory.
pub struct ModelNode {
    pub _dir: tempfile::TempDir,
    pub mesh: Mesh,
    pub db: Db,
    pub cluster: Cluster,
    pub model: Arc<Model>,
}

/// Starts a model node with no layout yet.
pub async fn start_model_node() -> ModelNode {
    let dir = tempfile::tempdir().unwrap();
    let mesh = start_mesh(dir.path(), [7; 32]).await;
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
    ModelNode {
        _dir: dir,
        mesh,
        db,
        cluster,
        model,
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
