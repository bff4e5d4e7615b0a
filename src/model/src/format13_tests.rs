//! Row format 13 (doc/table-rows.md): a bucket row carrying an object
//! ownership setting is written with format byte 13 and `ownership`
//! appended to its map, so a binary of an older format refuses it instead
//! of dropping the setting on its next merge (and letting ACLs it disabled
//! grant again); every other bucket row keeps its format byte for byte.

use hangar_table::{ROW_FORMAT, Schema, encode};

use crate::ModelError;
use crate::access::{CannedAcl, ObjectOwnership};
use crate::bucket::{BucketQuotas, BucketRow, BucketTable};
use crate::row_format::{OWNERSHIP_ROW_FORMAT, QUOTA_ROW_FORMAT};
use crate::test_support::{fixstr as s, test_model};

// Every later format reads the rows of this one.
const _: () = assert!(
    BucketTable::NEWEST_FORMAT >= OWNERSHIP_ROW_FORMAT,
    "bucket rows of format 13 are read"
);
#[test]
fn a_bucket_without_ownership_keeps_its_format_and_one_with_it_is_format_13() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    assert_eq!(encode::<BucketTable>(&b)[0], ROW_FORMAT);
    b.quotas.update(5, BucketQuotas::default());
    assert_eq!(encode::<BucketTable>(&b)[0], QUOTA_ROW_FORMAT);

    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.ownership
        .update(7, Some(ObjectOwnership::BucketOwnerEnforced));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], OWNERSHIP_ROW_FORMAT);
    assert_eq!(v[1], 0x86, "the 5 fields of format 2, then ownership");
    // a9 "ownership" 82 a2 "ts" 07 a5 "value" b3 "BucketOwnerEnforced"
    let mut tail = s("ownership");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.extend(s("BucketOwnerEnforced"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // With quotas too: format 13, which includes 12.
    b.quotas.update(8, BucketQuotas::default());
    assert_eq!(encode::<BucketTable>(&b)[0], OWNERSHIP_ROW_FORMAT);
    // Removed later: still format 13 (the removal must replicate).
    let mut c = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    c.ownership.update(9, None);
    assert_eq!(encode::<BucketTable>(&c)[0], OWNERSHIP_ROW_FORMAT);
}

#[test]
fn a_reader_of_format_12_refuses_a_format_13_row() {
    struct Format12;
    impl Schema for Format12 {
        const NEWEST_FORMAT: u8 = QUOTA_ROW_FORMAT;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            QUOTA_ROW_FORMAT
        }
    }
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.ownership.update(7, Some(ObjectOwnership::ObjectWriter));
    let e = hangar_table::decode::<Format12>(&encode::<BucketTable>(&b)).unwrap_err();
    assert!(e.to_string().contains("unknown row format 13"), "{e}");
}

#[tokio::test]
async fn enforced_ownership_is_refused_while_the_acl_is_public_and_kept_otherwise() {
    let (_dir, model) = test_model().await;
    let buckets = model.buckets();
    buckets.create_bucket("shared", None).await.unwrap();
    buckets
        .set_bucket_acl("shared", CannedAcl::PublicRead, Vec::new())
        .await
        .unwrap();
    let e = buckets
        .set_bucket_ownership("shared", Some(ObjectOwnership::BucketOwnerEnforced))
        .await
        .unwrap_err();
    assert!(matches!(e, ModelError::AclWithOwnershipEnforced(_)), "{e}");
    let b = buckets.get_bucket("shared").await.unwrap().unwrap();
    assert_eq!(b.ownership(), None);
    assert!(b.acls_enabled());

    buckets
        .set_bucket_acl("shared", CannedAcl::Private, Vec::new())
        .await
        .unwrap();
    let b = buckets
        .set_bucket_ownership("shared", Some(ObjectOwnership::BucketOwnerEnforced))
        .await
        .unwrap();
    assert_eq!(b.ownership(), Some(ObjectOwnership::BucketOwnerEnforced));
    assert!(!b.acls_enabled());
    let b = buckets.set_bucket_ownership("shared", None).await.unwrap();
    assert_eq!(b.ownership(), None);
    assert!(b.acls_enabled());
}
