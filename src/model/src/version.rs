//! A version's block list: one row per block, so that storing a large object
//! never rewrites a growing list (Garage's single-row list costs O(n²)).

use hangar_table::{Crdt, Schema, max_by_content};
use hangar_util::Hash;
use serde::{Deserialize, Serialize};

/// One block of a version. The derived order is the merge order: a
/// tombstone (`deleted`) wins over the live entry it replaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockEntry {
    /// Set when the version was collected and its reference to the block
    /// dropped; the row stays as a tombstone, with the hash it named.
    #[serde(default)]
    pub deleted: bool,
    pub hash: Hash,
    /// Plain (uncompressed) length of the block.
    pub size: u64,
}

impl Crdt for BlockEntry {
    fn merge(&mut self, other: &Self) {
        // A version's block i never changes once written, except to become
        // a tombstone; the content order settles anything else the same way
        // on every replica.
        max_by_content(self, other);
    }
}

/// The version table: partition = version id (16 bytes), sort key = block
/// index (u32, big-endian, so rows sort in block order).
pub struct VersionTable;

impl Schema for VersionTable {
    const TREE: &'static str = "version";
    const PARTITION_LEN: usize = 16;
    type Row = BlockEntry;

    fn is_tombstone(row: &BlockEntry) -> bool {
        row.deleted
    }
}
