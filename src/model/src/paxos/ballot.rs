//! Ballots: the totally ordered numbers of Paxos rounds, and the clock a
//! node draws them from.

use std::sync::atomic::{AtomicU64, Ordering};

use hangar_util::NodeId;
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};

/// A round's number: compared by `counter` (milliseconds since the epoch,
/// or one past the highest counter the proposer has seen), then by the
/// proposing node's id, so two nodes never draw the same ballot.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Ballot {
    pub counter: u64,
    pub node: NodeId,
}

impl Ballot {
    /// The ballot below every real one (no promise yet).
    pub const ZERO: Ballot = Ballot {
        counter: 0,
        node: NodeId([0; 32]),
    };
}

impl std::fmt::Display for Ballot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.counter, self.node.short())
    }
}

/// Where one node draws its ballots from: strictly increasing, at least
/// its clock, and past every ballot it has seen refused in its favour of
/// another (so a proposer whose clock is behind catches up in one retry).
/// One counter for the whole node: no state per key.
#[derive(Debug, Default)]
pub struct BallotClock {
    last: AtomicU64,
}

impl BallotClock {
    pub fn new() -> BallotClock {
        BallotClock::default()
    }

    /// The next ballot of node `me`.
    pub fn next(&self, me: NodeId) -> Ballot {
        let now = now_msec();
        let mut cur = self.last.load(Ordering::Relaxed);
        loop {
            let next = now.max(cur.saturating_add(1));
            match self
                .last
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Ballot {
                        counter: next,
                        node: me,
                    };
                }
                Err(c) => cur = c,
            }
        }
    }

    /// Records a ballot seen in a refusal: the next one drawn is above it.
    pub fn observe(&self, b: Ballot) {
        self.last.fetch_max(b.counter, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballots_increase_and_pass_what_was_seen() {
        let c = BallotClock::new();
        let me = NodeId([1; 32]);
        let a = c.next(me);
        let b = c.next(me);
        assert!(b > a);
        let far = Ballot {
            counter: a.counter + 1_000_000,
            node: NodeId([9; 32]),
        };
        c.observe(far);
        let n = c.next(me);
        assert!(n.counter > far.counter);
        // Same counter: the node id decides.
        let x = Ballot {
            counter: 5,
            node: NodeId([1; 32]),
        };
        let y = Ballot {
            counter: 5,
            node: NodeId([2; 32]),
        };
        assert!(x < y && Ballot::ZERO < x);
    }
}
