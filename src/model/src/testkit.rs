//! Model nodes for tests, in one process: a mesh on 127.0.0.1 with short
//! ping settings, a cluster of the given replication factor over it, and
//! the model on a store and block directory under a directory the caller
//! owns. A node of replication factor 1 with no layout is a lone node
//! (`hangar_cluster::Cluster::is_lone`): the model of one node, on the
//! same path as any cluster's. Built for the crate's unit tests and, with
//! the `testkit` feature, for its integration tests.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hangar_block::{BlockFiles, BlockManager, ReplicatedBlocks, ReplicatedConfig, ResyncSettings};
use hangar_cluster::Cluster;
use hangar_db::{Db, DbOptions, Engine};
use hangar_layout::LayoutHistory;
use hangar_net::{Mesh, MeshConfig};
use hangar_util::config::ConsistencyMode;

use crate::Model;

/// The parts of a model node, for tests that reach below the model.
pub struct NodeParts {
    pub mesh: Mesh,
    pub db: Db,
    pub cluster: Cluster,
    pub model: Arc<Model>,
}

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

/// Starts a model node with no layout, its metadata in `engine` and its
/// mesh state and blocks under `dir`; nodes started so share one cluster
/// secret and may be connected to each other.
pub async fn start_node(
    dir: &Path,
    engine: Arc<dyn Engine>,
    replication_factor: usize,
) -> NodeParts {
    let mesh = start_mesh(dir, [7; 32]).await;
    let db = Db::new(engine, DbOptions::default());
    let data = dir.join("data");
    let files = BlockFiles::new(vec![data.clone()], Some(1), false, true).unwrap();
    let blocks = BlockManager::new(files, db.clone(), 60_000);
    let cluster = Cluster::start(
        mesh.clone(),
        LayoutHistory::new(replication_factor),
        ConsistencyMode::Consistent,
        dir.to_path_buf(),
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
    let model = Model::new(db.clone(), blocks, false, &cluster, replicated).unwrap();
    NodeParts {
        mesh,
        db,
        cluster,
        model,
    }
}
