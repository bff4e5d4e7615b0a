//! The bounds an HTTP endpoint (S3, admin) keeps on its connections, so
//! that slow or idle clients cannot take it from everyone else.

use std::time::Duration;

/// Most bytes of a request head (request line and headers) an endpoint
/// reads before answering `431` and closing. Without it hyper's bound is
/// its read buffer, about 400 KiB, which a client holding every permitted
/// connection with a slowly sent head could make the node keep per
/// connection. 96 KiB holds hyper's 64 KiB bound on a URI (past it `414`)
/// and S3's 16 KiB on the header section (past it
/// `RequestHeaderSectionTooLarge` with S3's XML) with room to spare.
pub const MAX_HEAD_BYTES: usize = 96 * 1024;

/// Most header lines of a request. hyper's default is 100, which refused
/// requests S3 serves (a few hundred short headers fit in S3's 16 KiB)
/// with a bare `431`; 1024 lines cost a transient 32 KiB index per parsed
/// head, and any more cannot fit in 16 KiB at S3's usual header sizes.
pub const MAX_HEAD_LINES: usize = 1024;

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

/// The gate in front of an HTTP endpoint's connections: it accepts them,
/// serves at most `max_connections` at once, and answers one more with the
/// endpoint's `refusal` (a whole HTTP response, e.g. `503 SlowDown`) at
/// once, then closes it, rather than leaving it in the backlog, where a
/// flood of idle connections would keep everyone waiting.
pub struct ConnGate {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    refusal: std::sync::Arc<[u8]>,
}

/// An admitted connection and its place among those served; the place is
/// given back when the permit is dropped.
pub type Admitted = (
    tokio::net::TcpStream,
    std::net::SocketAddr,
    tokio::sync::OwnedSemaphorePermit,
);

impl ConnGate {
    /// A gate for `limits.max_connections` (at least 1) that answers
    /// `refusal` past it.
    pub fn new(limits: &ConnLimits, refusal: Vec<u8>) -> Self {
        ConnGate {
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(
                limits.max_connections.max(1),
            )),
            refusal: refusal.into(),
        }
    }

    /// The next connection on `listener` that may be served: accept errors
    /// (e.g. out of file descriptors) are logged and retried after a pause,
    /// connections past the limit are refused in the background and
    /// `on_refused` is called for each.
    pub async fn next(
        &self,
        listener: &tokio::net::TcpListener,
        on_refused: impl Fn(),
    ) -> Admitted {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Small responses must not wait for the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => return (stream, peer, permit),
                Err(_) => {
                    on_refused();
                    let refusal = self.refusal.clone();
                    tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let mut stream = stream;
                        let _ = tokio::time::timeout(Duration::from_secs(1), async {
                            stream.write_all(&refusal).await?;
                            stream.shutdown().await
                        })
                        .await;
                    });
                }
            }
        }
    }
}
