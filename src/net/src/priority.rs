//! How urgent a call is ([`Priority`]), and the priority of body bytes
//! entering a connection's send buffer ([`PriorityGate`]).
//!
//! QUIC stream priorities order the bytes already buffered, but writers that
//! wait for buffer space (the connection's send window and flow credit) are
//! woken without regard to priority: with 16 background bodies queued, a
//! foreground body would get a sixteenth of the link. So, per peer, while a
//! foreground body is being sent, background bodies write only small pieces
//! and wait between them until the foreground one is done (or a short
//! maximum wait passed, so that background traffic never stops entirely).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How urgent a call is. Maps to QUIC stream priorities on both directions of
/// the call's stream, so background transfers (resync, anti-entropy) yield
/// the link to client-facing calls on the same connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Priority {
    /// Bulk work that may wait: resync, anti-entropy, rebalancing.
    Background,
    /// Work a client is waiting for (the default).
    #[default]
    Foreground,
    /// The mesh's own control traffic (ping, peer exchange).
    Control,
}

impl Priority {
    pub(crate) fn wire(self) -> u8 {
        match self {
            Priority::Background => 0,
            Priority::Foreground => 1,
            Priority::Control => 2,
        }
    }

    pub(crate) fn from_wire(b: u8) -> Priority {
        match b {
            0 => Priority::Background,
            2 => Priority::Control,
            _ => Priority::Foreground,
        }
    }

    /// The quinn send-stream priority (higher is sent first).
    pub(crate) fn quic(self) -> i32 {
        match self {
            Priority::Background => 0,
            Priority::Foreground => 10,
            Priority::Control => 20,
        }
    }
}

/// Size of the pieces background bodies are written in.
pub(crate) const BACKGROUND_PIECE: usize = 64 * 1024;
/// Longest a background piece waits for foreground bodies to finish; bounds
/// how much foreground traffic can slow background traffic down.
pub(crate) const BACKGROUND_MAX_WAIT: Duration = Duration::from_millis(50);

/// Per-peer gate between foreground and background body writers.
#[derive(Default)]
pub(crate) struct PriorityGate {
    urgent: AtomicUsize,
    clear: Notify,
}

/// Held while a foreground body is being written.
pub(crate) struct UrgentGuard(Arc<PriorityGate>);

impl PriorityGate {
    /// Marks a foreground body in progress until the guard is dropped.
    pub(crate) fn urgent(self: &Arc<Self>) -> UrgentGuard {
        self.urgent.fetch_add(1, Ordering::SeqCst);
        UrgentGuard(self.clone())
    }

    /// Waits until no foreground body is in progress, or the maximum wait.
    pub(crate) async fn wait_clear(&self) {
        let _ = tokio::time::timeout(BACKGROUND_MAX_WAIT, async {
            loop {
                let notified = self.clear.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.urgent.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

impl Drop for UrgentGuard {
    fn drop(&mut self) {
        if self.0.urgent.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.clear.notify_waiters();
        }
    }
}
