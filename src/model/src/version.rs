//! A version's block list: one row per block, so that storing a large object
//! never rewrites a growing list (Garage's single-row list costs O(n²)).

use hangar_table::{Crdt, Schema};
use hangar_util::Hash;
use serde::{Deserialize, Serialize};

/// One block of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockEntry {
    pub hash: Hash,
    /// Plain (uncompressed) length of the block.
    pub size: u64,
}

impl Crdt for BlockEntry {
    fn merge(&mut self, _other: &Self) {
        // A version's block i never changes once written.
    }
}

/// The version table: partition = version id (16 bytes), sort key = block
/// index (u32, big-endian, so rows sort in block order).
pub struct VersionTable;

impl Schema for VersionTable {
    const TREE: &'static str = "version";
    const PARTITION_LEN: usize = 16;
    type Row = BlockEntry;
}
