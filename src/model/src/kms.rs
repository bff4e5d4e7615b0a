//! The keys of SSE-KMS: named keys the operator creates, rotates, disables
//! and enables (`hangar kms`, the admin API), in a table every node holds
//! (doc/table-rows.md, "The `kms_key` table"). A key's row holds no key
//! material: the data key of every version sealed under it derives from
//! the cluster's master key, the key's id and the version of its material
//! ([`crate::sse_managed::MasterKey::data_key`]), so its row says only which
//! versions of material exist and whether the key may be used.

use std::collections::BTreeSet;

use hangar_table::{Crdt, Lww, Schema};
use serde::{Deserialize, Serialize};

/// The key every SSE-KMS request without a key id uses, as S3's AWS
/// managed key `aws/s3`: it always exists, is always enabled, and has one
/// version of material (zero).
pub const DEFAULT_KEY: &str = "aws/s3";

/// One version of a key's material: a rotation adds one, and new versions
/// of objects are sealed under the newest; older ones keep opening with
/// theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeyVersion {
    pub created_msec: u64,
    /// Random: names the material in the data keys' derivation.
    #[serde(with = "hangar_util::serde_id16")]
    pub id: [u8; 16],
}

/// One KMS key. Its id is random, so two rows of one id come from the
/// same creation; `enabled` and `description` are last-writer-wins
/// registers and `versions` a grow-only set, so concurrent rotations
/// through different nodes both survive and the newest is the current
/// version everywhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KmsKeyRow {
    pub id: String,
    pub created_msec: u64,
    pub description: Lww<String>,
    pub enabled: Lww<bool>,
    pub versions: BTreeSet<KeyVersion>,
}

impl Crdt for KmsKeyRow {
    fn merge(&mut self, other: &Self) {
        self.created_msec = self.created_msec.min(other.created_msec);
        self.description.merge(&other.description);
        self.enabled.merge(&other.enabled);
        self.versions.extend(other.versions.iter().copied());
    }
}

impl KmsKeyRow {
    /// A new enabled key with one version of material.
    pub fn new(description: &str, now: u64) -> KmsKeyRow {
        KmsKeyRow {
            id: new_kms_key_id(),
            created_msec: now,
            description: Lww::new(now, description.to_owned()),
            enabled: Lww::new(now, true),
            versions: BTreeSet::from([KeyVersion {
                created_msec: now,
                id: rand::random(),
            }]),
        }
    }

    /// The version new data is sealed under: the newest.
    pub fn current(&self) -> Option<&KeyVersion> {
        self.versions.iter().next_back()
    }

    /// Whether the key may seal and open data.
    pub fn is_enabled(&self) -> bool {
        self.enabled.value
    }
}

/// A fresh key id: 16 random bytes written as a UUID, the form of AWS's
/// key ids.
fn new_kms_key_id() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The id a request names a key by: the id itself, or an ARN ending in
/// `key/<id>` (`arn:aws:kms:<region>:<account>:key/<id>`).
pub fn key_id_of(named: &str) -> &str {
    match named.strip_prefix("arn:") {
        Some(rest) => rest.rsplit_once(":key/").map_or(named, |(_, id)| id),
        None => named,
    }
}

/// The table of KMS keys: partition empty, sort key = key id; on every
/// node.
pub struct KmsKeyTable;

impl Schema for KmsKeyTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "kms_key";
    const PARTITION_LEN: usize = 0;
    type Row = KmsKeyRow;
    type Replication = hangar_table::Full;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_rotations_both_survive_and_the_newest_is_current() {
        let base = KmsKeyRow::new("k", 1);
        let (mut a, mut b) = (base.clone(), base.clone());
        let va = KeyVersion {
            created_msec: 5,
            id: [1; 16],
        };
        let vb = KeyVersion {
            created_msec: 6,
            id: [2; 16],
        };
        a.versions.insert(va);
        b.versions.insert(vb);
        b.enabled.update(7, false);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(ab.versions.len(), 3);
        assert_eq!(ab.current(), Some(&vb));
        assert!(!ab.is_enabled());
    }

    #[test]
    fn ids_look_like_aws_key_ids_and_arns_name_them() {
        let k = KmsKeyRow::new("", 1);
        assert_eq!(k.id.len(), 36);
        assert_eq!(k.id.matches('-').count(), 4);
        assert_eq!(key_id_of(&k.id), k.id);
        let arn = format!("arn:aws:kms:garage:123456789012:key/{}", k.id);
        assert_eq!(key_id_of(&arn), k.id);
        assert_eq!(
            key_id_of("arn:aws:kms:x:y:alias/z"),
            "arn:aws:kms:x:y:alias/z"
        );
    }
}
