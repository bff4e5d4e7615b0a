//! Every row type's merge is commutative, associative and idempotent, and
//! replicas receiving the same writes in any order (some twice) converge —
//! deletes (tombstones) included. Domains are kept tiny so that equal
//! timestamps, equal versions and concurrent deletes are common.

use std::collections::BTreeMap;

use hangar_model::access::{
    AclGrant, AclPermission, CannedAcl, ObjectOwnership, PublicAccessBlock,
};
use hangar_model::alias::AliasRow;
use hangar_model::block_list::BlockEntry;
use hangar_model::bucket::{
    BucketEncryption, BucketLogging, BucketQuotas, BucketRow, CorsRule, PartitionDate, Versioning,
    bucket_id, displaced,
};
use hangar_model::key::{KeyRow, Permission};
use hangar_model::lifecycle::{LifecycleFilter, LifecycleRule};
use hangar_model::multipart::{MpuRow, PartRow};
use hangar_model::notification::{DestinationKind, NotificationRule};
use hangar_model::object::{ObjectData, ObjectRow, StoredChecksum};
use hangar_model::object_lock::{
    DefaultRetention, ObjectLockConfig, Retention, RetentionMode, RetentionPeriod,
};
use hangar_model::sse_c::SseC;
use hangar_model::version_parts::VersionPart;
use hangar_model::website::WebsiteConfig;
use hangar_table::crdt::laws;
use hangar_table::{Crdt, Lww, LwwMap};
use hangar_util::Hash;
use proptest::prelude::*;

fn ts() -> impl Strategy<Value = u64> {
    0u64..4
}

fn small_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just(String::new())
    ]
}

fn lww<T: std::fmt::Debug + Clone>(v: impl Strategy<Value = T>) -> impl Strategy<Value = Lww<T>> {
    (ts(), v).prop_map(|(ts, value)| Lww { ts, value })
}

fn permission() -> impl Strategy<Value = Permission> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(read, write, owner)| Permission {
        read,
        write,
        owner,
    })
}

/// Key rows as replicas hold them after random operations: grants and
/// revocations on a few buckets, renames, new secrets, deletes, expiries
/// and owner identities set, moved and cleared (`None`), at equal
/// timestamps too.
fn key_row() -> impl Strategy<Value = KeyRow> {
    (
        lww(small_string()),
        lww(small_string()),
        lww(any::<bool>()),
        proptest::collection::vec((small_string(), ts(), permission()), 0..4),
        0u64..3,
        lww(any::<bool>()),
        lww(proptest::option::of(0u64..3)),
        lww(proptest::option::of(small_string())),
        lww(proptest::option::of(small_string())),
    )
        .prop_map(
            |(name, secret, create, grants, created, deleted, expires, canonical, display)| {
                let mut buckets = LwwMap::default();
                for (b, t, p) in grants {
                    let mut one = LwwMap::default();
                    one.update(b, t, p);
                    buckets.merge(&one);
                }
                KeyRow {
                    access_key_id: "GK000000000000000000000001".into(),
                    name,
                    secret,
                    allow_create_bucket: create,
                    buckets,
                    created_msec: created,
                    deleted,
                    expires_msec: expires,
                    canonical_id: canonical,
                    display_name: display,
                }
            },
        )
}

/// A few tag sets (the empty one is what a delete of the tags stores).
fn tag_set() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(small_string(), small_string(), 0..3)
}

fn cors_rules() -> impl Strategy<Value = Vec<CorsRule>> {
    proptest::collection::vec(
        (small_string(), proptest::option::of(0i32..2)).prop_map(|(origin, max_age)| CorsRule {
            id: None,
            allowed_origins: vec![origin],
            allowed_methods: vec!["GET".into()],
            allowed_headers: Vec::new(),
            expose_headers: Vec::new(),
            max_age_seconds: max_age,
        }),
        0..2,
    )
}

/// Bucket rows of a few buckets (few ids, few timestamps: the same bucket
/// is common), each with random tag and CORS registers, as concurrent
/// Put/DeleteBucketTagging and Put/DeleteBucketCors through different
/// nodes leave them; ids are random ones or derived from a predecessor
/// ([`bucket_id`]), creators one of two keys or none, deletes included.
/// A few lifecycle configurations (none, one rule, two rules).
fn lifecycle_rules() -> impl Strategy<Value = Vec<LifecycleRule>> {
    let rule =
        (0u8..3, any::<bool>(), prop::option::of(1u32..4)).prop_map(|(id, enabled, days)| {
            LifecycleRule {
                id: format!("r{id}"),
                enabled,
                filter: Some(LifecycleFilter::default()),
                expiration_days: days,
                abort_days: Some(1),
                ..Default::default()
            }
        });
    prop::collection::vec(rule, 0..3)
}

