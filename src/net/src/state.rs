//! [`MeshInner`]: the state a running node shares between its parts —
//! connections (`conn`), RPC (`endpoint`, `rpc`), failure detection
//! (`ping`) and peer exchange (`exchange`) — each of which adds its own
//! methods in its own module. It depends on none of them, so that none of
//! them depends on another through it; `mesh` builds it and wraps it in
//! the public [`crate::Mesh`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::config::MeshConfig;
use crate::handshake::{HandshakeLimits, LogThrottle};
use crate::identity::NodeId;
use crate::metrics::NetMetrics;
use crate::peers::{PeerStatus, PeerTable, save_peer_list};
use crate::registry::EndpointEntry;
use crate::tls::ClusterTls;

/// Says why this node cannot do its work now, if it cannot: its ping
/// handler then refuses ([`crate::Mesh::set_health_check`]).
pub type HealthCheck = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The state of one running node, shared by its parts.
pub(crate) struct MeshInner {
    pub(crate) cfg: MeshConfig,
    pub(crate) id: NodeId,
    pub(crate) tls: ClusterTls,
    pub(crate) transport: Arc<quinn::TransportConfig>,
    pub(crate) quic: quinn::Endpoint,
    pub(crate) local_addr: SocketAddr,
    pub(crate) public_addr: Option<String>,
    pub(crate) peers: Mutex<PeerTable>,
    pub(crate) endpoints: RwLock<HashMap<String, EndpointEntry>>,
    pub(crate) metrics: NetMetrics,
    /// Incoming handshakes in progress, bounded.
    pub(crate) handshakes: Arc<HandshakeLimits>,
    /// Rate of warnings about refused handshakes.
    pub(crate) handshake_log: LogThrottle,
    /// Wakes the dial loop when a peer needs a connection.
    pub(crate) dial_wakeup: Arc<Notify>,
    pub(crate) persist_lock: Mutex<()>,
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) self_ref: Weak<MeshInner>,
    /// What this node's ping handler asks before it answers.
    pub(crate) health: Arc<RwLock<Option<HealthCheck>>>,
    /// The growth of every connection's flow-control windows together
    /// (`window.rs`).
    pub(crate) window_budget: Arc<crate::window::WindowBudget>,
}

impl Drop for MeshInner {
    fn drop(&mut self) {
        self.quic.close(0u32.into(), b"shutdown");
        for t in self.tasks.get_mut().expect("tasks lock").drain(..) {
            t.abort();
        }
    }
}

impl MeshInner {
    pub(crate) fn id(&self) -> NodeId {
        self.id
    }

    pub(crate) fn rpc_timeout(&self) -> Duration {
        self.cfg.rpc_timeout
    }

    pub(crate) fn metrics(&self) -> &NetMetrics {
        &self.metrics
    }

    pub(crate) fn serve_entry(&self, path: &str) -> Option<EndpointEntry> {
        self.endpoints
            .read()
            .expect("endpoints lock")
            .get(path)
            .cloned()
    }

    /// Writes the peer list file with the current table.
    pub(crate) fn persist_peers(&self) {
        let _guard = self.persist_lock.lock().expect("persist lock");
        let list = self.peers.lock().expect("peers lock").addresses();
        if let Err(e) = save_peer_list(&self.cfg.metadata_dir, &list) {
            tracing::warn!(error = %e, "cannot write the peer list");
        }
    }

    pub(crate) fn peer_status(&self) -> Vec<PeerStatus> {
        let mut v = vec![PeerStatus {
            id: self.id,
            addr: Some(
                self.public_addr
                    .clone()
                    .unwrap_or_else(|| self.local_addr.to_string()),
            ),
            is_up: true,
            connected: true,
            last_seen_msec: Some(hangar_now_msec()),
            rtt_msec: Some(0.0),
            is_self: true,
            congestion_control: None,
        }];
        let table = self.peers.lock().expect("peers lock");
        let mut others: Vec<PeerStatus> = table.peers.iter().map(|(id, p)| p.status(*id)).collect();
        others.sort_by_key(|p| p.id);
        v.extend(others);
        v
    }
}

fn hangar_now_msec() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
