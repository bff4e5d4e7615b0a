//! Every row type's merge is commutative, associative and idempotent, and
//! replicas receiving the same writes in any order (some twice) converge —
//! deletes (tombstones) included. Domains are kept tiny so that equal
//! timestamps, equal versions and concurrent deletes are common.

use std::collections::BTreeMap;

use hangar_model::bucket::BucketRow;
use hangar_model::key::{KeyRow, Permission};
use hangar_model::multipart::{MpuRow, PartRow};
use hangar_model::object::{ObjectData, ObjectRow, StoredChecksum};
use hangar_model::version::BlockEntry;
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
/// revocations on a few buckets, renames, new secrets, deletes.
fn key_row() -> impl Strategy<Value = KeyRow> {
    (
        lww(small_string()),
        lww(small_string()),
        lww(any::<bool>()),
        proptest::collection::vec((small_string(), ts(), permission()), 0..4),
        0u64..3,
        lww(any::<bool>()),
    )
        .prop_map(|(name, secret, create, grants, created, deleted)| {
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
            }
        })
}

fn bucket_row() -> impl Strategy<Value = BucketRow> {
    (ts(), any::<bool>(), small_string(), 0u64..3).prop_map(|(updated, deleted, id, created)| {
        BucketRow {
            updated_msec: updated,
            deleted,
            id,
            name: "bucket".into(),
            created_msec: created,
        }
    })
}

fn version_id() -> impl Strategy<Value = [u8; 16]> {
    (0u8..3).prop_map(|b| [b; 16])
}

fn object_data() -> impl Strategy<Value = ObjectData> {
    prop_oneof![
        Just(ObjectData::Deleted),
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
    )
        .prop_map(|(timestamp_msec, version, size, etag, sum, data)| {
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
            }
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
    (any::<bool>(), small_string(), 0u64..2).prop_map(|(deleted, key, initiated)| MpuRow {
        deleted,
        upload_id: [7; 16],
        key,
        initiated_msec: initiated,
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum_algorithm: None,
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
    block_entries_obey_the_laws,
    block_entries_converge,
    block_entry()
);
crdt_laws!(mpu_rows_obey_the_laws, mpu_rows_converge, mpu_row());
crdt_laws!(part_rows_obey_the_laws, part_rows_converge, part_row());

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
    };
    let tomb = ObjectRow::tombstone([2; 16], 11);
    let (mut a, mut b) = (live.clone(), tomb.clone());
    a.merge(&tomb);
    b.merge(&live);
    assert!(a.is_deleted() && b.is_deleted());
    assert_eq!(a, b);
}
