//! Hangar's cluster layer (DESIGN.md §2, doc/architecture.md "The
//! cluster"): what tables and blocks need to spread their data over the
//! nodes.
//!
//! - [`ClusterLayout`] (`live_layout`): this node's live copy of the cluster
//!   layout of `hangar_layout`, persisted in `metadata_dir/cluster_layout`
//!   ([`layout_file`]) and gossiped with every peer on `hangar/layout/push`.
//! - [`Cluster`]: the handle the data layers hold: the mesh, the live
//!   layout, this node's id, the replication factor and the quorums of the
//!   consistency mode, with the look-ups of a partition's nodes in every
//!   active layout version.
//! - [`quorum_call`]: one RPC sent to several nodes at once, done when a
//!   quorum answered (in every active layout version for writes), failing
//!   fast when the quorum cannot be reached.
//!
//! The layers below: `hangar_net` (the mesh), `hangar_layout` (the pure
//! layout algorithms and CRDT), `hangar_util`.

mod cluster;
mod error;
pub mod layout_file;
mod live_layout;
pub mod node_info;
pub mod quorum_call;

pub use cluster::{Cluster, StorageNodes, WriteGuard};
pub use error::ClusterError;
pub use layout_file::LayoutFileError;
pub use live_layout::{
    ClusterLayout, EXCHANGE_INTERVAL, LayoutPush, LayoutPushReply, PUSH_PATH, PeerLayoutState,
    WeakClusterLayout,
};
pub use node_info::{DiskSpace, NodeInfo};
pub use quorum_call::{
    QuorumError, call_quorum, call_quorum_per_version, call_quorum_per_version_with,
};
