//! Objects: the current, complete version of each key of a bucket.
//!
//! A row only ever describes a complete upload: an object becomes visible
//! when its row is written, after all its blocks are stored and referenced.
//! A deleted object is a tombstone row ([`ObjectData::Deleted`]), newer than
//! the row it deletes, so that a replica that missed the delete cannot bring
//! the object back. An object's tags are a register of its version: they
//! change without a new version (S3's PutObjectTagging keeps LastModified).

use std::collections::BTreeMap;

use crate::row_format::{
    ACCESS_ROW_FORMAT, GRANTS_ROW_FORMAT, MANAGED_SSE_ROW_FORMAT, OBJECT_LOCK_ROW_FORMAT,
    SSE_C_ROW_FORMAT, TAGS_CORS_ROW_FORMAT, VERSIONING_ROW_FORMAT,
};
use hangar_db::{DbError, Tx};
use hangar_table::{Crdt, Lww, ROW_FORMAT, Schema};
use serde::{Deserialize, Serialize};

use crate::VersionId;
use crate::access::{AclGrant, CannedAcl};
use crate::queues::queue_version_gc;
use crate::retention::Retention;
use crate::sse_c::SseC;

/// Where an object's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjectData {
    /// The object was deleted: this row is its tombstone.
    Deleted,
    /// Small objects: the bytes themselves.
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Larger objects: `count` blocks, listed in the version table.
    Blocks { count: u32 },
    /// A delete marker of a versioned bucket (row format 4): a version of
    /// its own, listed and deleted like one, that reads as "no object".
    /// Unlike [`ObjectData::Deleted`] it is not a tombstone: it stays until
    /// it is deleted by its version id.
    DeleteMarker,
}

/// A checksum the client asked for at upload, returned on request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StoredChecksum {
    /// `CRC32`, `CRC32C`, `CRC64NVME`, `SHA1` or `SHA256`.
    pub algorithm: String,
    /// Base64, as S3 transmits it.
    pub value: String,
}

/// Tags of an object or a bucket: key → value (keys are unique in S3).
pub type TagSet = BTreeMap<String, String>;

/// The metadata and data location of one object version. The version
/// (every field but `tags`, `retention` and `legal_hold`) is one register: the greater of (timestamp,
/// version id, then the rest) wins. `tags` is the version's own register,
/// merged when both rows are the same version and dropped with the row that
/// loses otherwise (tags set on a version replaced meanwhile do not move to
/// the new one). `retention` and `legal_hold` are registers the same way.
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
    /// The version's tags (`x-amz-tagging`, PutObjectTagging): row format
    /// 3; absent when never set. Given at upload they have timestamp 0.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub tags: Lww<TagSet>,
    /// The version's Object Lock retention (`x-amz-object-lock-mode` and
    /// `-retain-until-date`, PutObjectRetention): row format 8; absent
    /// when never set. Given at upload it has timestamp 0.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub retention: Lww<Option<Retention>>,
    /// The version's legal hold (`x-amz-object-lock-legal-hold`,
    /// PutObjectLegalHold): row format 8; absent when never set.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub legal_hold: Lww<bool>,
    /// SSE-C (row format 11; absent when the version is not encrypted):
    /// the algorithm and the salted check of the customer's key; the data
    /// (blocks and inline bytes) is sealed under that key
    /// ([`crate::sse_c`]). SSE-S3 and SSE-KMS too, the record naming the
    /// managed key its data key derives from (row format 15,
    /// [`crate::sse_managed`]). Part of the version register.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_c: Option<SseC>,
    /// The version's canned ACL (`x-amz-acl` of its upload or copy,
    /// PutObjectAcl): row format 10; absent when never set (`private`).
    /// Given at upload it has timestamp 0; `private` at upload is not
    /// stored. A register of the version like `tags`.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub acl: Lww<Option<CannedAcl>>,
    /// The version's ACL grants beyond its canned ACL (to users, and to
    /// groups where no canned ACL says them)
    /// (`x-amz-grant-*` of its upload or copy, PutObjectAcl): row format
    /// 19; absent when never set. Changed with `acl`, at the same time.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub grants: Lww<Vec<AclGrant>>,
}