/// No policy, or one of two documents (row format 10).
fn policy_document() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just(r#"{"Version":"2012-10-17","Statement":[]}"#.to_owned()),
        Just(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}]}"#
                .to_owned()
        ),
    ])
}

/// No ACL, or one of three canned ACLs (row format 10).
fn canned_acl() -> impl Strategy<Value = Option<CannedAcl>> {
    proptest::option::of(prop_oneof![
        Just(CannedAcl::Private),
        Just(CannedAcl::PublicRead),
        Just(CannedAcl::AuthenticatedRead),
    ])
}

/// A few grants beyond the canned ACL (row format 19): none, one, or two,
/// to two users and a group and three permissions, as concurrent
/// PutBucketAcl / PutObjectAcl leave them.
fn grants() -> impl Strategy<Value = Vec<AclGrant>> {
    proptest::collection::vec(
        (
            prop_oneof![
                Just("a"),
                Just("b"),
                Just(hangar_model::access::AUTHENTICATED_USERS)
            ],
            prop_oneof![
                Just(AclPermission::Read),
                Just(AclPermission::WriteAcp),
                Just(AclPermission::FullControl)
            ],
        )
            .prop_map(|(id, permission)| AclGrant {
                id: id.to_owned(),
                permission,
            }),
        0..3,
    )
}

/// No object ownership setting, or one of S3's three (row format 13).
fn object_ownership() -> impl Strategy<Value = Option<ObjectOwnership>> {
    proptest::option::of(prop_oneof![
        Just(ObjectOwnership::BucketOwnerEnforced),
        Just(ObjectOwnership::BucketOwnerPreferred),
        Just(ObjectOwnership::ObjectWriter),
    ])
}

/// No default encryption, SSE-S3, or SSE-KMS under one of two keys (row
/// format 15).
fn bucket_encryption() -> impl Strategy<Value = Option<BucketEncryption>> {
    proptest::option::of(prop_oneof![
        Just(("AES256", None)),
        Just(("aws:kms", Some("k1"))),
        Just(("aws:kms", Some("k2"))),
    ])
    .prop_map(|e| {
        e.map(|(a, k)| BucketEncryption {
            algorithm: a.to_owned(),
            kms_key: k.map(str::to_owned),
            bucket_key: k == Some("k2"),
        })
    })
}

/// Logging off, or to one of two targets, partitioned or not, with grants
/// on the log objects or not (row formats 16, 17 and 20).
fn bucket_logging() -> impl Strategy<Value = Option<BucketLogging>> {
    let partitioned = prop_oneof![
        Just(None),
        Just(Some(PartitionDate::EventTime)),
        Just(Some(PartitionDate::DeliveryTime)),
    ];
    proptest::option::of((
        prop_oneof![Just(("logs", "a/")), Just(("logs", "b/"))],
        partitioned,
        canned_acl(),
        grants(),
    ))
    .prop_map(|l| {
        l.map(
            |((b, p), partitioned, object_acl, object_grants)| BucketLogging {
                target_bucket: b.to_owned(),
                target_prefix: p.to_owned(),
                partitioned,
                object_acl,
                object_grants,
            },
        )
    })
}

/// No notification rules, or one of two sets of them (row format 21).
fn notification_rules() -> impl Strategy<Value = Vec<NotificationRule>> {
    let rule = |id: &str, prefix: &str| NotificationRule {
        id: id.to_owned(),
        kind: DestinationKind::Queue,
        target: "arn:hangar:sqs::hook:webhook".to_owned(),
        events: vec!["s3:ObjectCreated:*".to_owned()],
        prefix: prefix.to_owned(),
        suffix: String::new(),
    };
    prop_oneof![
        Just(Vec::new()),
        Just(vec![rule("a", "in/")]),
        Just(vec![rule("a", "in/"), rule("b", "out/")]),
    ]
}

/// No public access block, or any of its switches (row format 10).
fn public_access_block() -> impl Strategy<Value = Option<PublicAccessBlock>> {
    proptest::option::of(
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c, d)| {
            PublicAccessBlock {
                block_public_acls: a,
                ignore_public_acls: b,
                block_public_policy: c,
                restrict_public_buckets: d,
            }
        }),
    )
}

