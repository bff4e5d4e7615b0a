//! Buckets, by name, with their configuration: tags, CORS rules, website,
//! Object Lock, lifecycle rules, policy and public access block.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::row_format::{
    ACCESS_LOG_ROW_FORMAT, ACCESS_ROW_FORMAT, CREATOR_ROW_FORMAT, GRANTS_ROW_FORMAT,
    LIFECYCLE_ROW_FORMAT, LOG_GRANTS_ROW_FORMAT, MANAGED_SSE_ROW_FORMAT, NOTIFY_ROW_FORMAT,
    OBJECT_LOCK_ROW_FORMAT, OWNERSHIP_ROW_FORMAT, PARTITIONED_LOG_ROW_FORMAT, QUOTA_ROW_FORMAT,
    TAGS_CORS_ROW_FORMAT, VERSIONING_ROW_FORMAT, WEBSITE_ROW_FORMAT,
};
use hangar_db::{DbError, Tx};
use hangar_table::{Crdt, Lww, ROW_FORMAT, Schema};
use serde::{Deserialize, Serialize};

use crate::ModelError;
use crate::access::{AclGrant, CannedAcl, ObjectOwnership, PublicAccessBlock};
use crate::lifecycle::LifecycleRule;
use crate::object::TagSet;
use crate::object_lock::ObjectLockConfig;
use crate::website::WebsiteConfig;

/// One bucket. The bucket itself (`updated_msec` … `created_msec`, and
/// `created_by`) is one last-writer-wins register: the greater of (last
/// change, then deleted over live, then the content) wins, so a delete and
/// a re-creation at the same millisecond resolve the same way everywhere. Its configuration
/// registers (`tags`, `cors`) belong to that bucket: merged register by
/// register when both rows are the same bucket, dropped with the row that
/// loses otherwise (a re-created bucket starts without configuration). A
/// deleted bucket keeps its row as a tombstone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BucketRow {
    pub updated_msec: u64,
    pub deleted: bool,
    /// 32 bytes, hex; the partition key of the bucket's objects. Derived
    /// from the name and the id of the row the creation replaced
    /// ([`bucket_id`]), so that a deleted and re-created bucket starts
    /// empty, and two creations that raced from the same state make the
    /// same bucket (buckets made before that have random ids).
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
    /// The access key that created the bucket through S3 (row format 6;
    /// absent for buckets made by the operator or before it was recorded).
    /// Part of the bucket register: it tells its creator's retry
    /// "yours" without the key row, which replicates after the bucket row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Put/DeleteBucketWebsite: `None` when there is no configuration
    /// (row format 7; absent when never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub website: Lww<Option<WebsiteConfig>>,
    /// S3 Object Lock: `None` while not enabled; once enabled (at creation
    /// or by PutObjectLockConfiguration) it stays, with its default
    /// retention (row format 8; absent while never set). A configuration
    /// register of the bucket like `tags`.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub object_lock: Lww<Option<ObjectLockConfig>>,
    /// Put/DeleteBucketLifecycleConfiguration: the rules in the order
    /// given, empty when there is no configuration (row format 9; absent
    /// while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub lifecycle: Lww<Vec<LifecycleRule>>,
    /// Put/DeleteBucketPolicy: the policy document (JSON) as it was put,
    /// checked by the S3 layer first; `None` when there is none (row
    /// format 10; absent while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub policy: Lww<Option<String>>,
    /// Put/DeletePublicAccessBlock: `None` when there is none (row format
    /// 10; absent while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub public_access_block: Lww<Option<PublicAccessBlock>>,
    /// The bucket's canned ACL (CreateBucket's `x-amz-acl`, PutBucketAcl):
    /// absent while never set, which is `private` (row format 10).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub acl: Lww<Option<CannedAcl>>,
    /// The bucket's ACL grants beyond its canned ACL (to users, and to
    /// groups where no canned ACL says them)
    /// (PutBucketAcl, CreateBucket's `x-amz-grant-*`): row format 19;
    /// absent while never set. Changed with `acl`, at the same time.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub grants: Lww<Vec<AclGrant>>,
    /// `hangar bucket set-quotas`: the most bytes and objects the bucket
    /// may hold (row format 12; absent while never set). A configuration
    /// register like `tags`.
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub quotas: Lww<BucketQuotas>,
    /// Put/DeleteBucketOwnershipControls, CreateBucket's
    /// `x-amz-object-ownership`: `None` when there is none (row format 13;
    /// absent while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub ownership: Lww<Option<ObjectOwnership>>,
    /// Put/DeleteBucketEncryption: the encryption of objects written
    /// without one of their own; `None` when there is none (row format 15;
    /// absent while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub encryption: Lww<Option<BucketEncryption>>,
    /// PutBucketLogging: where the bucket's server access logs go; `None`
    /// when logging is off (row format 16, 17 with a partitioned prefix;
    /// absent while never set).
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub logging: Lww<Option<BucketLogging>>,
    /// PutBucketNotificationConfiguration: the rules selecting the events
    /// sent to the operator's targets (row format 21; absent while never
    /// set; empty: none). See [`crate::notification`].
    #[serde(default, skip_serializing_if = "Lww::is_unset")]
    pub notification: Lww<Vec<crate::notification::NotificationRule>>,
}

