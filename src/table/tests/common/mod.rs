//! The harness of the table tests over real meshes in one process: nodes
//! on 127.0.0.1 with short ping timings (as in hangar_cluster's tests), a
//! real layout applied through the live layout, a sled store per node; a
//! test table `T` (sharded, fenceable) and `F` (on every node).
#![allow(dead_code, unused_imports, unused_macros)]

pub use std::collections::BTreeSet;
pub use std::ops::Bound;
pub use std::path::Path;
pub use std::sync::Arc;
pub use std::time::{Duration, Instant};

pub use async_trait::async_trait;
pub use hangar_cluster::{Cluster, QuorumError, layout_file};
pub use hangar_db::{Db, DbOptions, SledEngine};
pub use hangar_layout::{NodeId, NodeRole, Partition};
pub use hangar_net::{Handler, HandlerError, Mesh, MeshConfig, Request, Response};
pub use hangar_table::sharded::sync::{
    ShardedSyncStatus, ShardedSyncable, spawn_sharded_sync_worker, sync_pass,
};
pub use hangar_table::wire::{RangeRows, ReadRange, ReadRow, UpdateRows};
pub use hangar_table::{
    Crdt, Replica, ReplicationError, Schema, Table, TableError, layout_partition_of,
};
pub use hangar_util::config::ConsistencyMode;
pub use hangar_util::worker::WorkerRegistry;
pub use serde::{Deserialize, Serialize};
pub use serde_bytes::ByteBuf;

pub const SECRET: [u8; 32] = [9; 32];
pub const TB: u64 = 1_000_000_000_000;

/// A last-writer-wins row; an empty value is a tombstone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct R {
    pub ts: u64,
    pub val: String,
}

impl Crdt for R {
    fn merge(&mut self, o: &Self) {
        if (o.ts, &o.val) > (self.ts, &self.val) {
            *self = o.clone();
        }
    }
}

pub struct T;
impl Schema for T {
    const TREE: &'static str = "t";
    const PARTITION_LEN: usize = 4;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:t");
    const FENCE_TREE: Option<&'static str> = Some("fence:t");
    const BURIED_TREE: Option<&'static str> = Some("buried:t");
    type Row = R;
    type Replication = hangar_table::Sharded;
    fn is_tombstone(row: &R) -> bool {
        row.val.is_empty()
    }
}

/// A table every node holds (`Table<F>`, replicated `Full`), of the same rows.
pub struct F;
impl Schema for F {
    const TREE: &'static str = "f";
    const PARTITION_LEN: usize = 0;
    type Row = R;
    type Replication = hangar_table::Full;
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hangar_table=debug,hangar_cluster=info".into()),
        )
        .with_test_writer()
        .try_init();
}

pub struct Node {
    pub dir: tempfile::TempDir,
    pub mesh: Mesh,
    pub cluster: Cluster,
    pub db: Db,
    pub table: Table<T>,
}

