//! Connections: accepting, dialing with a short capped backoff, and keeping
//! exactly one connection per pair of nodes, used in both directions.
//!
//! When two connections to the same peer exist (both sides dialed at once,
//! or the peer restarted), one is chosen the same way on both sides:
//! - if they come from different incarnations of the peer (different
//!   certificates), the newer one wins and the stale one is closed at once;
//! - otherwise (both nodes dialed at once) the one with the smaller TLS
//!   exporter value wins: both ends derive the same value for a connection,
//!   so they agree whatever order they saw the connections in. The other is
//!   closed after a grace period so calls already on it can end.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::CertificateDer;
use tokio::sync::Notify;

use hangar_util::last_event::LastEvent;

use crate::answer_time::AnswerTime;

use crate::error::NetError;
use crate::handshake::Admission;
use crate::identity::{NodeId, PeerAddr};
use crate::peers::{ConnEntry, Peer};
use crate::priority::PriorityGate;
use crate::state::MeshInner;
use crate::tls::{SERVER_NAME, peer_node_id};

/// QUIC close code: a duplicate connection was dropped in favour of another.
const CLOSE_DUPLICATE: u32 = 2;
/// QUIC close code: the connection belongs to a previous incarnation.
const CLOSE_STALE: u32 = 3;
/// QUIC close code: the peer stopped answering pings.
pub(crate) const CLOSE_PING_TIMEOUT: u32 = 4;
/// TLS exporter label for the duplicate-connection tie-break.
const TIEBREAK_LABEL: &[u8] = b"EXPORTER-hangar-connection-tiebreak";
/// How long a duplicate connection stays open for calls already on it.
const DUPLICATE_GRACE: Duration = Duration::from_secs(5);
/// How often the dial loop looks for peers to dial, besides wake-ups.
const DIAL_TICK: Duration = Duration::from_millis(50);

/// The id and incarnation (hash of the certificate) of a connected peer.
fn conn_identity(conn: &quinn::Connection) -> Result<(NodeId, [u8; 32]), NetError> {
    let any = conn
        .peer_identity()
        .ok_or_else(|| NetError::PeerRefused("peer sent no certificate".into()))?;
    let certs = any
        .downcast::<Vec<CertificateDer<'static>>>()
        .map_err(|_| NetError::PeerRefused("unexpected peer identity type".into()))?;
    let id = peer_node_id(&certs)?;
    Ok((id, *blake3::hash(certs[0].as_ref()).as_bytes()))
}

/// Accepts incoming connections until the endpoint closes, within the bounds
/// of [`crate::handshake`]: each handshake is admitted, retried or refused at
/// once, and one that does not complete within the ping timeout is dropped.
pub(crate) async fn accept_loop(mesh: Weak<MeshInner>, quic: quinn::Endpoint) {
    while let Some(incoming) = quic.accept().await {
        let Some(m) = mesh.upgrade() else { return };
        let remote = incoming.remote_address();
        let slot = match m
            .handshakes
            .admit(remote.ip(), incoming.remote_address_validated())
        {
            Admission::Admit(slot) => slot,
            Admission::Retry => {
                // Only fails when the source has already proved its address,
                // which admit() was told it has not.
                let _ = incoming.retry();
                continue;
            }
            Admission::Refuse(reason) => {
                m.metrics().handshake_refused();
                if m.handshake_log.allow() {
                    tracing::warn!(%remote, reason, "refused incoming handshake");
                } else {
                    tracing::debug!(%remote, reason, "refused incoming handshake");
                }
                incoming.refuse();
                continue;
            }
        };
        m.metrics().set_handshakes_pending(m.handshakes.pending());
        let deadline = m.cfg.ping_timeout;
        drop(m);
        let mesh = mesh.clone();
        tokio::spawn(async move {
            // Dropping the handshake's future on timeout closes its connection.
            let outcome = tokio::time::timeout(deadline, incoming.into_future()).await;
            drop(slot);
            let Some(m) = mesh.upgrade() else { return };
            m.metrics().set_handshakes_pending(m.handshakes.pending());
            let failure = match outcome {
                Ok(Ok(conn)) => match conn_identity(&conn) {
                    Ok((id, inc)) => {
                        m.install_conn(id, inc, conn, false);
                        return;
                    }
                    Err(e) => {
                        conn.close(0u32.into(), b"bad identity");
                        e.to_string()
                    }
                },
                Ok(Err(e)) => format!("TLS/QUIC handshake failed: {e}"),
                Err(_) => {
                    m.metrics().handshake_timed_out();
                    format!("handshake not completed within {deadline:?}")
                }
            };
            m.metrics().handshake_failed();
            if m.handshake_log.allow() {
                tracing::warn!(%remote, error = %failure, "refused incoming connection");
            } else {
                tracing::debug!(%remote, error = %failure, "refused incoming connection");
            }
        });
    }
}

