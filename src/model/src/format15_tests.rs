//! Row format 15 (doc/table-rows.md): a version or an upload sealed under a
//! managed key (SSE-S3, SSE-KMS) carries `managed` in its `sse_c` record, and
//! a bucket with a default encryption carries `encryption`; both rows are
//! written with format byte 15, so a binary of an older format refuses them
//! instead of taking a managed version for an SSE-C one (and dropping the
//! key's name on its next merge) or storing new objects in the clear. Every
//! other row keeps its format byte for byte.

use hangar_table::{Lww, ROW_FORMAT, Schema, encode};
use hangar_util::Hash;

use crate::bucket::{BucketEncryption, BucketRow, BucketTable};
use crate::multipart::MpuTable;
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::row_format::{MANAGED_SSE_ROW_FORMAT, OWNERSHIP_ROW_FORMAT, SSE_C_ROW_FORMAT};
use crate::sse_c::SseC;
use crate::sse_managed::Managed;
use crate::test_support::fixstr as s;

fn managed_record() -> SseC {
    SseC {
        algorithm: "aws:kms".into(),
        salt: [0x11; 16],
        check: Hash([0x22; 32]),
        managed: Some(Managed::kms("k1", [0x33; 16])),
    }
}

/// a5 "sse_c" 84 (the 3 fields of format 11) a7 "managed" 82
/// a7 "kms_key" a2 "k1" ab "key_version" c4 10 <16 bytes>
fn managed_tail() -> Vec<u8> {
    let mut t = s("managed");
    t.push(0x82);
    t.extend(s("kms_key"));
    t.extend(s("k1"));
    t.extend(s("key_version"));
    t.extend([0xc4, 0x10]);
    t.extend([0x33; 16]);
    t
}

#[test]
fn a_managed_version_is_format_15_with_its_key_at_the_end_of_the_record() {
    let mut r = ObjectRow::tombstone([5; 16], 1);
    r.data = ObjectData::Inline(b"sealed bytes".to_vec());
    let mut customer = managed_record();
    customer.managed = None;
    r.sse_c = Some(customer);
    assert_eq!(encode::<ObjectTable>(&r)[0], SSE_C_ROW_FORMAT);

    r.sse_c = Some(managed_record());
    let v = encode::<ObjectTable>(&r);
    assert_eq!(v[0], MANAGED_SSE_ROW_FORMAT);
    assert!(v.ends_with(&managed_tail()), "{v:02x?}");
    let mut head = s("sse_c");
    head.push(0x84);
    assert!(v.windows(head.len()).any(|w| w == head.as_slice()));
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), r);

    // SSE-S3: no key id, a zero version.
    r.sse_c.as_mut().unwrap().managed = Some(Managed::s3());
    let v = encode::<ObjectTable>(&r);
    assert_eq!(v[0], MANAGED_SSE_ROW_FORMAT);
    let mut tail = s("managed");
    tail.push(0x81);
    tail.extend(s("key_version"));
    tail.extend([0xc4, 0x10]);
    tail.extend([0; 16]);
    assert!(v.ends_with(&tail), "{v:02x?}");
    // With an ACL too: format 15, which includes 10.
    r.acl = Lww::new(3, Some(crate::access::CannedAcl::PublicRead));
    assert_eq!(encode::<ObjectTable>(&r)[0], MANAGED_SSE_ROW_FORMAT);
}

#[test]
fn a_managed_upload_is_format_15() {
    let mut m = crate::test_support::plain_upload();
    m.sse_c = Some(managed_record());
    m.checksum_type = Some("COMPOSITE".into());
    let v = encode::<MpuTable>(&m);
    assert_eq!(v[0], MANAGED_SSE_ROW_FORMAT);
    assert_eq!(hangar_table::decode::<MpuTable>(&v).unwrap(), m);
}

#[test]
fn a_bucket_with_default_encryption_is_format_15() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    assert_eq!(encode::<BucketTable>(&b)[0], ROW_FORMAT);
    b.encryption.update(
        7,
        Some(BucketEncryption {
            algorithm: "AES256".into(),
            kms_key: None,
            bucket_key: false,
        }),
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], MANAGED_SSE_ROW_FORMAT);
    // aa "encryption" 82 a2 "ts" 07 a5 "value" 81 a9 "algorithm" a6 "AES256"
    let mut tail = s("encryption");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.push(0x81);
    tail.extend(s("algorithm"));
    tail.extend(s("AES256"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // Removed later: still format 15 (the removal must replicate).
    b.encryption.update(8, None);
    assert_eq!(encode::<BucketTable>(&b)[0], MANAGED_SSE_ROW_FORMAT);
}

#[test]
fn a_reader_of_format_14_refuses_format_15_rows() {
    struct Format14;
    impl Schema for Format14 {
        const NEWEST_FORMAT: u8 = MANAGED_SSE_ROW_FORMAT - 1;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            OWNERSHIP_ROW_FORMAT
        }
    }
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.encryption.update(7, None);
    let e = hangar_table::decode::<Format14>(&encode::<BucketTable>(&b)).unwrap_err();
    assert!(e.to_string().contains("unknown row format 15"), "{e}");
}
