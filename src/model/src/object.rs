//! Objects: the current, complete version of each key of a bucket.
//!
//! A row only ever describes a complete upload: an object becomes visible
//! when its row is written, after all its blocks are stored and referenced.
//! A deleted object is a tombstone row ([`ObjectData::Deleted`]), newer than
//! the row it deletes, so that a replica that missed the delete cannot bring
//! the object back.

use std::collections::BTreeMap;

use hangar_db::{DbError, Tx};
use hangar_table::{Crdt, Schema, max_by_content};
use serde::{Deserialize, Serialize};

use crate::VersionId;
use crate::queues::queue_version_gc;

/// Where an object's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjectData {
    /// The object was deleted: this row is its tombstone.
    Deleted,
    /// Small objects: the bytes themselves.
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Larger objects: `count` blocks, listed in the version table.
    Blocks { count: u32 },
}

/// A checksum the client asked for at upload, returned on request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StoredChecksum {
    /// `CRC32`, `CRC32C`, `CRC64NVME`, `SHA1` or `SHA256`.
    pub algorithm: String,
    /// Base64, as S3 transmits it.
    pub value: String,
}

/// The metadata and data location of one object version. The derived order
/// (timestamp first, then version id, then the rest) is the merge order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRow {
    /// Publication time, ms since the epoch; S3's LastModified. Taken in the
    /// publishing transaction, strictly greater than the row it replaces.
    pub timestamp_msec: u64,
    #[serde(with = "hangar_util::serde_id16")]
    pub version: VersionId,
    pub size: u64,
    /// Hex MD5 of the content, without quotes.
    pub etag: String,
    /// System headers (content-type, cache-control, …), lower-case names.
    pub headers: BTreeMap<String, String>,
    /// `x-amz-meta-*` values, by the suffix after `x-amz-meta-`.
    pub user_meta: BTreeMap<String, String>,
    pub checksum: Option<StoredChecksum>,
    pub data: ObjectData,
}

impl Crdt for ObjectRow {
    fn merge(&mut self, other: &Self) {
        // Newest publication wins; the version id, then the content, break
        // ties identically everywhere.
        max_by_content(self, other);
    }
}

impl ObjectRow {
    /// The tombstone that deletes an object: newer than `now` and than the
    /// row it replaces.
    pub fn tombstone(version: VersionId, timestamp_msec: u64) -> ObjectRow {
        ObjectRow {
            timestamp_msec,
            version,
            size: 0,
            etag: String::new(),
            headers: BTreeMap::new(),
            user_meta: BTreeMap::new(),
            checksum: None,
            data: ObjectData::Deleted,
        }
    }

    pub fn is_deleted(&self) -> bool {
        self.data == ObjectData::Deleted
    }

    /// Whether this row's version has block rows to collect when it loses.
    pub fn has_blocks(&self) -> bool {
        matches!(self.data, ObjectData::Blocks { .. })
    }
}

/// The object table: partition = bucket id (32 bytes), sort key = object key.
pub struct ObjectTable;

impl Schema for ObjectTable {
    const TREE: &'static str = "object";
    const PARTITION_LEN: usize = 32;
    type Row = ObjectRow;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:object");

    fn is_tombstone(row: &ObjectRow) -> bool {
        row.is_deleted()
    }

    /// Every version that is not the one the merge keeps — the one replaced,
    /// or the one inserted if it lost — is queued for collection.
    fn updated(
        tx: &mut Tx<'_>,
        _partition: &[u8],
        _sort: &[u8],
        old: Option<&ObjectRow>,
        inserted: &ObjectRow,
        merged: &ObjectRow,
    ) -> Result<(), DbError> {
        for loser in old.into_iter().chain(std::iter::once(inserted)) {
            if loser.version != merged.version && loser.has_blocks() {
                queue_version_gc(tx, &loser.version);
            }
        }
        Ok(())
    }
}
