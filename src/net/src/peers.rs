//! The peer table: every node this node knows, its address, its connection
//! and its health; and the peer list file that survives restarts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use hangar_util::last_event::LastEvent;

use crate::answer_time::AnswerTime;

use crate::error::NetError;
use crate::identity::{NodeId, PeerAddr};
use crate::priority::PriorityGate;

/// File name of the persisted peer list inside `metadata_dir`.
pub const PEER_LIST_FILE: &str = "peer_list.json";

/// One node as seen from here, for `hangar status` (which reads it back:
/// a field an older node does not send reads as its default).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerStatus {
    /// Node id (hex).
    pub id: NodeId,
    /// `host:port` the node is dialed at, if known.
    pub addr: Option<String>,
    /// The node answered its last pings (always true for this node).
    pub is_up: bool,
    /// A QUIC connection to the node is open.
    pub connected: bool,
    /// When the node last answered a ping or connected, in ms since the Unix epoch.
    pub last_seen_msec: Option<u64>,
    /// Average ping round-trip time in milliseconds.
    pub rtt_msec: Option<f64>,
    /// This entry is the local node.
    pub is_self: bool,
    /// The congestion controller pacing this node's connection to the peer
    /// (`"cubic"` or `"bbr"`; with `rpc_congestion_control = "auto"`, the
    /// one its round trip picked); `None` unconnected and for this node.
    pub congestion_control: Option<String>,
}

/// The live connection to a peer.
pub(crate) struct ConnEntry {
    pub conn: quinn::Connection,
    /// blake3 of the peer's certificate: one value per peer incarnation.
    pub incarnation: [u8; 32],
    /// A value both ends of this connection derive identically from its
    /// TLS session (keying-material exporter); used to pick the same
    /// connection on both sides when there are two.
    pub tiebreak: [u8; 16],
}

/// What this node knows about another one.
pub(crate) struct Peer {
    pub addr: Option<String>,
    pub conn: Option<ConnEntry>,
    pub up: bool,
    pub last_seen: Option<SystemTime>,
    pub rtt: Option<Duration>,
    pub failed_pings: u32,
    /// Pings sent and not yet answered or failed.
    pub pings_in_flight: u32,
    pub dialing: bool,
    pub backoff: Duration,
    pub next_dial: Instant,
    /// The last dial error, to log each new reason once rather than on
    /// every retry.
    pub last_error: Option<String>,
    /// Orders foreground before background bodies sent to this peer.
    pub gate: Arc<PriorityGate>,
    /// When the peer last answered a call: a late ping is no failure while
    /// it answers calls.
    pub answers: Arc<LastEvent>,
    /// How long it has recently taken to answer.
    pub answer_time: Arc<AnswerTime>,
}

impl Peer {
    pub(crate) fn new(addr: Option<String>) -> Peer {
        Peer {
            addr,
            conn: None,
            up: false,
            last_seen: None,
            rtt: None,
            failed_pings: 0,
            pings_in_flight: 0,
            dialing: false,
            backoff: Duration::ZERO,
            next_dial: Instant::now(),
            last_error: None,
            gate: Arc::default(),
            answers: Arc::default(),
            answer_time: Arc::default(),
        }
    }

    /// The connection, if it is still open.
    pub(crate) fn live_conn(&self) -> Option<&quinn::Connection> {
        self.conn
            .as_ref()
            .map(|c| &c.conn)
            .filter(|c| c.close_reason().is_none())
    }

    pub(crate) fn status(&self, id: NodeId) -> PeerStatus {
        PeerStatus {
            id,
            addr: self.addr.clone(),
            is_up: self.up,
            connected: self.live_conn().is_some(),
            last_seen_msec: self
                .last_seen
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64),
            rtt_msec: self.rtt.map(|d| d.as_secs_f64() * 1000.0),
            is_self: false,
            congestion_control: self
                .live_conn()
                .map(|c| crate::congestion::name_of(c).to_owned()),
        }
    }
}

/// Every known peer, by id.
#[derive(Default)]
pub(crate) struct PeerTable {
    pub peers: HashMap<NodeId, Peer>,
}

impl PeerTable {
    /// Adds a peer or fills in its address. Returns true if the persisted
    /// list changed.
    pub(crate) fn learn(&mut self, id: NodeId, addr: Option<String>, overwrite: bool) -> bool {
        match self.peers.get_mut(&id) {
            None => {
                let changed = addr.is_some();
                self.peers.insert(id, Peer::new(addr));
                changed
            }
            Some(p) => match addr {
                Some(a) if p.addr.is_none() || (overwrite && p.addr.as_deref() != Some(&a)) => {
                    p.addr = Some(a);
                    // A new address deserves an immediate dial.
                    p.next_dial = Instant::now();
                    true
                }
                _ => false,
            },
        }
    }

    /// The peers with a known address, as written in the peer list file.
    pub(crate) fn addresses(&self) -> Vec<PeerAddr> {
        let mut v: Vec<PeerAddr> = self
            .peers
            .iter()
            .filter_map(|(id, p)| {
                p.addr.as_ref().map(|a| PeerAddr {
                    id: *id,
                    addr: a.clone(),
                })
            })
            .collect();
        v.sort_by_key(|p| p.id);
        v
    }
}

/// Reads the persisted peer list; a missing file is an empty list.
pub(crate) fn load_peer_list(dir: &Path) -> Result<Vec<PeerAddr>, NetError> {
    let path = dir.join(PEER_LIST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e.into()),
    };
    let entries: Vec<String> = serde_json::from_str(&text)
        .map_err(|e| NetError::Config(format!("{}: {e}", path.display())))?;
    entries.iter().map(|s| s.parse()).collect()
}

/// Writes the peer list atomically (temporary file, fsync, rename), so a
/// crash leaves either the old or the new list.
pub(crate) fn save_peer_list(dir: &Path, peers: &[PeerAddr]) -> Result<(), NetError> {
    use std::io::Write;
    let entries: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
    let text = serde_json::to_string_pretty(&entries).expect("strings always serialize");
    let tmp: PathBuf = dir.join(format!("{PEER_LIST_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(PEER_LIST_FILE))?;
    Ok(())
}
