//! Typed answers of the admin operations on keys and buckets: the node
//! builds them, the CLI reads them, and both transports carry them as the
//! JSON objects doc/admin-api.yaml describes (serde_json writes an
//! object's keys in alphabetical order whichever way it was built, so the
//! bytes are those of the untyped answers these replace).
//!
//! Every field has a default when read, so a CLI reads the answer of a
//! node that does not send a field yet (a cluster being upgraded).

use serde::{Deserialize, Serialize};

/// An access key: `key create|import|info|set|allow|deny`, and
/// `bucket allow|deny` (the key after the change).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyInfo {
    pub name: String,
    pub access_key_id: String,
    /// Absent when the CLI was not asked to show it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_access_key: Option<String>,
    pub allow_create_bucket: bool,
    /// When the key stops working, ms since the epoch; `None`: never.
    pub expires_msec: Option<u64>,
    /// `expires_msec` as RFC 3339.
    pub expires: Option<String>,
    pub expired: bool,
    /// The canonical user id S3 shows for the key (the owner of the
    /// buckets it creates, the grantee of its ACL grants).
    pub canonical_id: String,
    /// The display name S3 shows beside it; `None`: none.
    pub display_name: Option<String>,
    pub buckets: Vec<KeyGrant>,
}

/// A key's permissions on one bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyGrant {
    pub bucket: String,
    pub read: bool,
    pub write: bool,
    pub owner: bool,
}

/// One key of `key list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeySummary {
    pub access_key_id: String,
    pub name: String,
    pub expires_msec: Option<u64>,
    pub expired: bool,
}

/// An SSE-KMS key (`kms create|info|rotate|disable|enable`, one of `kms
/// list`): no key material, which never leaves the cluster's derivation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KmsKey {
    pub id: String,
    pub description: String,
    pub enabled: bool,
    /// Creation time, ms since the epoch.
    pub created_msec: u64,
    /// Versions of its material (1 + rotations).
    pub versions: usize,
    /// When the current version (the one new data is sealed under) was
    /// made, ms since the epoch.
    pub current_version_msec: u64,
}

/// `key delete`: the id of the key deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyDeleted {
    pub deleted: String,
}

/// `bucket create`: the new bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketCreated {
    pub name: String,
    pub id: String,
}

/// One bucket of `bucket list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketSummary {
    pub name: String,
    pub id: String,
    /// Creation time, ms since the epoch.
    pub created: u64,
    /// Its global aliases.
    pub aliases: Vec<String>,
}

/// `bucket info`, and `bucket alias|unalias` (the bucket after the
/// change).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketInfo {
    pub name: String,
    pub id: String,
    /// Creation time, ms since the epoch.
    pub created: u64,
    pub objects: u64,
    pub bytes: u64,
    /// The keys with any permission on it.
    pub keys: Vec<BucketKey>,
    /// `None`: not a website.
    pub website: Option<Website>,
    pub quotas: Quotas,
    pub aliases: Vec<String>,
    pub local_aliases: Vec<KeyAlias>,
}

/// A key's permissions on the bucket `bucket info` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketKey {
    pub access_key_id: String,
    pub name: String,
    pub read: bool,
    pub write: bool,
    pub owner: bool,
}

/// A bucket's website configuration, as `bucket info` summarises it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Website {
    pub index_document: Option<String>,
    pub error_document: Option<String>,
    /// The host every request is redirected to, if any.
    pub redirect_all: Option<String>,
    /// How many routing rules it has.
    pub routing_rules: usize,
}

/// A bucket's quotas (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Quotas {
    pub max_size: Option<u64>,
    pub max_objects: Option<u64>,
}

/// A local alias: a name of the bucket for one key only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyAlias {
    pub access_key_id: String,
    pub alias: String,
}

/// `bucket set-quotas`: the bucket's quotas now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketQuotas {
    pub name: String,
    pub quotas: Quotas,
}

/// `bucket website`: whether the bucket is a website now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketWebsite {
    pub name: String,
    pub website: bool,
}

/// `admin-token create`: a signed admin token (shown once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdminToken {
    pub token: String,
    /// `read` or `full`.
    pub scope: String,
    /// When it stops working, ms since the epoch; `None`: never.
    pub expires_msec: Option<u64>,
    /// `expires_msec` as RFC 3339.
    pub expires: Option<String>,
}

/// `bucket delete`: the name of the bucket deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketDeleted {
    pub deleted: String,
}

