//! Staged changes: role assignments and parameter changes waiting for
//! `layout apply`, kept as last-writer-wins registers so that changes made
//! on different nodes merge without a leader.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::node::NodeId;
use crate::role::{LayoutParameters, NodeRole};

/// A write's timestamp: wall-clock milliseconds, ties broken by the writing
/// node's id, so two writes never compare equal unless they are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Stamp {
    pub msec: u64,
    pub node: NodeId,
}

/// The staged changes since the current version.
///
/// A lattice: `cleared` is the stamp of the last apply or revert, and every
/// entry written at or before it is gone. `merge` keeps, per node, the entry
/// with the largest (stamp, value), and the later `cleared`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Staging {
    pub cleared: Stamp,
    /// Per node: `Some(role)` to assign, `None` to remove the node's role.
    pub roles: BTreeMap<NodeId, (Stamp, Option<NodeRole>)>,
    pub parameters: Option<(Stamp, LayoutParameters)>,
}

impl Staging {
    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.parameters.is_none()
    }

    /// The latest stamp this staging has seen (entries and `cleared`).
    pub fn max_stamp(&self) -> Stamp {
        self.roles
            .values()
            .map(|(s, _)| *s)
            .chain(self.parameters.as_ref().map(|(s, _)| *s))
            .fold(self.cleared, Stamp::max)
    }

    /// A stamp for a new write by `node` at `now_msec`, later than every
    /// stamp seen here even if the wall clock went backwards.
    pub fn next_stamp(&self, node: NodeId, now_msec: u64) -> Stamp {
        Stamp {
            msec: now_msec.max(self.max_stamp().msec + 1),
            node,
        }
    }

    /// Stages `role` for `node` (`None`: remove its role).
    pub fn set_role(&mut self, stamp: Stamp, node: NodeId, role: Option<NodeRole>) {
        self.merge_role(node, (stamp, role));
    }

    /// Stages new layout parameters.
    pub fn set_parameters(&mut self, stamp: Stamp, parameters: LayoutParameters) {
        self.merge_parameters((stamp, parameters));
    }

    /// Drops every staged change written at or before `stamp`.
    pub fn clear(&mut self, stamp: Stamp) {
        self.cleared = self.cleared.max(stamp);
        self.drop_cleared();
    }

    /// The join of two stagings (commutative, associative, idempotent).
    pub fn merge(&mut self, other: &Staging) {
        self.cleared = self.cleared.max(other.cleared);
        for (node, entry) in &other.roles {
            self.merge_role(*node, entry.clone());
        }
        if let Some(p) = other.parameters {
            self.merge_parameters(p);
        }
        self.drop_cleared();
    }

    fn merge_role(&mut self, node: NodeId, entry: (Stamp, Option<NodeRole>)) {
        if entry.0 <= self.cleared {
            return;
        }
        match self.roles.get(&node) {
            Some(have) if *have >= entry => {}
            _ => {
                self.roles.insert(node, entry);
            }
        }
    }

    fn merge_parameters(&mut self, entry: (Stamp, LayoutParameters)) {
        if entry.0 > self.cleared && self.parameters.is_none_or(|have| have < entry) {
            self.parameters = Some(entry);
        }
    }

    fn drop_cleared(&mut self) {
        let cleared = self.cleared;
        self.roles.retain(|_, (s, _)| *s > cleared);
        if self.parameters.is_some_and(|(s, _)| s <= cleared) {
            self.parameters = None;
        }
    }
}
