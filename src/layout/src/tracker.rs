//! Per-node progress through layout versions (ack, sync, sync-ack), merged
//! by taking each node's maximum.

use std::collections::BTreeMap;

use hangar_util::Hash;
use serde::{Deserialize, Serialize};

use crate::node::NodeId;

/// For each node, the latest version it reported, with the content hash of
/// that version as the node knew it. A report for content that lost a
/// version conflict counts only for the version before (see
/// `LayoutHistory::effective`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tracker(pub BTreeMap<NodeId, (u64, Hash)>);

impl Tracker {
    /// Raises `node`'s entry to `(version, hash)` if that is later.
    pub fn set(&mut self, node: NodeId, version: u64, hash: Hash) {
        let entry = (version, hash);
        match self.0.get(&node) {
            Some(have) if *have >= entry => {}
            _ => {
                self.0.insert(node, entry);
            }
        }
    }

    /// The join: per node, the larger (version, hash).
    pub fn merge(&mut self, other: &Tracker) {
        for (node, &(v, h)) in &other.0 {
            self.set(*node, v, h);
        }
    }
}