fn bucket_row() -> impl Strategy<Value = BucketRow> {
    (
        ts(),
        any::<bool>(),
        prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just(bucket_id("bucket", None)),
            Just(bucket_id("bucket", Some(&bucket_id("bucket", None)))),
        ],
        0u64..2,
        lww(tag_set()),
        lww(cors_rules()),
        lww(prop_oneof![
            Just(Versioning::Off),
            Just(Versioning::Enabled),
            Just(Versioning::Suspended)
        ]),
        prop_oneof![
            Just(None),
            Just(Some("GK000000000000000000000001".to_owned())),
            Just(Some("GK000000000000000000000002".to_owned())),
        ],
        lww(lock_config()),
        lww(lifecycle_rules()),
        lww(website_config()),
        (
            lww(policy_document()),
            lww(public_access_block()),
            lww(canned_acl()),
            lww(quotas()),
            lww(object_ownership()),
            lww(bucket_encryption()),
            lww(bucket_logging()),
            lww(grants()),
            lww(notification_rules()),
        ),
    )
        .prop_map(
            |(
                updated,
                deleted,
                id,
                created,
                tags,
                cors,
                versioning,
                created_by,
                object_lock,
                lifecycle,
                website,
                (
                    policy,
                    public_access_block,
                    acl,
                    quotas,
                    ownership,
                    encryption,
                    logging,
                    grants,
                    notification,
                ),
            )| {
                let mut b = BucketRow::new("bucket", id, created, updated);
                b.deleted = deleted;
                b.tags = tags;
                b.cors = cors;
                b.versioning = versioning;
                b.created_by = created_by;
                b.object_lock = object_lock;
                b.lifecycle = lifecycle;
                b.website = website;
                b.policy = policy;
                b.public_access_block = public_access_block;
                b.acl = acl;
                b.grants = grants;
                b.quotas = quotas;
                b.ownership = ownership;
                b.encryption = encryption;
                b.logging = logging;
                b.notification = notification;
                b
            },
        )
}

/// No quota, or one of a few limits of each kind: concurrent
/// `set-quotas` through different nodes, ties included.
fn quotas() -> impl Strategy<Value = BucketQuotas> {
    (
        prop::option::of(prop_oneof![Just(1000u64), Just(1 << 30)]),
        prop::option::of(prop_oneof![Just(1u64), Just(100)]),
    )
        .prop_map(|(max_size, max_objects)| BucketQuotas {
            max_size,
            max_objects,
        })
}

fn retention_mode() -> impl Strategy<Value = RetentionMode> {
    prop_oneof![
        Just(RetentionMode::Governance),
        Just(RetentionMode::Compliance)
    ]
}

/// No website, or one of two index documents with or without an error
/// document: enough values that concurrent registers differ and tie.
fn website_config() -> impl Strategy<Value = Option<WebsiteConfig>> {
    proptest::option::of(
        (
            prop_oneof![Just("index.html"), Just("home.htm")],
            proptest::option::of(Just("404.html")),
        )
            .prop_map(|(index, error)| WebsiteConfig {
                index_suffix: Some(index.to_owned()),
                error_key: error.map(str::to_owned),
                ..WebsiteConfig::default()
            }),
    )
}

fn lock_config() -> impl Strategy<Value = Option<ObjectLockConfig>> {
    proptest::option::of(
        proptest::option::of((retention_mode(), any::<bool>(), 1u32..3).prop_map(
            |(mode, days, n)| DefaultRetention {
                mode,
                period: if days {
                    RetentionPeriod::Days(n)
                } else {
                    RetentionPeriod::Years(n)
                },
            },
        ))
        .prop_map(|default_retention| ObjectLockConfig { default_retention }),
    )
}

fn retention() -> impl Strategy<Value = Option<Retention>> {
    proptest::option::of(
        (retention_mode(), 0u64..3).prop_map(|(mode, until_msec)| Retention { mode, until_msec }),
    )
}

/// Rows of a few versions, each with random retention and legal-hold
/// registers: concurrent Put/ObjectRetention and PutObjectLegalHold on the
/// same versions, and their removals.
fn locked_object_row() -> impl Strategy<Value = ObjectRow> {
    (0u8..3, any::<bool>(), lww(retention()), lww(any::<bool>())).prop_map(
        |(v, deleted, retention, legal_hold)| {
            if deleted {
                return ObjectRow::tombstone([v + 10; 16], u64::from(v) + 1);
            }
            let mut row = ObjectRow::tombstone([v; 16], u64::from(v));
            row.data = ObjectData::Inline(vec![v]);
            row.retention = retention;
            row.legal_hold = legal_hold;
            row
        },
    )
}

fn version_id() -> impl Strategy<Value = [u8; 16]> {
    (0u8..3).prop_map(|b| [b; 16])
}

fn object_data() -> impl Strategy<Value = ObjectData> {
    prop_oneof![
        Just(ObjectData::Deleted),
        Just(ObjectData::DeleteMarker),
        (0u8..2).prop_map(|b| ObjectData::Inline(vec![b; 3])),
        (1u32..3).prop_map(|count| ObjectData::Blocks { count }),
    ]
}