/// Where a bucket's server access logs are written: objects named
/// `<target_prefix><time>-<unique>` in `target_bucket`, or, with
/// `partitioned`, `<target_prefix><owner>/<region>/<bucket>/<YYYY>/<MM>/<DD>/<time>-<unique>`
/// (S3's `PartitionedPrefix`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BucketLogging {
    pub target_bucket: String,
    pub target_prefix: String,
    /// S3's `PartitionedPrefix`: which date the object names are
    /// partitioned by (row format 17; absent for `SimplePrefix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitioned: Option<PartitionDate>,
    /// S3's `TargetGrants`, given to every log object written: the canned
    /// ACL of the groups' grants (row format 20; absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_acl: Option<CannedAcl>,
    /// The other `TargetGrants` (row format 20; absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub object_grants: Vec<AclGrant>,
}

impl BucketLogging {
    /// Whether the log objects get grants (`TargetGrants`).
    pub fn has_grants(&self) -> bool {
        self.object_acl.is_some() || !self.object_grants.is_empty()
    }
}

/// The date a partitioned log object's name carries (S3's
/// `PartitionDateSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PartitionDate {
    /// The day of the requests: an object holds one day's lines, and its
    /// name's time is that day at 00:00:00.
    EventTime,
    /// When the object was written.
    DeliveryTime,
}

/// A bucket's default encryption (S3's
/// `ServerSideEncryptionConfiguration`, one rule).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BucketEncryption {
    /// `AES256` (SSE-S3) or `aws:kms` (SSE-KMS).
    pub algorithm: String,
    /// The KMS key of `aws:kms` (`None`: the default key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key: Option<String>,
    /// `BucketKeyEnabled`, kept and answered back; Hangar derives one data
    /// key per object either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bucket_key: bool,
}

/// A bucket's quotas (Garage's `bucket set-quotas`): `None` is no limit.
/// Objects and bytes count every stored version (doc/operations.md,
/// "Quotas").
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct BucketQuotas {
    /// The most bytes of object data the bucket may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// The most object versions the bucket may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u64>,
}

