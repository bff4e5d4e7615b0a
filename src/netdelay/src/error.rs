//! What can go wrong between the delay line and the kernel.

use std::io;

/// The delay line's errors: all of them end the process, with what failed.
#[derive(Debug, thiserror::Error)]
pub enum DelayError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
    #[error("the kernel refused {what}: {source}")]
    Refused { what: String, source: io::Error },
    #[error("bad --link {0:?}: {1}")]
    Link(String, String),
}

impl DelayError {
    /// The last OS error, for the step `what`.
    pub fn os(what: &'static str) -> DelayError {
        DelayError::Io {
            what,
            source: io::Error::last_os_error(),
        }
    }
}
