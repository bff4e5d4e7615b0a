//! Objects: the current, complete version of each key of a bucket.
//!
//! A row only ever describes a complete upload: an object becomes visible
//! when its row is written, after all its blocks are stored and referenced.

use std::collections::BTreeMap;

use hangar_table::{Crdt, Schema};
use serde::{Deserialize, Serialize};

use crate::VersionId;

/// Where an object's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ObjectData {
    /// Small objects: the bytes themselves.
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Larger objects: `count` blocks, listed in the version table.
    Blocks { count: u32 },
}

/// A checksum the client asked for at upload, returned on request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredChecksum {
    /// `CRC32`, `CRC32C`, `CRC64NVME`, `SHA1` or `SHA256`.
    pub algorithm: String,
    /// Base64, as S3 transmits it.
    pub value: String,
}

/// The metadata and data location of one object version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectRow {
    #[serde(with = "hangar_util::serde_id16")]
    pub version: VersionId,
    /// Upload time, ms since the epoch; S3's LastModified.
    pub timestamp_msec: u64,
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
        // Newest upload wins; the version id breaks ties identically everywhere.
        if (other.timestamp_msec, other.version) > (self.timestamp_msec, self.version) {
            *self = other.clone();
        }
    }
}

/// The object table: partition = bucket id (32 bytes), sort key = object key.
pub struct ObjectTable;

impl Schema for ObjectTable {
    const TREE: &'static str = "object";
    const PARTITION_LEN: usize = 32;
    type Row = ObjectRow;
}
