//! Row format 21 (doc/table-rows.md): a bucket row with notification
//! rules (`BucketRow::notification`) is written with format byte 21 and
//! the register appended to its map, so a binary of format 20 refuses it
//! instead of dropping the rules on its next merge; a bucket without
//! rules keeps its row's format.

use hangar_table::{Schema, encode};

use crate::bucket::{BucketRow, BucketTable};
use crate::notification::{DestinationKind, NotificationRule};
use crate::row_format::{LOG_GRANTS_ROW_FORMAT, NOTIFY_ROW_FORMAT};
use crate::test_support::fixstr as s;

#[test]
fn a_bucket_with_notification_rules_is_format_21_and_format_20_readers_refuse_it() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    assert_eq!(encode::<BucketTable>(&b)[0], hangar_table::ROW_FORMAT);
    b.notification.update(
        9,
        vec![NotificationRule {
            id: "r".into(),
            kind: DestinationKind::Topic,
            target: "t".into(),
            events: vec!["e".into()],
            prefix: "p".into(),
            suffix: String::new(),
        }],
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], NOTIFY_ROW_FORMAT);
    // ac "notification" 82 a2 "ts" 09 a5 "value" 91 86 a2 "id" a1 "r"
    // a4 "kind" a5 "Topic" a6 "target" a1 "t" a6 "events" 91 a1 "e"
    // a6 "prefix" a1 "p" a6 "suffix" a0
    let mut t = s("notification");
    t.push(0x82);
    t.extend(s("ts"));
    t.push(0x09);
    t.extend(s("value"));
    t.extend([0x91, 0x86]);
    for (k, val) in [("id", "r"), ("kind", "Topic"), ("target", "t")] {
        t.extend(s(k));
        t.extend(s(val));
    }
    t.extend(s("events"));
    t.push(0x91);
    t.extend(s("e"));
    t.extend(s("prefix"));
    t.extend(s("p"));
    t.extend(s("suffix"));
    t.extend(s(""));
    assert!(v.ends_with(&t), "{v:02x?}");
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    struct Format20;
    impl Schema for Format20 {
        const NEWEST_FORMAT: u8 = LOG_GRANTS_ROW_FORMAT;
        const TREE: &'static str = BucketTable::TREE;
        const PARTITION_LEN: usize = 0;
        type Row = BucketRow;
        type Replication = hangar_table::Full;
        fn format_of(_: &BucketRow) -> u8 {
            LOG_GRANTS_ROW_FORMAT
        }
    }
    let e = hangar_table::decode::<Format20>(&v).unwrap_err();
    assert!(e.to_string().contains("unknown row format 21"), "{e}");
}