fn object_row() -> impl Strategy<Value = ObjectRow> {
    (
        ts(),
        version_id(),
        0u64..3,
        small_string(),
        proptest::option::of(small_string()),
        object_data(),
        lww(tag_set()),
        lww(retention()),
        lww(any::<bool>()),
        sse_c(),
        lww(canned_acl()),
        lww(grants()),
    )
        .prop_map(
            |(
                timestamp_msec,
                version,
                size,
                etag,
                sum,
                data,
                tags,
                retention,
                legal_hold,
                sse_c,
                acl,
                grants,
            )| {
                let mut headers = BTreeMap::new();
                headers.insert("content-type".to_owned(), etag.clone());
                ObjectRow {
                    timestamp_msec,
                    version,
                    size,
                    etag,
                    headers,
                    user_meta: BTreeMap::new(),
                    checksum: sum.map(|value| StoredChecksum {
                        algorithm: "CRC32".into(),
                        value,
                    }),
                    data,
                    tags,
                    retention,
                    legal_hold,
                    sse_c,
                    acl,
                    grants,
                }
            },
        )
}

/// Rows of a few versions only (each version's content fixed by its id, as
/// publication makes it), each with a random tag register: what concurrent
/// PutObjectTagging / DeleteObjectTagging of the same versions and PUTs of
/// new ones leave on replicas.
fn tagged_object_row() -> impl Strategy<Value = ObjectRow> {
    (
        0u8..3,
        any::<bool>(),
        lww(tag_set()),
        lww(canned_acl()),
        lww(grants()),
    )
        .prop_map(|(v, deleted, tags, acl, grants)| {
            let mut row = if deleted {
                ObjectRow::tombstone([v + 10; 16], u64::from(v) + 1)
            } else {
                ObjectRow {
                    timestamp_msec: u64::from(v),
                    version: [v; 16],
                    size: 1,
                    etag: format!("e{v}"),
                    headers: BTreeMap::new(),
                    user_meta: BTreeMap::new(),
                    checksum: None,
                    data: ObjectData::Inline(vec![v]),
                    tags: Lww::default(),
                    retention: Lww::default(),
                    legal_hold: Lww::default(),
                    sse_c: None,
                    acl: Default::default(),
                    grants: Lww::default(),
                }
            };
            if !row.is_deleted() {
                row.tags = tags;
                row.acl = acl;
                row.grants = grants;
            }
            row
        })
}

fn block_entry() -> impl Strategy<Value = BlockEntry> {
    (any::<bool>(), 0u8..2, 0u64..2, 0u64..2).prop_map(|(deleted, h, size, offset)| BlockEntry {
        deleted,
        hash: Hash([h; 32]),
        size,
        offset,
    })
}

fn mpu_row() -> impl Strategy<Value = MpuRow> {
    (
        any::<bool>(),
        small_string(),
        0u64..2,
        tag_set(),
        sse_c(),
        proptest::option::of(prop_oneof![Just("COMPOSITE"), Just("FULL_OBJECT")]),
    )
        .prop_map(
            |(deleted, key, initiated, tags, sse_c, checksum_type)| MpuRow {
                deleted,
                upload_id: [7; 16],
                key,
                initiated_msec: initiated,
                headers: BTreeMap::new(),
                user_meta: BTreeMap::new(),
                checksum_algorithm: checksum_type.map(|_| "CRC32".to_owned()),
                tags,
                sse_c,
                checksum_type: checksum_type.map(str::to_owned),
            },
        )
}

/// The rows of a completed version's parts (`version_part`).
fn version_part() -> impl Strategy<Value = VersionPart> {
    (
        any::<bool>(),
        0u64..3,
        0u64..3,
        proptest::option::of(0u8..2),
    )
        .prop_map(|(deleted, size, offset, sum)| VersionPart {
            deleted,
            size,
            offset,
            checksum: sum.map(|v| StoredChecksum {
                algorithm: "CRC32".into(),
                value: format!("{v}"),
            }),
        })
}

/// No SSE-C, one of two records (row format 11), or one of two managed
/// ones (row format 15).
fn sse_c() -> impl Strategy<Value = Option<SseC>> {
    proptest::option::of(0u8..4).prop_map(|r| {
        r.map(|i| SseC {
            algorithm: "AES256".into(),
            salt: [i; 16],
            check: Hash([i + 1; 32]),
            managed: (i >= 2).then(|| hangar_model::sse_managed::Managed::kms("k", [i; 16])),
        })
    })
}

fn part_row() -> impl Strategy<Value = PartRow> {
    (any::<bool>(), ts(), version_id(), 0u64..2, small_string()).prop_map(
        |(deleted, timestamp_msec, version, size, etag)| PartRow {
            deleted,
            timestamp_msec,
            version,
            size,
            etag,
            checksum: None,
            blocks: 1,
        },
    )
}

/// Alias rows of one alias as replicas hold them: made for one of two
/// buckets (or two incarnations of one), removed, at equal timestamps too.
fn alias_row() -> impl Strategy<Value = AliasRow> {
    (
        ts(),
        any::<bool>(),
        0u8..2,
        prop_oneof![Just("photos"), Just("videos")],
    )
        .prop_map(|(updated_msec, deleted, id, bucket)| AliasRow {
            updated_msec,
            deleted,
            bucket_id: format!("{id:02x}").repeat(32),
            bucket: bucket.to_owned(),
        })
}

