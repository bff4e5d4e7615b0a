//! Access keys: id, secret, the create-bucket right and per-bucket permissions.
//!
//! Key ids look like Garage's (`GK` + 24 hex), secrets are 64 hex. A key row
//! is the single source of truth for the permissions it carries.

use std::collections::BTreeMap;

use crate::row_format::KEY_EXPIRY_ROW_FORMAT;
use hangar_table::{Crdt, Lww, LwwMap, ROW_FORMAT, Schema};
use serde::{Deserialize, Serialize};

/// What a key may do on one bucket. No right at all is also the tombstone
/// of a revoked permission (see [`KeyRow::buckets`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
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

/// One access key. Each field that can change is its own register, so that
/// concurrent changes of different fields (a grant on one bucket, a grant on
/// another, a rename) all survive a merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub access_key_id: String,
    pub name: Lww<String>,
    pub secret: Lww<String>,
    pub allow_create_bucket: Lww<bool>,
    /// Permissions by bucket name; a revoked permission is an entry with no
    /// right, kept so that the revocation replicates.
    pub buckets: LwwMap<String, Permission>,
    /// First creation, ms since the epoch (the smallest one seen wins).
    pub created_msec: u64,
    /// The tombstone: a deleted key keeps its row, with every permission
    /// revoked, so that no replica brings it back.
    pub deleted: Lww<bool>,
    /// When the key stops signing requests, ms since the epoch (`None`:
    /// never). A register, so the latest change (set, extend, clear) wins
    /// (row format 5; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub expires_msec: Lww<Option<u64>>,
}

impl Crdt for KeyRow {
    fn merge(&mut self, other: &Self) {
        self.name.merge(&other.name);
        self.secret.merge(&other.secret);
        self.allow_create_bucket.merge(&other.allow_create_bucket);
        self.buckets.merge(&other.buckets);
        self.created_msec = self.created_msec.min(other.created_msec);
        self.deleted.merge(&other.deleted);
        self.expires_msec.merge(&other.expires_msec);
    }
}

impl KeyRow {
    /// A new, live key, every field stamped `now`.
    pub fn new(access_key_id: &str, secret: &str, name: &str, now: u64) -> KeyRow {
        KeyRow {
            access_key_id: access_key_id.to_owned(),
            name: Lww::new(now, name.to_owned()),
            secret: Lww::new(now, secret.to_owned()),
            allow_create_bucket: Lww::new(now, false),
            buckets: LwwMap::default(),
            created_msec: now,
            deleted: Lww::new(now, false),
            expires_msec: Lww::default(),
        }
    }

    /// Whether the key has expired at `now` (ms since the epoch).
    pub fn is_expired(&self, now: u64) -> bool {
        self.expires_msec.value.is_some_and(|t| now >= t)
    }

    /// The permission this key holds on `bucket`.
    pub fn permission(&self, bucket: &str) -> Permission {
        self.buckets
            .get(&bucket.to_owned())
            .copied()
            .unwrap_or_default()
    }

    /// The buckets this key has any right on, with its rights.
    pub fn granted(&self) -> impl Iterator<Item = (&String, &Permission)> {
        self.buckets.iter().filter(|(_, p)| p.any())
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.value
    }

    /// Makes this row the tombstone of the key: deleted, every right revoked.
    pub fn delete(&mut self, now: u64) {
        self.deleted.update(now, true);
        let granted: Vec<String> = self.granted().map(|(b, _)| b.clone()).collect();
        for b in granted {
            self.buckets.update(b, now, Permission::default());
        }
        self.allow_create_bucket.update(now, false);
    }
}

/// A key row as format 1 stored it: one last-writer-wins row.
#[derive(Deserialize)]
struct KeyRowV1 {
    access_key_id: String,
    name: String,
    secret: String,
    allow_create_bucket: bool,
    buckets: BTreeMap<String, Permission>,
    created_msec: u64,
    updated_msec: u64,
    deleted: bool,
}

impl From<KeyRowV1> for KeyRow {
    fn from(o: KeyRowV1) -> KeyRow {
        let ts = o.updated_msec;
        let mut buckets = LwwMap::default();
        for (b, p) in o.buckets {
            buckets.update(b, ts, p);
        }
        KeyRow {
            access_key_id: o.access_key_id,
            name: Lww::new(ts, o.name),
            secret: Lww::new(ts, o.secret),
            allow_create_bucket: Lww::new(ts, o.allow_create_bucket),
            buckets,
            created_msec: o.created_msec,
            deleted: Lww::new(ts, o.deleted),
            expires_msec: Lww::default(),
        }
    }
}

/// The key table: partition empty, sort key = access key id.
pub struct KeyTable;

impl Schema for KeyTable {
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "key";
    const PARTITION_LEN: usize = 0;
    type Row = KeyRow;
    type Replication = hangar_table::Full;

    fn format_of(row: &KeyRow) -> u8 {
        if row.expires_msec.is_unset() {
            ROW_FORMAT
        } else {
            KEY_EXPIRY_ROW_FORMAT
        }
    }

    fn decode_old(format: u8, body: &[u8]) -> Result<KeyRow, String> {
        match format {
            1 => rmp_serde::from_slice::<KeyRowV1>(body)
                .map(KeyRow::from)
                .map_err(|e| e.to_string()),
            f => Err(format!("unknown row format {f}")),
        }
    }
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
