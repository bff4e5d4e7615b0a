//! The load generator's error type.

/// Everything that stops a load-generator run before it can report.
///
/// Failures of single measured operations are not errors of this type: they are
/// counted per operation in the report, so one bad request does not end a run.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// A command-line value that cannot be used as given.
    #[error("invalid --{option}: {reason}")]
    InvalidOption {
        /// The option's long name, without dashes.
        option: &'static str,
        /// Why the value was refused.
        reason: String,
    },
    /// An S3 request outside the measured phase (bucket creation, prepare, cleanup) failed.
    #[error("{phase}: {message}")]
    Setup {
        /// The phase of the run that failed.
        phase: &'static str,
        /// The SDK's description of the failure, with the service's error code.
        message: String,
    },
    /// A report file given to `summary` could not be read.
    #[error("reading report {path}: {source}")]
    ReadReport {
        /// The file that failed.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A report could not be encoded or decoded as JSON.
    #[error("report JSON: {0}")]
    Json(#[from] serde_json::Error),
}