fn orders() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..8, 0..16)
}

macro_rules! crdt_laws {
    ($laws:ident, $orders:ident, $strategy:expr) => {
        proptest! {
            #[test]
            fn $laws(a in $strategy, b in $strategy, c in $strategy) {
                laws::check(&a, &b, &c);
            }

            #[test]
            fn $orders(writes in proptest::collection::vec($strategy, 1..8), order in orders()) {
                laws::check_orders(&writes, &order);
            }
        }
    };
}

crdt_laws!(key_rows_obey_the_laws, key_rows_converge, key_row());
crdt_laws!(alias_rows_obey_the_laws, alias_rows_converge, alias_row());
crdt_laws!(
    bucket_rows_obey_the_laws,
    bucket_rows_converge,
    bucket_row()
);
crdt_laws!(
    object_rows_obey_the_laws,
    object_rows_converge,
    object_row()
);
crdt_laws!(
    tagged_object_rows_obey_the_laws,
    tagged_object_rows_converge,
    tagged_object_row()
);
crdt_laws!(
    locked_object_rows_obey_the_laws,
    locked_object_rows_converge,
    locked_object_row()
);
crdt_laws!(
    block_entries_obey_the_laws,
    block_entries_converge,
    block_entry()
);
crdt_laws!(mpu_rows_obey_the_laws, mpu_rows_converge, mpu_row());
crdt_laws!(part_rows_obey_the_laws, part_rows_converge, part_row());
crdt_laws!(
    version_parts_obey_the_laws,
    version_parts_converge,
    version_part()
);

#[test]
fn two_concurrent_grants_on_one_key_both_survive() {
    let base = KeyRow::new("GK000000000000000000000001", "secret-secret-00", "k", 1);
    let (mut on_a, mut on_b) = (base.clone(), base);
    let rw = Permission {
        read: true,
        write: true,
        owner: false,
    };
    on_a.buckets.update("photos".into(), 5, rw);
    on_b.buckets.update("videos".into(), 5, rw);
    on_a.merge(&on_b);
    assert_eq!(on_a.permission("photos"), rw);
    assert_eq!(on_a.permission("videos"), rw);
}

#[test]
fn a_deleted_key_stays_deleted_and_loses_its_rights_whatever_the_order() {
    let mut base = KeyRow::new("GK000000000000000000000001", "secret-secret-00", "k", 1);
    let rw = Permission {
        read: true,
        write: true,
        owner: true,
    };
    base.buckets.update("photos".into(), 2, rw);
    let mut deleted = base.clone();
    deleted.delete(3);
    for (mut x, y) in [(base.clone(), deleted.clone()), (deleted.clone(), base)] {
        x.merge(&y);
        assert!(x.is_deleted());
        assert!(!x.permission("photos").any());
    }
}

#[test]
fn an_expiry_change_and_a_grant_through_two_nodes_both_survive_and_the_latest_expiry_wins() {
    let base = KeyRow::new("GK000000000000000000000001", "secret-secret-00", "k", 1);
    let rw = Permission {
        read: true,
        write: true,
        owner: false,
    };
    let (mut on_a, mut on_b, mut on_c) = (base.clone(), base.clone(), base);
    on_a.expires_msec.update(5, Some(1_000));
    on_b.buckets.update("photos".into(), 5, rw);
    // Later, on a third node, the expiry is cleared.
    on_c.expires_msec.update(7, None);
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1]] {
        let rows = [&on_a, &on_b, &on_c];
        let mut x = rows[order[0]].clone();
        x.merge(rows[order[1]]);
        x.merge(rows[order[2]]);
        assert_eq!(x.permission("photos"), rw, "{order:?}");
        assert_eq!(x.expires_msec.value, None, "{order:?}");
        assert!(!x.is_expired(u64::MAX));
    }
    let mut x = on_a.clone();
    x.merge(&on_b);
    assert!(x.is_expired(1_000) && !x.is_expired(999));
}

