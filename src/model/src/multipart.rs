//! The rows of multipart uploads (the service is [`crate::uploads`]).
//!
//! - `mpu` table: partition = bucket id (32 bytes), sort key = object key ++
//!   NUL ++ upload id (16 bytes): one row per upload in progress, listed in
//!   key order as ListMultipartUploads wants;
//! - `mpu_part` table: partition = upload id (16 bytes), sort key = part
//!   number (u32, big-endian): one row per uploaded part, each part being a
//!   version of its own (with its block list in the version table).

use std::collections::BTreeMap;

use crate::row_format::{
    CHECKSUM_TYPE_ROW_FORMAT, MANAGED_SSE_ROW_FORMAT, SSE_C_ROW_FORMAT, TAGS_CORS_ROW_FORMAT,
};
use hangar_table::{Crdt, ROW_FORMAT, Schema, max_by_content};
use serde::{Deserialize, Serialize};

use crate::VersionId;
use crate::object::{StoredChecksum, TagSet};
use crate::queues::queue_version_gc;
use crate::sse_c::SseC;

/// An upload in progress, or the tombstone of one that was completed or
/// aborted (`deleted`). The derived order is the merge order: the tombstone
/// wins, and upload ids are never reused, so an ended upload stays ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MpuRow {
    #[serde(default)]
    pub deleted: bool,
    #[serde(with = "hangar_util::serde_id16")]
    pub upload_id: VersionId,
    pub key: String,
    pub initiated_msec: u64,
    pub headers: BTreeMap<String, String>,
    pub user_meta: BTreeMap<String, String>,
    /// Checksum algorithm the client announced at creation.
    pub checksum_algorithm: Option<String>,
    /// `x-amz-tagging` of CreateMultipartUpload: the completed object's
    /// tags (row format 3; absent when empty).
    #[serde(default, skip_serializing_if = "TagSet::is_empty")]
    pub tags: TagSet,
    /// SSE-C, SSE-S3 or SSE-KMS of the upload (row format 11, 15 when
    /// managed; absent when not encrypted): its parts are sealed under the
    /// key it checks, and the completed object takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_c: Option<SseC>,
    /// How the completed object's checksum is made of the parts'
    /// (`x-amz-checksum-type` of CreateMultipartUpload: `COMPOSITE`, a
    /// checksum of the parts' checksums, or `FULL_OBJECT`, the checksum of
    /// the whole content): row format 14; absent when the client named none
    /// (the algorithm's default then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
}

impl Crdt for MpuRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of uploads in progress.
pub struct MpuTable;

impl Schema for MpuTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "mpu";
    const PARTITION_LEN: usize = 32;
    type Row = MpuRow;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:mpu");
    const BURIED_TREE: Option<&'static str> = Some("buried:mpu");
    /// A bucket's deletion closes its id to new uploads as it does to new
    /// objects ([`Model::delete_bucket`]), then ends the uploads in
    /// progress.
    const FENCE_TREE: Option<&'static str> = Some("fence:mpu");

    fn is_tombstone(row: &MpuRow) -> bool {
        row.deleted
    }

    fn format_of(row: &MpuRow) -> u8 {
        if row.sse_c.as_ref().is_some_and(|r| r.managed.is_some()) {
            MANAGED_SSE_ROW_FORMAT
        } else if row.checksum_type.is_some() {
            CHECKSUM_TYPE_ROW_FORMAT
        } else if row.sse_c.is_some() {
            SSE_C_ROW_FORMAT
        } else if row.tags.is_empty() {
            ROW_FORMAT
        } else {
            TAGS_CORS_ROW_FORMAT
        }
    }
}

/// One uploaded part. The derived order is the merge order: a tombstone
/// (the upload ended) wins, then the newest part, then the version id and
/// the content break ties.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PartRow {
    #[serde(default)]
    pub deleted: bool,
    /// Taken in the recording transaction, greater than the part replaced.
    pub timestamp_msec: u64,
    /// The part's own version (its block list).
    #[serde(with = "hangar_util::serde_id16")]
    pub version: VersionId,
    pub size: u64,
    /// Hex MD5 of the part.
    pub etag: String,
    pub checksum: Option<StoredChecksum>,
    /// Blocks of the part.
    pub blocks: u32,
}

impl Crdt for PartRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

/// The table of uploaded parts.
pub struct PartTable;

impl Schema for PartTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "mpu_part";
    const PARTITION_LEN: usize = 16;
    type Row = PartRow;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:mpu_part");
    const BURIED_TREE: Option<&'static str> = Some("buried:mpu_part");

    fn is_tombstone(row: &PartRow) -> bool {
        row.deleted
    }

    /// Every part version that is not the live one the merge keeps — the
    /// part replaced, the part that lost, or every part of an ended upload
    /// — is queued for collection.
    fn updated(
        tx: &mut hangar_db::Tx<'_>,
        _partition: &[u8],
        _sort: &[u8],
        old: Option<&PartRow>,
        inserted: &PartRow,
        merged: &PartRow,
    ) -> std::result::Result<(), hangar_db::DbError> {
        for loser in old.into_iter().chain(std::iter::once(inserted)) {
            if loser.version != merged.version || merged.deleted {
                queue_version_gc(tx, &loser.version);
            }
        }
        Ok(())
    }
}

/// The sort key of an upload in the `mpu` table.
pub fn mpu_sort_key(key: &str, upload_id: &VersionId) -> Vec<u8> {
    let mut k = key.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(upload_id);
    k
}

/// What [`crate::Uploads::complete`] needs to know of each part listed.
pub struct CompletedPart {
    pub part_number: u32,
    /// Hex MD5, without quotes.
    pub etag: String,
}

/// What a completion's caller makes of the parts it chose (each listed
/// part's stored row, in order): the completed object's checksum, or why
/// the completion is refused. The model stores what it is given; the
/// algorithms are the API's.
pub type ObjectChecksum<'a> = dyn Fn(&[(u32, PartRow)]) -> std::result::Result<Option<StoredChecksum>, CompleteError>
    + Send
    + Sync
    + 'a;

/// Why a completion was refused (each maps to an S3 error code).
#[derive(Debug)]
pub enum CompleteError {
    /// InvalidPart: a listed part is missing or its ETag differs.
    InvalidPart(u32),
    /// InvalidPartOrder: part numbers not ascending.
    InvalidPartOrder,
    /// EntityTooSmall: a part other than the last is under the minimum.
    EntityTooSmall(u32),
    /// MalformedXML: no parts listed.
    NoParts,
    /// A checksum of the parts or of the object does not hold (the
    /// caller's [`ObjectChecksum`] says which, and its S3 error).
    Checksum(ChecksumRefusal),
    /// InvalidRequest: the parts do not add up to the size the client
    /// announced (`x-amz-mp-object-size`), checked by the caller's
    /// [`ObjectChecksum`] with the parts.
    ObjectSize { announced: i64, parts: u64 },
}

/// Why the checksums of a completion refuse it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecksumRefusal {
    /// InvalidPart: a listed part's checksum is not the stored one.
    PartMismatch(u32),
    /// InvalidRequest: the upload's algorithm needs what is missing.
    Missing(String),
    /// BadDigest: the object's checksum sent is not the one its parts make.
    ObjectMismatch(String),
}

/// Smallest part, except the last, that S3 accepts in a completion.
pub const MIN_PART_SIZE: u64 = 5 << 20;