impl BucketQuotas {
    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.max_size.is_none() && self.max_objects.is_none()
    }
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
                self.website.merge(&other.website);
                self.object_lock.merge(&other.object_lock);
                self.lifecycle.merge(&other.lifecycle);
                self.policy.merge(&other.policy);
                self.public_access_block.merge(&other.public_access_block);
                self.acl.merge(&other.acl);
                self.grants.merge(&other.grants);
                self.quotas.merge(&other.quotas);
                self.ownership.merge(&other.ownership);
                self.encryption.merge(&other.encryption);
                self.logging.merge(&other.logging);
                self.notification.merge(&other.notification);
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
            created_by: None,
            website: Lww::default(),
            object_lock: Lww::default(),
            lifecycle: Lww::default(),
            policy: Lww::default(),
            public_access_block: Lww::default(),
            acl: Lww::default(),
            grants: Lww::default(),
            quotas: Lww::default(),
            ownership: Lww::default(),
            encryption: Lww::default(),
            logging: Lww::default(),
            notification: Lww::default(),
        }
    }

    /// The bucket's canned ACL (`private` when never set).
    pub fn acl(&self) -> CannedAcl {
        self.acl.value.unwrap_or_default()
    }

    /// The bucket's object ownership setting, if any.
    pub fn ownership(&self) -> Option<ObjectOwnership> {
        self.ownership.value
    }

    /// Where the bucket's server access logs go, if anywhere.
    pub fn logging(&self) -> Option<&BucketLogging> {
        self.logging.value.as_ref()
    }

    /// The bucket's default encryption, if any.
    pub fn encryption(&self) -> Option<&BucketEncryption> {
        self.encryption.value.as_ref()
    }

    /// Whether ACLs apply (they do unless the ownership setting is
    /// `BucketOwnerEnforced`).
    pub fn acls_enabled(&self) -> bool {
        self.ownership() != Some(ObjectOwnership::BucketOwnerEnforced)
    }

    /// The bucket policy document, if any.
    pub fn policy(&self) -> Option<&str> {
        self.policy.value.as_deref()
    }

    /// The bucket's public access block, if any.
    pub fn public_access_block(&self) -> Option<PublicAccessBlock> {
        self.public_access_block.value
    }

    /// The bucket's quotas (no limit when never set).
    pub fn quotas(&self) -> BucketQuotas {
        self.quotas.value
    }

    /// The bucket's Object Lock configuration, `None` if not enabled.
    pub fn object_lock(&self) -> Option<ObjectLockConfig> {
        self.object_lock.value
    }

    /// Whether the live bucket was created by access key `key`.
    pub fn created_by(&self, key: &str) -> bool {
        !self.deleted && self.created_by.as_deref() == Some(key)
    }

    /// The bucket's versioning state.
    pub fn versioning(&self) -> Versioning {
        self.versioning.value
    }

    /// The bucket register, in merge order.
    fn bucket(&self) -> (u64, bool, &str, &str, u64, Option<&str>) {
        (
            self.updated_msec,
            self.deleted,
            &self.id,
            &self.name,
            self.created_msec,
            self.created_by.as_deref(),
        )
    }

    /// The CORS rules; empty when the bucket has no CORS configuration.
    pub fn cors_rules(&self) -> &[CorsRule] {
        &self.cors.value
    }

    /// The lifecycle rules; empty when the bucket has no configuration.
    pub fn lifecycle_rules(&self) -> &[LifecycleRule] {
        &self.lifecycle.value
    }

    /// The notification rules; empty when the bucket sends no events.
    pub fn notification_rules(&self) -> &[crate::notification::NotificationRule] {
        &self.notification.value
    }

    /// The website configuration; `None` when the bucket is no website.
    pub fn website(&self) -> Option<&WebsiteConfig> {
        self.website.value.as_ref()
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
    const NEWEST_FORMAT: u8 = crate::row_format::NEWEST;
    const TREE: &'static str = "bucket";
    const PARTITION_LEN: usize = 0;
    type Row = BucketRow;
    type Replication = hangar_table::Full;

    fn format_of(row: &BucketRow) -> u8 {
        if !row.notification.is_unset() {
            NOTIFY_ROW_FORMAT
        } else if row.logging().is_some_and(BucketLogging::has_grants) {
            LOG_GRANTS_ROW_FORMAT
        } else if !row.grants.is_unset() {
            GRANTS_ROW_FORMAT
        } else if row.logging().is_some_and(|l| l.partitioned.is_some()) {
            PARTITIONED_LOG_ROW_FORMAT
        } else if !row.logging.is_unset() {
            ACCESS_LOG_ROW_FORMAT
        } else if !row.encryption.is_unset() {
            MANAGED_SSE_ROW_FORMAT
        } else if !row.ownership.is_unset() {
            OWNERSHIP_ROW_FORMAT
        } else if !row.quotas.is_unset() {
            QUOTA_ROW_FORMAT
        } else if !row.policy.is_unset()
            || !row.public_access_block.is_unset()
            || !row.acl.is_unset()
        {
            ACCESS_ROW_FORMAT
        } else if !row.lifecycle.is_unset() {
            LIFECYCLE_ROW_FORMAT
        } else if !row.object_lock.is_unset() {
            OBJECT_LOCK_ROW_FORMAT
        } else if !row.website.is_unset() {
            WEBSITE_ROW_FORMAT
        } else if row.created_by.is_some() {
            CREATOR_ROW_FORMAT
        } else if !row.versioning.is_unset() {
            VERSIONING_ROW_FORMAT
        } else if row.tags.is_unset() && row.cors.is_unset() {
            ROW_FORMAT
        } else {
            TAGS_CORS_ROW_FORMAT
        }
    }

    /// Counts and logs a live bucket displaced by another of its name that
    /// is not its successor (see [`displaced`]); keeps this node's index of
    /// the buckets' notification rules ([`crate::notification`]).
    fn updated(
        tx: &mut Tx<'_>,
        _partition: &[u8],
        _sort: &[u8],
        old: Option<&BucketRow>,
        inserted: &BucketRow,
        merged: &BucketRow,
    ) -> Result<(), DbError> {
        if let Some(old) = old {
            for loser in [old, inserted] {
                if displaced(loser, merged) {
                    BUCKET_ID_CONFLICTS.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        bucket = %merged.name,
                        kept = %merged.id,
                        hidden = %loser.id,
                        "two creations of bucket {} met: the one of id {} is kept; objects \
                         written under id {} (created {} ms) are not visible through it",
                        merged.name,
                        merged.id,
                        loser.id,
                        loser.created_msec,
                    );
                }
            }
        }
        if old != Some(merged) {
            let rules = merged.notification_rules();
            let entry =
                (!merged.deleted && !rules.is_empty()).then(|| crate::notification::BucketRules {
                    name: merged.name.clone(),
                    versioned: merged.versioning() != Versioning::Off,
                    rules: rules.to_vec(),
                });
            crate::notification::tx_index_rules(tx, merged.id_bytes(), entry)?;
        }
        Ok(())
    }
}

