//! Access keys: id, secret, the create-bucket right and per-bucket permissions.
//!
//! Key ids look like Garage's (`GK` + 24 hex), secrets are 64 hex. A key row
//! is the single source of truth for the permissions it carries.

use std::collections::BTreeMap;

use hangar_table::{Crdt, Schema};
use serde::{Deserialize, Serialize};

/// What a key may do on one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    pub read: bool,
    pub write: bool,
    pub owner: bool,
}

impl Permission {
    pub fn any(&self) -> bool {
        self.read || self.write || self.owner
    }
}

/// One access key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRow {
    pub access_key_id: String,
    pub name: String,
    pub secret: String,
    pub allow_create_bucket: bool,
    /// Permissions by bucket name.
    pub buckets: BTreeMap<String, Permission>,
    pub created_msec: u64,
    /// Last change; the newest row wins a merge.
    pub updated_msec: u64,
    pub deleted: bool,
}

impl Crdt for KeyRow {
    fn merge(&mut self, other: &Self) {
        // Last writer wins on the whole row; ties broken by content so that
        // every replica picks the same one.
        let newer = (other.updated_msec, other.deleted) > (self.updated_msec, self.deleted);
        if newer {
            *self = other.clone();
        }
    }
}

impl KeyRow {
    /// The permission this key holds on `bucket`.
    pub fn permission(&self, bucket: &str) -> Permission {
        self.buckets.get(bucket).copied().unwrap_or_default()
    }
}

/// The key table: partition empty, sort key = access key id.
pub struct KeyTable;

impl Schema for KeyTable {
    const TREE: &'static str = "key";
    const PARTITION_LEN: usize = 0;
    type Row = KeyRow;
}

/// A new key id, `GK` followed by 24 hex digits.
pub fn new_key_id() -> String {
    format!("GK{}", hex::encode(rand::random::<[u8; 12]>()))
}

/// A new secret, 64 hex digits.
pub fn new_secret() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// Whether `id` has the form of a key id.
pub fn valid_key_id(id: &str) -> bool {
    id.len() == 26 && id.starts_with("GK") && id[2..].bytes().all(|b| b.is_ascii_hexdigit())
}
