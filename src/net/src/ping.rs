//! Failure detection: every node pings each connected peer at a fixed
//! interval with a short deadline, marks it up or down, and keeps an average
//! round-trip time. A dead peer is noticed within about
//! `ping_failures_down × ping_interval + ping_timeout`, whatever the RPC
//! timeout is. A ping that times out while the peer answered other calls or
//! read this node's data since it was sent is not a failure
//! ([`crate::liveness`]): under overload
//! pings wait behind the calls' data, and declaring such a peer down would
//! close a connection full of calls that are being served.
//!
//! A node whose process runs but that cannot do its work — its metadata
//! disk stopped taking writes — answers pings with a refusal
//! ([`Mesh::set_health_check`](crate::Mesh::set_health_check)): its peers
//! mark it down at once, so that quorums and coordinators go around it,
//! and up again at its first pong. The connection stays open (the node
//! answers); nothing else changes.

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::conn::CLOSE_PING_TIMEOUT;
use crate::endpoint::{CallOpts, Handler, HandlerError, Priority, Request, Response};
use crate::error::NetError;
use crate::identity::NodeId;
use crate::liveness;
use crate::state::{HealthCheck, MeshInner};

/// Path of the built-in ping endpoint.
pub(crate) const PING_PATH: &str = "hangar/net/ping";

/// Weight of the newest sample in the RTT average.
const RTT_WEIGHT: f64 = 0.2;

/// A ping carries a number that the pong echoes.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PingMsg {
    pub nonce: u64,
}

/// How a refused ping's message starts: the peer is running but unfit.
const UNFIT: &str = "unfit: ";

pub(crate) struct PingHandler {
    pub(crate) health: Arc<RwLock<Option<HealthCheck>>>,
}

#[async_trait]
impl Handler<PingMsg, PingMsg> for PingHandler {
    async fn handle(&self, req: Request<PingMsg>) -> Result<Response<PingMsg>, HandlerError> {
        if let Some(check) = &*self.health.read().expect("health lock")
            && let Err(why) = check()
        {
            return Err(HandlerError::new(format!("{UNFIT}{why}")));
        }
        Ok(Response::new(req.msg))
    }
}

/// Pings every connected peer each `interval`. Pings overlap when the
/// timeout is longer than the interval (up to `ping_failures_down` at once),
/// so that a dead peer is declared down `ping_failures_down` intervals after
/// its first missed ping, plus one timeout.
pub(crate) async fn ping_loop(mesh: Weak<MeshInner>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(m) = mesh.upgrade() else { return };
        let max_in_flight = m.cfg.ping_failures_down.max(1);
        let due: Vec<NodeId> = {
            let mut table = m.peers.lock().expect("peers lock");
            table
                .peers
                .iter_mut()
                .filter(|(_, p)| p.live_conn().is_some() && p.pings_in_flight < max_in_flight)
                .map(|(id, p)| {
                    p.pings_in_flight += 1;
                    *id
                })
                .collect()
        };
        for id in due {
            let m = m.clone();
            tokio::spawn(async move { m.ping(id).await });
        }
    }
}

impl MeshInner {
    async fn ping(&self, id: NodeId) {
        let Some(ep) = self.typed_endpoint::<PingMsg, PingMsg>(PING_PATH) else {
            return;
        };
        let nonce: u64 = rand::random();
        let opts = CallOpts {
            timeout: Some(self.cfg.ping_timeout),
            priority: Priority::Control,
        };
        let credit_before = self
            .conn_to(id)
            .ok()
            .map(|h| liveness::credit_frames(&h.conn));
        let start = Instant::now();
        let result = ep.call(id, PingMsg { nonce }, opts).await;
        let rtt = start.elapsed();
        let mut table = self.peers.lock().expect("peers lock");
        let Some(p) = table.peers.get_mut(&id) else {
            return;
        };
        p.pings_in_flight = p.pings_in_flight.saturating_sub(1);
        match result {
            Ok(pong) if pong.nonce == nonce => {
                p.failed_pings = 0;
                p.last_seen = Some(SystemTime::now());
                let avg = match p.rtt {
                    None => rtt,
                    Some(old) => old.mul_f64(1.0 - RTT_WEIGHT) + rtt.mul_f64(RTT_WEIGHT),
                };
                p.rtt = Some(avg);
                self.metrics().set_peer_rtt(&id, avg);
                if !p.up {
                    tracing::info!(peer = %id, "peer is up");
                    p.up = true;
                    self.metrics().set_peer_up(&id, true);
                }
            }
            // Late, but the peer answered a call or read this node's data
            // since the ping was sent: it is busy, not dead (crate::liveness).
            Err(NetError::Timeout { .. })
                if p.answers.at_or_after(start)
                    || credit_before.is_some_and(|before| {
                        p.live_conn()
                            .is_some_and(|c| liveness::credit_frames(c) > before)
                    }) =>
            {
                p.failed_pings = 0;
                p.last_seen = Some(SystemTime::now());
                tracing::debug!(peer = %id, "ping late, but the peer answers calls");
            }
            // An answer, not a loss: the peer runs but says it cannot work.
            Err(NetError::Remote { message, .. }) if message.starts_with(UNFIT) => {
                p.failed_pings = 0;
                p.last_seen = Some(SystemTime::now());
                if p.up {
                    tracing::warn!(peer = %id, "peer is down: it answers pings with \"{message}\"");
                    p.up = false;
                    self.metrics().set_peer_up(&id, false);
                }
            }
            other => {
                p.failed_pings += 1;
                let reason = match other {
                    Err(e) => e.to_string(),
                    Ok(_) => "pong with the wrong nonce".to_string(),
                };
                tracing::debug!(peer = %id, failed = p.failed_pings, %reason, "ping failed");
                if p.failed_pings >= self.cfg.ping_failures_down {
                    if p.up {
                        tracing::warn!(peer = %id, failed = p.failed_pings, %reason, "peer is down");
                        p.up = false;
                        self.metrics().set_peer_up(&id, false);
                    }
                    // Drop the silent connection so the peer is dialed
                    // again (with the short backoff) instead of waiting for
                    // QUIC's idle timeout.
                    if let Some(c) = p.conn.take() {
                        c.conn.close(CLOSE_PING_TIMEOUT.into(), b"ping timeout");
                    }
                    p.next_dial = Instant::now();
                    drop(table);
                    self.dial_wakeup.notify_one();
                }
            }
        }
    }
}