/// Dials, in the background, every known peer that has an address and no
/// connection, respecting each peer's backoff.
pub(crate) async fn dial_loop(mesh: Weak<MeshInner>, wakeup: Arc<Notify>) {
    loop {
        {
            let Some(m) = mesh.upgrade() else { return };
            for (id, addr) in m.take_due_dials() {
                let m = m.clone();
                tokio::spawn(async move {
                    let _ = m.dial_and_record(id, addr).await;
                });
            }
        }
        tokio::select! {
            _ = wakeup.notified() => {}
            _ = tokio::time::sleep(DIAL_TICK) => {}
        }
    }
}

/// An open connection to a peer and what every call to it shares.
pub(crate) struct PeerHandles {
    pub conn: quinn::Connection,
    /// Orders foreground before background bodies sent to the peer.
    pub gate: Arc<PriorityGate>,
    /// When the peer last answered a call (the failure detector's).
    pub answers: Arc<LastEvent>,
    /// How long the peer has recently taken to answer.
    pub answer_time: Arc<AnswerTime>,
}

impl MeshInner {
    /// The open connection to `to`, with what calls to it share.
    pub(crate) fn conn_to(&self, to: NodeId) -> Result<PeerHandles, NetError> {
        let table = self.peers.lock().expect("peers lock");
        let p = table.peers.get(&to).ok_or(NetError::NotConnected(to))?;
        let conn = p.live_conn().cloned().ok_or(NetError::NotConnected(to))?;
        Ok(PeerHandles {
            conn,
            gate: p.gate.clone(),
            answers: p.answers.clone(),
            answer_time: p.answer_time.clone(),
        })
    }

    /// The priority gate for bodies sent to `peer`.
    pub(crate) fn gate_for(&self, peer: NodeId) -> Arc<PriorityGate> {
        let table = self.peers.lock().expect("peers lock");
        table
            .peers
            .get(&peer)
            .map(|p| p.gate.clone())
            .unwrap_or_default()
    }

    /// Peers due for a dial; marks them as being dialed.
    fn take_due_dials(&self) -> Vec<(NodeId, String)> {
        let now = Instant::now();
        let mut table = self.peers.lock().expect("peers lock");
        let mut due = vec![];
        for (id, p) in table.peers.iter_mut() {
            if *id != self.id()
                && !p.dialing
                && p.next_dial <= now
                && p.live_conn().is_none()
                && let Some(addr) = &p.addr
            {
                p.dialing = true;
                due.push((*id, addr.clone()));
            }
        }
        due
    }

    /// Dials `peer` now. Only a peer that answered with the right identity
    /// is added to the table and the persisted list, so a mistyped id or
    /// address is not retried forever.
    pub(crate) async fn connect(&self, peer: &PeerAddr) -> Result<(), NetError> {
        if peer.id == self.id() {
            return Ok(());
        }
        let connected = {
            let table = self.peers.lock().expect("peers lock");
            table
                .peers
                .get(&peer.id)
                .and_then(Peer::live_conn)
                .is_some()
        };
        if !connected {
            self.dial(peer.id, &peer.addr).await?;
        }
        let changed =
            self.peers
                .lock()
                .expect("peers lock")
                .learn(peer.id, Some(peer.addr.clone()), true);
        if changed {
            self.persist_peers();
        }
        Ok(())
    }

    /// Dials `id` at `addr` and records the outcome (backoff on failure).
    async fn dial_and_record(&self, id: NodeId, addr: String) -> Result<(), NetError> {
        let result = self.dial(id, &addr).await;
        let mut table = self.peers.lock().expect("peers lock");
        if let Some(p) = table.peers.get_mut(&id) {
            p.dialing = false;
            match &result {
                Ok(()) => {
                    p.backoff = Duration::ZERO;
                    p.last_error = None;
                }
                Err(e) => {
                    p.backoff = (p.backoff * 2).clamp(
                        self.cfg.reconnect_backoff_min,
                        self.cfg.reconnect_backoff_max,
                    );
                    p.next_dial = Instant::now() + p.backoff;
                    let msg = e.to_string();
                    if p.last_error.as_deref() != Some(msg.as_str()) {
                        tracing::warn!(peer = %id, %addr, error = %msg, "cannot connect to peer");
                    } else {
                        tracing::debug!(peer = %id, %addr, error = %msg, "cannot connect to peer");
                    }
                    p.last_error = Some(msg);
                }
            }
        }
        result
    }

    async fn dial(&self, id: NodeId, addr: &str) -> Result<(), NetError> {
        let sockaddr = tokio::net::lookup_host(addr)
            .await
            .map_err(|e| NetError::BadAddress(addr.into(), e.to_string()))?
            .next()
            .ok_or_else(|| NetError::BadAddress(addr.into(), "resolves to nothing".into()))?;
        let crypto = QuicClientConfig::try_from(self.tls.client_config(id)?)
            .map_err(|e| NetError::Tls(e.to_string()))?;
        let mut client = quinn::ClientConfig::new(Arc::new(crypto));
        client.transport_config(self.transport.clone());
        let connecting = self.quic.connect_with(client, sockaddr, SERVER_NAME)?;
        let conn = tokio::time::timeout(self.cfg.ping_timeout, connecting)
            .await
            .map_err(|_| NetError::Timeout {
                endpoint: "connect".into(),
                after: self.cfg.ping_timeout,
            })??;
        let (got, inc) = conn_identity(&conn)?;
        if got != id {
            // The verifier already refuses this; kept as a second guard.
            conn.close(0u32.into(), b"unexpected node id");
            return Err(NetError::PeerRefused(format!(
                "{got} answered instead of {id}"
            )));
        }
        self.install_conn(id, inc, conn, true);
        Ok(())
    }

