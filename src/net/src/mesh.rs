//! The mesh: starting a node and its public API ([`Mesh`]), over the
//! shared state of `state.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::Notify;

use crate::config::MeshConfig;
use crate::endpoint::{DEFAULT_QUEUE_CAPACITY, Endpoint, Message};
use crate::error::NetError;
use crate::exchange::{PEERS_PATH, PeerListMsg, PeersHandler};
use crate::handshake::{HandshakeLimits, LogThrottle, MAX_PENDING};
use crate::identity::{NodeId, NodeKey, PeerAddr};
use crate::metrics::NetMetrics;
use crate::peers::{Peer, PeerStatus, PeerTable, load_peer_list};
use crate::ping::{PING_PATH, PingHandler, PingMsg};
use crate::registry::EndpointEntry;
use crate::state::MeshInner;
use crate::tls::ClusterTls;

/// blake3 context deriving the QUIC stateless-reset key from the node key.
/// Being stable across restarts, it lets a restarted node reset the stale
/// connections its peers still hold to its previous incarnation.
const RESET_KEY_CONTEXT: &str = "hangar 2026-11 quic stateless reset key v1";

/// A running node of the mesh. Cheap to clone; the node stops when
/// [`Mesh::shutdown`] is called or the last clone is dropped.
#[derive(Clone)]
pub struct Mesh {
    inner: Arc<MeshInner>,
}

fn transport_config(cfg: &MeshConfig) -> Result<quinn::TransportConfig, NetError> {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(cfg.flow.max_concurrent_streams.into());
    t.max_concurrent_uni_streams(0u32.into());
    t.stream_receive_window(cfg.flow.stream_window.into());
    t.receive_window(cfg.flow.connection_window.into());
    t.send_window(cfg.flow.send_window);
    // Nodes of a cluster are usually close: a smaller first RTT guess makes
    // a lost handshake packet (e.g. a peer still starting) retried sooner.
    t.initial_rtt(Duration::from_millis(100));
    t.congestion_controller_factory(crate::congestion::factory(cfg.flow.congestion));
    // Pings detect dead peers; the idle timeout only reclaims connections
    // that nothing uses anymore, and keep-alives stop it from closing a
    // healthy but quiet one.
    let idle = (cfg.ping_interval * (cfg.ping_failures_down + 1) + cfg.ping_timeout)
        .max(Duration::from_secs(2));
    t.max_idle_timeout(Some(idle.try_into().map_err(|_| {
        NetError::Config("ping settings give a too long idle timeout".into())
    })?));
    t.keep_alive_interval(Some(idle / 4));
    Ok(t)
}

/// Sets the socket's kernel buffers (capped by the kernel at
/// `net.core.rmem_max` / `wmem_max`).
fn set_udp_buffers(socket: &std::net::UdpSocket, bytes: usize) {
    let sock = quinn::udp::UdpSockRef::from(socket);
    match quinn::udp::UdpSocketState::new(sock) {
        Ok(state) => {
            let sock = quinn::udp::UdpSockRef::from(socket);
            let _ = state.set_recv_buffer_size(sock, bytes);
            let sock = quinn::udp::UdpSockRef::from(socket);
            let _ = state.set_send_buffer_size(sock, bytes);
            let sock = quinn::udp::UdpSockRef::from(socket);
            tracing::debug!(
                requested = bytes,
                recv = ?state.recv_buffer_size(sock),
                "UDP socket buffers"
            );
        }
        Err(e) => tracing::warn!(error = %e, "cannot tune UDP socket buffers"),
    }
}

/// A peer as a reader ranks it ([`Mesh::standing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub up: bool,
    pub rtt: Option<Duration>,
    pub answer_time: Option<Duration>,
}

