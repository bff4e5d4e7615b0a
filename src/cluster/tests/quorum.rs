//! Quorum calls and the Cluster handle over real meshes in one process:
//! three nodes on 127.0.0.1 with short ping timings (as in hangar_net's
//! tests) and a 10 s RPC timeout, which no test may wait for.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hangar_cluster::{Cluster, QuorumError, call_quorum};
use hangar_layout::{LayoutHistory, NodeId, NodeRole};
use hangar_net::{CallOpts, Handler, HandlerError, Mesh, MeshConfig, Request, Response};
use hangar_util::Hash;
use hangar_util::config::ConsistencyMode;

const SECRET: [u8; 32] = [7; 32];
const RPC_TIMEOUT: Duration = Duration::from_secs(10);
const PATH: &str = "test/quorum";

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hangar_net=info,hangar_cluster=debug".into()),
        )
        .with_test_writer()
        .try_init();
}

async fn start_node(dir: &Path) -> Mesh {
    let mut cfg = MeshConfig::new(SECRET, "127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.rpc_timeout = RPC_TIMEOUT;
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    Mesh::start(cfg).await.unwrap()
}

/// Three connected nodes (each sees the two others up) and their dirs.
async fn three_nodes() -> (Vec<Mesh>, Vec<tempfile::TempDir>) {
    init_tracing();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut meshes = Vec::new();
    for d in &dirs {
        meshes.push(start_node(d.path()).await);
    }
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        meshes[a].connect(&meshes[b].peer_addr()).await.unwrap();
    }
    let all_up = wait_for(Duration::from_secs(5), || {
        meshes
            .iter()
            .all(|m| meshes.iter().all(|o| m.is_up(o.id())))
    })
    .await;
    assert!(all_up, "the three nodes did not see each other up");
    (meshes, dirs)
}