    /// Takes a freshly established connection into the peer table (or
    /// drops it as a duplicate), and starts serving calls on it.
    pub(crate) fn install_conn(
        &self,
        id: NodeId,
        incarnation: [u8; 32],
        conn: quinn::Connection,
        dialed_by_us: bool,
    ) {
        if id == self.id() {
            conn.close(0u32.into(), b"connected to self");
            return;
        }
        let mut tiebreak = [0u8; 16];
        if conn
            .export_keying_material(&mut tiebreak, TIEBREAK_LABEL, b"")
            .is_err()
        {
            conn.close(0u32.into(), b"no keying material");
            return;
        }
        let entry = ConnEntry {
            conn: conn.clone(),
            incarnation,
            tiebreak,
        };
        let (installed, learnt_addr) = {
            let mut table = self.peers.lock().expect("peers lock");
            // An incoming connection tells where the peer can be reached
            // (its socket is the one it dials from) if we did not know.
            let observed = (!dialed_by_us).then(|| conn.remote_address().to_string());
            let learnt_addr = table.learn(id, observed, false);
            let p = table.peers.get_mut(&id).expect("learnt above");
            let install = match &p.conn {
                None => true,
                Some(old) if old.conn.close_reason().is_some() => true,
                Some(old) if old.incarnation != incarnation => {
                    tracing::info!(peer = %id, "peer restarted: replacing its stale connection");
                    old.conn.close(CLOSE_STALE.into(), b"stale incarnation");
                    true
                }
                Some(old) => {
                    // Same incarnation: two live connections. Both sides
                    // keep the one with the smaller exporter value.
                    let keep_new = tiebreak < old.tiebreak;
                    let loser = if keep_new {
                        old.conn.clone()
                    } else {
                        conn.clone()
                    };
                    tokio::spawn(async move {
                        tokio::time::sleep(DUPLICATE_GRACE).await;
                        loser.close(CLOSE_DUPLICATE.into(), b"duplicate connection");
                    });
                    keep_new
                }
            };
            if install {
                p.conn = Some(entry);
                p.failed_pings = 0;
                p.last_seen = Some(SystemTime::now());
                p.backoff = Duration::ZERO;
                p.last_error = None;
                if !p.up {
                    tracing::info!(peer = %id, remote = %conn.remote_address(), outgoing = dialed_by_us, "peer connected");
                }
                p.up = true;
                self.metrics().set_peer_up(&id, true);
                // Until pings say more, QUIC's own estimate from the handshake.
                if p.rtt.is_none() {
                    p.rtt = Some(conn.rtt());
                }
            }
            (install, learnt_addr)
        };
        if learnt_addr {
            self.persist_peers();
        }
        if installed {
            let flow = &self.cfg.flow;
            tokio::spawn(crate::window::follow(
                conn.clone(),
                u64::from(flow.connection_window),
                flow.send_window,
                flow.max_window,
                self.window_budget.clone(),
                self.metrics().clone(),
            ));
        }
        self.spawn_serve(id, conn);
        if installed {
            crate::exchange::spawn_exchange(self.self_ref.clone(), id);
        }
    }

    /// Serves the calls the peer opens on `conn`, until it closes.
    fn spawn_serve(&self, id: NodeId, conn: quinn::Connection) {
        let mesh = self.self_ref.clone();
        tokio::spawn(async move {
            let reason = loop {
                match conn.accept_bi().await {
                    Ok((send, recv)) => {
                        let Some(m) = mesh.upgrade() else { return };
                        tokio::spawn(async move { m.serve_stream(id, send, recv).await });
                    }
                    Err(e) => break e,
                }
            };
            if let Some(m) = mesh.upgrade() {
                m.on_conn_closed(id, conn.stable_id(), reason);
            }
        });
    }

    fn on_conn_closed(&self, id: NodeId, stable_id: usize, reason: quinn::ConnectionError) {
        let mut table = self.peers.lock().expect("peers lock");
        let Some(p) = table.peers.get_mut(&id) else {
            return;
        };
        if p.conn.as_ref().map(|c| c.conn.stable_id()) != Some(stable_id) {
            return;
        }
        p.conn = None;
        p.next_dial = Instant::now();
        if p.up {
            tracing::info!(peer = %id, %reason, "connection to peer lost");
            p.up = false;
            self.metrics().set_peer_up(&id, false);
        }
        drop(table);
        self.dial_wakeup.notify_one();
    }
}
