//! Buckets, by name.

use hangar_table::{Crdt, Schema, max_by_content};
use serde::{Deserialize, Serialize};

use crate::ModelError;

/// One bucket. The row is one last-writer-wins register: the derived order
/// (last change, then deleted over live, then the content) is the merge
/// order, so a delete and a re-creation at the same millisecond resolve the
/// same way everywhere. A deleted bucket keeps its row as a tombstone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketRow {
    pub updated_msec: u64,
    pub deleted: bool,
    /// 32 random bytes, hex; the partition key of the bucket's objects, so
    /// that a deleted and re-created bucket starts empty.
    pub id: String,
    pub name: String,
    pub created_msec: u64,
}

impl Crdt for BucketRow {
    fn merge(&mut self, other: &Self) {
        max_by_content(self, other);
    }
}

impl BucketRow {
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