impl Mesh {
    /// Starts a node: loads or creates its key in `metadata_dir`, binds the
    /// UDP socket, and starts accepting, dialing known peers (persisted list
    /// and bootstrap peers), pinging and exchanging peer lists. Must be
    /// called within a Tokio runtime.
    pub async fn start(cfg: MeshConfig) -> Result<Mesh, NetError> {
        let key = NodeKey::load_or_create(&cfg.metadata_dir)?;
        let id = key.id();
        let tls = ClusterTls::new(&cfg.secret, &key)?;
        let transport = Arc::new(transport_config(&cfg)?);
        let cfg_budget = cfg.flow.window_budget;
        let crypto = QuicServerConfig::try_from(tls.server_config())
            .map_err(|e| NetError::Tls(e.to_string()))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(transport.clone());
        // What quinn holds for handshakes the accept loop has not decided on yet:
        // it decides at once, so a little room is enough, and a flood of first
        // packets cannot make the endpoint buffer its default 100 MiB.
        server.max_incoming(MAX_PENDING * 4);
        server.incoming_buffer_size(64 * 1024);
        server.incoming_buffer_size_total(8 << 20);
        let reset_key =
            ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key.derive(RESET_KEY_CONTEXT));
        let socket = std::net::UdpSocket::bind(cfg.bind_addr)?;
        if let Some(bytes) = cfg.flow.udp_buffer {
            set_udp_buffers(&socket, bytes);
        }
        let quic = quinn::Endpoint::new(
            quinn::EndpointConfig::new(Arc::new(reset_key)),
            Some(server),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        let local_addr = quic.local_addr()?;
        let public_addr = cfg
            .public_addr
            .clone()
            .or_else(|| (!cfg.bind_addr.ip().is_unspecified()).then(|| local_addr.to_string()));

        let mut table = PeerTable::default();
        let saved = load_peer_list(&cfg.metadata_dir)?;
        let mut changed = false;
        for p in saved.iter().chain(cfg.bootstrap_peers.iter()) {
            if p.id != id {
                changed |= table.learn(p.id, Some(p.addr.clone()), false);
            }
        }
        changed &= table.addresses() != saved;

        let inner = Arc::new_cyclic(|weak| MeshInner {
            cfg,
            id,
            tls,
            transport,
            quic,
            local_addr,
            public_addr,
            peers: Mutex::new(table),
            endpoints: RwLock::new(HashMap::new()),
            metrics: NetMetrics::default(),
            handshakes: Arc::new(HandshakeLimits::default()),
            handshake_log: LogThrottle::default(),
            dial_wakeup: Arc::new(Notify::new()),
            persist_lock: Mutex::new(()),
            tasks: Mutex::new(Vec::new()),
            self_ref: weak.clone(),
            health: Arc::new(RwLock::new(None)),
            window_budget: crate::window::WindowBudget::new(cfg_budget),
        });
        if changed {
            inner.persist_peers();
        }
        let mesh = Mesh { inner };
        let weak = Arc::downgrade(&mesh.inner);
        mesh.endpoint::<PingMsg, PingMsg>(PING_PATH)?.set_handler(
            PingHandler {
                health: mesh.inner.health.clone(),
            },
            DEFAULT_QUEUE_CAPACITY,
        );
        mesh.endpoint::<PeerListMsg, PeerListMsg>(PEERS_PATH)?
            .set_handler(PeersHandler { mesh: weak.clone() }, 64);

        let tasks = vec![
            tokio::spawn(crate::conn::accept_loop(
                weak.clone(),
                mesh.inner.quic.clone(),
            )),
            tokio::spawn(crate::conn::dial_loop(
                weak.clone(),
                mesh.inner.dial_wakeup.clone(),
            )),
            tokio::spawn(crate::ping::ping_loop(
                weak.clone(),
                mesh.inner.cfg.ping_interval,
            )),
            tokio::spawn(crate::exchange::exchange_loop(
                weak,
                mesh.inner.cfg.peer_exchange_interval,
            )),
        ];
        *mesh.inner.tasks.lock().expect("tasks lock") = tasks;
        tracing::info!(id = %id, addr = %local_addr, "mesh node started");
        Ok(mesh)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// The UDP address the node is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// `<id>@<addr>` to give to other nodes (`hangar node id`): the public
    /// address if configured, else the bound address.
    pub fn peer_addr(&self) -> PeerAddr {
        PeerAddr {
            id: self.inner.id,
            addr: self
                .inner
                .public_addr
                .clone()
                .unwrap_or_else(|| self.inner.local_addr.to_string()),
        }
    }

    /// Adds a peer (persisted at once) and dials it now; returns when the
    /// connection is up or the dial failed (wrong id, wrong secret, nobody
    /// there). The mesh keeps redialing a failed peer in the background.
    pub async fn connect(&self, peer: &PeerAddr) -> Result<(), NetError> {
        self.inner.connect(peer).await
    }

    /// Opens a bare call stream on the live connection to `to`, for tests
    /// that write the wire format by hand (`hangar_net::wire`), such as a
    /// peer sending forged frames. Calls go through [`Mesh::endpoint`].
    #[doc(hidden)]
    pub async fn open_raw_stream(
        &self,
        to: NodeId,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), NetError> {
        let conn = self.inner.conn_to(to)?.conn;
        Ok(conn.open_bi().await?)
    }

    /// Every known node, this one included, with its health.
    pub fn peer_status(&self) -> Vec<PeerStatus> {
        self.inner.peer_status()
    }

    /// Makes this node answer pings with a refusal while `check` fails:
    /// its peers then report it down (crate::ping), as they do a dead node,
    /// though its process runs. For a node that cannot do its work, e.g.
    /// because its metadata disk stopped taking writes.
    pub fn set_health_check(&self, check: crate::state::HealthCheck) {
        *self.inner.health.write().expect("health lock") = Some(check);
    }

    /// Whether `id` answers pings now (always true for this node).
    pub fn is_up(&self, id: NodeId) -> bool {
        id == self.inner.id
            || self
                .inner
                .peers
                .lock()
                .expect("peers lock")
                .peers
                .get(&id)
                .is_some_and(|p| p.up)
    }

    /// What a reader ranks replica `id` by, read under one lock: whether it
    /// answers pings, its ping RTT, and how long it has recently taken to
    /// answer this node's foreground calls ([`crate::answer_time`]; `None`
    /// when not called lately). This node: up, RTT zero, no answer time.
    pub fn standing(&self, id: NodeId) -> Standing {
        if id == self.inner.id {
            return Standing {
                up: true,
                rtt: Some(Duration::ZERO),
                answer_time: None,
            };
        }
        self.peer_read(id, |p| {
            Some(Standing {
                up: p.up,
                rtt: p.rtt,
                answer_time: p.answer_time.recent(),
            })
        })
        .unwrap_or(Standing {
            up: false,
            rtt: None,
            answer_time: None,
        })
    }

    /// The average ping round-trip time to `id` (zero for this node), to
    /// pick the closest replica.
    pub fn rtt(&self, id: NodeId) -> Option<Duration> {
        if id == self.inner.id {
            return Some(Duration::ZERO);
        }
        self.peer_read(id, |p| p.rtt)
    }

    /// `read` of what this node knows of peer `id` (`None` if nothing).
    /// Whether the caller is the one to probe peer `id`, whose answer time
    /// went stale ([`crate::answer_time::AnswerTime::claim_probe`]): false
    /// for a peer that is not stale, unknown, or being probed by another
    /// caller.
    pub fn claim_probe(&self, id: NodeId) -> bool {
        self.peer_read(id, |p| Some(p.answer_time.claim_probe()))
            .unwrap_or(false)
    }

    fn peer_read<T>(&self, id: NodeId, read: impl FnOnce(&Peer) -> Option<T>) -> Option<T> {
        self.inner
            .peers
            .lock()
            .expect("peers lock")
            .peers
            .get(&id)
            .and_then(read)
    }

    /// The ids of the nodes that answer pings now (this one included).
    pub fn up_nodes(&self) -> Vec<NodeId> {
        // From the peer table, not from `peer_status`, whose entries also
        // read each connection's congestion state: the anti-entropy loops
        // call this every few seconds.
        let mut others: Vec<NodeId> = {
            let table = self.inner.peers.lock().expect("peers lock");
            table
                .peers
                .iter()
                .filter(|(_, p)| p.up)
                .map(|(id, _)| *id)
                .collect()
        };
        others.sort();
        let mut v = vec![self.inner.id];
        v.extend(others);
        v
    }

    /// The typed endpoint at `path`, created on first use. Asking again for
    /// the same path with the same types gives the same endpoint; with other
    /// types it is an error.
    pub fn endpoint<Req: Message, Resp: Message>(
        &self,
        path: &str,
    ) -> Result<Arc<Endpoint<Req, Resp>>, NetError> {
        let mut eps = self.inner.endpoints.write().expect("endpoints lock");
        if let Some(e) = eps.get(path) {
            return e
                .typed
                .clone()
                .downcast::<Endpoint<Req, Resp>>()
                .map_err(|_| NetError::EndpointTypeMismatch(path.to_string()));
        }
        let ep = Arc::new(Endpoint::<Req, Resp>::new(
            path.to_string(),
            Arc::downgrade(&self.inner),
        ));
        eps.insert(
            path.to_string(),
            EndpointEntry {
                serve: ep.clone(),
                typed: ep.clone(),
            },
        );
        Ok(ep)
    }

    /// The mesh's metrics (register them with [`NetMetrics::register`]).
    pub fn metrics(&self) -> &NetMetrics {
        &self.inner.metrics
    }

    /// Stops the node: closes every connection (peers see it go at once),
    /// stops the background tasks and releases the UDP port.
    pub async fn shutdown(&self) {
        self.inner.quic.close(0u32.into(), b"shutdown");
        for t in self.inner.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.inner.quic.wait_idle()).await;
    }
}
