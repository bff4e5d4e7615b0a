//! The error type of the cluster layer.

use crate::layout_file::LayoutFileError;
use crate::quorum_call::QuorumError;

/// Everything that can fail in `hangar_cluster`.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The stored layout cannot be used (unreadable, or another
    /// replication factor than the configured one).
    #[error("cluster layout: {0}")]
    LayoutFile(#[from] LayoutFileError),
    #[error("RPC mesh: {0}")]
    Net(#[from] hangar_net::NetError),
    #[error(transparent)]
    Quorum(#[from] QuorumError),
}
