//! Hangar's RPC mesh (DESIGN.md §5, wire format in doc/rpc.md).
//!
//! Every node has an ed25519 key ([`NodeKey`], kept in `metadata_dir`); its
//! [`NodeId`] is the public key. Nodes talk QUIC (quinn) to each other, one
//! connection per pair used in both directions, authenticated by TLS 1.3
//! certificates signed by a CA derived from the cluster secret. On top sits a
//! typed RPC: an [`Endpoint<Req, Resp>`] per message type, one stream per
//! call, MessagePack messages, optional streamed [`Body`], a deadline on
//! every call, per-handler admission ([`NetError::Overloaded`]) and stream
//! priorities. A ping loop keeps each peer's up/down state and RTT; calls
//! keep its recent answer time ([`answer_time`]).
//!
//! Typical use:
//! ```no_run
//! # async fn f(cfg: &hangar_util::config::Config) -> Result<(), hangar_net::NetError> {
//! use hangar_net::{CallOpts, Mesh, MeshConfig};
//! let mesh = Mesh::start(MeshConfig::from_config(cfg)?).await?;
//! println!("{}", mesh.peer_addr()); // <id>@<addr>
//! let ep = mesh.endpoint::<String, String>("hangar/echo")?;
//! let reply = ep.call(mesh.id(), "hi".to_string(), CallOpts::default()).await;
//! # Ok(()) }
//! ```

pub mod answer_time;
mod body;
mod config;
pub mod congestion;
mod conn;
mod endpoint;
mod error;
mod exchange;
mod frame;
mod handshake;
mod identity;
mod liveness;
mod mesh;
mod metrics;
mod peers;
mod ping;
mod priority;
mod registry;
mod rpc;
mod state;
mod tls;
mod window;
pub mod wire;

pub use body::{Body, MAX_CHUNK_LEN};
pub use config::{Congestion, FlowControl, MeshConfig};
pub use endpoint::{
    CallOpts, DEFAULT_QUEUE_CAPACITY, Endpoint, Handler, HandlerError, Message, Priority, Request,
    Response,
};
pub use error::NetError;
pub use identity::{NODE_KEY_FILE, NodeId, NodeKey, PeerAddr};
pub use mesh::{Mesh, Standing};
pub use metrics::NetMetrics;
pub use peers::{PEER_LIST_FILE, PeerStatus};
pub use state::HealthCheck;
