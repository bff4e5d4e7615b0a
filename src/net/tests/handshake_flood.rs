//! Hosts that start QUIC handshakes with a node's RPC port and never finish
//! them: the node holds a bounded number of them, each for at most the ping
//! timeout, and a real peer connecting during the flood is served at once.
//!
//! Each attacker is a real QUIC client whose packets pass through a one-way
//! relay: the relay forwards the client's packets to the node from its own
//! address and drops every answer, so the node sees a handshake that starts
//! and then goes silent, from the relay's address. Relays bind addresses
//! across 127.0.0.0/8, so the flood comes from many hosts as well as many
//! connections from one host.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use hangar_net::{CallOpts, Mesh};
use tokio::net::UdpSocket;

/// The ALPN id a node requires (`hangar-rpc/1`, doc/rpc.md): an attacker who
/// sends it gets as far into the handshake as any stranger can.
const ALPN: &[u8] = b"hangar-rpc/1";
/// Handshakes started from one address (the node keeps at most 16 of them).
const FROM_ONE_HOST: usize = 40;
/// Hosts starting one handshake each.
const HOSTS: usize = 300;

/// A metric's value in the node's text exposition.
fn metric(mesh: &Mesh, name: &str) -> f64 {
    let text = mesh.metrics().encode_text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

/// Binds a relay at `ip` that forwards what it receives to `node` and never
/// answers; returns its address.
async fn one_way_relay(ip: IpAddr, node: SocketAddr) -> SocketAddr {
    let socket = UdpSocket::bind(SocketAddr::new(ip, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            if from != node {
                let _ = socket.send_to(&buf[..n], node).await;
            }
        }
    });
    addr
}

fn attacker_endpoint() -> quinn::Endpoint {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Answers never come back through the relays, so the client never gets
    // as far as checking the node's certificate: an empty root store does.
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_handshakes_are_bounded_and_real_peers_still_connect() {
    init_tracing();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let a = start_node(dir_a.path()).await;
    let node = a.local_addr();
    a.endpoint::<String, String>("test/echo")
        .unwrap()
        .set_handler(Echo, 16);

    let attacker = attacker_endpoint();
    let one_host = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let mut relays = Vec::new();
    for _ in 0..FROM_ONE_HOST {
        relays.push(one_way_relay(one_host, node).await);
    }
    for i in 0..HOSTS {
        let ip = IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            1 + (i / 250) as u8,
            1 + (i % 250) as u8,
        ));
        relays.push(one_way_relay(ip, node).await);
    }
    for relay in &relays {
        let connecting = attacker.connect(*relay, "hangar").unwrap();
        // The handshake never completes; its result does not matter.
        tokio::spawn(async move {
            let _ = connecting.await;
        });
    }
    // Every attacker's first packet has arrived once the node has either
    // admitted, retried or refused it.
    wait_for(Duration::from_secs(5), || {
        metric(&a, "hangar_rpc_handshakes_refused_total") >= (FROM_ONE_HOST - 16) as f64
    })
    .await
    .expect("the handshakes past 16 from one host were not refused");
    let pending = metric(&a, "hangar_rpc_handshakes_pending");
    assert!(
        pending <= 128.0,
        "unvalidated sources hold {pending} handshakes, more than half the 256 slots"
    );

    // A real peer dialing now is admitted (after a Retry if the node asks for
    // one) and its calls are served.
    let mut cfg = test_config(dir_b.path(), SECRET, "127.0.0.1:0".parse().unwrap());
    cfg.bootstrap_peers = vec![a.peer_addr()];
    let b = Mesh::start(cfg).await.unwrap();
    let connected = wait_for(Duration::from_secs(5), || is_up(&b, a.id())).await;
    assert!(connected.is_some(), "peer not connected during the flood");
    let echo = b.endpoint::<String, String>("test/echo").unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        echo.call(a.id(), "still here".into(), CallOpts::default()),
    )
    .await
    .expect("call timed out during the flood")
    .unwrap();
    assert_eq!(answer, "still here");

    // The stalled handshakes end at the ping timeout (1 s in tests).
    let drained = wait_for(Duration::from_secs(5), || {
        metric(&a, "hangar_rpc_handshakes_pending") == 0.0
    })
    .await;
    assert!(
        drained.is_some(),
        "{} handshakes still pending",
        metric(&a, "hangar_rpc_handshakes_pending")
    );
    assert!(metric(&a, "hangar_rpc_handshakes_timed_out_total") >= 16.0);
    assert!(is_up(&b, a.id()), "the real peer lost its connection");
}
