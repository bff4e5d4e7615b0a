//! The bounds an HTTP endpoint (S3, admin) keeps on its connections, so
//! that slow or idle clients cannot take it from everyone else.

use std::time::Duration;

/// The bounds a client cannot stretch.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once; one more is answered `503` at once and
    /// closed.
    pub max_connections: usize,
    /// Longest time to receive a request's head, counted from the first
    /// wait for it: a slow header, and an idle keep-alive connection.
    pub header_timeout: Duration,
    /// Longest time without a byte read or written while the connection
    /// waits on the client: a stalled body or a client that stopped
    /// reading (`idle_io::IdleTimeout`).
    pub idle_timeout: Duration,
}
