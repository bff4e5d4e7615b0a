//! Several nodes in one process on 127.0.0.1: mesh formation, cluster
//! authentication, and failure detection across a kill and a restart.

mod common;

use std::time::Duration;

use common::*;
use hangar_net::{CallOpts, Mesh, PEER_LIST_FILE, PeerAddr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_mesh_forms_from_one_bootstrap_peer() {
    init_tracing();
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let seed = start_node(dirs[0].path()).await;
    let mut nodes = vec![seed.clone()];
    for d in &dirs[1..] {
        let mut cfg = test_config(d.path(), SECRET, "127.0.0.1:0".parse().unwrap());
        cfg.bootstrap_peers = vec![seed.peer_addr()];
        nodes.push(Mesh::start(cfg).await.unwrap());
    }
    let ids: Vec<_> = nodes.iter().map(|n| n.id()).collect();
    let took = wait_for(Duration::from_secs(10), || {
        nodes.iter().all(|n| ids.iter().all(|id| is_up(n, *id)))
    })
    .await;
    assert!(
        took.is_some(),
        "mesh did not form: {:?}",
        nodes[3].peer_status()
    );

    // Every node persisted every other one (the file is written right
    // after the table changes, so give it a moment).
    let persisted = |i: usize| {
        let text = std::fs::read_to_string(dirs[i].path().join(PEER_LIST_FILE)).unwrap_or_default();
        ids.iter()
            .enumerate()
            .all(|(j, id)| i == j || text.contains(&id.to_string()))
    };
    let all_persisted = wait_for(Duration::from_secs(2), || (0..4).all(persisted)).await;
    assert!(
        all_persisted.is_some(),
        "peer lists: {:?}",
        (0..4).map(persisted).collect::<Vec<_>>()
    );

    // Calls work in both directions between nodes that only met through
    // the exchange, and a call to oneself runs locally.
    for n in &nodes {
        n.endpoint::<String, String>("test/echo")
            .unwrap()
            .set_handler(Echo, 16);
    }
    let ep1 = nodes[1].endpoint::<String, String>("test/echo").unwrap();
    let ep3 = nodes[3].endpoint::<String, String>("test/echo").unwrap();
    assert_eq!(
        ep1.call(ids[3], "a".into(), CallOpts::default())
            .await
            .unwrap(),
        "a"
    );
    assert_eq!(
        ep3.call(ids[1], "b".into(), CallOpts::default())
            .await
            .unwrap(),
        "b"
    );
    assert_eq!(
        ep3.call(ids[3], "c".into(), CallOpts::default())
            .await
            .unwrap(),
        "c"
    );

    // One status row per node, and metrics per endpoint and peer.
    for n in &nodes {
        assert_eq!(n.peer_status().len(), 4);
    }
    let text = nodes[1].metrics().encode_text();
    let want = format!(
        "hangar_rpc_calls_total{{endpoint=\"test/echo\",peer=\"{}\"}} 1",
        ids[3].short()
    );
    assert!(text.contains(&want), "no {want} in:\n{text}");
    assert!(text.contains(&format!(
        "hangar_rpc_peer_up{{peer=\"{}\"}} 1",
        ids[0].short()
    )));
    assert!(text.contains("hangar_rpc_peer_rtt_seconds"));
    assert!(nodes[1].is_up(ids[2]) && nodes[1].rtt(ids[2]).is_some());
    assert_eq!(nodes[1].up_nodes().len(), 4);
    assert!(text.contains("hangar_rpc_call_duration_seconds_bucket"));
    // `hangar node id` without a running node gives the same id.
    let cfg = test_config(dirs[2].path(), SECRET, "127.0.0.1:3901".parse().unwrap());
    assert_eq!(cfg.node_peer_addr().unwrap().id, ids[2]);
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_with_wrong_secret_is_refused_both_ways() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node(da.path()).await;
    let b = Mesh::start(test_config(
        db.path(),
        [1; 32],
        "127.0.0.1:0".parse().unwrap(),
    ))
    .await
    .unwrap();
    let e = b.connect(&a.peer_addr()).await.unwrap_err();
    assert!(
        e.to_string().contains("certificate"),
        "unexpected error: {e}"
    );
    let e = a.connect(&b.peer_addr()).await.unwrap_err();
    assert!(
        e.to_string().contains("certificate"),
        "unexpected error: {e}"
    );
    assert!(status_of(&a, b.id()).is_none_or(|s| !s.connected));
    // A refused peer is not remembered.
    assert!(status_of(&b, a.id()).is_none());
    // And no connection sneaks in through the background redials.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!is_up(&a, b.id()) && !is_up(&b, a.id()));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_presenting_another_id_is_refused() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node(da.path()).await;
    let b = start_node(db.path()).await;
    let wrong_id = hangar_net::NodeKey::from_seed([9; 32]).id();
    let wrong = PeerAddr {
        id: wrong_id,
        addr: a.local_addr().to_string(),
    };
    let e = b.connect(&wrong).await.unwrap_err();
    assert!(
        e.to_string().contains("but") && e.to_string().contains("expected"),
        "unexpected error: {e}"
    );
    assert!(
        status_of(&b, wrong_id).is_none(),
        "a refused peer is not remembered"
    );
    // The right id at the same address works.
    b.connect(&a.peer_addr()).await.unwrap();
    assert!(is_up(&b, a.id()));
    a.shutdown().await;
    b.shutdown().await;
}

/// Runs a node on its own runtime, so that dropping the runtime kills it
/// the way a crash would: no close frame is sent.
struct Killable {
    rt: tokio::runtime::Runtime,
    mesh: Mesh,
}

fn start_killable(cfg: hangar_net::MeshConfig) -> Killable {
    // A runtime cannot be started from within the test's runtime.
    std::thread::spawn(move || start_killable_blocking(cfg))
        .join()
        .unwrap()
}

fn start_killable_blocking(cfg: hangar_net::MeshConfig) -> Killable {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mesh = rt.block_on(async {
        // The port may still be held for a moment by the killed instance.
        let mut last = None;
        for _ in 0..50 {
            match Mesh::start(cfg.clone()).await {
                Ok(m) => return m,
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("cannot restart node: {last:?}");
    });
    Killable { rt, mesh }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_node_is_marked_down_then_up_again_after_restart() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut cfg_a = test_config(da.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    cfg_a.ping_timeout = Duration::from_millis(400);
    let interval = cfg_a.ping_interval;
    let ping_timeout = cfg_a.ping_timeout;
    let a = Mesh::start(cfg_a).await.unwrap();

    let mut cfg_b = test_config(db.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    cfg_b.bootstrap_peers = vec![a.peer_addr()];
    let b = start_killable(cfg_b.clone());
    let b_id = b.mesh.id();
    let b_addr = b.mesh.local_addr();
    assert!(
        wait_for(Duration::from_secs(5), || is_up(&a, b_id))
            .await
            .is_some()
    );

    // Kill: the runtime goes away with the socket, nothing is said to A.
    let Killable { rt, mesh } = b;
    rt.shutdown_background();
    drop(mesh);
    let limit = interval * 2 + ping_timeout;
    let down_after = wait_for(Duration::from_secs(5), || !is_up(&a, b_id))
        .await
        .expect("killed node never marked down");
    println!("marked down after {down_after:?} (bound {limit:?} + slack)");
    assert!(
        down_after <= limit + Duration::from_millis(400),
        "took {down_after:?}"
    );

    // Restart on the same port: B knows A from its persisted peer list.
    cfg_b.bind_addr = b_addr;
    cfg_b.bootstrap_peers = vec![];
    let b2 = start_killable(cfg_b);
    assert_eq!(b2.mesh.id(), b_id, "node id must survive a restart");
    let up_after = wait_for(Duration::from_secs(5), || is_up(&a, b_id))
        .await
        .expect("restarted node never marked up");
    println!("back up after {up_after:?}");
    assert!(up_after <= Duration::from_millis(1500), "took {up_after:?}");

    // A can call the new incarnation at once.
    let ep = a.endpoint::<String, String>("test/echo").unwrap();
    b2.mesh
        .endpoint::<String, String>("test/echo")
        .unwrap()
        .set_handler(Echo, 4);
    let r = ep
        .call(
            b_id,
            "x".into(),
            CallOpts::default().with_timeout(Duration::from_secs(2)),
        )
        .await;
    assert_eq!(r.unwrap(), "x");
    let Killable { rt, mesh } = b2;
    std::thread::spawn(move || {
        rt.block_on(mesh.shutdown());
        drop(mesh);
    })
    .join()
    .unwrap();
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_dials_settle_on_one_connection() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node(da.path()).await;
    let b = start_node(db.path()).await;
    let (pa, pb) = (a.peer_addr(), b.peer_addr());
    let (ra, rb) = tokio::join!(a.connect(&pb), b.connect(&pa));
    ra.unwrap();
    rb.unwrap();
    // Both sides must keep the same connection: if they kept different
    // ones, each would close the other's after the 5 s grace and the peer
    // would drop out, however briefly.
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(6500) {
        assert!(
            is_up(&a, b.id()) && is_up(&b, a.id()),
            "connection dropped at {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for n in [&a, &b] {
        n.endpoint::<String, String>("test/echo")
            .unwrap()
            .set_handler(Echo, 4);
    }
    let ea = a.endpoint::<String, String>("test/echo").unwrap();
    let eb = b.endpoint::<String, String>("test/echo").unwrap();
    assert_eq!(
        ea.call(b.id(), "1".into(), CallOpts::default())
            .await
            .unwrap(),
        "1"
    );
    assert_eq!(
        eb.call(a.id(), "2".into(), CallOpts::default())
            .await
            .unwrap(),
        "2"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_says_it_cannot_work_is_down_until_it_can() {
    init_tracing();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let cfg_a = test_config(da.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    let interval = cfg_a.ping_interval;
    let a = Mesh::start(cfg_a).await.unwrap();
    let mut cfg_b = test_config(db.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    cfg_b.bootstrap_peers = vec![a.peer_addr()];
    let b = Mesh::start(cfg_b).await.unwrap();
    let b_id = b.id();
    assert!(
        wait_for(Duration::from_secs(5), || is_up(&a, b_id))
            .await
            .is_some()
    );
    let unfit = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let u = unfit.clone();
    b.set_health_check(Box::new(move || {
        if u.load(std::sync::atomic::Ordering::Relaxed) {
            Err("metadata disk stalled".into())
        } else {
            Ok(())
        }
    }));
    // One refused ping is enough: down within an interval (and a little).
    let down_after = wait_for(interval * 2 + Duration::from_secs(1), || !is_up(&a, b_id))
        .await
        .expect("a node refusing pings stays up");
    assert!(
        down_after <= interval + Duration::from_millis(500),
        "took {down_after:?}"
    );
    // Still connected: it answers other calls meanwhile.
    b.endpoint::<String, String>("test/echo")
        .unwrap()
        .set_handler(Echo, 4);
    let r = a
        .endpoint::<String, String>("test/echo")
        .unwrap()
        .call(
            b_id,
            "x".into(),
            CallOpts::default().with_timeout(Duration::from_secs(2)),
        )
        .await;
    assert_eq!(r.unwrap(), "x");
    assert!(!is_up(&a, b_id), "a call does not bring it back up");
    unfit.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(
        wait_for(interval * 2 + Duration::from_secs(1), || is_up(&a, b_id))
            .await
            .is_some(),
        "up again at its first pong"
    );
}

/// `Congestion::Auto` paces a connection whose round trip is under 2 ms by
/// Cubic (BBR's bursts overflow busy receivers on a short link,
/// doc/put-cost.md); the far side of the rule is checked across a 20 ms
/// link by `test_netlab.py`. A fixed controller is kept whatever the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_connection_is_paced_by_cubic_unless_told_otherwise() {
    init_tracing();
    for (congestion, want) in [
        (hangar_net::Congestion::Auto, "cubic"),
        (hangar_net::Congestion::Bbr, "bbr"),
    ] {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let bind = "127.0.0.1:0".parse().unwrap();
        let mut ca = test_config(da.path(), SECRET, bind);
        ca.flow.congestion = congestion;
        let a = Mesh::start(ca).await.unwrap();
        let b = start_node(db.path()).await;
        a.connect(&b.peer_addr()).await.unwrap();
        let b_id = b.id();
        let picked = || status_of(&a, b_id).and_then(|p| p.congestion_control);
        assert!(
            wait_for(Duration::from_secs(5), || picked().as_deref() == Some(want))
                .await
                .is_some(),
            "{congestion:?}: {:?}",
            picked()
        );
        assert_eq!(status_of(&a, a.id()).unwrap().congestion_control, None);
        a.shutdown().await;
        b.shutdown().await;
    }
}
