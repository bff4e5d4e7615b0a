//! Replicated blocks over real meshes in one process: three nodes on
//! 127.0.0.1 (short ping timings, a 10 s RPC timeout no test may wait for),
//! each with its own metadata store, block files and `ReplicatedBlocks`,
//! one layout of replication factor 3 applied on node 0 and gossiped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use hangar_block::rpc::{
    BlockEndpoints, BlockLimits, GetBlock, GetBlockReply, GetHandler, PutBlock, PutBlockReply,
    PutHandler,
};
use hangar_block::{
    BlockError, BlockFiles, BlockManager, ReplicatedBlocks, ReplicatedConfig, ResyncSettings,
    resync_queue,
};
use hangar_cluster::{Cluster, QuorumError};
use hangar_db::{Db, DbOptions, SledEngine};
use hangar_layout::{LayoutHistory, NodeRole};
use hangar_net::{Handler, HandlerError, Mesh, MeshConfig, Request, Response};
use hangar_util::config::ConsistencyMode;
use hangar_util::worker::WorkerRegistry;
use hangar_util::{Hash, NodeId};

const SECRET: [u8; 32] = [9; 32];
const BLOCK: u64 = 64 * 1024;

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "hangar_block=debug,hangar_net=info".into()),
        )
        .with_test_writer()
        .try_init();
}

struct Node {
    mesh: Mesh,
    cluster: Cluster,
    mgr: Arc<BlockManager>,
    blocks: Arc<ReplicatedBlocks>,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    fn id(&self) -> NodeId {
        self.mesh.id()
    }

    fn endpoints(&self) -> BlockEndpoints {
        BlockEndpoints::of(&self.mesh).unwrap()
    }

    /// The file of block `h` on this node.
    fn block_file(&self, h: &Hash) -> Option<PathBuf> {
        let b = h.as_bytes();
        let dir = self
            .data
            .join(format!("{:02x}", b[0]))
            .join(format!("{:02x}", b[1]));
        [format!("{}.zst", h.to_hex()), h.to_hex()]
            .into_iter()
            .map(|n| dir.join(n))
            .find(|p| p.exists())
    }
}

fn test_config() -> ReplicatedConfig {
    ReplicatedConfig::new(8 << 20, BLOCK)
}