/// Merges of a live bucket row into the row of another bucket of the same
/// name that was not created from its tombstone, counted on this node since
/// it started (`hangar_bucket_id_conflicts_total`): the objects written
/// under the displaced id are no longer reachable through the name. With
/// creations serialised by their coordinator (`crate::bucket_create`) it
/// takes two coordinators acting at once from different states of the row
/// (doc/replication.md, "Bucket creation").
pub static BUCKET_ID_CONFLICTS: AtomicU64 = AtomicU64::new(0);

/// Whether the merge `merged` hides the live bucket `loser`: another id
/// won, and it is not the id of a creation from `loser`'s tombstone (then
/// `loser` had been deleted, and the node that held it had missed that). A
/// bucket deleted and re-created more than once while a node was away is
/// reported by that node too, as it cannot tell.
pub fn displaced(loser: &BucketRow, merged: &BucketRow) -> bool {
    !loser.deleted && loser.id != merged.id && merged.id != bucket_id(&merged.name, Some(&loser.id))
}

/// The id of a bucket created under `name` in place of the row of id
/// `previous` (a tombstone), or of the first bucket of that name: the same
/// on every node, so that creations racing from the same state make one
/// bucket, and a new one for each incarnation.
pub fn bucket_id(name: &str, previous: Option<&str>) -> String {
    let mut h = blake3::Hasher::new_derive_key("hangar 2026-12 bucket id");
    h.update(&(name.len() as u64).to_be_bytes());
    h.update(name.as_bytes());
    if let Some(p) = previous {
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize().as_bytes())
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
