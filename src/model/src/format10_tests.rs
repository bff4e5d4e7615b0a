//! Row format 10 (doc/table-rows.md): a bucket row carrying a policy or a
//! public access block is written with format byte 10 and the register
//! appended to its map, so a binary of an older format refuses it instead
//! of dropping it on its next merge (a lost Deny statement would open the
//! bucket); every other bucket row keeps its format byte for byte.

use crate::row_format::{ACCESS_ROW_FORMAT, CREATOR_ROW_FORMAT, LIFECYCLE_ROW_FORMAT};
use hangar_table::encode;

use crate::access::PublicAccessBlock;
use crate::bucket::{BucketRow, BucketTable};
use crate::test_support::{fixstr as s, test_model};

fn find(v: &[u8], tail: &[u8]) -> usize {
    v.windows(tail.len())
        .position(|w| w == tail)
        .unwrap_or_else(|| panic!("{tail:02x?} not in {v:02x?}"))
}

#[test]
fn a_bucket_with_a_policy_is_format_10_and_others_keep_theirs() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.created_by = Some("GK000000000000000000000001".into());
    let plain = encode::<BucketTable>(&b);
    assert_eq!(plain[0], CREATOR_ROW_FORMAT);
    assert!(!plain.windows(7).any(|w| w == s("policy").as_slice()));
    b.lifecycle.update(3, Vec::new());
    assert_eq!(encode::<BucketTable>(&b)[0], LIFECYCLE_ROW_FORMAT);

    b.policy.update(7, Some("{}".into()));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_ROW_FORMAT);
    assert_eq!(v[1], 0x88, "the 6 fields of format 6, lifecycle, policy");
    // a6 "policy" 82 a2 "ts" 07 a5 "value" a2 "{}"
    let mut tail = s("policy");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.extend(s("{}"));
    assert!(find(&v, &tail) > 100, "after the fields of format 9");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // Removed later: still format 10 (the removal must replicate).
    b.policy.update(8, None);
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_ROW_FORMAT);
    let mut tail = s("value");
    tail.push(0xc0);
    find(&v, &tail);
}

#[test]
fn a_public_access_block_is_format_10() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.public_access_block.update(
        9,
        Some(PublicAccessBlock {
            block_public_acls: true,
            restrict_public_buckets: true,
            ..Default::default()
        }),
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_ROW_FORMAT);
    assert_eq!(v[1], 0x86, "the 5 fields of format 2, public_access_block");
    // b3 "public_access_block" 82 a2 "ts" 09 a5 "value" 84
    // b1 "block_public_acls" c3 b2 "ignore_public_acls" c2
    // b3 "block_public_policy" c2 b7 "restrict_public_buckets" c3
    let mut tail = s("public_access_block");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x09);
    tail.extend(s("value"));
    tail.push(0x84);
    tail.extend(s("block_public_acls"));
    tail.push(0xc3);
    tail.extend(s("ignore_public_acls"));
    tail.push(0xc2);
    tail.extend(s("block_public_policy"));
    tail.push(0xc2);
    tail.extend(s("restrict_public_buckets"));
    tail.push(0xc3);
    assert_eq!(find(&v, &tail) + tail.len(), v.len(), "the last field");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
}

#[tokio::test]
async fn policy_and_block_set_through_the_model_are_stored_and_removed() {
    let (_d, model) = test_model().await;
    model.buckets().create_bucket("photos", None).await.unwrap();
    let doc = r#"{"Version":"2012-10-17","Statement":[]}"#;
    model
        .buckets()
        .set_bucket_policy("photos", Some(doc.into()))
        .await
        .unwrap();
    let block = PublicAccessBlock {
        block_public_policy: true,
        ..Default::default()
    };
    model
        .buckets()
        .set_bucket_public_access_block("photos", Some(block))
        .await
        .unwrap();
    let stored = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(stored.policy(), Some(doc));
    assert_eq!(stored.public_access_block(), Some(block));
    model
        .buckets()
        .set_bucket_policy("photos", None)
        .await
        .unwrap();
    model
        .buckets()
        .set_bucket_public_access_block("photos", None)
        .await
        .unwrap();
    let stored = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(stored.policy(), None);
    assert_eq!(stored.public_access_block(), None);
    // Bounded, and only on a bucket that exists.
    let big = "x".repeat(crate::access::MAX_POLICY_LEN + 1);
    assert!(
        model
            .buckets()
            .set_bucket_policy("photos", Some(big))
            .await
            .is_err()
    );
    assert!(
        model
            .buckets()
            .set_bucket_policy("nope", None)
            .await
            .is_err()
    );
}

#[test]
fn canned_acls_of_buckets_and_versions_are_format_10() {
    use crate::access::CannedAcl;
    use crate::object::{ObjectData, ObjectRow, ObjectTable};
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.acl.update(5, Some(CannedAcl::PublicRead));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_ROW_FORMAT);
    // a3 "acl" 82 a2 "ts" 05 a5 "value" aa "PublicRead"
    let mut tail = s("acl");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x05);
    tail.extend(s("value"));
    tail.extend(s("PublicRead"));
    assert_eq!(find(&v, &tail) + tail.len(), v.len(), "the last field");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);

    let mut o = ObjectRow::tombstone([1; 16], 3);
    o.data = ObjectData::Inline(b"x".to_vec());
    let plain = encode::<ObjectTable>(&o);
    assert_eq!(plain[0], hangar_table::ROW_FORMAT, "no ACL: format 2");
    o.acl = hangar_table::Lww::new(0, Some(CannedAcl::AuthenticatedRead));
    let v = encode::<ObjectTable>(&o);
    assert_eq!(v[0], ACCESS_ROW_FORMAT);
    assert_eq!(v[1], 0x89, "the 8 fields of format 2, acl");
    let mut tail = s("acl");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x00);
    tail.extend(s("value"));
    tail.extend(s("AuthenticatedRead"));
    assert_eq!(find(&v, &tail) + tail.len(), v.len(), "the last field");
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), o);
    assert_eq!(o.acl(), CannedAcl::AuthenticatedRead);
}

#[tokio::test]
async fn a_bucket_acl_set_through_the_model_is_stored() {
    use crate::access::CannedAcl;
    let (_d, model) = test_model().await;
    model.buckets().create_bucket("photos", None).await.unwrap();
    let b = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(b.acl(), CannedAcl::Private);
    model
        .buckets()
        .set_bucket_acl("photos", CannedAcl::PublicReadWrite, Vec::new())
        .await
        .unwrap();
    let b = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(b.acl(), CannedAcl::PublicReadWrite);
}
