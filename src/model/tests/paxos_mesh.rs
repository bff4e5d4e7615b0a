//! The Paxos round of conditional writes over real meshes in one process:
//! three nodes on 127.0.0.1, each with its acceptor on its own store and
//! the `hangar/object/paxos/*` endpoints, a layout applied through the
//! live layout; proposers on every node race on one key through
//! [`MeshLink`], and one of them wins per key.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hangar_cluster::{Cluster, layout_file};
use hangar_db::{Db, DbOptions, RedbEngine};
use hangar_layout::{NodeId, NodeRole};
use hangar_model::paxos::link::{MeshLink, PaxosEndpoints};
use hangar_model::paxos::messages::{PaxosKey, Proposal};
use hangar_model::paxos::proposer::{self, Link, Register};
use hangar_model::paxos::{Acceptor, BallotClock, Outcome};
use hangar_net::Mesh;
use hangar_util::config::ConsistencyMode;
use serde_bytes::ByteBuf;

const TB: u64 = 1_000_000_000_000;

struct Node {
    _dir: tempfile::TempDir,
    mesh: Mesh,
    cluster: Cluster,
    eps: Arc<PaxosEndpoints>,
    clock: Arc<BallotClock>,
}

async fn start_node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mesh = hangar_model::testkit::start_mesh(dir.path(), [5; 32]).await;
    let engine = RedbEngine::open(&dir.path().join("db"), 4 << 20).unwrap();
    let db = Db::new(Arc::new(engine), DbOptions::default());
    let history = layout_file::load_or_create(dir.path(), 3).unwrap();
    let cluster = Cluster::start(
        mesh.clone(),
        history,
        ConsistencyMode::Consistent,
        dir.path().to_path_buf(),
        vec![dir.path().to_path_buf()],
    )
    .unwrap();
    let eps = PaxosEndpoints::new(&mesh, Acceptor::new(db)).unwrap();
    Node {
        _dir: dir,
        mesh,
        cluster,
        eps,
        clock: Arc::new(BallotClock::new()),
    }
}

async fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn three_nodes() -> Vec<Node> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(start_node().await);
    }
    common::connect_all(&nodes.iter().map(|n| &n.mesh).collect::<Vec<_>>()).await;
    let me = nodes[0].cluster.id();
    let ids: Vec<NodeId> = nodes.iter().map(|n| n.cluster.id()).collect();
    nodes[0]
        .cluster
        .layout()
        .update("test layout", |h| {
            let now = hangar_util::time::now_msec();
            for (i, id) in ids.iter().enumerate() {
                h.stage_role(me, now, *id, NodeRole::storage(format!("z{i}"), TB))
                    .map_err(|e| e.to_string())?;
            }
            h.apply(1, me, now + 1)
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
            == 1))
        .await
    );
    nodes
}

/// A linearizable cell shared by every proposer (the mesh is what is
/// tested here): `If-None-Match: *`.
struct Cell {
    value: Arc<Mutex<Option<String>>>,
    mine: String,
}

fn proposal(v: &str) -> Proposal {
    Proposal::Publish {
        sort: ByteBuf::from(b"k".to_vec()),
        row: ByteBuf::from(v.as_bytes().to_vec()),
    }
}

#[async_trait]
impl Register for Cell {
    async fn propose(&self) -> hangar_model::Result<Option<Proposal>> {
        Ok(self
            .value
            .lock()
            .unwrap()
            .is_none()
            .then(|| proposal(&self.mine)))
    }
    async fn publish(&self, v: &Proposal) -> hangar_model::Result<()> {
        if let Proposal::Publish { row, .. } = v {
            let s = String::from_utf8(row.to_vec()).unwrap();
            let mut cur = self.value.lock().unwrap();
            assert!(
                cur.is_none() || cur.as_deref() == Some(s.as_str()),
                "two different values decided: {cur:?} and {s}"
            );
            *cur = Some(s);
        }
        Ok(())
    }
    async fn is_published(&self, v: &Proposal) -> hangar_model::Result<bool> {
        Ok(Some(v) == self.value.lock().unwrap().as_deref().map(proposal).as_ref())
    }
    async fn still_newest(&self, _: &Proposal) -> hangar_model::Result<bool> {
        Ok(self.value.lock().unwrap().is_none())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposers_on_three_meshes_decide_one_value_per_key() {
    let nodes = three_nodes().await;
    for round in 0..30 {
        let key = PaxosKey::new(&[round as u8; 32], &format!("k{round}"));
        let cell = Arc::new(Mutex::new(None));
        let mut tasks = Vec::new();
        for w in 0..6 {
            let n = &nodes[w % 3];
            let p = <hangar_model::object::ObjectTable as hangar_table::Schema>::layout_partition(
                &key.bucket,
            );
            let sets = n.cluster.storage_nodes_of_partition(p).sets;
            assert_eq!(sets.len(), 1);
            assert_eq!(sets[0].nodes.len(), 3);
            let link: Arc<dyn Link> =
                Arc::new(MeshLink::new(n.cluster.clone(), n.eps.clone(), sets));
            let (clock, key, cell) = (n.clock.clone(), key.clone(), cell.clone());
            tasks.push(tokio::spawn(async move {
                let reg = Cell {
                    value: cell,
                    mine: format!("writer-{w}"),
                };
                proposer::run(link, &clock, &key, &reg).await
            }));
        }
        let mut won = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(Outcome::Published(_)) => won += 1,
                Ok(Outcome::PreconditionFailed) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(won, 1, "round {round}");
        assert!(cell.lock().unwrap().is_some());
    }
    // Two of three nodes gone: a round fails at once, sending nothing.
    nodes[1].mesh.shutdown().await;
    nodes[2].mesh.shutdown().await;
    assert!(
        wait_for(Duration::from_secs(10), || !nodes[0]
            .mesh
            .is_up(nodes[1].mesh.id())
            && !nodes[0].mesh.is_up(nodes[2].mesh.id()))
        .await
    );
    let key = PaxosKey::new(&[99; 32], "alone");
    let p =
        <hangar_model::object::ObjectTable as hangar_table::Schema>::layout_partition(&key.bucket);
    let link: Arc<dyn Link> = Arc::new(MeshLink::new(
        nodes[0].cluster.clone(),
        nodes[0].eps.clone(),
        nodes[0].cluster.storage_nodes_of_partition(p).sets,
    ));
    let reg = Cell {
        value: Arc::new(Mutex::new(None)),
        mine: "alone".into(),
    };
    let t0 = Instant::now();
    let r = proposer::run(link, &nodes[0].clock, &key, &reg).await;
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    match r {
        Err(hangar_model::ModelError::ConditionalWrite {
            outcome_unknown: false,
            contended: false,
            reason,
        }) => assert!(reason.contains("quorum"), "{reason}"),
        other => panic!("{other:?}"),
    }
    nodes[0].mesh.shutdown().await;
}