/// One table of `table status`: its rows on this node and their digest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TableStatus {
    pub table: String,
    pub rows: u64,
    /// Hex of the digest of the rows.
    pub digest: String,
}

/// `node id`: this node's `<id>@<address>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeAddr {
    pub node: String,
}

/// `node connect`: the peer this node connected to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeConnected {
    pub connected: String,
}

/// `hangar presign` (`PresignObject`): a SigV4 presigned S3 URL for one
/// request, and its parts (the console sends `path_and_query` to `host`
/// through `/console/s3/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PresignedUrl {
    pub url: String,
    /// `GET`, `PUT` or `DELETE`.
    pub method: String,
    pub host: String,
    pub path_and_query: String,
    /// The key that signed it.
    pub access_key_id: String,
    /// How long it is valid, from now.
    pub expires_secs: u64,
}

/// `hangar status` (`GetClusterStatus`): every node this one knows of
/// (its mesh's peers and the layout's nodes), and the cluster health.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterStatus {
    /// This node's `<id>@<host:port>`.
    pub node: String,
    pub layout_version: u64,
    pub replication_factor: usize,
    pub staged_changes: bool,
    pub peers: Vec<PeerRow>,
    pub health: crate::layout_answers::ClusterHealth,
}

/// One node of `hangar status`: what the mesh knows of it (`None`s for a
/// node only the layout names), its role in the current layout version,
/// its own report and its progress through that version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerRow {
    /// What the mesh knows of it: id, address, up, RTT, … (`is_up` false
    /// and the rest empty for a node only the layout names).
    #[serde(flatten)]
    pub peer: hangar_net::PeerStatus,
    pub hostname: Option<String>,
    pub data_disk: Option<Disk>,
    pub metadata_disk: Option<Disk>,
    /// When its self-description was received, ms since the epoch.
    pub info_msec: Option<u64>,
    /// Why a layout exchange with it was refused, if it was.
    pub layout_refused: Option<String>,
    pub zone: Option<String>,
    /// Bytes; `None` for a gateway or a node without a role.
    pub capacity: Option<u64>,
    /// `None` for a node without a role.
    pub gateway: Option<bool>,
    pub tags: Option<Vec<String>>,
    /// Partitions it holds a replica of in the current version.
    pub partitions: usize,
    pub report: Option<NodeReport>,
    /// Why it has no report: down, no answer in time, an older version.
    pub report_error: Option<String>,
    pub layout_sync: LayoutSync,
}

/// Where a node is in the current layout version (the layout history's
/// trackers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayoutSync {
    /// The latest version it acknowledged.
    pub ack: Option<u64>,
    /// The latest version whose data it holds entirely.
    pub sync: Option<u64>,
    /// The latest synced version it reads from.
    pub sync_ack: Option<u64>,
    /// `synced`, `syncing`, or `no data` (the current version stores
    /// nothing on it: a gateway, or no role).
    pub state: String,
}

/// `hangar stats` (`ClusterStatistics`): per bucket its usage, the
/// totals, and per node its report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterStats {
    pub buckets: Vec<BucketStats>,
    pub totals: StatsTotals,
    pub nodes: Vec<NodeStats>,
}

/// One bucket of `stats`: its stored object versions and their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketStats {
    pub name: String,
    pub id: String,
    pub objects: u64,
    pub bytes: u64,
}

/// The sums of `stats` over its buckets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsTotals {
    pub buckets: u64,
    pub objects: u64,
    pub bytes: u64,
}

/// One node of `stats`: whether it is up, and its report, or why there is
/// none (`report_error`: down, or it did not answer in time).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeStats {
    /// The node id, 64 hex digits.
    pub id: String,
    pub hostname: Option<String>,
    pub is_up: bool,
    pub is_self: bool,
    pub report: Option<NodeReport>,
    pub report_error: Option<String>,
}

/// What a node measures of itself when asked (`hangar status`, `stats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeReport {
    /// The current layout version it holds.
    pub layout_version: u64,
    pub data_disk: Option<Disk>,
    pub metadata_disk: Option<Disk>,
    pub resync: Resync,
    pub scrub: Option<Scrub>,
    /// Rows it holds, per replicated table.
    pub tables: std::collections::BTreeMap<String, u64>,
    /// Its block files; `None` until the count made at start has finished.
    pub blocks: Option<BlockFiles>,
}

/// A file system's space in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Disk {
    /// What an unprivileged process can still write.
    pub avail: u64,
    pub total: u64,
}

/// A node's resync worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resync {
    /// Blocks waiting in its queue.
    pub queue: u64,
    /// Block transfers running now.
    pub in_flight: u64,
    /// Errors since the node started.
    pub errors: u64,
}

