//! Copies of a block put still running after the put's write quorum answered.
//!
//! A put returns once the write quorum of its replicas stored the block; the
//! other copies finish in the background, holding their share of the RAM
//! budget until they end. A replica that is up (it answers pings) but whose
//! disk stalls would hold those shares for the whole RPC timeout, and its
//! handler queue admits as many copies as *its* budget allows, so the
//! sender's budget could be spent on copies that never finish and uploads
//! through healthy nodes be refused with `503 SlowDown`.
//!
//! [`Stragglers`] bounds that: a copy that is still running when its put
//! reaches the quorum is admitted as a straggler only while the bytes of its
//! node's stragglers stay under a cap (a quarter of the budget), and then
//! runs at most [`STRAGGLER_DEADLINE`] more. A copy refused or past the
//! deadline is abandoned — its RPC dropped, its budget share released — and
//! the replica gets the block from its resync queue instead: it holds (or
//! gets by anti-entropy) the block's reference row, whose hook queues the
//! block for resync.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_util::NodeId;

/// How long a copy may run on after its put reached the write quorum.
pub const STRAGGLER_DEADLINE: Duration = Duration::from_secs(30);

/// The bytes of straggling copies per node, under a cap.
pub(crate) struct Stragglers {
    per_node: Mutex<HashMap<NodeId, u64>>,
    cap: u64,
    deadline: Duration,
}

/// A straggling copy admitted; its bytes count until it is dropped.
pub(crate) struct Admitted {
    stragglers: Arc<Stragglers>,
    node: NodeId,
    len: u64,
}

impl Stragglers {
    /// At most `cap` bytes of stragglers per node, each running at most
    /// `deadline` after its quorum.
    pub(crate) fn new(cap: u64, deadline: Duration) -> Arc<Stragglers> {
        Arc::new(Stragglers {
            per_node: Mutex::new(HashMap::new()),
            cap,
            deadline,
        })
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Admits a copy of `len` bytes to `node` as a straggler, or None when
    /// that node's stragglers already hold their cap.
    pub(crate) fn admit(self: &Arc<Self>, node: NodeId, len: u64) -> Option<Admitted> {
        let mut m = self.per_node.lock().unwrap_or_else(|p| p.into_inner());
        let held = m.entry(node).or_insert(0);
        if *held + len > self.cap {
            return None;
        }
        *held += len;
        Some(Admitted {
            stragglers: self.clone(),
            node,
            len,
        })
    }

    #[cfg(test)]
    fn held(&self, node: NodeId) -> u64 {
        let m = self.per_node.lock().unwrap();
        m.get(&node).copied().unwrap_or(0)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut m = self
            .stragglers
            .per_node
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(held) = m.get_mut(&self.node) {
            *held = held.saturating_sub(self.len);
            if *held == 0 {
                m.remove(&self.node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_holds_at_most_its_cap_and_dropping_frees_it() {
        let s = Stragglers::new(10, STRAGGLER_DEADLINE);
        let (a, b) = (NodeId([1; 32]), NodeId([2; 32]));
        let first = s.admit(a, 6).unwrap();
        assert!(s.admit(a, 6).is_none(), "over a's cap");
        let other = s.admit(b, 6).unwrap();
        let second = s.admit(a, 4).unwrap();
        assert_eq!(s.held(a), 10);
        drop(first);
        assert_eq!(s.held(a), 4);
        assert!(s.admit(a, 6).is_some());
        drop((second, other));
        assert_eq!((s.held(a), s.held(b)), (0, 0));
        assert!(s.per_node.lock().unwrap().is_empty());
    }
}