impl Crdt for ObjectRow {
    fn merge(&mut self, other: &Self) {
        // Newest publication wins; the version id, then the content, break
        // ties identically everywhere. The same version: newest tags win.
        match self.version_register().cmp(&other.version_register()) {
            std::cmp::Ordering::Less => *self = other.clone(),
            std::cmp::Ordering::Greater => {}
            std::cmp::Ordering::Equal => {
                self.tags.merge(&other.tags);
                self.retention.merge(&other.retention);
                self.legal_hold.merge(&other.legal_hold);
                self.acl.merge(&other.acl);
                self.grants.merge(&other.grants);
            }
        }
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
            tags: Lww::default(),
            retention: Lww::default(),
            legal_hold: Lww::default(),
            sse_c: None,
            acl: Lww::default(),
            grants: Lww::default(),
        }
    }

    /// What this row adds to its bucket's usage counters ([`crate::usage`]):
    /// one object and its bytes when it holds data (inline or blocks),
    /// nothing for a delete marker or a tombstone.
    pub fn usage(&self) -> crate::usage::Usage {
        match self.data {
            ObjectData::Inline(_) | ObjectData::Blocks { .. } => crate::usage::Usage {
                objects: 1,
                bytes: self.size,
            },
            ObjectData::Deleted | ObjectData::DeleteMarker => crate::usage::Usage::default(),
        }
    }

    /// The version's canned ACL (`private` when never set).
    pub fn acl(&self) -> CannedAcl {
        self.acl.value.unwrap_or_default()
    }

    /// The S3 events (bucket notifications, [`crate::notification`]) that
    /// the change of this row from `old` is:
    /// a new version (or its removal) when the version changed, else changes
    /// of its tags and ACL. With the time each happened.
    pub fn events_since(&self, old: Option<&ObjectRow>) -> Vec<(&'static str, u64)> {
        let merged = self;
        let mut out = Vec::new();
        match old {
            Some(o) if o.same_version(merged) => {
                if o.tags != merged.tags {
                    let name = if merged.tag_set().is_empty() {
                        "s3:ObjectTagging:Delete"
                    } else {
                        "s3:ObjectTagging:Put"
                    };
                    out.push((name, merged.tags.ts));
                }
                if o.acl != merged.acl || o.grants != merged.grants {
                    out.push(("s3:ObjectAcl:Put", merged.acl.ts.max(merged.grants.ts)));
                }
            }
            // Each DELETE's tombstone is its event, the key's object gone or
            // not (as S3 sends one for each DELETE of a key).
            _ if merged.is_deleted() => {
                out.push(("s3:ObjectRemoved:Delete", merged.timestamp_msec));
            }
            _ if merged.is_delete_marker() => {
                out.push((
                    "s3:ObjectRemoved:DeleteMarkerCreated",
                    merged.timestamp_msec,
                ));
            }
            _ => {
                // A multipart object's ETag is `<md5 of the parts' md5s>-<n>`.
                let name = if merged.etag.contains('-') {
                    "s3:ObjectCreated:CompleteMultipartUpload"
                } else {
                    "s3:ObjectCreated:Put"
                };
                out.push((name, merged.timestamp_msec));
            }
        }
        out
    }

    /// Whether `other` is the same version (every field of the version
    /// register equal): then only its tags, retention, legal hold or ACL
    /// may differ.
    pub fn same_version(&self, other: &ObjectRow) -> bool {
        self.version_register() == other.version_register()
    }

    /// Every field but the tags, retention, legal hold and ACL, in merge order.
    #[allow(clippy::type_complexity)]
    fn version_register(
        &self,
    ) -> (
        u64,
        &VersionId,
        u64,
        &str,
        &BTreeMap<String, String>,
        &BTreeMap<String, String>,
        &Option<StoredChecksum>,
        &ObjectData,
        &Option<SseC>,
    ) {
        (
            self.timestamp_msec,
            &self.version,
            self.size,
            &self.etag,
            &self.headers,
            &self.user_meta,
            &self.checksum,
            &self.data,
            &self.sse_c,
        )
    }

    /// The version's retention, if any.
    pub fn retention(&self) -> Option<Retention> {
        self.retention.value
    }

    /// Whether the version is under a legal hold.
    pub fn legal_hold(&self) -> bool {
        self.legal_hold.value
    }

    /// The version's tags.
    pub fn tag_set(&self) -> &TagSet {
        &self.tags.value
    }

    /// Whether this row is a tombstone (the version was removed).
    pub fn is_deleted(&self) -> bool {
        self.data == ObjectData::Deleted
    }

    /// Whether this row is a delete marker.
    pub fn is_delete_marker(&self) -> bool {
        self.data == ObjectData::DeleteMarker
    }

    /// A delete marker: a version without content.
    pub fn delete_marker(version: VersionId, timestamp_msec: u64) -> ObjectRow {
        ObjectRow {
            data: ObjectData::DeleteMarker,
            ..ObjectRow::tombstone(version, timestamp_msec)
        }
    }

    /// Whether this row's version has block rows to collect when it loses.
    pub fn has_blocks(&self) -> bool {
        matches!(self.data, ObjectData::Blocks { .. })
    }
}

