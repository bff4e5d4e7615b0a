use hangar_util::Hash;
use thiserror::Error;

/// Errors of the block store.
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
}

impl BlockError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        BlockError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