async fn wait_for(limit: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn start_mesh(dir: &Path) -> Mesh {
    let mut cfg = MeshConfig::new(SECRET, "127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    Mesh::start(cfg).await.unwrap()
}

/// Three nodes, all up, with a layout of replication factor 3 known to all.
async fn three_nodes(cfg: ReplicatedConfig) -> Vec<Node> {
    init_tracing();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut meshes = Vec::new();
    for d in &dirs {
        meshes.push(start_mesh(d.path()).await);
    }
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        meshes[a].connect(&meshes[b].peer_addr()).await.unwrap();
    }
    assert!(
        wait_for(Duration::from_secs(5), async || meshes
            .iter()
            .all(|m| meshes.iter().all(|o| m.is_up(o.id()))))
        .await,
        "the three nodes did not see each other up"
    );
    let mut nodes = Vec::new();
    let mut clusters = Vec::new();
    for (mesh, dir) in meshes.into_iter().zip(dirs) {
        let engine = SledEngine::open(&dir.path().join("db"), 8 << 20).unwrap();
        let db = Db::new(Arc::new(engine), DbOptions::default());
        let data = dir.path().join("data");
        let files = BlockFiles::new(vec![data.clone()], Some(1), false, true).unwrap();
        let mgr = BlockManager::new(files, db, 60_000);
        let cluster = Cluster::start(
            mesh.clone(),
            LayoutHistory::new(3),
            ConsistencyMode::Consistent,
            dir.path().to_path_buf(),
            vec![data.clone()],
        )
        .unwrap();
        let blocks =
            ReplicatedBlocks::new(mgr.clone(), cluster.clone(), cfg.clone(), settings()).unwrap();
        tokio::spawn(
            blocks
                .resync()
                .clone()
                .run(WorkerRegistry::default().register("block-resync")),
        );
        clusters.push(cluster.clone());
        nodes.push(Node {
            mesh,
            cluster,
            mgr,
            blocks,
            data,
            _dir: dir,
        });
    }
    let ids: Vec<NodeId> = nodes.iter().map(|n| n.id()).collect();
    let me = ids[0];
    clusters[0]
        .layout()
        .update("test layout", |h| {
            for (i, id) in ids.iter().enumerate() {
                h.stage_role(me, 1, *id, NodeRole::storage(format!("z{i}"), 1 << 40))
                    .map_err(|e| e.to_string())?;
            }
            h.apply(1, me, 2).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    let probe = Hash::of(b"probe");
    assert!(
        wait_for(Duration::from_secs(5), async || clusters.iter().all(|c| c
            .storage_nodes_of(&probe)
            .nodes()
            .len()
            == 3
            && c.read_nodes_of(&probe).len() == 3))
        .await,
        "the layout did not reach every node"
    );
    nodes
}

async fn shutdown(nodes: Vec<Node>) {
    for n in nodes {
        n.mesh.shutdown().await;
    }
}

fn random_block(len: usize) -> Bytes {
    Bytes::from((0..len).map(|_| rand::random::<u8>()).collect::<Vec<u8>>())
}

/// Answers nothing, ever.
struct Stall;

#[async_trait]
impl Handler<PutBlock, PutBlockReply> for Stall {
    async fn handle(&self, _: Request<PutBlock>) -> Result<Response<PutBlockReply>, HandlerError> {
        std::future::pending().await
    }
}

#[async_trait]
impl Handler<GetBlock, GetBlockReply> for Stall {
    async fn handle(&self, _: Request<GetBlock>) -> Result<Response<GetBlockReply>, HandlerError> {
        std::future::pending().await
    }
}

/// The real get handler, answering after a delay.
struct SlowGet(GetHandler, Duration);

#[async_trait]
impl Handler<GetBlock, GetBlockReply> for SlowGet {
    async fn handle(
        &self,
        req: Request<GetBlock>,
    ) -> Result<Response<GetBlockReply>, HandlerError> {
        tokio::time::sleep(self.1).await;
        self.0.handle(req).await
    }
}

fn settings() -> Arc<ResyncSettings> {
    Arc::new(ResyncSettings::new(4, 0, 0))
}

/// Whether `node` has `hash` queued for resync now (not only for the check
/// every reference change queues a moment later).
async fn queued_now(node: &Node, hash: Hash) -> bool {
    let soon = hangar_util::time::now_msec() + 1000;
    resync_queue::due(node.mgr.metadata(), soon, None, 10_000)
        .await
        .unwrap()
        .iter()
        .any(|q| q.hash == hash)
}

/// Whether `node` holds a good copy of `hash`.
async fn good_copy(node: &Node, hash: Hash) -> bool {
    node.block_file(&hash).is_some() && node.mgr.read(hash).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_reaches_every_disk_and_a_get_works_through_a_node_without_the_block() {
    let nodes = three_nodes(test_config()).await;
    let text = Bytes::from("compressible block ".repeat(3000));
    let rand = random_block(BLOCK as usize);
    let (ht, hr) = (Hash::of(&text), Hash::of(&rand));
    let version = [1u8; 16];
    // Several puts of one object in flight at once.
    let (a, b) = tokio::join!(
        nodes[0].blocks.put(ht, text.clone(), version),
        nodes[0].blocks.put(hr, rand.clone(), version)
    );
    a.unwrap();
    b.unwrap();
    for h in [ht, hr] {
        assert!(
            wait_for(Duration::from_secs(3), async || {
                let mut all = true;
                for n in &nodes {
                    all &= n.block_file(&h).is_some() && n.mgr.refcount(h).await.unwrap() == 1;
                }
                all
            })
            .await,
            "block {h} is not on every disk with one reference"
        );
    }
    // Stored as sent: the compressed frame is the same bytes on every node.
    let ref_frame = std::fs::read(nodes[0].block_file(&ht).unwrap()).unwrap();
    assert!(
        nodes[0]
            .block_file(&ht)
            .unwrap()
            .to_string_lossy()
            .ends_with(".zst")
    );
    for n in &nodes[1..] {
        assert_eq!(
            std::fs::read(n.block_file(&ht).unwrap()).unwrap(),
            ref_frame
        );
    }
    let s = nodes[0].mgr.stats();
    // The last acks may still be on their way back to node 0.
    assert!(
        wait_for(Duration::from_secs(2), async || s
            .remote_puts
            .load(Ordering::Relaxed)
            == 4)
        .await
    );
    assert_eq!(
        nodes[1].mgr.stats().puts_received.load(Ordering::Relaxed),
        2
    );
    assert!(
        wait_for(Duration::from_secs(2), async || s
            .ram_in_use_bytes
            .load(Ordering::Relaxed)
            == 0)
        .await
    );

    // Node 2 loses its copy; a get through it reads a replica and queues
    // the block, and node 2's resync worker fetches it back.
    std::fs::remove_file(nodes[2].block_file(&hr).unwrap()).unwrap();
    assert_eq!(nodes[2].blocks.get(hr).await.unwrap(), rand);
    assert_eq!(nodes[2].mgr.stats().remote_gets.load(Ordering::Relaxed), 1);
    assert!(
        wait_for(Duration::from_secs(5), async || good_copy(&nodes[2], hr)
            .await)
        .await,
        "the lost copy was not fetched back"
    );
    assert_eq!(
        nodes[2]
            .blocks
            .resync()
            .stats()
            .blocks_fetched
            .load(Ordering::Relaxed),
        1
    );
    // A local copy is read locally.
    assert_eq!(nodes[1].blocks.get(ht).await.unwrap(), text);
    assert_eq!(nodes[1].mgr.stats().remote_gets.load(Ordering::Relaxed), 0);
    // Absent everywhere: Missing, not an error string.
    let nowhere = Hash::of(b"never stored");
    let e = nodes[0].blocks.get(nowhere).await.unwrap_err();
    assert!(matches!(e, BlockError::Missing(_)), "{e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !queued_now(&nodes[0], nowhere).await,
        "a block that exists nowhere is no repair to make"
    );

    // Unref removes the reference on every node.
    nodes[1].blocks.unref(ht, version).await.unwrap();
    assert!(
        wait_for(Duration::from_secs(3), async || {
            let mut all = true;
            for n in &nodes {
                all &= n.mgr.refcount(ht).await.unwrap() == 0;
            }
            all
        })
        .await
    );
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_replica_is_skipped_and_reported() {
    let nodes = three_nodes(test_config()).await;
    let data = random_block(50_000);
    let h = Hash::of(&data);
    nodes[0].blocks.put(h, data.clone(), [2; 16]).await.unwrap();
    assert!(
        wait_for(Duration::from_secs(3), async || nodes
            .iter()
            .all(|n| n.block_file(&h).is_some()))
        .await
    );
    // Node 1's copy gets a flipped byte; node 0 loses its own; node 2
    // answers late, so that node 1 is asked whatever the RTT order.
    let f1 = nodes[1].block_file(&h).unwrap();
    let mut bytes = std::fs::read(&f1).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&f1, &bytes).unwrap();
    std::fs::remove_file(nodes[0].block_file(&h).unwrap()).unwrap();
    nodes[2].endpoints().get.set_handler(
        SlowGet(
            GetHandler::new(nodes[2].mgr.clone()),
            Duration::from_millis(300),
        ),
        16,
    );
    assert_eq!(nodes[0].blocks.get(h).await.unwrap(), data);
    let s = nodes[0].mgr.stats();
    assert_eq!(s.corrupt_replicas.load(Ordering::Relaxed), 1);
    // Node 1 was told: it quarantines its copy (moved aside, kept) and its
    // resync worker fetches a good one; node 0 fetches its lost one.
    assert!(
        wait_for(Duration::from_secs(5), async || good_copy(&nodes[1], h)
            .await
            && good_copy(&nodes[0], h).await)
        .await,
        "the corrupt and the lost copies were not repaired"
    );
    let quarantined: Vec<_> = std::fs::read_dir(nodes[1].data.join("quarantine"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    assert_eq!(quarantined, vec![bytes], "the corrupt copy is kept aside");
    assert_eq!(
        nodes[1]
            .mgr
            .stats()
            .blocks_quarantined
            .load(Ordering::Relaxed),
        1
    );

    // Node 1 finds its own copy corrupt on a read: the read is served by a
    // replica, and the copy is quarantined and fetched again.
    let f1 = nodes[1].block_file(&h).unwrap();
    let mut bytes = std::fs::read(&f1).unwrap();
    bytes[2000] ^= 0xff;
    std::fs::write(&f1, &bytes).unwrap();
    assert_eq!(nodes[1].blocks.get(h).await.unwrap(), data);
    let s1 = nodes[1].mgr.stats();
    assert_eq!(s1.corrupt_replicas.load(Ordering::Relaxed), 1);
    assert_eq!(s1.remote_gets.load(Ordering::Relaxed), 1);
    assert!(
        wait_for(Duration::from_secs(5), async || good_copy(&nodes[1], h)
            .await)
        .await,
        "the copy found corrupt by a read was not repaired"
    );
    assert_eq!(s1.blocks_quarantined.load(Ordering::Relaxed), 2);
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_never_answers_delays_neither_get_nor_put() {
    let mut cfg = test_config();
    cfg.put_timeout = Some(Duration::from_secs(1));
    let nodes = three_nodes(cfg).await;
    let a = random_block(30_000);
    let ha = Hash::of(&a);
    nodes[0].blocks.put(ha, a.clone(), [3; 16]).await.unwrap();
    assert!(
        wait_for(Duration::from_secs(3), async || nodes
            .iter()
            .all(|n| n.block_file(&ha).is_some()))
        .await
    );
    std::fs::remove_file(nodes[0].block_file(&ha).unwrap()).unwrap();

    // Node 2 stops answering puts and gets.
    let ep2 = nodes[2].endpoints();
    ep2.put.set_handler(Stall, 16);
    ep2.get.set_handler(Stall, 16);
    let b = random_block(30_000);
    let hb = Hash::of(&b);
    let start = Instant::now();
    nodes[0].blocks.put(hb, b.clone(), [4; 16]).await.unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(500), "put took {took:?}");
    let s = nodes[0].mgr.stats();
    assert_eq!(s.background_copies_pending.load(Ordering::Relaxed), 1);
    assert_eq!(
        s.background_pending_bytes.load(Ordering::Relaxed),
        b.len() as u64
    );

    // Reads: one replica stalls, the other answers; whichever is asked
    // first, the get ends within about a hedge delay. Then the other way.
    for stalled in [2, 1] {
        if stalled == 1 {
            ep2.get
                .set_handler(GetHandler::new(nodes[2].mgr.clone()), 16);
            nodes[1].endpoints().get.set_handler(Stall, 16);
        }
        let start = Instant::now();
        assert_eq!(nodes[0].blocks.get(ha).await.unwrap(), a);
        let took = start.elapsed();
        assert!(took < Duration::from_millis(300), "get took {took:?}");
    }
    assert!(s.hedged_reads.load(Ordering::Relaxed) >= 1);

    // The stalled copy times out: its budget is released.
    assert!(
        wait_for(Duration::from_secs(3), async || s
            .background_copies_pending
            .load(Ordering::Relaxed)
            == 0
            && s.ram_in_use_bytes.load(Ordering::Relaxed) == 0)
        .await
    );
    assert_eq!(nodes[0].blocks.budget_available(), 8 << 20);

    // What node 2 missed is not forgotten: one anti-entropy pass of the
    // block reference table gives it the reference, and its resync worker
    // the block.
    assert!(nodes[2].block_file(&hb).is_none());
    ep2.put.set_handler(
        PutHandler::new(
            nodes[2].mgr.clone(),
            BlockLimits {
                max_plain_len: BLOCK,
            },
            nodes[2].cluster.id(),
        ),
        16,
    );
    let tables: Vec<Arc<dyn hangar_table::sharded::sync::ShardedSyncable>> =
        vec![Arc::new(nodes[0].blocks.ref_table().clone())];
    let r = hangar_table::sharded::sync::sync_pass(&nodes[0].cluster, &tables).await;
    assert!(r.rows_pushed >= 1, "{r:?}");
    assert!(
        wait_for(Duration::from_secs(8), async || good_copy(&nodes[2], hb)
            .await
            && nodes[2].mgr.refcount(hb).await.unwrap() == 1)
        .await,
        "the missed copy was not fetched after the reference table's sync"
    );
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_of_three_nodes_down_a_put_fails_fast() {
    let mut nodes = three_nodes(test_config()).await;
    let n2 = nodes.pop().unwrap();
    let n1 = nodes.pop().unwrap();
    let (id1, id2) = (n1.id(), n2.id());

    // One node down: puts and unrefs still reach their quorum (what the
    // down node missed reaches it by the reference table's anti-entropy).
    n2.mesh.shutdown().await;
    assert!(wait_for(Duration::from_secs(5), async || !nodes[0].mesh.is_up(id2)).await);
    let one = random_block(10_000);
    let h1 = Hash::of(&one);
    nodes[0].blocks.put(h1, one, [7; 16]).await.unwrap();
    nodes[0].blocks.unref(h1, [7; 16]).await.unwrap();

    n1.mesh.shutdown().await;
    assert!(
        wait_for(Duration::from_secs(5), async || !nodes[0].mesh.is_up(id1)
            && !nodes[0].mesh.is_up(id2))
        .await
    );
    let data = random_block(10_000);
    let h = Hash::of(&data);
    let start = Instant::now();
    let e = nodes[0].blocks.put(h, data, [5; 16]).await.unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(100), "took {took:?}");
    assert!(
        matches!(
            e,
            BlockError::Quorum {
                source: QuorumError::NotEnoughNodes {
                    needed: 2,
                    up: 1,
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("only 1 of the 3"), "{e}");
    assert!(nodes[0].block_file(&h).is_none(), "nothing was written");
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_ram_budget_makes_puts_wait_then_fail_overloaded() {
    // The budget holds one block: a put whose slow copy still runs keeps
    // the next put waiting.
    let mut cfg = test_config();
    cfg.ram_budget = BlockLimits {
        max_plain_len: BLOCK,
    }
    .max_stored();
    cfg.budget_wait = Duration::from_millis(300);
    cfg.put_timeout = Some(Duration::from_secs(2));
    let nodes = three_nodes(cfg.clone()).await;
    nodes[2].endpoints().put.set_handler(Stall, 16);
    let s = nodes[0].mgr.stats();

    let a = random_block(BLOCK as usize);
    nodes[0].blocks.put(Hash::of(&a), a, [6; 16]).await.unwrap();
    assert_eq!(s.ram_in_use_bytes.load(Ordering::Relaxed), BLOCK);
    assert!(!nodes[0].blocks.overloaded_within(Duration::from_secs(60)));

    let b = random_block(BLOCK as usize);
    let hb = Hash::of(&b);
    let start = Instant::now();
    let e = nodes[0]
        .blocks
        .put(hb, b.clone(), [6; 16])
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, BlockError::Overloaded { .. }), "{e}");
    assert!(e.to_string().contains("retry later"), "{e}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(1),
        "took {took:?}"
    );
    assert_eq!(s.puts_overloaded.load(Ordering::Relaxed), 1);
    // What the S3 layer refuses new uploads on (s3_shed_after_overload_msec).
    assert!(e.is_overload());
    assert!(nodes[0].blocks.overloaded_within(Duration::from_secs(60)));
    assert!(s.ram_in_use_bytes.load(Ordering::Relaxed) <= cfg.ram_budget);
    assert!(nodes[1].block_file(&hb).is_none(), "nothing was sent");

    // Once the slow copy times out, the budget is free again.
    assert!(
        wait_for(Duration::from_secs(4), async || s
            .ram_in_use_bytes
            .load(Ordering::Relaxed)
            == 0)
        .await
    );
    nodes[0].blocks.put(hb, b, [6; 16]).await.unwrap();

    // A budget that cannot hold one block is refused at construction.
    let mut tiny = cfg.clone();
    tiny.ram_budget = 1000;
    let e = ReplicatedBlocks::new(
        nodes[0].mgr.clone(),
        nodes[0].cluster.clone(),
        tiny,
        settings(),
    )
    .err()
    .unwrap();
    assert!(matches!(e, BlockError::Config(_)), "{e}");
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_layout_transition_a_put_needs_the_quorum_of_both_versions() {
    let mut cfg = test_config();
    cfg.put_timeout = Some(Duration::from_millis(500));
    let nodes = three_nodes(cfg).await;
    let c = &nodes[0].cluster;
    let me = c.id();
    // Version 2 adds a node that never comes up.
    let ghost = NodeId([0xee; 32]);
    c.layout()
        .update("test layout", |h| {
            h.stage_role(me, 3, ghost, NodeRole::storage("z0", 1 << 40))
                .map_err(|e| e.to_string())?;
            h.apply(2, me, 4).map(|_| ()).map_err(|e| e.to_string())
        })
        .await
        .unwrap();
    // A block of a partition the ghost holds in version 2.
    let (data, h) = std::iter::repeat_with(|| {
        let d = random_block(20_000);
        let h = Hash::of(&d);
        (d, h)
    })
    .find(|(_, h)| {
        let s = c.storage_nodes_of(h);
        s.sets.len() == 2 && s.sets[1].nodes.contains(&ghost)
    })
    .unwrap();
    // A node of version 2 other than node 0 stops answering: version 1
    // still has its quorum, version 2 not, so the put fails, naming it.
    let v2 = c.storage_nodes_of(&h).sets[1].nodes.clone();
    let stalled = nodes
        .iter()
        .find(|n| n.id() != me && v2.contains(&n.id()))
        .unwrap();
    stalled.endpoints().put.set_handler(Stall, 16);
    let e = nodes[0]
        .blocks
        .put(h, data.clone(), [8; 16])
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BlockError::Quorum {
                source: QuorumError::Failed {
                    version: Some(2),
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("in layout version 2"), "{e}");
    stalled.endpoints().put.set_handler(
        PutHandler::new(
            stalled.mgr.clone(),
            BlockLimits {
                max_plain_len: BLOCK,
            },
            stalled.cluster.id(),
        ),
        16,
    );
    nodes[0].blocks.put(h, data.clone(), [8; 16]).await.unwrap();
    // Every live node of both versions got it.
    assert!(
        wait_for(Duration::from_secs(3), async || nodes
            .iter()
            .filter(|n| c.storage_nodes_of(&h).nodes().contains(&n.id()))
            .all(|n| n.block_file(&h).is_some()))
        .await
    );
    assert_eq!(nodes[1].blocks.get(h).await.unwrap(), data);
    shutdown(nodes).await;
}
