//! Row format 12 (doc/table-rows.md): a bucket row carrying quotas is
//! written with format byte 12 and `quotas` appended to its map, so a
//! binary of an older format refuses it instead of dropping the quotas on
//! its next merge; every other bucket row keeps its format byte for byte.
//! And the usage counters the quotas are checked against
//! ([`crate::usage`]): kept by the object table's hook through overwrites,
//! deletes and versions, equal to a recount ([`crate::usage_backfill::backfill`]).

use std::sync::Arc;

use crate::row_format::{CREATOR_ROW_FORMAT, LIFECYCLE_ROW_FORMAT, QUOTA_ROW_FORMAT};
use hangar_table::{ROW_FORMAT, encode};

use crate::bucket::{BucketQuotas, BucketRow, BucketTable, Versioning};
use crate::object::{ObjectData, ObjectRow};
use crate::state::MODEL_STATE_TREE;
use crate::test_support::{fixstr as s, test_model};
use crate::usage::{USAGE_COUNTED, USAGE_TREE, Usage};
use crate::version_keys::VersionRef;
use crate::{Model, ModelError};

#[test]
fn a_bucket_without_quotas_keeps_its_format_and_one_with_quotas_is_format_12() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    let plain = encode::<BucketTable>(&b);
    assert_eq!(plain[0], ROW_FORMAT);
    assert!(!plain.windows(7).any(|w| w == s("quotas").as_slice()));
    b.created_by = Some("GK000000000000000000000001".into());
    assert_eq!(encode::<BucketTable>(&b)[0], CREATOR_ROW_FORMAT);

    b.quotas.update(
        7,
        BucketQuotas {
            max_size: Some(1000),
            max_objects: None,
        },
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], QUOTA_ROW_FORMAT);
    assert_eq!(v[1], 0x87, "the 6 fields of format 6, then quotas");
    // a6 "quotas" 82 a2 "ts" 07 a5 "value" 81 (max_objects left out)
    // a8 "max_size" cd 03 e8
    let mut tail = s("quotas");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.push(0x81);
    tail.extend(s("max_size"));
    tail.extend([0xcd, 0x03, 0xe8]);
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // With lifecycle rules too: format 12, which includes 9.
    b.lifecycle.update(8, Vec::new());
    assert_eq!(encode::<BucketTable>(&b)[0], QUOTA_ROW_FORMAT);
    // Removed later: still format 12 (the removal must replicate).
    let mut c = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    c.quotas.update(9, BucketQuotas::default());
    assert_eq!(encode::<BucketTable>(&c)[0], QUOTA_ROW_FORMAT);
    c.lifecycle.update(10, Vec::new());
    assert_ne!(LIFECYCLE_ROW_FORMAT, QUOTA_ROW_FORMAT);
}

fn object(size: usize) -> ObjectRow {
    ObjectRow {
        timestamp_msec: 1,
        version: crate::new_version_id(),
        size: size as u64,
        etag: "e".into(),
        headers: Default::default(),
        user_meta: Default::default(),
        checksum: None,
        data: ObjectData::Inline(vec![7; size]),
        tags: Default::default(),
        retention: Default::default(),
        legal_hold: Default::default(),
        sse_c: None,
        acl: Default::default(),
        grants: hangar_table::Lww::default(),
    }
}

async fn usage(model: &Model, b: &BucketRow) -> (u64, u64) {
    let u = model.objects().bucket_usage(b).await.unwrap();
    (u.objects, u.bytes)
}

/// What a recount from the object rows says: the backfill run again.
async fn recount(model: &Arc<Model>, b: &BucketRow) -> (u64, u64) {
    let db = model.db().clone();
    let id = b.id_bytes().to_vec();
    db.write(move |tx| {
        tx.delete(MODEL_STATE_TREE, USAGE_COUNTED.to_vec());
        tx.put(USAGE_TREE, id, vec![0xff; 16]);
        Ok::<_, hangar_db::DbError>(())
    })
    .await
    .unwrap();
    crate::usage_backfill::backfill(&db).await.unwrap();
    usage(model, b).await
}

