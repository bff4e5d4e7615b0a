//! One numbered layout version: the roles it was computed from and the
//! partition → nodes assignment, with the look-ups the rest of the system
//! needs (nodes of a partition, of a hash, partitions of a node).

use std::collections::{BTreeMap, BTreeSet};

use hangar_util::Hash;
use serde::{Deserialize, Serialize};

use crate::error::LayoutError;
use crate::node::NodeId;
use crate::role::{LayoutParameters, NodeRole};

/// The key space is cut into this many partitions.
pub const PARTITION_COUNT: usize = 256;

/// A partition number: the first byte of a hash.
pub type Partition = u8;

/// The partition a hash (a block hash, or a table row's partition-key hash)
/// belongs to: its first byte.
pub fn partition_of(hash: &Hash) -> Partition {
    hash.0[0]
}

/// A layout version: who has which role, and which `replication_factor`
/// storage nodes hold each of the [`PARTITION_COUNT`] partitions.
///
/// Version 0 is the empty layout every cluster starts from (no roles, no
/// assignment); versions 1, 2, … are made by `LayoutHistory::apply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutVersion {
    pub version: u64,
    pub replication_factor: usize,
    pub parameters: LayoutParameters,
    /// Every node with a role, storage or gateway.
    pub roles: BTreeMap<NodeId, NodeRole>,
    /// The storage nodes, sorted by id; `assignment` refers to them by index.
    pub node_ids: Vec<NodeId>,
    /// Bytes of capacity each partition replica is given: the usable
    /// capacity of a node is `partition_size × its partition count`.
    pub partition_size: u64,
    /// `replication_factor` indices into `node_ids` per partition, partition
    /// after partition, each partition's indices ascending. Empty when the
    /// version has no storage nodes (version 0).
    pub assignment: Vec<u16>,
}

impl LayoutVersion {
    /// The empty version 0.
    pub fn initial(replication_factor: usize) -> Self {
        LayoutVersion {
            version: 0,
            replication_factor,
            parameters: LayoutParameters::default(),
            roles: BTreeMap::new(),
            node_ids: Vec::new(),
            partition_size: 0,
            assignment: Vec::new(),
        }
    }

    /// A blake3 hash of the version's whole content (its MessagePack
    /// encoding). Two versions with the same number and different content
    /// are told apart by it.
    pub fn content_hash(&self) -> Hash {
        Hash::of(&rmp_serde::to_vec_named(self).expect("a layout version always encodes"))
    }

    /// True when partitions have been assigned (false for version 0).
    pub fn is_assigned(&self) -> bool {
        !self.assignment.is_empty()
    }

    /// The storage nodes holding partition `p` (empty if unassigned).
    pub fn nodes_of_partition(&self, p: Partition) -> Vec<NodeId> {
        let rf = self.replication_factor;
        if !self.is_assigned() {
            return Vec::new();
        }
        let at = p as usize * rf;
        self.assignment[at..at + rf]
            .iter()
            .map(|&i| self.node_ids[i as usize])
            .collect()
    }

    /// The storage nodes holding the partition of `hash`.
    pub fn nodes_of_hash(&self, hash: &Hash) -> Vec<NodeId> {
        self.nodes_of_partition(partition_of(hash))
    }

    /// The partitions `node` holds, ascending.
    pub fn partitions_of_node(&self, node: NodeId) -> Vec<Partition> {
        (0..PARTITION_COUNT)
            .map(|p| p as Partition)
            .filter(|&p| self.nodes_of_partition(p).contains(&node))
            .collect()
    }

    /// Every (partition, node) pair of the assignment.
    pub fn replicas(&self) -> BTreeSet<(Partition, NodeId)> {
        (0..PARTITION_COUNT)
            .flat_map(|p| {
                self.nodes_of_partition(p as Partition)
                    .into_iter()
                    .map(move |n| (p as Partition, n))
            })
            .collect()
    }

    /// How many partitions each storage node holds.
    pub fn partition_counts(&self) -> BTreeMap<NodeId, usize> {
        let mut counts: BTreeMap<NodeId, usize> = self.node_ids.iter().map(|&n| (n, 0)).collect();
        for &i in &self.assignment {
            *counts.entry(self.node_ids[i as usize]).or_default() += 1;
        }
        counts
    }

    /// Partition replicas this version places on a node that did not hold
    /// that partition in `prev`: the amount of data movement, in partitions.
    pub fn moves_from(&self, prev: &LayoutVersion) -> usize {
        let old = prev.replicas();
        self.replicas().difference(&old).count()
    }

    /// Usable capacity (partition size × partitions held) per zone.
    pub fn usable_capacity_per_zone(&self) -> BTreeMap<String, u64> {
        let mut zones: BTreeMap<String, u64> = BTreeMap::new();
        for (node, count) in self.partition_counts() {
            if let Some(role) = self.roles.get(&node) {
                *zones.entry(role.zone.clone()).or_default() += self.partition_size * count as u64;
            }
        }
        zones
    }

    /// Checks what a decoder cannot: the assignment has the right length,
    /// refers to storage nodes that have a role, and gives each partition
    /// distinct nodes.
    pub fn check(&self) -> Result<(), LayoutError> {
        let bad = |m: String| Err(LayoutError::Encoding(m));
        if self.assignment.is_empty() {
            return Ok(());
        }
        if self.assignment.len() != PARTITION_COUNT * self.replication_factor {
            return bad(format!(
                "version {}: assignment has {} entries, expected {}",
                self.version,
                self.assignment.len(),
                PARTITION_COUNT * self.replication_factor
            ));
        }
        let storage: Vec<NodeId> = self
            .roles
            .iter()
            .filter(|(_, r)| !r.is_gateway())
            .map(|(n, _)| *n)
            .collect();
        if storage != self.node_ids {
            return bad(format!(
                "version {}: node_ids are not exactly the storage nodes",
                self.version
            ));
        }
        for n in &self.node_ids {
            if self.roles.get(n).is_none_or(|r| r.is_gateway()) {
                return bad(format!(
                    "version {}: node {n} is assigned but not a storage node",
                    self.version
                ));
            }
        }
        for chunk in self.assignment.chunks(self.replication_factor) {
            if chunk.iter().any(|&i| i as usize >= self.node_ids.len())
                || chunk.windows(2).any(|w| w[0] >= w[1])
            {
                return bad(format!(
                    "version {}: a partition's node list is invalid",
                    self.version
                ));
            }
        }
        Ok(())
    }
}
