use thiserror::Error;

/// Errors of the metadata store.
#[derive(Debug, Error, Clone)]
pub enum DbError {
    /// The engine reported an I/O or corruption error.
    #[error("metadata engine {engine}: {message}")]
    Engine {
        engine: &'static str,
        message: String,
    },
    /// The committer thread has stopped (the node is shutting down).
    #[error("metadata store is closed")]
    Closed,
}

impl DbError {
    pub(crate) fn engine(engine: &'static str, e: impl std::fmt::Display) -> Self {
        DbError::Engine {
            engine,
            message: e.to_string(),
        }
    }
}