#[tokio::test]
async fn counters_follow_overwrites_deletes_and_versions() {
    let (_d, model) = test_model().await;
    let b = model.buckets().create_bucket("photos", None).await.unwrap();
    assert_eq!(usage(&model, &b).await, (0, 0));
    model.objects().publish(&b, "a", object(10)).await.unwrap();
    model.objects().publish(&b, "b", object(20)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (2, 30));
    // An overwrite replaces the bytes, not the count.
    model.objects().publish(&b, "a", object(5)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (2, 25));
    assert!(model.objects().delete(&b, "b").await.unwrap());
    assert_eq!(usage(&model, &b).await, (1, 5));
    // Deleting again changes nothing.
    assert!(!model.objects().delete(&b, "b").await.unwrap());
    assert_eq!(usage(&model, &b).await, (1, 5));
    assert_eq!(recount(&model, &b).await, (1, 5));

    // Versioned: every version counts, a delete marker does not.
    let b = model
        .buckets()
        .set_bucket_versioning("photos", Versioning::Enabled)
        .await
        .unwrap();
    model.objects().publish(&b, "a", object(7)).await.unwrap();
    model.objects().publish(&b, "a", object(8)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (3, 20));
    model.objects().delete_version(&b, "a", None).await.unwrap();
    assert_eq!(usage(&model, &b).await, (3, 20));
    // Removing the null version by id frees it.
    model
        .objects()
        .delete_version(&b, "a", Some(VersionRef::Null))
        .await
        .unwrap();
    assert_eq!(usage(&model, &b).await, (2, 15));
    assert_eq!(recount(&model, &b).await, (2, 15));
    // Another bucket has its own counters.
    let other = model.buckets().create_bucket("other", None).await.unwrap();
    assert_eq!(usage(&model, &other).await, (0, 0));
}

#[tokio::test]
async fn quotas_refuse_what_would_pass_them_and_nothing_else() {
    let (_d, model) = test_model().await;
    model.buckets().create_bucket("photos", None).await.unwrap();
    let quotas = BucketQuotas {
        max_size: Some(100),
        max_objects: Some(2),
    };
    let b = model
        .buckets()
        .set_bucket_quotas("photos", quotas)
        .await
        .unwrap();
    assert_eq!(
        model
            .buckets()
            .get_bucket("photos")
            .await
            .unwrap()
            .unwrap()
            .quotas(),
        quotas
    );
    model.objects().publish(&b, "a", object(40)).await.unwrap();
    model.objects().publish(&b, "b", object(40)).await.unwrap();
    // A third object: past max_objects.
    let e = model
        .objects()
        .publish(&b, "c", object(1))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ModelError::QuotaExceeded(m) if m.contains("maximum objects for this bucket: 2")),
        "{e}"
    );
    // An overwrite adds no object; growing past max_size is refused.
    model.objects().publish(&b, "a", object(60)).await.unwrap();
    let e = model
        .objects()
        .publish(&b, "a", object(61))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ModelError::QuotaExceeded(m) if m.contains("already 100 bytes")),
        "{e}"
    );
    // Delete one: room again.
    model.objects().delete(&b, "b").await.unwrap();
    model.objects().publish(&b, "c", object(40)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (2, 100));
    // Removing the quotas lifts them.
    let b = model
        .buckets()
        .set_bucket_quotas("photos", BucketQuotas::default())
        .await
        .unwrap();
    model.objects().publish(&b, "d", object(50)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (3, 150));
    assert!(
        model
            .buckets()
            .set_bucket_quotas("nope", BucketQuotas::default())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn the_backfill_counts_rows_stored_before_the_counters_once() {
    let (_d, model) = test_model().await;
    let b = model.buckets().create_bucket("photos", None).await.unwrap();
    model.objects().publish(&b, "a", object(3)).await.unwrap();
    model.objects().publish(&b, "b", object(4)).await.unwrap();
    // As a node of the previous binary left it: rows, no counters.
    let db = model.db().clone();
    let id = b.id_bytes().to_vec();
    db.write(move |tx| {
        tx.delete(USAGE_TREE, id);
        Ok::<_, hangar_db::DbError>(())
    })
    .await
    .unwrap();
    assert_eq!(usage(&model, &b).await, (0, 0));
    assert_eq!(crate::usage_backfill::backfill(&db).await.unwrap(), 2);
    assert_eq!(usage(&model, &b).await, (2, 7));
    // Marked done: a second start does not count again.
    assert_eq!(crate::usage_backfill::backfill(&db).await.unwrap(), 0);
    model.objects().publish(&b, "c", object(5)).await.unwrap();
    assert_eq!(usage(&model, &b).await, (3, 12));
    assert_eq!(
        model.objects().bucket_usage(&b).await.unwrap(),
        Usage {
            objects: 3,
            bytes: 12
        }
    );
}