/// A cluster handle (replication factor 3, consistent, no layout yet) on
/// the first of `meshes`.
fn cluster_on_first(meshes: &[Mesh], dirs: &[tempfile::TempDir]) -> Cluster {
    Cluster::start(
        meshes[0].clone(),
        LayoutHistory::new(3),
        ConsistencyMode::Consistent,
        dirs[0].path().to_path_buf(),
        vec![dirs[0].path().to_path_buf()],
    )
    .unwrap()
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

/// Counts the calls it receives; answers with the message plus one, or,
/// when `stall` is set, never.
struct Replica {
    received: Arc<AtomicUsize>,
    stall: bool,
}

#[async_trait]
impl Handler<u32, u32> for Replica {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u32>, HandlerError> {
        self.received.fetch_add(1, Ordering::SeqCst);
        if self.stall {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(req.msg + 1))
    }
}

/// Installs a [`Replica`] on each node (stalling on those in `stalled`) and
/// returns their receive counters.
fn install(meshes: &[Mesh], stalled: &[usize]) -> Vec<Arc<AtomicUsize>> {
    meshes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let received = Arc::new(AtomicUsize::new(0));
            m.endpoint::<u32, u32>(PATH).unwrap().set_handler(
                Replica {
                    received: received.clone(),
                    stall: stalled.contains(&i),
                },
                16,
            );
            received
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_of_two_returns_while_the_third_replica_never_answers() {
    let (meshes, _dirs) = three_nodes().await;
    let received = install(&meshes, &[2]);
    let ids: Vec<NodeId> = meshes.iter().map(|m| m.id()).collect();
    let ep = meshes[0].endpoint::<u32, u32>(PATH).unwrap();
    let start = Instant::now();
    let mut got = call_quorum(&meshes[0], &ep, &ids, 41, 2, CallOpts::default())
        .await
        .unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(1), "took {took:?}");
    got.sort_by_key(|(n, _)| *n);
    let mut expected = vec![(ids[0], 42), (ids[1], 42)];
    expected.sort_by_key(|(n, _)| *n);
    assert_eq!(got, expected, "the local node and node 1 answered");
    // The stalled replica got the message all the same (its call goes on in
    // the background).
    assert!(
        wait_for(Duration::from_secs(2), || received[2]
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the third replica was not called"
    );
    for m in &meshes {
        m.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_down_fails_fast_with_not_enough_nodes() {
    let (meshes, _dirs) = three_nodes().await;
    let received = install(&meshes, &[]);
    let ids: Vec<NodeId> = meshes.iter().map(|m| m.id()).collect();
    meshes[1].shutdown().await;
    meshes[2].shutdown().await;
    assert!(
        wait_for(Duration::from_secs(5), || !meshes[0].is_up(ids[1])
            && !meshes[0].is_up(ids[2]))
        .await,
        "node 0 did not see the others go down"
    );
    let ep = meshes[0].endpoint::<u32, u32>(PATH).unwrap();
    let start = Instant::now();
    let e = call_quorum(&meshes[0], &ep, &ids, 1, 2, CallOpts::default())
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(100), "took {took:?}");
    assert!(
        matches!(
            e,
            QuorumError::NotEnoughNodes {
                needed: 2,
                up: 1,
                targets: 3,
                version: None
            }
        ),
        "got {e}"
    );
    assert!(e.to_string().contains("only 1 of the 3"), "{e}");
    // Nothing was sent, not even to the local node.
    assert_eq!(received[0].load(Ordering::SeqCst), 0);
    // A quorum of one still works, with the local node.
    let got = call_quorum(&meshes[0], &ep, &ids, 1, 1, CallOpts::default())
        .await
        .unwrap();
    assert_eq!(got, vec![(ids[0], 2)]);
    meshes[0].shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_writes_reach_the_quorum_of_every_active_version() {
    let (meshes, dirs) = three_nodes().await;
    let received = install(&meshes, &[]);
    let ids: Vec<NodeId> = meshes.iter().map(|m| m.id()).collect();
    let cluster = cluster_on_first(&meshes, &dirs);
    assert_eq!(cluster.id(), ids[0]);
    assert_eq!(cluster.replication_factor(), 3);
    assert_eq!((cluster.quorums().read, cluster.quorums().write), (2, 2));
    let key = Hash::of(b"some object");
    let ep = meshes[0].endpoint::<u32, u32>(PATH).unwrap();
    // No layout yet: nowhere to write.
    assert!(cluster.storage_nodes_of(&key).is_empty());
    let e = cluster
        .call_write_quorum(&ep, &cluster.storage_nodes_of(&key), 1, CallOpts::default())
        .await
        .unwrap_err();
    assert!(matches!(e, QuorumError::NoLayout), "{e}");

    // Version 1: the three live nodes.
    let me = cluster.id();
    let tb = 1_000_000_000_000;
    cluster
        .layout()
        .update("test layout", |h| {
            for (i, id) in ids.iter().enumerate() {
                h.stage_role(me, 1, *id, NodeRole::storage(format!("z{i}"), tb))
                    .map_err(|e| e.to_string())?;
            }
            h.apply(1, me, 2).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    let v1 = cluster.storage_nodes_of(&key);
    assert_eq!(v1.sets.len(), 1);
    assert_eq!(v1.sets[0].version, 1);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(v1.nodes(), sorted);
    let got = cluster
        .call_write_quorum(&ep, &v1, 10, CallOpts::default())
        .await
        .unwrap();
    assert!(got.len() >= 2, "{got:?}");

    // Version 2 adds a node that does not exist (never up): the partitions
    // it takes have one live node fewer in version 2, and writes go to both
    // versions while the transition lasts.
    let ghost = NodeId([0xee; 32]);
    cluster
        .layout()
        .update("test layout", |h| {
            h.stage_role(me, 3, ghost, NodeRole::storage("z0", tb))
                .map_err(|e| e.to_string())?;
            h.apply(2, me, 4).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    assert!(!cluster.is_up(ghost));
    assert!(cluster.is_up(me));
    assert_eq!(cluster.rtt(me), Some(Duration::ZERO));
    assert_eq!(cluster.all_storage_nodes().len(), 4);
    // A partition the ghost holds in version 2.
    let (p, sets) = (0..=255u8)
        .map(|p| (p, cluster.storage_nodes_of_partition(p)))
        .find(|(_, s)| s.sets[1].nodes.contains(&ghost))
        .expect("the ghost holds some partition");
    assert_eq!(sets.partition, p);
    assert_eq!(
        sets.sets.iter().map(|s| s.version).collect::<Vec<_>>(),
        [1, 2]
    );
    let before: usize = received.iter().map(|r| r.load(Ordering::SeqCst)).sum();
    let start = Instant::now();
    let got = cluster
        .call_write_quorum(&ep, &sets, 20, CallOpts::default())
        .await
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(1));
    for s in &sets.sets {
        let acked = s
            .nodes
            .iter()
            .filter(|n| got.iter().any(|(g, _)| g == *n))
            .count();
        assert!(acked >= 2, "version {} has {acked} acks", s.version);
    }
    // The ghost was never called; each live node once.
    assert!(got.iter().all(|(n, _)| *n != ghost));
    assert!(
        wait_for(Duration::from_secs(2), || {
            received
                .iter()
                .map(|r| r.load(Ordering::SeqCst))
                .sum::<usize>()
                == before + 3
        })
        .await
    );
    for m in &meshes {
        m.shutdown().await;
    }
}

/// Counts the calls it receives and answers each after `delay_ms`.
struct Timed {
    received: Arc<AtomicUsize>,
    delay_ms: Arc<std::sync::atomic::AtomicU64>,
}

#[async_trait]
impl Handler<u32, u32> for Timed {
    async fn handle(&self, req: Request<u32>) -> Result<Response<u32>, HandlerError> {
        self.received.fetch_add(1, Ordering::SeqCst);
        let ms = self.delay_ms.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(Response::new(req.msg + 1))
    }
}

/// Three nodes answering the endpoint [`Timed`] at `test/timed`, each
/// counting its calls and waiting its own delay, and a cluster on the
/// first: the delay and count of each, the ids, the first node's endpoint.
struct TimedNodes {
    meshes: Vec<Mesh>,
    _dirs: Vec<tempfile::TempDir>,
    cluster: Cluster,
    ids: Vec<NodeId>,
    ep: Arc<hangar_net::Endpoint<u32, u32>>,
    received: Vec<Arc<AtomicUsize>>,
    delays: Vec<Arc<std::sync::atomic::AtomicU64>>,
}

impl TimedNodes {
    async fn start() -> TimedNodes {
        const TIMED: &str = "test/timed";
        let (meshes, dirs) = three_nodes().await;
        let (received, delays): (Vec<_>, Vec<_>) = meshes
            .iter()
            .map(|m| {
                let h = Timed {
                    received: Arc::default(),
                    delay_ms: Arc::default(),
                };
                let r = (h.received.clone(), h.delay_ms.clone());
                m.endpoint::<u32, u32>(TIMED).unwrap().set_handler(h, 64);
                r
            })
            .unzip();
        let cluster = cluster_on_first(&meshes, &dirs);
        let ids: Vec<NodeId> = meshes.iter().map(|m| m.id()).collect();
        let ep = meshes[0].endpoint::<u32, u32>(TIMED).unwrap();
        TimedNodes {
            meshes,
            _dirs: dirs,
            cluster,
            ids,
            ep,
            received,
            delays,
        }
    }

    fn count(&self, i: usize) -> usize {
        self.received[i].load(Ordering::SeqCst)
    }

    async fn read(&self) -> Duration {
        let start = Instant::now();
        let got = self
            .cluster
            .call_read_quorum(&self.ep, &self.ids, 1, CallOpts::default())
            .await
            .unwrap();
        assert!(got.len() >= 2);
        start.elapsed()
    }
}

/// A read goes to the replica that answers fastest now, not to the one
/// with the smallest ping RTT: a replica that slows down (as a node does
/// while a resync takes its CPU, its pings still answered at once) stops
/// getting the reads within a few calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_move_off_a_replica_that_answers_slowly() {
    let t = TimedNodes::start().await;
    let (meshes, ids, delays) = (&t.meshes, &t.ids, &t.delays);
    let count = |i: usize| t.count(i);
    for _ in 0..20 {
        t.read().await;
    }
    assert_eq!(count(0), 20, "this node answers every read");
    // The remote replica the reads went to most slows down: 30 ms, past the
    // 20 ms hedge, so every read still completes through the other one.
    let (slow, fast) = if count(1) >= count(2) { (1, 2) } else { (2, 1) };
    delays[slow].store(30, Ordering::SeqCst);
    let before = (count(slow), count(fast));
    let start = Instant::now();
    for _ in 0..40 {
        t.read().await;
    }
    let (to_slow, to_fast) = (count(slow) - before.0, count(fast) - before.1);
    // One slow call teaches the caller; after that the slow replica is
    // asked again only when its estimate goes stale (once a second).
    let stale_checks = start.elapsed().as_secs() as usize + 1;
    assert!(
        to_slow <= 2 + stale_checks && to_fast >= 40 - stale_checks,
        "40 reads: {to_slow} to the slow replica, {to_fast} to the fast one"
    );
    assert!(meshes[0].standing(ids[slow]).answer_time.is_some());
}

/// Whether a replica that answered slowly is still slow is found out beside
/// the reads, not by them: once its estimate goes stale (a second without a
/// call) its small ping RTT would rank it ahead of the replica known to
/// answer in 3 ms, and a read sent to it instead would wait for the 20 ms
/// hedge. It is called as a probe beside the fast one, and no read waits
/// for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_replica_is_probed_beside_the_read_not_instead_of_a_fast_one() {
    let t = TimedNodes::start().await;
    t.delays[1].store(3, Ordering::SeqCst);
    t.delays[2].store(3, Ordering::SeqCst);
    for _ in 0..20 {
        t.read().await;
    }
    let (slow, fast) = if t.count(1) >= t.count(2) {
        (1, 2)
    } else {
        (2, 1)
    };
    t.delays[slow].store(30, Ordering::SeqCst);
    // Learn that it is slow.
    for _ in 0..5 {
        t.read().await;
    }
    let before = (t.count(slow), t.count(fast));
    let start = Instant::now();
    let mut waited = Vec::new();
    let mut reads = 0;
    while start.elapsed() < Duration::from_secs(5) {
        let took = t.read().await;
        reads += 1;
        // The cluster's read hedge (READ_HEDGE_MIN): a read waited for it.
        if took >= Duration::from_millis(20) {
            waited.push(took);
        }
    }
    let (to_slow, to_fast) = (t.count(slow) - before.0, t.count(fast) - before.1);
    // Sent to the slow replica in place of the fast one, about one read a
    // second and more waited (8 in 5 s when this was the case); a read
    // slowed by a busy test machine is rarer than that.
    assert!(
        waited.len() <= 3,
        "{} of {reads} reads waited for the hedge: {waited:?}",
        waited.len()
    );
    assert_eq!(to_fast, reads, "the fast replica answers every read");
    // A probe each time the slow one's estimate went stale: about one a
    // second, and at least a few in five seconds.
    assert!((3..=8).contains(&to_slow), "{to_slow} probes in 5 s");
    assert!(t.meshes[0].standing(t.ids[slow]).answer_time.is_some());
}

/// A node of replication factor 1 with no layout is the one node of every
/// partition (layout version 0), written and read through the same quorum
/// calls as any layout's nodes; its first layout places the partitions.
#[tokio::test(flavor = "multi_thread")]
async fn a_lone_node_is_the_one_node_of_every_partition_until_its_first_layout() {
    let (meshes, dirs) = three_nodes().await;
    let received = install(&meshes, &[]);
    let lone = Cluster::start(
        meshes[0].clone(),
        LayoutHistory::new(1),
        ConsistencyMode::Consistent,
        dirs[0].path().to_path_buf(),
        vec![dirs[0].path().to_path_buf()],
    )
    .unwrap();
    let me = lone.id();
    assert!(lone.is_lone() && !lone.awaits_layout());
    for p in [0u8, 17, 255] {
        let nodes = lone.storage_nodes_of_partition(p);
        assert_eq!(nodes.sets.len(), 1);
        assert_eq!((nodes.sets[0].version, nodes.nodes()), (0, vec![me]));
        assert_eq!(lone.read_nodes_of_partition(p), vec![me]);
        assert!(lone.stores_partition(p));
    }
    let ep = meshes[0].endpoint::<u32, u32>(PATH).unwrap();
    let key = Hash::of(b"an object of a lone node");
    let got = lone
        .call_write_quorum(&ep, &lone.storage_nodes_of(&key), 7, CallOpts::default())
        .await
        .unwrap();
    assert_eq!(got.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![me]);
    assert_eq!(received[0].load(Ordering::SeqCst), 1);
    assert_eq!(received[1].load(Ordering::SeqCst), 0);

    // A node of a replicated cluster with no layout is not lone: nowhere
    // to write.
    let waiting = cluster_on_first(&meshes[1..], &dirs[1..]);
    assert!(!waiting.is_lone() && waiting.awaits_layout());
    assert!(waiting.storage_nodes_of(&key).is_empty());
    assert!(waiting.read_nodes_of(&key).is_empty());

    // Its first layout, with another node in it, places the partitions.
    let other = meshes[1].id();
    lone.layout()
        .update("test layout", |h| {
            h.stage_role(me, 1, other, NodeRole::storage("z1", 1 << 40))
                .map_err(|e| e.to_string())?;
            h.apply(1, me, 2).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    assert!(!lone.is_lone());
    let placed = lone.storage_nodes_of(&key);
    assert_eq!((placed.sets[0].version, placed.nodes()), (1, vec![other]));
    assert!(!lone.stores_partition(placed.partition));
}
