//! Row format 19 (doc/table-rows.md): a bucket row or an object version
//! carrying ACL grants beyond its canned ACL (`grants`) is written with format
//! byte 19 and the register appended to its map, so a binary of format 18
//! refuses it instead of dropping the grants (or their revocation) on its
//! next merge; every other row keeps its format byte for byte.

use hangar_table::{Lww, Schema, encode};

use crate::access::{AclGrant, AclPermission, CannedAcl};
use crate::bucket::{BucketRow, BucketTable};
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::row_format::{ACCESS_ROW_FORMAT, GRANTS_ROW_FORMAT, OWNER_IDENTITY_ROW_FORMAT};
use crate::test_support::fixstr as s;

pub(crate) fn grants() -> Vec<AclGrant> {
    vec![AclGrant {
        id: "u1".into(),
        permission: AclPermission::ReadAcp,
    }]
}

/// The bytes a grant register ends with: `a6 "grants" 82 a2 "ts" <ts>
/// a5 "value" 91 82 a2 "id" a2 "u1" aa "permission" a7 "ReadAcp"`.
fn tail(ts: u8) -> Vec<u8> {
    let mut t = s("grants");
    t.push(0x82);
    t.extend(s("ts"));
    t.push(ts);
    t.extend(s("value"));
    t.extend([0x91, 0x82]);
    t.extend(s("id"));
    t.extend(s("u1"));
    t.extend(s("permission"));
    t.extend(s("ReadAcp"));
    t
}

macro_rules! format18_reader {
    ($name:ident, $table:ty, $row:ty, $replication:ty, $partition:expr) => {
        struct $name;
        impl Schema for $name {
            const NEWEST_FORMAT: u8 = OWNER_IDENTITY_ROW_FORMAT;
            const TREE: &'static str = <$table>::TREE;
            const PARTITION_LEN: usize = $partition;
            type Row = $row;
            type Replication = $replication;
            fn format_of(_: &$row) -> u8 {
                OWNER_IDENTITY_ROW_FORMAT
            }
        }
    };
}

#[test]
fn a_bucket_with_grants_to_users_is_format_19_and_format_18_readers_refuse_it() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.acl.update(5, Some(CannedAcl::PublicRead));
    assert_eq!(encode::<BucketTable>(&b)[0], ACCESS_ROW_FORMAT);
    b.grants.update(6, grants());
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], GRANTS_ROW_FORMAT);
    // After `acl`: the register is declared right after it.
    let at = v
        .windows(tail(6).len())
        .position(|w| w == tail(6))
        .expect("the register");
    let acl_at = v
        .windows(3)
        .position(|w| w == [0xa3, b'a', b'c'])
        .expect("acl");
    assert!(acl_at < at);
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    format18_reader!(Format18, BucketTable, BucketRow, hangar_table::Full, 0);
    let e = hangar_table::decode::<Format18>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 19"), "{e}");
    // Revoked later: still format 19 (the revocation must replicate).
    b.grants.update(7, Vec::new());
    assert_eq!(encode::<BucketTable>(&b)[0], GRANTS_ROW_FORMAT);
}

#[test]
fn a_version_with_grants_to_users_is_format_19_and_format_18_readers_refuse_it() {
    let mut row = ObjectRow {
        version: [1; 16],
        timestamp_msec: 1,
        size: 1,
        etag: "e".into(),
        headers: Default::default(),
        user_meta: Default::default(),
        checksum: None,
        data: ObjectData::Inline(vec![1]),
        tags: Lww::default(),
        retention: Lww::default(),
        legal_hold: Lww::default(),
        sse_c: None,
        acl: Lww::default(),
        grants: Lww::default(),
    };
    assert_eq!(encode::<ObjectTable>(&row)[0], hangar_table::ROW_FORMAT);
    row.grants = Lww::new(0, grants());
    let v = encode::<ObjectTable>(&row);
    assert_eq!(v[0], GRANTS_ROW_FORMAT);
    assert!(v.ends_with(&tail(0)), "{v:02x?}");
    assert_eq!(hangar_table::decode::<ObjectTable>(&v).unwrap(), row);
    format18_reader!(Format18, ObjectTable, ObjectRow, hangar_table::Sharded, 32);
    let e = hangar_table::decode::<Format18>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 19"), "{e}");
}

#[test]
fn an_uploads_grants_travel_in_its_headers_to_the_completed_object() {
    let mut headers = std::collections::BTreeMap::new();
    crate::access::put_grants_in_headers(&mut headers, &[]);
    assert!(headers.is_empty());
    let two = vec![
        AclGrant {
            id: "u1".into(),
            permission: AclPermission::Read,
        },
        AclGrant {
            id: "a-b_c.d".into(),
            permission: AclPermission::FullControl,
        },
    ];
    crate::access::put_grants_in_headers(&mut headers, &two);
    assert_eq!(headers["x-hangar-grants"], "READ=u1 FULL_CONTROL=a-b_c.d");
    let got = crate::access::take_grants_from_headers(&mut headers);
    assert_eq!(got, Lww::new(0, two));
    assert!(headers.is_empty());
    assert!(crate::access::take_grants_from_headers(&mut headers).is_unset());
}
