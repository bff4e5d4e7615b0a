//! Peer-list exchange: nodes tell each other whom they know, so that a full
//! mesh forms from a single contact. New peers are persisted at once.

use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::endpoint::{CallOpts, Handler, HandlerError, Priority, Request, Response};
use crate::error::NetError;
use crate::identity::NodeId;
use crate::state::MeshInner;

/// Path of the built-in peer-exchange endpoint.
pub(crate) const PEERS_PATH: &str = "hangar/net/peers";

/// The sender's own public address (if it has one) and every peer it
/// knows an address for.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PeerListMsg {
    pub addr: Option<String>,
    pub peers: Vec<(NodeId, String)>,
}

/// Answers a peer list with ours, after learning from it.
pub(crate) struct PeersHandler {
    pub mesh: Weak<MeshInner>,
}

#[async_trait]
impl Handler<PeerListMsg, PeerListMsg> for PeersHandler {
    async fn handle(
        &self,
        req: Request<PeerListMsg>,
    ) -> Result<Response<PeerListMsg>, HandlerError> {
        let m = self
            .mesh
            .upgrade()
            .ok_or_else(|| HandlerError::new("shutting down"))?;
        m.merge_peers(req.from, req.msg);
        Ok(Response::new(m.peer_list_msg()))
    }
}

/// Exchanges peer lists with every connected peer each `interval`.
pub(crate) async fn exchange_loop(mesh: Weak<MeshInner>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let Some(m) = mesh.upgrade() else { return };
        let connected: Vec<NodeId> = {
            let table = m.peers.lock().expect("peers lock");
            table
                .peers
                .iter()
                .filter(|(_, p)| p.live_conn().is_some())
                .map(|(id, _)| *id)
                .collect()
        };
        for id in connected {
            spawn_exchange(mesh.clone(), id);
        }
    }
}

/// Starts one exchange with `id` in the background.
pub(crate) fn spawn_exchange(mesh: Weak<MeshInner>, id: NodeId) {
    tokio::spawn(async move {
        let Some(m) = mesh.upgrade() else { return };
        if let Err(e) = m.exchange_with(id).await {
            tracing::debug!(peer = %id, error = %e, "peer list exchange failed");
        }
    });
}

impl MeshInner {
    async fn exchange_with(&self, id: NodeId) -> Result<(), NetError> {
        let ep = self
            .typed_endpoint::<PeerListMsg, PeerListMsg>(PEERS_PATH)
            .ok_or(NetError::Shutdown)?;
        let opts = CallOpts {
            timeout: Some(self.cfg.ping_timeout),
            priority: Priority::Control,
        };
        let theirs = ep.call(id, self.peer_list_msg(), opts).await?;
        self.merge_peers(id, theirs);
        Ok(())
    }

    pub(crate) fn peer_list_msg(&self) -> PeerListMsg {
        let table = self.peers.lock().expect("peers lock");
        PeerListMsg {
            addr: self.public_addr.clone(),
            peers: table
                .addresses()
                .into_iter()
                .map(|p| (p.id, p.addr))
                .collect(),
        }
    }

    /// Learns the peers in `msg`, sent by `from`; persists and dials the new
    /// ones.
    fn merge_peers(&self, from: NodeId, msg: PeerListMsg) {
        let mut changed = false;
        {
            let mut table = self.peers.lock().expect("peers lock");
            if let Some(addr) = msg.addr {
                // A node knows its own public address best.
                changed |= table.learn(from, Some(addr), true);
            }
            for (id, addr) in msg.peers {
                if id != self.id() {
                    changed |= table.learn(id, Some(addr), false);
                }
            }
        }
        if changed {
            self.persist_peers();
            self.dial_wakeup.notify_one();
        }
    }
}
