//! Row format 14 (doc/table-rows.md): a multipart upload's row carrying a
//! checksum type is written with format byte 14 and `checksum_type`
//! appended to its map, so a binary of an older format refuses it instead
//! of dropping the type on its next merge (and completing the object with
//! the other kind of checksum); every other upload row keeps its format
//! byte for byte.

use hangar_table::{ROW_FORMAT, Schema, encode};

use crate::multipart::{MpuRow, MpuTable};
use crate::row_format::{CHECKSUM_TYPE_ROW_FORMAT, SSE_C_ROW_FORMAT};
use crate::test_support::fixstr as s;

fn upload() -> MpuRow {
    MpuRow {
        checksum_algorithm: Some("CRC32".into()),
        ..crate::test_support::plain_upload()
    }
}

#[test]
fn an_upload_without_a_checksum_type_keeps_its_format_and_one_with_it_is_format_14() {
    let mut m = upload();
    assert_eq!(encode::<MpuTable>(&m)[0], ROW_FORMAT);
    m.checksum_type = Some("FULL_OBJECT".into());
    let v = encode::<MpuTable>(&m);
    assert_eq!(v[0], CHECKSUM_TYPE_ROW_FORMAT);
    assert_eq!(v[1], 0x88, "the 7 fields of format 2, then checksum_type");
    // ad "checksum_type" ab "FULL_OBJECT", after the fields of format 2.
    let mut tail = s("checksum_type");
    tail.extend(s("FULL_OBJECT"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    assert_eq!(hangar_table::decode::<MpuTable>(&v).unwrap(), m);
}

#[test]
fn a_reader_of_format_13_refuses_a_format_14_row() {
    struct Format13;
    impl Schema for Format13 {
        const NEWEST_FORMAT: u8 = CHECKSUM_TYPE_ROW_FORMAT - 1;
        const TREE: &'static str = MpuTable::TREE;
        const PARTITION_LEN: usize = 32;
        type Row = MpuRow;
        type Replication = hangar_table::Sharded;
        fn format_of(_: &MpuRow) -> u8 {
            SSE_C_ROW_FORMAT
        }
    }
    let mut m = upload();
    m.checksum_type = Some("COMPOSITE".into());
    assert!(hangar_table::decode::<Format13>(&encode::<MpuTable>(&m)).is_err());
    m.checksum_type = None;
    assert_eq!(
        hangar_table::decode::<Format13>(&encode::<MpuTable>(&m)).unwrap(),
        m
    );
}
