//! What one measured operation ended with: its latency, and the bytes it
//! moved or an [`OpFailure`] saying what went wrong (with the service's
//! error code when there is one) and whether the server refused it as
//! overloaded. Shared by the SDK's operations (`crate::ops`) and the
//! `Expect: 100-continue` client (`crate::expect`).

use std::fmt;
use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// The outcome of one timed operation: its latency, and bytes moved or a failure.
pub type Timed = (Duration, Result<u64, OpFailure>);

/// What kind of failure an operation met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// `503 SlowDown`: the server refused the request as overloaded; `retry_hint` says
    /// whether it told when to retry (`Retry-After` or `x-amz-retry-after`).
    SlowDown {
        /// A retry hint header came with the refusal.
        retry_hint: bool,
    },
    /// A GET whose body was not the object's content.
    Mismatch,
    /// Anything else: another error code, a transport error, a timeout.
    Other,
}

/// A failed operation: its kind and a message naming the key and the cause.
#[derive(Debug, Clone)]
pub struct OpFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The operation, key and cause, for reports.
    pub message: String,
    /// How long the server asked the client to wait before its next request
    /// (`x-amz-retry-after` in ms, else `Retry-After` in seconds).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl OpFailure {
    pub(crate) fn other(message: String) -> Self {
        OpFailure {
            kind: FailureKind::Other,
            message,
            retry_after: None,
        }
    }

    /// Classifies an SDK error of operation `what`.
    pub(crate) fn from_sdk<E>(what: String, err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let response = err.raw_response();
        let slow_down =
            err.code() == Some("SlowDown") || response.is_some_and(|r| r.status().as_u16() == 503);
        let header = |name: &str| response.and_then(|r| r.headers().get(name));
        let number = |name: &str| header(name).and_then(|v| v.trim().parse::<u64>().ok());
        let (kind, retry_after) = if slow_down {
            let retry_hint =
                header("retry-after").is_some() || header("x-amz-retry-after").is_some();
            let retry_after = number("x-amz-retry-after")
                .map(Duration::from_millis)
                .or_else(|| number("retry-after").map(Duration::from_secs));
            (FailureKind::SlowDown { retry_hint }, retry_after)
        } else {
            (FailureKind::Other, None)
        };
        OpFailure {
            kind,
            message: format!("{what}: {}", DisplayErrorContext(err)),
            retry_after,
        }
    }
}
