use std::time::Duration;

use hangar_util::Hash;
use thiserror::Error;

/// Errors of the block store.
///
/// The ones the S3 layer maps to retryable answers: [`BlockError::Overloaded`]
/// (503 SlowDown: the RAM budget for blocks in flight stayed spent) and
/// [`BlockError::Quorum`] / [`BlockError::Unavailable`] (503
/// ServiceUnavailable: too few nodes answered).
#[derive(Debug, Error)]
pub enum BlockError {
    #[error("block {0} is missing")]
    Missing(Hash),
    #[error("block {hash} is corrupt: {reason}")]
    Corrupt { hash: Hash, reason: String },
    #[error("block I/O error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Db(#[from] hangar_db::DbError),
    #[error("block store task failed: {0}")]
    Task(String),
    /// A received block, or its announced size, exceeds what a block may be.
    #[error("block {hash} refused: {len} bytes is more than the limit of {max}")]
    TooLarge { hash: Hash, len: u64, max: u64 },
    /// The RAM budget for blocks in flight (`block_ram_buffer_max`) stayed
    /// spent for `waited`: replicas are slower than uploads. Retry later.
    #[error(
        "block RAM budget of {budget} bytes spent: waited {waited:?} for {needed} bytes (replicas are slow; retry later)"
    )]
    Overloaded {
        needed: u64,
        budget: u64,
        waited: Duration,
    },
    /// A replicated write (put, unref) did not reach its write quorum.
    #[error("block {hash}: {source}")]
    Quorum {
        hash: Hash,
        source: hangar_cluster::QuorumError,
    },
    /// No replica could give a good copy of the block.
    #[error("block {hash} unavailable: {}", errors.join("; "))]
    Unavailable { hash: Hash, errors: Vec<String> },
    /// A settings combination that cannot work.
    #[error("block store configuration: {0}")]
    Config(String),
    #[error("RPC mesh: {0}")]
    Net(#[from] hangar_net::NetError),
}

impl BlockError {
    /// Whether the put failed because the cluster is busy: this node's
    /// budget for blocks in flight stayed spent, or a replica refused the
    /// copy as overloaded and the write quorum was lost with it.
    pub fn is_overload(&self) -> bool {
        match self {
            BlockError::Overloaded { .. } => true,
            BlockError::Quorum { source, .. } => source.overloaded(),
            _ => false,
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        BlockError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
