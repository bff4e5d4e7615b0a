//! Row format 17 (doc/table-rows.md): a bucket row whose access logging
//! target has a partitioned prefix is written with format byte 17 and
//! `partitioned` appended to the target's map, so a binary of format 16
//! refuses it instead of dropping the partitioning on its next merge; a
//! target with the simple prefix keeps format 16, byte for byte.

use hangar_table::{Schema, encode};

use crate::bucket::{BucketLogging, BucketRow, BucketTable, PartitionDate};
use crate::row_format::{ACCESS_LOG_ROW_FORMAT, PARTITIONED_LOG_ROW_FORMAT};
use crate::test_support::fixstr as s;

#[test]
fn a_partitioned_log_target_is_format_17_and_format_16_readers_refuse_it() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    let target = |partitioned| BucketLogging {
        target_bucket: "logs".into(),
        target_prefix: "p/".into(),
        partitioned,
        object_acl: None,
        object_grants: Vec::new(),
    };
    b.logging.update(7, Some(target(None)));
    let simple = encode::<BucketTable>(&b);
    assert_eq!(simple[0], ACCESS_LOG_ROW_FORMAT);
    b.logging
        .update(8, Some(target(Some(PartitionDate::EventTime))));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], PARTITIONED_LOG_ROW_FORMAT);
    // ... a5 "value" 83 ad "target_bucket" a4 "logs" ad "target_prefix"
    // a2 "p/" ab "partitioned" a9 "EventTime"
    let mut tail = s("value");
    tail.push(0x83);
    tail.extend(s("target_bucket"));
    tail.extend(s("logs"));
    tail.extend(s("target_prefix"));
    tail.extend(s("p/"));
    tail.extend(s("partitioned"));
    tail.extend(s("EventTime"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    b.logging
        .update(9, Some(target(Some(PartitionDate::DeliveryTime))));
    let v = encode::<BucketTable>(&b);
    assert!(v.ends_with(&s("DeliveryTime")), "{v:02x?}");

    struct Format16;
    impl Schema for Format16 {
        const NEWEST_FORMAT: u8 = ACCESS_LOG_ROW_FORMAT;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            ACCESS_LOG_ROW_FORMAT
        }
    }
    let e = hangar_table::decode::<Format16>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 17"), "{e}");
    // Back to the simple prefix: format 16 again, and readable by it.
    b.logging.update(10, Some(target(None)));
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], ACCESS_LOG_ROW_FORMAT);
    assert!(hangar_table::decode::<Format16>(&v).is_ok());
}
