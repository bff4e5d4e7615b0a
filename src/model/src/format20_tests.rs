//! Row format 20 (doc/table-rows.md): a bucket row whose access logging
//! target gives its log objects grants (`BucketLogging::object_acl`,
//! `object_grants`, S3's `TargetGrants`) is written with format byte 20
//! and the fields appended to the target's map, so a binary of format 19
//! refuses it instead of dropping the grants on its next merge; a target
//! without grants keeps its row's format.

use hangar_table::{Schema, encode};

use crate::access::CannedAcl;
use crate::bucket::{BucketLogging, BucketRow, BucketTable};
use crate::format19_tests::grants;
use crate::row_format::{GRANTS_ROW_FORMAT, LOG_GRANTS_ROW_FORMAT};
use crate::test_support::fixstr as s;

#[test]
fn a_log_target_with_grants_is_format_20_and_format_19_readers_refuse_it() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    b.grants.update(5, grants());
    let target = |object_acl, object_grants| BucketLogging {
        target_bucket: "logs".into(),
        target_prefix: "p/".into(),
        partitioned: None,
        object_acl,
        object_grants,
    };
    b.logging.update(6, Some(target(None, Vec::new())));
    assert_eq!(encode::<BucketTable>(&b)[0], GRANTS_ROW_FORMAT);
    b.logging
        .update(7, Some(target(Some(CannedAcl::PublicRead), grants())));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], LOG_GRANTS_ROW_FORMAT);
    // ... ab "target_prefix" a2 "p/" aa "object_acl" aa "PublicRead"
    // ad "object_grants" 91 82 a2 "id" a2 "u1" aa "permission" a7 "ReadAcp"
    let mut t = s("target_prefix");
    t.extend(s("p/"));
    t.extend(s("object_acl"));
    t.extend(s("PublicRead"));
    t.extend(s("object_grants"));
    t.extend([0x91, 0x82]);
    t.extend(s("id"));
    t.extend(s("u1"));
    t.extend(s("permission"));
    t.extend(s("ReadAcp"));
    assert!(v.windows(t.len()).any(|w| w == t), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    struct Format19;
    impl Schema for Format19 {
        const NEWEST_FORMAT: u8 = GRANTS_ROW_FORMAT;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            GRANTS_ROW_FORMAT
        }
    }
    let e = hangar_table::decode::<Format19>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 20"), "{e}");
}
