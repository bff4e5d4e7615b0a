//! The HTTP/1 connection settings of Hangar's HTTP endpoints (S3, website,
//! admin): hyper's builder holding a client to the node's bounds.

use hangar_util::conn_limits::{ConnLimits, MAX_HEAD_BYTES, MAX_HEAD_LINES};

/// An HTTP/1 connection builder that holds a client to `limits`: the time
/// to send a head, and the head's size and line count ([`MAX_HEAD_BYTES`],
/// [`MAX_HEAD_LINES`]). The idle bound is the stream's own
/// (`hangar_util::idle_io::IdleTimeout`).
pub fn http1(limits: &ConnLimits) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEAD_LINES);
    b
}