pub async fn start_mesh(dir: &Path) -> Mesh {
    let mut cfg = MeshConfig::new(SECRET, "127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    Mesh::start(cfg).await.unwrap()
}

/// Starts (or restarts, on the same directory and store) one node.
pub async fn start_node(dir: tempfile::TempDir, db: Option<Db>) -> Node {
    let mesh = start_mesh(dir.path()).await;
    let db = db.unwrap_or_else(|| {
        Db::new(
            Arc::new(SledEngine::open(&dir.path().join("db"), 1 << 22).unwrap()),
            DbOptions::default(),
        )
    });
    let history = layout_file::load_or_create(dir.path(), 3).unwrap();
    let cluster = Cluster::start(
        mesh.clone(),
        history,
        ConsistencyMode::Consistent,
        dir.path().to_path_buf(),
        vec![dir.path().to_path_buf()],
    )
    .unwrap();
    let table = Table::<T>::new(db.clone(), cluster.clone()).unwrap();
    Node {
        dir,
        mesh,
        cluster,
        db,
        table,
    }
}

pub async fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Like [`wait_for`] with an async condition.
macro_rules! eventually {
    ($limit:expr, $cond:expr) => {{
        let start = Instant::now();
        let mut ok = false;
        while start.elapsed() < $limit {
            if $cond {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ok
    }};
}

pub async fn connect_all(nodes: &[Node]) {
    for a in 0..nodes.len() {
        for b in a + 1..nodes.len() {
            nodes[a]
                .mesh
                .connect(&nodes[b].mesh.peer_addr())
                .await
                .unwrap();
        }
    }
    let all_up = wait_for(Duration::from_secs(5), || {
        nodes
            .iter()
            .all(|m| nodes.iter().all(|o| m.mesh.is_up(o.mesh.id())))
    })
    .await;
    assert!(all_up, "the nodes did not see each other up");
}

/// Applies a layout version made of `nodes` on node 0 (node i in zone
/// `z{i % zones}`) and waits until every node in `nodes` has it.
pub async fn apply_layout(nodes: &[Node], zones: usize) -> u64 {
    let me = nodes[0].cluster.id();
    let ids: Vec<NodeId> = nodes.iter().map(|n| n.cluster.id()).collect();
    let version = nodes[0].cluster.layout().history().current().version + 1;
    nodes[0]
        .cluster
        .layout()
        .update("test layout", |h| {
            let now = hangar_util::time::now_msec();
            for (i, id) in ids.iter().enumerate() {
                if h.current().roles.contains_key(id) {
                    continue;
                }
                h.stage_role(
                    me,
                    now,
                    *id,
                    NodeRole::storage(format!("z{}", i % zones), TB),
                )
                .map_err(|e| e.to_string())?;
            }
            h.apply(version, me, now + 1)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(10), || nodes.iter().all(|n| n
            .cluster
            .layout()
            .history()
            .current()
            .version
            == version))
        .await,
        "layout version {version} did not reach every node"
    );
    version
}

/// `n` connected nodes with a layout of all of them applied.
pub async fn cluster_of(n: usize) -> Vec<Node> {
    init_tracing();
    let mut nodes = Vec::new();
    for _ in 0..n {
        nodes.push(start_node(tempfile::tempdir().unwrap(), None).await);
    }
    connect_all(&nodes).await;
    apply_layout(&nodes, n).await;
    nodes
}

pub async fn shutdown(nodes: &[Node]) {
    for n in nodes {
        n.mesh.shutdown().await;
    }
}

pub fn pk(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

pub fn row(ts: u64, val: &str) -> R {
    R {
        ts,
        val: val.to_string(),
    }
}

/// Rows `0..n` of partition key `p`: sort key `k{i:03}`.
pub fn rows_of(p: u32, n: usize, ts: u64) -> Vec<(Vec<u8>, Vec<u8>, R)> {
    (0..n)
        .map(|i| {
            (
                pk(p),
                format!("k{i:03}").into_bytes(),
                row(ts, &format!("{p}-{i}")),
            )
        })
        .collect()
}

pub async fn local_count(n: &Node, p: u32) -> usize {
    n.table
        .local()
        .range(&pk(p), Bound::Unbounded, Bound::Unbounded, false, 10_000)
        .await
        .unwrap()
        .len()
}

pub async fn roots_equal(nodes: &[&Node], p: Partition) -> bool {
    let mut roots = Vec::new();
    for n in nodes {
        roots.push(n.table.merkle_root(p).await.unwrap());
    }
    roots.windows(2).all(|w| w[0] == w[1])
}

pub fn node_of(nodes: &[Node], id: NodeId) -> &Node {
    nodes.iter().find(|n| n.cluster.id() == id).unwrap()
}

pub fn syncable(n: &Node) -> Vec<Arc<dyn ShardedSyncable>> {
    vec![Arc::new(n.table.clone())]
}

/// Deletes rows locally (the Merkle index follows), as a lost write would
/// leave them.
pub async fn delete_locally(n: &Node, p: u32, sorts: Vec<Vec<u8>>) {
    let key = pk(p);
    n.db.write(move |tx| {
        for s in &sorts {
            Replica::<T>::tx_remove(tx, &key, s)?;
        }
        Ok::<_, TableError>(())
    })
    .await
    .unwrap();
}

/// Merges `r` into node `n`'s own rows of table `F` only.
pub async fn put_local_f(n: &Node, r: R) {
    n.db.write(move |tx| Replica::<F>::tx_insert(tx, b"", b"row", &r).map(|_| ()))
        .await
        .unwrap();
}
