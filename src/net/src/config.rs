//! The mesh's settings, taken from Hangar's configuration file plus a few
//! of the mesh's own knobs that have sensible defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hangar_util::config::{Config, RpcCongestion};

use crate::error::NetError;
use crate::identity::PeerAddr;

/// QUIC flow-control windows: what bounds the memory one connection may use
/// for data in flight (see doc/rpc.md, "Flow control").
#[derive(Clone, Debug)]
pub struct FlowControl {
    /// Bytes a single call's stream may have unread at the receiver.
    pub stream_window: u32,
    /// Bytes all streams of a connection may have unread at the receiver.
    pub connection_window: u32,
    /// Bytes a sender keeps buffered but unacknowledged per connection.
    pub send_window: u64,
    /// Streams (calls) a peer may have open at once on one connection. This
    /// is QUIC stream credit, refilled as calls end; calls beyond it wait for
    /// a stream within their deadline.
    pub max_concurrent_streams: u32,
    /// Kernel send and receive buffer of the UDP socket (capped by the
    /// kernel's `net.core.rmem_max` / `wmem_max`); `None` keeps the system
    /// default. Larger buffers queue more bytes in front of every small call
    /// (measured on loopback: 4 MiB gave 13 ms small-call p50 under bulk
    /// against 2.5 ms with the default ~208 KiB, for the same throughput).
    pub udp_buffer: Option<usize>,
    /// QUIC congestion controller.
    pub congestion: Congestion,
    /// How far a connection's receive and send windows may grow each,
    /// from `connection_window` and `send_window`, when the connection
    /// moves a whole window per round trip (`window.rs`).
    pub max_window: u64,
    /// The growth of every connection's windows together, at most: bounds
    /// the memory peers may make this node hold.
    pub window_budget: u64,
}

/// Which congestion controller QUIC connections use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// Per connection, by its link's round trip: Cubic under
    /// [`crate::congestion::NEAR_RTT`], BBR above
    /// ([`crate::congestion::ByRoundTrip`]).
    Auto,
    Cubic,
    NewReno,
    /// quinn's BBR (marked experimental by quinn).
    Bbr,
}

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl {
            stream_window: 2 * 1024 * 1024,
            // Measured with script/bench-net: 4 MiB moves as many MiB/s per
            // core as 16 MiB on loopback and keeps a shorter queue in front
            // of small calls.
            connection_window: 4 * 1024 * 1024,
            send_window: 4 * 1024 * 1024,
            max_concurrent_streams: 16 * 1024,
            udp_buffer: None,
            // BBR where the link is long (doc/netlab.md: 92 % of the
            // link's rate at 20 ms with 0.1 % loss, which holds Cubic to a
            // few MiB/s), Cubic where it is short and BBR's bursts overflow
            // busy receivers (doc/put-cost.md).
            congestion: Congestion::Auto,
            // Twice the bandwidth-delay product of 1 Gbit/s at 80 ms (the
            // test bed's `wan`) is 20 MB.
            max_window: 32 * 1024 * 1024,
            window_budget: 256 * 1024 * 1024,
        }
    }
}

/// Everything [`crate::Mesh::start`] needs.
#[derive(Clone, Debug)]
pub struct MeshConfig {
    /// The cluster secret (`rpc_secret`).
    pub secret: [u8; 32],
    /// UDP address to bind (`rpc_bind_addr`); port 0 picks a free one.
    pub bind_addr: SocketAddr,
    /// `host:port` other nodes should dial (`rpc_public_addr`); when unset,
    /// the bind address if it is specific, else what peers observe.
    pub public_addr: Option<String>,
    /// Where `node_key` and `peer_list.json` live.
    pub metadata_dir: PathBuf,
    /// `bootstrap_peers`, parsed.
    pub bootstrap_peers: Vec<PeerAddr>,
    /// Default deadline of a call (`rpc_timeout_msec`).
    pub rpc_timeout: Duration,
    /// Deadline of a ping and of a connection handshake (`rpc_ping_timeout_msec`).
    pub ping_timeout: Duration,
    /// Time between two pings of a peer.
    pub ping_interval: Duration,
    /// Consecutive failed pings after which a peer is marked down and its
    /// connection closed (so that it is dialed again).
    pub ping_failures_down: u32,
    /// Time between two peer-list exchanges with each peer (there is also
    /// one at every new connection).
    pub peer_exchange_interval: Duration,
    /// First and largest wait between two dials of an unreachable peer.
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    pub flow: FlowControl,
}

impl MeshConfig {
    /// Settings with Hangar's defaults for everything but the identity,
    /// secret and address.
    pub fn new(secret: [u8; 32], bind_addr: SocketAddr, metadata_dir: PathBuf) -> MeshConfig {
        MeshConfig {
            secret,
            bind_addr,
            public_addr: None,
            metadata_dir,
            bootstrap_peers: vec![],
            rpc_timeout: Duration::from_secs(300),
            ping_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            ping_failures_down: 2,
            peer_exchange_interval: Duration::from_secs(30),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(1),
            flow: FlowControl::default(),
        }
    }

    /// `<id>@<addr>` of the node these settings describe, without starting
    /// it (for `hangar node id`): the id from `metadata_dir/node_key`
    /// (created if missing), the address from `public_addr`, else
    /// `bind_addr`.
    pub fn node_peer_addr(&self) -> Result<PeerAddr, NetError> {
        let key = crate::identity::NodeKey::load_or_create(&self.metadata_dir)?;
        Ok(PeerAddr {
            id: key.id(),
            addr: self
                .public_addr
                .clone()
                .unwrap_or_else(|| self.bind_addr.to_string()),
        })
    }

    /// Settings from Hangar's configuration file.
    pub fn from_config(cfg: &Config) -> Result<MeshConfig, NetError> {
        let secret = cfg
            .rpc_secret_bytes()
            .map_err(|e| NetError::Config(e.to_string()))?;
        let mut m = MeshConfig::new(secret, cfg.rpc_bind_addr, cfg.metadata_dir.clone());
        m.public_addr = cfg.rpc_public_addr.clone();
        m.bootstrap_peers = cfg
            .bootstrap_peers
            .iter()
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?;
        m.rpc_timeout = Duration::from_millis(cfg.rpc_timeout_msec);
        m.ping_timeout = Duration::from_millis(cfg.rpc_ping_timeout_msec);
        m.flow.congestion = match cfg.rpc_congestion_control {
            RpcCongestion::Auto => Congestion::Auto,
            RpcCongestion::Bbr => Congestion::Bbr,
            RpcCongestion::Cubic => Congestion::Cubic,
            RpcCongestion::NewReno => Congestion::NewReno,
        };
        Ok(m)
    }
}
