//! Buckets, by name, with their configuration: tags and CORS rules.

use hangar_table::{Crdt, Lww, NEWEST_ROW_FORMAT, ROW_FORMAT, Schema, VERSIONING_ROW_FORMAT};
use serde::{Deserialize, Serialize};

use crate::ModelError;
use crate::object::TagSet;

/// One bucket. The bucket itself (`updated_msec` … `created_msec`) is one
/// last-writer-wins register: the greater of (last change, then deleted
/// over live, then the content) wins, so a delete and a re-creation at the
/// same millisecond resolve the same way everywhere. Its configuration
/// registers (`tags`, `cors`) belong to that bucket: merged register by
/// register when both rows are the same bucket, dropped with the row that
/// loses otherwise (a re-created bucket starts without configuration). A
/// deleted bucket keeps its row as a tombstone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketRow {
    pub updated_msec: u64,
    pub deleted: bool,
    /// 32 random bytes, hex; the partition key of the bucket's objects, so
    /// that a deleted and re-created bucket starts empty.
    pub id: String,
    pub name: String,
    pub created_msec: u64,
    /// Put/DeleteBucketTagging (row format 3; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub tags: Lww<TagSet>,
    /// Put/DeleteBucketCors: the rules in the order given, empty when
    /// there is no configuration (row format 3; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub cors: Lww<Vec<CorsRule>>,
    /// PutBucketVersioning (row format 4; absent while never set, so an
    /// unversioned bucket's row is unchanged). Once set it never returns
    /// to [`Versioning::Off`] (S3 has no way back).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub versioning: Lww<Versioning>,
}

/// A bucket's versioning state (S3's `VersioningConfiguration/Status`).
/// The derived order only breaks ties of equal timestamps in the register.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Versioning {
    /// Never versioned: writes replace the object (its `null` version).
    #[default]
    Off,
    /// Every write makes a new version with its own id.
    Enabled,
    /// Writes replace the `null` version; versions with ids stay.
    Suspended,
}

/// One rule of a bucket's CORS configuration, as S3's `CORSRule` (checked
/// by the S3 layer before it is stored).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CorsRule {
    pub id: Option<String>,
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age_seconds: Option<i32>,
}

impl Crdt for BucketRow {
    fn merge(&mut self, other: &Self) {
        match self.bucket().cmp(&other.bucket()) {
            std::cmp::Ordering::Less => *self = other.clone(),
            std::cmp::Ordering::Greater => {}
            std::cmp::Ordering::Equal => {
                self.tags.merge(&other.tags);
                self.cors.merge(&other.cors);
                self.versioning.merge(&other.versioning);
            }
        }
    }
}

impl BucketRow {
    /// A live bucket without configuration.
    pub fn new(name: &str, id: String, created_msec: u64, updated_msec: u64) -> BucketRow {
        BucketRow {
            updated_msec,
            deleted: false,
            id,
            name: name.to_owned(),
            created_msec,
            tags: Lww::default(),
            cors: Lww::default(),
            versioning: Lww::default(),
        }
    }

    /// The bucket's versioning state.
    pub fn versioning(&self) -> Versioning {
        self.versioning.value
    }

    /// The bucket register, in merge order.
    fn bucket(&self) -> (u64, bool, &str, &str, u64) {
        (
            self.updated_msec,
            self.deleted,
            &self.id,
            &self.name,
            self.created_msec,
        )
    }

    /// The CORS rules; empty when the bucket has no CORS configuration.
    pub fn cors_rules(&self) -> &[CorsRule] {
        &self.cors.value
    }

    /// The partition key of this bucket's objects.
    pub fn id_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        hex::decode_to_slice(&self.id, &mut b).expect("bucket ids are 64 hex digits");
        b
    }
}

/// The bucket table: partition empty, sort key = bucket name.
pub struct BucketTable;

impl Schema for BucketTable {
    const TREE: &'static str = "bucket";
    const PARTITION_LEN: usize = 0;
    type Row = BucketRow;

    fn format_of(row: &BucketRow) -> u8 {
        if !row.versioning.is_unset() {
            VERSIONING_ROW_FORMAT
        } else if row.tags.is_unset() && row.cors.is_unset() {
            ROW_FORMAT
        } else {
            NEWEST_ROW_FORMAT
        }
    }
}

/// Checks S3's bucket naming rules.
pub fn check_bucket_name(name: &str, allow_punycode: bool) -> Result<(), ModelError> {
    let bad = |reason| {
        Err(ModelError::InvalidBucketName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.len() < 3 || name.len() > 63 {
        return bad("must be 3 to 63 characters long");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return bad("may contain only lowercase letters, digits, dots and hyphens");
    }
    let first = name.as_bytes()[0];
    let last = name.as_bytes()[name.len() - 1];
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return bad("must begin and end with a letter or digit");
    }
    if name.contains("..") || name.contains(".-") || name.contains("-.") {
        return bad("must not contain two adjacent dots, or a dot next to a hyphen");
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return bad("must not be formatted as an IP address");
    }
    if !allow_punycode && name.starts_with("xn--") {
        return bad("must not start with xn--");
    }
    if name.starts_with("sthree-") || name.ends_with("-s3alias") || name.ends_with("--ol-s3") {
        return bad("uses a prefix or suffix reserved by S3");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_s3_rules() {
        for ok in ["abc", "my-bucket.2", "a1b", "0bucket"] {
            assert!(check_bucket_name(ok, false).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "Abc",
            "a_b",
            "-abc",
            "abc-",
            "a..b",
            "192.168.1.1",
            "xn--abc",
            &"a".repeat(64),
        ] {
            assert!(check_bucket_name(bad, false).is_err(), "{bad}");
        }
    }
}
