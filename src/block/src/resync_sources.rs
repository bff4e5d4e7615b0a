//! The order in which one block's fetch asks its sources, and when it stops
//! asking: pure, so that the deferral rules are tested without a cluster.
//!
//! A source serving its own clients answers `deferred` to a caller that
//! says it has others (`defer_if_busy`). The rules:
//!
//! - sources that are up are asked in the order given (the fewest of this
//!   worker's fetches first, then the closest), with the option, except
//!   those that deferred within the hold ([`SourceOrder::new`]'s `holding`),
//!   which are asked last and without it;
//! - a source that defers is asked again without the option after every
//!   other source, so that a refill goes on when every source is serving
//!   clients (deferral never starves it), or when the others do not hold the
//!   block or are down;
//! - but not when another source refused the transfer as busy (its bound on
//!   resync transfers served at once is full): that source *is* serving the
//!   refill, at its pace, so the block waits for it rather than taking a
//!   deferring source away from its clients.

use std::collections::{HashSet, VecDeque};

use hangar_util::NodeId;

/// The sources of one fetch still to ask.
#[derive(Debug)]
pub(crate) struct SourceOrder {
    attempts: VecDeque<(NodeId, bool)>,
    /// Sources that deferred, in this fetch or within the hold.
    deferring: HashSet<NodeId>,
    /// Another source refused a transfer as busy in this fetch.
    served_elsewhere: bool,
    /// Deferring sources not asked again because another one serves.
    spared: Vec<NodeId>,
}

impl SourceOrder {
    /// `up`: the sources that are up, in the order to ask them; `holding`:
    /// those that deferred within the hold.
    pub(crate) fn new(up: impl IntoIterator<Item = NodeId>, holding: &HashSet<NodeId>) -> Self {
        let (mut first, mut last) = (VecDeque::new(), VecDeque::new());
        let mut deferring = HashSet::new();
        for node in up {
            if holding.contains(&node) {
                deferring.insert(node);
                last.push_back((node, false));
            } else {
                first.push_back((node, true));
            }
        }
        first.append(&mut last);
        SourceOrder {
            attempts: first,
            deferring,
            served_elsewhere: false,
            spared: Vec::new(),
        }
    }

    /// The next source to ask, and whether to ask it with `defer_if_busy`;
    /// `None` when none is left to ask.
    pub(crate) fn next(&mut self) -> Option<(NodeId, bool)> {
        while let Some((node, defer_if_busy)) = self.attempts.pop_front() {
            if !defer_if_busy && self.deferring.contains(&node) && self.served_elsewhere {
                self.spared.push(node);
                continue;
            }
            return Some((node, defer_if_busy));
        }
        None
    }

    /// `node` deferred: it is asked again, without the option, after the others.
    pub(crate) fn deferred(&mut self, node: NodeId) {
        self.deferring.insert(node);
        self.attempts.push_back((node, false));
    }

    /// `node` was asked with the option by a node too old to decode it:
    /// asked again without, after the others.
    pub(crate) fn retry_plain(&mut self, node: NodeId) {
        self.attempts.push_back((node, false));
    }

    /// A source refused the transfer as busy: it serves this refill already.
    pub(crate) fn busy(&mut self) {
        self.served_elsewhere = true;
    }

    /// The deferring sources left unasked because another source serves
    /// the refill: the block waits for it, which is not a failure.
    pub(crate) fn spared(&self) -> &[NodeId] {
        &self.spared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: u8) -> NodeId {
        NodeId([i; 32])
    }

    fn held(nodes: &[u8]) -> HashSet<NodeId> {
        nodes.iter().map(|&i| n(i)).collect()
    }

    #[test]
    fn every_source_is_asked_with_the_option_first_then_the_deferring_ones_without() {
        let mut o = SourceOrder::new([n(1), n(2)], &held(&[]));
        assert_eq!(o.next(), Some((n(1), true)));
        o.deferred(n(1));
        assert_eq!(o.next(), Some((n(2), true)));
        o.deferred(n(2));
        // Both serve clients: the refill is served anyway, in order.
        assert_eq!(o.next(), Some((n(1), false)));
        assert_eq!(o.next(), Some((n(2), false)));
        assert_eq!(o.next(), None);
        assert!(o.spared().is_empty());
    }

    #[test]
    fn a_source_held_as_deferring_is_asked_last_and_without_the_option() {
        let mut o = SourceOrder::new([n(1), n(2)], &held(&[1]));
        assert_eq!(o.next(), Some((n(2), true)));
        assert_eq!(o.next(), Some((n(1), false)));
        assert_eq!(o.next(), None);
    }

    #[test]
    fn a_deferring_source_serves_when_the_other_lacks_the_block_or_is_the_only_one() {
        // The other source answered "not found" (or failed): ask the
        // deferring one after all.
        let mut o = SourceOrder::new([n(1), n(2)], &held(&[]));
        assert_eq!(o.next(), Some((n(1), true)));
        o.deferred(n(1));
        assert_eq!(o.next(), Some((n(2), true)));
        assert_eq!(o.next(), Some((n(1), false)));
        // The only source up (the other is down: not in `up`).
        let mut o = SourceOrder::new([n(1)], &held(&[1]));
        assert_eq!(o.next(), Some((n(1), false)));
        assert!(o.spared().is_empty());
    }

    #[test]
    fn a_source_busy_serving_the_refill_spares_the_deferring_one() {
        // The failure of CI's run at 02e3c17: node 2's bound on transfers
        // was full, and each block it refused went to node 1, which was
        // serving clients.
        let mut o = SourceOrder::new([n(2), n(1)], &held(&[1]));
        assert_eq!(o.next(), Some((n(2), true)));
        o.busy();
        assert_eq!(o.next(), None);
        assert_eq!(o.spared(), &[n(1)]);
        // The same when node 1 defers in this fetch.
        let mut o = SourceOrder::new([n(1), n(2)], &held(&[]));
        assert_eq!(o.next(), Some((n(1), true)));
        o.deferred(n(1));
        assert_eq!(o.next(), Some((n(2), true)));
        o.busy();
        assert_eq!(o.next(), None);
        assert_eq!(o.spared(), &[n(1)]);
    }

    #[test]
    fn a_busy_source_does_not_spare_a_source_that_never_deferred() {
        let mut o = SourceOrder::new([n(1), n(2)], &held(&[]));
        assert_eq!(o.next(), Some((n(1), true)));
        o.busy();
        assert_eq!(o.next(), Some((n(2), true)));
        assert_eq!(o.next(), None);
        assert!(o.spared().is_empty());
    }

    #[test]
    fn an_old_source_is_asked_again_without_the_option() {
        let mut o = SourceOrder::new([n(1)], &held(&[]));
        assert_eq!(o.next(), Some((n(1), true)));
        o.retry_plain(n(1));
        assert_eq!(o.next(), Some((n(1), false)));
        assert_eq!(o.next(), None);
    }
}