/// A node's scrub.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Scrub {
    pub status: hangar_block::scrub::ScrubStatus,
    pub checked: u64,
    pub corrupt: u64,
    /// How far the current pass is, 0 to 1.
    pub progress: f64,
    pub last_pass_done_msec: Option<u64>,
}

/// A node's block files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockFiles {
    pub count: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi_check::{fields, required_in_doc};

    /// The typed answers write the JSON the untyped ones wrote: same keys,
    /// same values, `null` for an absent option (the secret excepted,
    /// which the node always sets).
    #[test]
    fn a_key_answer_is_the_json_it_was() {
        let k = KeyInfo {
            name: "n".into(),
            access_key_id: "GK1".into(),
            secret_access_key: Some("s".into()),
            allow_create_bucket: true,
            expires_msec: None,
            expires: None,
            expired: false,
            canonical_id: "c".into(),
            display_name: None,
            buckets: vec![KeyGrant {
                bucket: "b".into(),
                read: true,
                write: false,
                owner: true,
            }],
        };
        let before = serde_json::json!({
            "name": "n", "access_key_id": "GK1", "secret_access_key": "s",
            "allow_create_bucket": true, "expires_msec": null, "expires": null,
            "expired": false, "canonical_id": "c", "display_name": null,
            "buckets": [{"bucket": "b", "read": true, "write": false, "owner": true}],
        });
        let v = serde_json::to_value(&k).unwrap();
        assert_eq!(v, before);
        assert_eq!(serde_json::to_string(&v).unwrap(), before.to_string());
        assert_eq!(serde_json::from_value::<KeyInfo>(before).unwrap(), k);
    }

    #[test]
    fn an_answer_without_a_newer_field_is_read() {
        let b: BucketInfo = serde_json::from_value(serde_json::json!({
            "name": "b", "id": "i", "created": 1, "objects": 2, "bytes": 3,
            "keys": [], "aliases": ["x"], "local_aliases": []
        }))
        .unwrap();
        assert_eq!(b.quotas, Quotas::default());
        assert_eq!(b.website, None);
        assert_eq!(b.aliases, vec!["x".to_owned()]);
    }

    /// The hand-written OpenAPI document and the types agree field by field
    /// on the answers it names as schemas.
    #[test]
    fn the_openapi_document_names_every_field_of_the_typed_answers() {
        assert_eq!(
            fields(BucketInfo::default()),
            required_in_doc(&["BucketInfo"])
        );
        assert_eq!(
            fields(Quotas::default()),
            required_in_doc(&["BucketQuotas"])
        );
        assert_eq!(
            fields(ClusterStatus::default()),
            required_in_doc(&["Status"])
        );
        assert_eq!(fields(PeerRow::default()), required_in_doc(&["Peer"]));
        assert_eq!(
            fields(LayoutSync::default()),
            required_in_doc(&["LayoutSync"])
        );
        let key = KeyInfo {
            secret_access_key: Some(String::new()),
            ..KeyInfo::default()
        };
        assert_eq!(fields(key), required_in_doc(&["Key"]));
        assert_eq!(
            fields(KeyGrant::default()),
            required_in_doc(&["Key", "buckets"])
        );
        assert_eq!(fields(Disk::default()), required_in_doc(&["Disk"]));
        assert_eq!(fields(KmsKey::default()), required_in_doc(&["KmsKey"]));
        assert_eq!(
            fields(NodeReport::default()),
            required_in_doc(&["NodeReport"])
        );
        assert_eq!(
            fields(Resync::default()),
            required_in_doc(&["NodeReport", "resync"])
        );
        assert_eq!(
            fields(Scrub::default()),
            required_in_doc(&["NodeReport", "scrub"])
        );
        assert_eq!(
            fields(BlockFiles::default()),
            required_in_doc(&["NodeReport", "blocks"])
        );
        assert_eq!(
            fields(ClusterStats::default()),
            required_in_doc(&["Statistics"])
        );
        assert_eq!(
            fields(BucketStats::default()),
            required_in_doc(&["Statistics", "buckets"])
        );
        assert_eq!(
            fields(StatsTotals::default()),
            required_in_doc(&["Statistics", "totals"])
        );
        assert_eq!(
            fields(NodeStats::default()),
            required_in_doc(&["Statistics", "nodes"])
        );
        assert_eq!(
            fields(PresignedUrl::default()),
            required_in_doc(&["/v2/PresignObject", "\"200\""])
        );
    }
}
