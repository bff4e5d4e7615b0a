//! Row format 9 (doc/table-rows.md): a bucket row carrying lifecycle rules
//! is written with format byte 9 and `lifecycle` appended to its map, so a
//! binary of an older format refuses it instead of dropping the rules on
//! its next merge; every other bucket row keeps its format byte for byte.

use crate::row_format::{CREATOR_ROW_FORMAT, LIFECYCLE_ROW_FORMAT};
use hangar_table::{ROW_FORMAT, encode};

use crate::bucket::{BucketRow, BucketTable};
use crate::lifecycle::{LifecycleFilter, LifecycleRule};
use crate::test_support::{fixstr as s, test_model};

fn rule() -> LifecycleRule {
    LifecycleRule {
        id: "r".into(),
        enabled: true,
        filter: Some(LifecycleFilter {
            prefix: Some("logs/".into()),
            ..Default::default()
        }),
        expiration_days: Some(3),
        ..Default::default()
    }
}

#[test]
fn a_bucket_without_rules_keeps_its_format_and_one_with_rules_is_format_9() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    let plain = encode::<BucketTable>(&b);
    assert_eq!(plain[0], ROW_FORMAT);
    assert!(!plain.windows(9).any(|w| w == s("lifecycle").as_slice()));
    b.created_by = Some("GK000000000000000000000001".into());
    assert_eq!(encode::<BucketTable>(&b)[0], CREATOR_ROW_FORMAT);

    b.lifecycle.update(7, vec![rule()]);
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], LIFECYCLE_ROW_FORMAT);
    assert_eq!(v[1], 0x87, "the 6 fields of format 6, then lifecycle");
    // a9 "lifecycle" 82 a2 "ts" 07 a5 "value" 91 (one rule) 8a (10 fields)
    // a2 "id" a1 "r" a7 "enabled" c3 a6 "filter" 85 …
    let mut tail = s("lifecycle");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.extend([0x91, 0x8a]);
    tail.extend(s("id"));
    tail.extend(s("r"));
    tail.extend(s("enabled"));
    tail.push(0xc3);
    tail.extend(s("filter"));
    tail.push(0x85);
    tail.extend(s("prefix"));
    tail.extend(s("logs/"));
    let at = v
        .windows(tail.len())
        .position(|w| w == tail.as_slice())
        .unwrap_or_else(|| panic!("{v:02x?}"));
    assert!(at > 100, "after the fields of format 6");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // Removed later: still format 9 (the removal must replicate).
    b.lifecycle.update(8, Vec::new());
    assert_eq!(encode::<BucketTable>(&b)[0], LIFECYCLE_ROW_FORMAT);
}

#[tokio::test]
async fn rules_set_through_the_model_are_stored_and_removed() {
    let (_d, model) = test_model().await;
    model.buckets().create_bucket("photos", None).await.unwrap();
    let b = model
        .buckets()
        .set_bucket_lifecycle("photos", vec![rule()])
        .await
        .unwrap();
    assert_eq!(b.lifecycle_rules(), &[rule()]);
    let stored = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(stored.lifecycle_rules(), &[rule()]);
    model
        .buckets()
        .set_bucket_lifecycle("photos", Vec::new())
        .await
        .unwrap();
    let stored = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert!(stored.lifecycle_rules().is_empty());
    assert!(
        model
            .buckets()
            .set_bucket_lifecycle("nope", vec![rule()])
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_pass_expires_an_object_under_the_prefix_only() {
    let (_d, model) = test_model().await;
    let b = model.buckets().create_bucket("photos", None).await.unwrap();
    for key in ["logs/a", "keep"] {
        let row = crate::object::ObjectRow {
            timestamp_msec: 1,
            version: crate::new_version_id(),
            size: 1,
            etag: "e".into(),
            headers: Default::default(),
            user_meta: Default::default(),
            checksum: None,
            data: crate::object::ObjectData::Inline(b"x".to_vec()),
            tags: Default::default(),
            retention: Default::default(),
            legal_hold: Default::default(),
            sse_c: None,
            acl: Default::default(),
            grants: hangar_table::Lww::default(),
        };
        model.objects().publish(&b, key, row).await.unwrap();
    }
    let b = model
        .buckets()
        .set_bucket_lifecycle("photos", vec![rule()])
        .await
        .unwrap();
    // A day of 1 ms: three days are long past.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = model.lifecycle_pass(1, |_| {}).await.unwrap();
    assert_eq!((r.buckets, r.expired), (1, 1));
    assert!(model.objects().get(&b, "logs/a").await.unwrap().is_none());
    assert!(model.objects().get(&b, "keep").await.unwrap().is_some());
    // Nothing left to do: idempotent.
    assert_eq!(model.lifecycle_pass(1, |_| {}).await.unwrap().expired, 0);
}

#[tokio::test]
async fn a_pass_tells_how_many_buckets_are_left() {
    let (_d, model) = test_model().await;
    for name in ["a-rules", "b-none", "c-rules"] {
        model.buckets().create_bucket(name, None).await.unwrap();
    }
    for name in ["a-rules", "c-rules"] {
        model
            .buckets()
            .set_bucket_lifecycle(name, vec![rule()])
            .await
            .unwrap();
    }
    let seen = std::sync::Mutex::new(Vec::new());
    let r = model
        .lifecycle_pass(1, |left| seen.lock().unwrap().push(left))
        .await
        .unwrap();
    assert_eq!(r.buckets, 2);
    // Only the buckets with rules count, then the pass's end.
    assert_eq!(*seen.lock().unwrap(), vec![2, 1, 0]);
}