/// The object table: partition = bucket id (32 bytes), sort key = object
/// key (the `null` version), or object key ++ 0x00 ++ (u64::MAX − timestamp)
/// BE ++ version id for the versions of a versioned bucket
/// ([`crate::version_keys`]).
pub struct ObjectTable;

impl Schema for ObjectTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "object";
    const PARTITION_LEN: usize = 32;
    type Row = ObjectRow;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:object");
    const BURIED_TREE: Option<&'static str> = Some("buried:object");
    // A bucket's deletion closes its id to new objects (Model::delete_bucket).
    const FENCE_TREE: Option<&'static str> = Some("fence:object");

    fn is_tombstone(row: &ObjectRow) -> bool {
        row.is_deleted()
    }

    fn format_of(row: &ObjectRow) -> u8 {
        if !row.grants.is_unset() {
            GRANTS_ROW_FORMAT
        } else if row.sse_c.as_ref().is_some_and(|r| r.managed.is_some()) {
            MANAGED_SSE_ROW_FORMAT
        } else if row.sse_c.is_some() {
            SSE_C_ROW_FORMAT
        } else if !row.acl.is_unset() {
            ACCESS_ROW_FORMAT
        } else if !row.retention.is_unset() || !row.legal_hold.is_unset() {
            OBJECT_LOCK_ROW_FORMAT
        } else if row.is_delete_marker() {
            VERSIONING_ROW_FORMAT
        } else if row.tags.is_unset() {
            ROW_FORMAT
        } else {
            TAGS_CORS_ROW_FORMAT
        }
    }

    /// Every version that is not the one the merge keeps — the one replaced,
    /// or the one inserted if it lost — is queued for collection; the
    /// bucket's usage counters take the difference ([`crate::usage`]); the
    /// change's events that the bucket's notification rules select are
    /// queued ([`crate::notification`]).
    fn updated(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        old: Option<&ObjectRow>,
        inserted: &ObjectRow,
        merged: &ObjectRow,
    ) -> Result<(), DbError> {
        for loser in old.into_iter().chain(std::iter::once(inserted)) {
            if loser.version != merged.version && loser.has_blocks() {
                queue_version_gc(tx, &loser.version);
            }
        }
        if old != Some(merged) {
            let change = crate::notification::Change {
                bucket_id: partition,
                sort,
                version: &merged.version,
                size: merged.size,
                etag: &merged.etag,
            };
            crate::notification::tx_queue_events(tx, &change, || merged.events_since(old))?;
        }
        crate::usage::tx_change(
            tx,
            partition,
            old.map(ObjectRow::usage).unwrap_or_default(),
            merged.usage(),
        )
    }

    /// The row leaves the bucket's usage counters of this node with it.
    fn dropped(
        tx: &mut Tx<'_>,
        partition: &[u8],
        _sort: &[u8],
        row: &ObjectRow,
    ) -> Result<(), DbError> {
        crate::usage::tx_change(tx, partition, row.usage(), crate::usage::Usage::default())
    }
}
