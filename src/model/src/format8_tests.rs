//! Row format 8 (doc/table-rows.md): a version row carrying a retention or
//! a legal hold, or a bucket row carrying an Object Lock configuration, is
//! written with format byte 8 and the registers appended to its map; every
//! other row keeps its format byte for byte, so a binary of an older
//! format refuses (rather than silently drops) a lock.

use crate::row_format::OBJECT_LOCK_ROW_FORMAT;
use hangar_table::{Lww, ROW_FORMAT, encode};

use crate::bucket::{BucketRow, BucketTable, Versioning};
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::object_lock::{
    DefaultRetention, ObjectLockConfig, Retention, RetentionMode, RetentionPeriod,
};
use crate::test_support::{fixstr as s, test_model};

fn object() -> ObjectRow {
    let mut r = ObjectRow::tombstone([5; 16], 1);
    r.data = ObjectData::Inline(b"hi".to_vec());
    r
}

#[test]
fn a_version_without_lock_keeps_its_format_and_one_with_it_is_format_8() {
    let plain = object();
    let bytes = encode::<ObjectTable>(&plain);
    assert_eq!(bytes[0], ROW_FORMAT);
    assert_eq!(bytes[1], 0x88, "the 8 fields of format 2");

    let mut held = plain.clone();
    held.legal_hold = Lww::new(0, true);
    let v = encode::<ObjectTable>(&held);
    assert_eq!(v[0], OBJECT_LOCK_ROW_FORMAT);
    assert_eq!(v[1], 0x89);
    // aa "legal_hold" 82 a2 "ts" 00 a5 "value" c3, at the end; the rest as format 2.
    let mut tail = s("legal_hold");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x00);
    tail.extend(s("value"));
    tail.push(0xc3);
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(&v[2..v.len() - tail.len()], &bytes[2..]);
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), held);

    let mut kept = plain.clone();
    kept.retention = Lww::new(
        7,
        Some(Retention {
            mode: RetentionMode::Compliance,
            until_msec: 300,
        }),
    );
    let v = encode::<ObjectTable>(&kept);
    assert_eq!(v[0], OBJECT_LOCK_ROW_FORMAT);
    // a9 "retention" 82 a2 "ts" 07 a5 "value"
    //   82 a4 "mode" aa "Compliance" aa "until_msec" cd 01 2c
    let mut tail = s("retention");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.push(0x82);
    tail.extend(s("mode"));
    tail.extend(s("Compliance"));
    tail.extend(s("until_msec"));
    tail.extend([0xcd, 0x01, 0x2c]);
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), kept);
    // Removed later: still format 8 (the removal must replicate).
    kept.retention.update(8, None);
    assert_eq!(encode::<ObjectTable>(&kept)[0], OBJECT_LOCK_ROW_FORMAT);
}

#[test]
fn a_bucket_with_object_lock_is_format_8() {
    let mut b = BucketRow::new("b", "ab".repeat(32), 1, 1);
    b.versioning = Lww::new(2, Versioning::Enabled);
    let before = encode::<BucketTable>(&b);
    assert_eq!(before[0], crate::row_format::VERSIONING_ROW_FORMAT);
    b.object_lock = Lww::new(
        3,
        Some(ObjectLockConfig {
            default_retention: Some(DefaultRetention {
                mode: RetentionMode::Governance,
                period: RetentionPeriod::Days(2),
            }),
        }),
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], OBJECT_LOCK_ROW_FORMAT);
    // ab "object_lock" 82 a2 "ts" 03 a5 "value"
    //   81 b1 "default_retention" 82 a4 "mode" aa "Governance" a6 "period" 81 a4 "Days" 02
    let mut tail = s("object_lock");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x03);
    tail.extend(s("value"));
    tail.push(0x81);
    tail.extend(s("default_retention"));
    tail.push(0x82);
    tail.extend(s("mode"));
    tail.extend(s("Governance"));
    tail.extend(s("period"));
    tail.push(0x81);
    tail.extend(s("Days"));
    tail.push(0x02);
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(&v[2..v.len() - tail.len()], &before[2..]);
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
}

#[tokio::test]
async fn a_locked_version_is_refused_to_deletes_until_its_date_through_the_model() {
    let (_d, model) = test_model().await;
    model.buckets().create_bucket("locked", None).await.unwrap();
    let b = model
        .buckets()
        .set_bucket_object_lock("locked", ObjectLockConfig::default(), true)
        .await
        .unwrap();
    assert_eq!(b.versioning(), Versioning::Enabled);
    assert!(matches!(
        model
            .buckets()
            .set_bucket_versioning("locked", Versioning::Suspended)
            .await,
        Err(crate::ModelError::InvalidBucketState(_))
    ));
    let mut row = object();
    row.timestamp_msec = hangar_util::time::now_msec();
    row.version = crate::new_version_id();
    row.legal_hold = Lww::new(0, true);
    let published = model.objects().publish(&b, "k", row).await.unwrap();
    let found = model
        .objects()
        .latest_version(&b, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.row.version, published.version);
    assert!(!crate::object_lock::may_remove_now(&found.row, u64::MAX));
    assert!(matches!(
        model
            .objects()
            .delete_version_as(&b, "k", found.id, true)
            .await,
        Err(crate::ModelError::ObjectLocked)
    ));
    model
        .objects()
        .set_version_legal_hold(&b, &found, false)
        .await
        .unwrap();
    let found = model
        .objects()
        .latest_version(&b, "k")
        .await
        .unwrap()
        .unwrap();
    let far = Retention {
        mode: RetentionMode::Governance,
        until_msec: hangar_util::time::now_msec() + 60_000,
    };
    model
        .objects()
        .set_version_retention(&b, &found, Some(far), false)
        .await
        .unwrap();
    let found = model
        .objects()
        .latest_version(&b, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.row.retention(), Some(far));
    assert!(matches!(
        model.objects().delete_version(&b, "k", found.id).await,
        Err(crate::ModelError::ObjectLocked)
    ));
    assert!(matches!(
        model
            .objects()
            .set_version_retention(&b, &found, None, false)
            .await,
        Err(crate::ModelError::ObjectLocked)
    ));
    let d = model
        .objects()
        .delete_version_as(&b, "k", found.id, true)
        .await
        .unwrap();
    assert!(d.existed);
    assert!(
        model
            .objects()
            .latest_version(&b, "k")
            .await
            .unwrap()
            .is_none()
    );
}
