//! Row format 7 (doc/table-rows.md): a bucket row carrying a website
//! configuration is written with format byte 7 and `website` appended to
//! its map, so a binary of format 6 refuses it instead of dropping the
//! configuration on its next merge; every other bucket row is unchanged.

use crate::row_format::WEBSITE_ROW_FORMAT;
use hangar_table::{Lww, ROW_FORMAT, Schema};

use crate::bucket::{BucketRow, BucketTable};
use crate::website::{Redirect, RoutingRule, WebsiteConfig};

fn encode(row: &BucketRow) -> Vec<u8> {
    hangar_table::encode::<BucketTable>(row)
}

#[test]
fn a_bucket_without_website_is_unchanged_and_one_with_it_format_7() {
    let mut b = BucketRow::new("site", "ab".repeat(32), 3, 3);
    let plain = encode(&b);
    assert_eq!(plain[0], ROW_FORMAT);
    assert_eq!(
        plain[1], 0x85,
        "the 5 fields of a bucket without configuration"
    );
    let w = WebsiteConfig {
        index_suffix: Some("index.html".into()),
        error_key: Some("error.html".into()),
        redirect_all: None,
        routing_rules: vec![RoutingRule {
            key_prefix_equals: Some("old/".into()),
            http_error_code_returned_equals: Some(404),
            redirect: Redirect {
                replace_key_prefix_with: Some("new/".into()),
                http_redirect_code: Some(302),
                ..Default::default()
            },
        }],
    };
    b.website.update(5, Some(w));
    let v = encode(&b);
    assert_eq!(v[0], WEBSITE_ROW_FORMAT);
    assert_eq!(BucketTable::format_of(&b), WEBSITE_ROW_FORMAT);
    assert_eq!(v[1], 0x86, "the same 5 fields, then website");
    assert_eq!(&v[2..plain.len()], &plain[2..]);
    assert_eq!(hangar_table::decode::<BucketTable>(&v).unwrap(), b);
    // Removed later: still format 7 (the removal must replicate).
    b.website.update(6, None);
    assert_eq!(encode(&b)[0], WEBSITE_ROW_FORMAT);
    assert_eq!(hangar_table::decode::<BucketTable>(&encode(&b)).unwrap(), b);
    assert_ne!(b.website, Lww::default());
}
