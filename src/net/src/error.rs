//! The error type of the mesh: what can go wrong when starting a node,
//! connecting to a peer or making a call.

use std::time::Duration;

use hangar_util::NodeId;

/// Everything that can fail in `hangar_net`.
///
/// Callers mostly care about three classes, which have their own variants so
/// they can be told apart without parsing messages: [`NetError::Timeout`] (the
/// call's deadline passed), [`NetError::Overloaded`] (the remote handler's
/// queue was full: retry later or elsewhere) and [`NetError::NotConnected`]
/// (no live connection to that node right now).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("no connection to node {0}")]
    NotConnected(NodeId),
    #[error("call to {endpoint} timed out after {after:?}")]
    Timeout { endpoint: String, after: Duration },
    #[error("endpoint {0} on the remote node is overloaded (its queue is full)")]
    Overloaded(String),
    #[error("no endpoint {0} on the remote node")]
    NoSuchEndpoint(String),
    #[error("remote handler for {endpoint} failed: {message}")]
    Remote { endpoint: String, message: String },
    #[error("endpoint {0} is already registered with other message types")]
    EndpointTypeMismatch(String),
    #[error("connection error: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("cannot connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    #[error("stream write error: {0}")]
    Write(#[from] quinn::WriteError),
    #[error("stream read error: {0}")]
    Read(#[from] quinn::ReadError),
    #[error("stream closed: {0}")]
    ClosedStream(#[from] quinn::ClosedStream),
    #[error("stream ended early")]
    UnexpectedEnd,
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("message encoding error: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("message decoding error: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    #[error("body stream failed: {0}")]
    Body(String),
    #[error("body larger than the limit of {0} bytes")]
    BodyTooLarge(usize),
    #[error("peer refused: {0}")]
    PeerRefused(String),
    #[error("bad address {0}: {1}")]
    BadAddress(String, String),
    #[error("node key error: {0}")]
    Key(String),
    #[error("TLS setup error: {0}")]
    Tls(String),
    #[error("configuration error: {0}")]
    Config(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the mesh is shut down")]
    Shutdown,
}

impl From<quinn::ReadExactError> for NetError {
    fn from(e: quinn::ReadExactError) -> Self {
        match e {
            quinn::ReadExactError::FinishedEarly(_) => NetError::UnexpectedEnd,
            quinn::ReadExactError::ReadError(e) => NetError::Read(e),
        }
    }
}

impl NetError {
    /// A short stable name for the error class, used as a metrics label.
    pub fn kind(&self) -> &'static str {
        match self {
            NetError::NotConnected(_) => "not_connected",
            NetError::Timeout { .. } => "timeout",
            NetError::Overloaded(_) => "overloaded",
            NetError::NoSuchEndpoint(_) => "no_such_endpoint",
            NetError::Remote { .. } => "remote",
            NetError::Connection(_) | NetError::Connect(_) => "connection",
            NetError::Write(_) | NetError::Read(_) | NetError::ClosedStream(_) => "stream",
            NetError::UnexpectedEnd | NetError::Protocol(_) => "protocol",
            NetError::Encode(_) | NetError::Decode(_) => "codec",
            NetError::Body(_) | NetError::BodyTooLarge(_) => "body",
            _ => "other",
        }
    }
}
