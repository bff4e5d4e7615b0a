//! Access keys: id, secret, the create-bucket right and per-bucket permissions.
//!
//! Key ids look like Garage's (`GK` + 24 hex), secrets are 64 hex. A key row
//! is the single source of truth for the permissions it carries.

use std::collections::BTreeMap;

use crate::row_format::{KEY_EXPIRY_ROW_FORMAT, OWNER_IDENTITY_ROW_FORMAT};
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
    /// The canonical user id the operator gave this key (`None`: the one
    /// derived from its access key id, [`KeyRow::canonical_id`]). A
    /// register (row format 18; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub canonical_id: Lww<Option<String>>,
    /// The display name the operator gave this key (`None`: none). A
    /// register (row format 18; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub display_name: Lww<Option<String>>,
}

/// Who a key is to S3 clients: the `Owner` (`ID`, `DisplayName`) of the
/// buckets it created, of their objects and uploads, of its ACL grants,
/// and the requester of its access-log records. Several keys may share
/// one identity (a user with several keys, as an AWS account's keys share
/// its canonical ID); rights stay each key's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub canonical_id: String,
    pub display_name: Option<String>,
}

/// The longest canonical user id or display name an operator may give.
pub const MAX_IDENTITY_LEN: usize = 128;

/// The canonical user id of a key the operator gave none: 64 hex digits,
/// as AWS's are, derived from the access key id by a one-way hash, so
/// that listings and ACLs, which anyone may read on a public bucket, do
/// not show the key id (half of a credential), and so that every node and
/// every release derives the same one without storing it.
pub fn derived_canonical_id(access_key_id: &str) -> String {
    hex::encode(blake3::derive_key(
        "hangar 2026-12-07 canonical user id of an access key",
        access_key_id.as_bytes(),
    ))
}

/// Whether `id` may be a canonical user id: 1 to [`MAX_IDENTITY_LEN`]
/// ASCII letters, digits, `-`, `_` or `.`, so that it travels unescaped in
/// XML, headers and the space-separated fields of an access log.
pub fn valid_canonical_id(id: &str) -> bool {
    (1..=MAX_IDENTITY_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `name` may be a display name: 1 to [`MAX_IDENTITY_LEN`] bytes
/// with no control character.
pub fn valid_display_name(name: &str) -> bool {
    (1..=MAX_IDENTITY_LEN).contains(&name.len()) && !name.chars().any(char::is_control)
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
        self.canonical_id.merge(&other.canonical_id);
        self.display_name.merge(&other.display_name);
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
            canonical_id: Lww::default(),
            display_name: Lww::default(),
        }
    }

    /// The canonical user id S3 shows for this key: the one the operator
    /// set, else [`derived_canonical_id`].
    pub fn canonical_id(&self) -> String {
        self.canonical_id
            .value
            .clone()
            .unwrap_or_else(|| derived_canonical_id(&self.access_key_id))
    }

    /// Who this key is to S3 clients.
    pub fn identity(&self) -> Identity {
        Identity {
            canonical_id: self.canonical_id(),
            display_name: self.display_name.value.clone(),
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
            canonical_id: Lww::default(),
            display_name: Lww::default(),
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
        if !row.canonical_id.is_unset() || !row.display_name.is_unset() {
            OWNER_IDENTITY_ROW_FORMAT
        } else if !row.expires_msec.is_unset() {
            KEY_EXPIRY_ROW_FORMAT
        } else {
            ROW_FORMAT
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
