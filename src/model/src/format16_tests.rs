//! Row format 16 (doc/table-rows.md): a bucket row carrying a server access
//! logging target is written with format byte 16 and `logging` appended to
//! its map, so a binary of an older format refuses it instead of dropping
//! the target on its next merge; every other bucket row keeps its format.

use hangar_table::{ROW_FORMAT, Schema, encode};

use crate::bucket::{BucketLogging, BucketRow, BucketTable};
use crate::row_format::{ACCESS_LOG_ROW_FORMAT, MANAGED_SSE_ROW_FORMAT};
use crate::test_support::fixstr as s;

#[test]
fn a_bucket_with_logging_is_format_16_and_older_readers_refuse_it() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    assert_eq!(encode::<BucketTable>(&b)[0], ROW_FORMAT);
    b.logging.update(
        7,
        Some(BucketLogging {
            target_bucket: "logs".into(),
            target_prefix: "p/".into(),
            partitioned: None,
            object_acl: None,
            object_grants: Vec::new(),
        }),
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_LOG_ROW_FORMAT);
    // a7 "logging" 82 a2 "ts" 07 a5 "value" 82 ad "target_bucket" a4 "logs"
    // ad "target_prefix" a2 "p/"
    let mut tail = s("logging");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x07);
    tail.extend(s("value"));
    tail.push(0x82);
    tail.extend(s("target_bucket"));
    tail.extend(s("logs"));
    tail.extend(s("target_prefix"));
    tail.extend(s("p/"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);

    struct Format15;
    impl Schema for Format15 {
        const NEWEST_FORMAT: u8 = MANAGED_SSE_ROW_FORMAT;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            MANAGED_SSE_ROW_FORMAT
        }
    }
    let e = hangar_table::decode::<Format15>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 16"), "{e}");
    // Turned off later: still format 16 (the change must replicate).
    b.logging.update(8, None);
    assert_eq!(encode::<BucketTable>(&b)[0], ACCESS_LOG_ROW_FORMAT);
}