#[test]
fn an_object_tombstone_newer_than_the_object_wins_on_every_replica() {
    let live = ObjectRow {
        timestamp_msec: 10,
        version: [1; 16],
        size: 1,
        etag: "e".into(),
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum: None,
        data: ObjectData::Inline(vec![1]),
        tags: Default::default(),
        retention: Default::default(),
        legal_hold: Default::default(),
        sse_c: None,
        acl: Default::default(),
        grants: Lww::default(),
    };
    let tomb = ObjectRow::tombstone([2; 16], 11);
    let (mut a, mut b) = (live.clone(), tomb.clone());
    a.merge(&tomb);
    b.merge(&live);
    assert!(a.is_deleted() && b.is_deleted());
    assert_eq!(a, b);
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_tag_change_and_a_cors_change_of_one_bucket_through_two_nodes_both_survive() {
    let base = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    let (mut on_a, mut on_b) = (base.clone(), base);
    on_a.tags.update(5, tags(&[("team", "web")]));
    on_b.cors.update(
        5,
        vec![CorsRule {
            id: Some("r".into()),
            allowed_origins: vec!["*".into()],
            allowed_methods: vec!["GET".into()],
            allowed_headers: Vec::new(),
            expose_headers: Vec::new(),
            max_age_seconds: None,
        }],
    );
    let mut ab = on_a.clone();
    ab.merge(&on_b);
    let mut ba = on_b.clone();
    ba.merge(&on_a);
    assert_eq!(ab, ba);
    assert_eq!(ab.tags.value, tags(&[("team", "web")]));
    assert_eq!(ab.cors_rules().len(), 1);
}

#[test]
fn a_recreated_bucket_does_not_inherit_the_old_configuration() {
    let mut old = BucketRow::new("photos", "aa".repeat(32), 1, 1);
    old.tags.update(50, tags(&[("k", "v")]));
    let new = BucketRow::new("photos", "bb".repeat(32), 3, 3);
    let mut m = old.clone();
    m.merge(&new);
    assert_eq!(m, new);
    let mut m = new.clone();
    m.merge(&old);
    assert_eq!(m, new);
}

#[test]
fn tags_of_a_replaced_version_do_not_move_to_the_new_one() {
    let v1 = ObjectRow {
        timestamp_msec: 10,
        version: [1; 16],
        size: 1,
        etag: "e".into(),
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum: None,
        data: ObjectData::Inline(vec![1]),
        tags: Lww::default(),
        retention: Default::default(),
        legal_hold: Default::default(),
        sse_c: None,
        acl: Default::default(),
        grants: Lww::default(),
    };
    let mut tagged = v1.clone();
    tagged.tags.update(100, tags(&[("a", "1")]));
    let v2 = ObjectRow {
        timestamp_msec: 11,
        version: [2; 16],
        tags: Lww::new(0, tags(&[("b", "2")])),
        ..v1.clone()
    };
    for order in [
        [&v1, &tagged, &v2],
        [&v2, &tagged, &v1],
        [&tagged, &v2, &v1],
    ] {
        let mut r = order[0].clone();
        r.merge(order[1]);
        r.merge(order[2]);
        assert_eq!(r, v2);
    }
    // The same version: the later change of its tags wins, a removal too.
    let mut removed = tagged.clone();
    removed.tags.update(90, BTreeMap::new());
    let mut r = tagged.clone();
    r.merge(&v1);
    assert_eq!(r.tag_set(), &tags(&[("a", "1")]));
    r.merge(&removed);
    assert!(r.tag_set().is_empty());
}

/// Replicas that each create the bucket from the row they hold (derived id)
/// or delete it, then exchange rows in a random order: creations made from
/// the same row have the same id, every replica converges on one row, and
/// [`displaced`] reports a hidden live bucket only when two creations from
/// different rows met.
#[derive(Debug, Clone)]
enum BucketOp {
    /// Replica `r` creates the bucket if it holds no live one.
    Create { r: usize, by: u8 },
    /// Replica `r` deletes the live bucket it holds.
    Delete { r: usize },
    /// Replica `to` merges the row of replica `from`.
    Sync { from: usize, to: usize },
}

fn bucket_op() -> impl Strategy<Value = BucketOp> {
    prop_oneof![
        (0usize..3, 1u8..3).prop_map(|(r, by)| BucketOp::Create { r, by }),
        (0usize..3).prop_map(|r| BucketOp::Delete { r }),
        (0usize..3, 0usize..3).prop_map(|(from, to)| BucketOp::Sync { from, to }),
    ]
}

proptest! {
    #[test]
    fn creations_from_one_state_make_one_bucket_and_replicas_converge(
        ops in proptest::collection::vec(bucket_op(), 1..24)
    ) {
        let mut replicas: Vec<Option<BucketRow>> = vec![None; 3];
        let mut clock = 1u64;
        // (predecessor id, id) of every creation made.
        let mut made: Vec<(Option<String>, String)> = Vec::new();
        let mut hidden = 0usize;
        let merge_into = |dst: &mut Option<BucketRow>, row: &BucketRow, hidden: &mut usize| {
            match dst {
                Some(d) => {
                    let before = d.clone();
                    d.merge(row);
                    if displaced(&before, d) || displaced(row, d) {
                        *hidden += 1;
                    }
                }
                None => *dst = Some(row.clone()),
            }
        };
        for op in ops {
            clock += 1;
            match op {
                BucketOp::Create { r, by } => {
                    if replicas[r].as_ref().is_some_and(|b| !b.deleted) {
                        continue;
                    }
                    let prev = replicas[r].as_ref().map(|b| b.id.clone());
                    let updated = replicas[r].as_ref().map_or(clock, |b| clock.max(b.updated_msec + 1));
                    let mut row = BucketRow::new("bucket", bucket_id("bucket", prev.as_deref()), clock, updated);
                    row.created_by = Some(format!("GK00000000000000000000000{by}"));
                    made.push((prev, row.id.clone()));
                    merge_into(&mut replicas[r], &row, &mut hidden);
                }
                BucketOp::Delete { r } => {
                    if let Some(b) = replicas[r].as_mut().filter(|b| !b.deleted) {
                        b.deleted = true;
                        b.updated_msec = clock.max(b.updated_msec + 1);
                    }
                }
                BucketOp::Sync { from, to } => {
                    if let Some(row) = replicas[from].clone() {
                        merge_into(&mut replicas[to], &row, &mut hidden);
                    }
                }
            }
        }
        for (p1, id1) in &made {
            for (p2, id2) in &made {
                if p1 == p2 {
                    prop_assert_eq!(id1, id2);
                }
            }
        }
        // Every creation came from a predecessor chain: when all of them
        // shared the same predecessors, no merge hid a live bucket.
        let chain_ok = made.iter().all(|(p, _)| made.iter().all(|(q, _)| p == q));
        if chain_ok {
            prop_assert_eq!(hidden, 0);
        }
        let rows: Vec<BucketRow> = replicas.into_iter().flatten().collect();
        if let Some(first) = rows.first() {
            let mut all = first.clone();
            for r in &rows {
                all.merge(r);
            }
            for order in [rows.clone(), rows.iter().rev().cloned().collect()] {
                let mut m = order[0].clone();
                for r in &order {
                    m.merge(r);
                }
                prop_assert_eq!(&m, &all);
            }
        }
    }
}

#[test]
fn the_successor_of_a_deleted_bucket_is_not_reported_and_a_rival_is() {
    let first = BucketRow::new("photos", bucket_id("photos", None), 1, 1);
    let next = BucketRow::new("photos", bucket_id("photos", Some(&first.id)), 3, 3);
    let mut m = first.clone();
    m.merge(&next);
    assert_eq!(m, next);
    assert!(!displaced(&first, &m));
    let rival = BucketRow::new("photos", "cd".repeat(32), 4, 4);
    let mut m = next.clone();
    m.merge(&rival);
    assert!(displaced(&next, &m));
    let mut tomb = next.clone();
    tomb.deleted = true;
    tomb.updated_msec = 5;
    assert!(!displaced(&tomb, &m), "a deleted bucket hides nothing");
}

/// One replica's rows of bucket `photos` and of its alias `pics`.
#[derive(Debug, Clone, Default)]
struct AliasReplica {
    bucket: Option<BucketRow>,
    alias: Option<AliasRow>,
}

impl AliasReplica {
    /// The bucket alias `pics` reaches on this replica, as
    /// `Buckets::get_bucket` resolves it.
    fn resolve(&self) -> Option<&BucketRow> {
        let a = self.alias.as_ref().filter(|a| !a.deleted)?;
        self.bucket
            .as_ref()
            .filter(|b| !b.deleted && b.id == a.bucket_id && b.name == a.bucket)
    }

    fn merge(&mut self, other: &AliasReplica) {
        match (self.bucket.as_mut(), &other.bucket) {
            (Some(m), Some(t)) => m.merge(t),
            (None, Some(t)) => self.bucket = Some(t.clone()),
            _ => {}
        }
        match (self.alias.as_mut(), &other.alias) {
            (Some(m), Some(t)) => m.merge(t),
            (None, Some(t)) => self.alias = Some(t.clone()),
            _ => {}
        }
    }
}

#[derive(Debug, Clone)]
enum AliasOp {
    /// Replica `r`, the name's coordinator, creates bucket `photos` if
    /// no replica holds a live one (its quorum read sees every
    /// acknowledged write: here, every replica's rows).
    Create { r: usize },
    /// Replica `r` deletes its live bucket and turns its aliases into
    /// tombstones (`Model::delete_bucket`).
    Delete { r: usize },
    /// Replica `r`, the alias's coordinator, makes `pics` an alias of the
    /// live bucket after the same quorum read.
    Alias { r: usize },
    /// Replica `r` removes the alias.
    Unalias { r: usize },
    /// Replica `to` merges the rows of replica `from`.
    Sync { from: usize, to: usize },
}

fn alias_op() -> impl Strategy<Value = AliasOp> {
    prop_oneof![
        (0usize..3).prop_map(|r| AliasOp::Create { r }),
        (0usize..3).prop_map(|r| AliasOp::Delete { r }),
        (0usize..3).prop_map(|r| AliasOp::Alias { r }),
        (0usize..3).prop_map(|r| AliasOp::Unalias { r }),
        (0usize..3, 0usize..3).prop_map(|(from, to)| AliasOp::Sync { from, to }),
    ]
}

proptest! {
    /// Whatever the order of creations and alias changes (each decided by
    /// its coordinator), deletes (not serialised) and exchanges: an alias
    /// reaches only the bucket it was made for; replicas that exchanged
    /// everything hold the same rows (merged in any order), resolve the
    /// alias the same way, and not to a deleted bucket.
    #[test]
    fn aliases_converge_and_never_reach_a_deleted_bucket(
        ops in proptest::collection::vec(alias_op(), 1..32)
    ) {
        let mut replicas: Vec<AliasReplica> = vec![AliasReplica::default(); 3];
        let mut clock = 1u64;
        let mut deleted_ids = std::collections::BTreeSet::new();
        // The ids aliases were made for.
        let mut aliased_ids = std::collections::BTreeSet::new();
        for op in ops {
            clock += 1;
            match op {
                AliasOp::Create { r } => {
                    quorum_read(&mut replicas, r);
                    let rep = &mut replicas[r];
                    if rep.bucket.as_ref().is_some_and(|b| !b.deleted) {
                        continue;
                    }
                    let prev = rep.bucket.as_ref().map(|b| b.id.clone());
                    let updated = rep.bucket.as_ref().map_or(clock, |b| clock.max(b.updated_msec + 1));
                    let row = BucketRow::new("photos", bucket_id("photos", prev.as_deref()), clock, updated);
                    // Deletes are not serialised: one made on a replica that
                    // missed a re-creation can bring back an older tombstone,
                    // and the next creation then takes an id again (the
                    // same bucket, objects included: doc/replication.md §9).
                    deleted_ids.remove(&row.id);
                    rep.merge(&AliasReplica { bucket: Some(row), alias: None });
                }
                AliasOp::Delete { r } => {
                    let rep = &mut replicas[r];
                    if let Some(b) = rep.bucket.as_mut().filter(|b| !b.deleted) {
                        b.deleted = true;
                        b.updated_msec = clock.max(b.updated_msec + 1);
                        deleted_ids.insert(b.id.clone());
                        let id = b.id.clone();
                        if let Some(a) = rep.alias.as_mut().filter(|a| !a.deleted && a.bucket_id == id) {
                            a.deleted = true;
                            a.updated_msec = clock.max(a.updated_msec + 1);
                        }
                    }
                }
                AliasOp::Alias { r } => {
                    quorum_read(&mut replicas, r);
                    let rep = &mut replicas[r];
                    let Some(b) = rep.bucket.clone().filter(|b| !b.deleted) else { continue };
                    if rep.resolve().is_some() {
                        continue;
                    }
                    let updated = rep.alias.as_ref().map_or(clock, |a| clock.max(a.updated_msec + 1));
                    aliased_ids.insert(b.id.clone());
                    let row = AliasRow { updated_msec: updated, deleted: false, bucket_id: b.id, bucket: b.name };
                    rep.merge(&AliasReplica { bucket: None, alias: Some(row) });
                }
                AliasOp::Unalias { r } => {
                    if let Some(a) = replicas[r].alias.as_mut().filter(|a| !a.deleted) {
                        a.deleted = true;
                        a.updated_msec = clock.max(a.updated_msec + 1);
                    }
                }
                AliasOp::Sync { from, to } => {
                    let rows = replicas[from].clone();
                    replicas[to].merge(&rows);
                }
            }
            // A replica that has not yet received a delete still serves the
            // bucket, through its name as through the alias; but an alias
            // reaches no other bucket than the one it was made for.
            for rep in &replicas {
                if let Some(b) = rep.resolve() {
                    prop_assert!(aliased_ids.contains(&b.id), "an alias reached another incarnation");
                }
            }
        }
        let orders = [[0, 1, 2], [2, 1, 0], [1, 0, 2]];
        let merged: Vec<AliasReplica> = orders
            .iter()
            .map(|o| {
                let mut m = replicas[o[0]].clone();
                m.merge(&replicas[o[1]]);
                m.merge(&replicas[o[2]]);
                m.merge(&replicas[o[0]]);
                m
            })
            .collect();
        for m in &merged[1..] {
            prop_assert_eq!(&m.bucket, &merged[0].bucket);
            prop_assert_eq!(&m.alias, &merged[0].alias);
            prop_assert_eq!(m.resolve().map(|b| &b.id), merged[0].resolve().map(|b| &b.id));
        }
        if let Some(b) = merged[0].resolve() {
            prop_assert!(!deleted_ids.contains(&b.id), "an alias reached a deleted bucket");
        }
    }
}

/// What the coordinator replica `r` holds after its quorum reads: the
/// rows of every replica merged into its own.
fn quorum_read(replicas: &mut [AliasReplica], r: usize) {
    for i in 0..replicas.len() {
        let rows = replicas[i].clone();
        replicas[r].merge(&rows);
    }
}
