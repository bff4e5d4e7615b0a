//! Row format 3 (doc/table-rows.md): a row carrying tags or CORS rules is
//! written with format byte 3 and those fields appended to its map; every
//! other row stays format 2 byte for byte, so a binary of format 2 keeps
//! reading it and refuses (rather than silently drops) what it cannot hold.

use std::collections::BTreeMap;

use crate::row_format::TAGS_CORS_ROW_FORMAT;
use hangar_table::{Lww, ROW_FORMAT, Replica, Schema, encode, storage_key};
use serde::Serialize;

use crate::bucket::{BucketRow, BucketTable, CorsRule};
use crate::multipart::MpuTable;
use crate::object::{ObjectData, ObjectRow, ObjectTable, TagSet};
use crate::test_support::{fixstr as s, test_db, test_model};

/// `ObjectRow` as format 2 had it: no `tags`.
#[derive(Serialize)]
struct Format2ObjectRow {
    timestamp_msec: u64,
    #[serde(with = "hangar_util::serde_id16")]
    version: [u8; 16],
    size: u64,
    etag: String,
    headers: BTreeMap<String, String>,
    user_meta: BTreeMap<String, String>,
    checksum: Option<()>,
    data: ObjectData,
}

fn object(tags: Lww<TagSet>) -> ObjectRow {
    ObjectRow {
        timestamp_msec: 1,
        version: [5; 16],
        size: 2,
        etag: "e".into(),
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum: None,
        data: ObjectData::Inline(b"hi".to_vec()),
        tags,
        retention: Lww::default(),
        legal_hold: Lww::default(),
        sse_c: None,
        acl: Default::default(),
        grants: Lww::default(),
    }
}

#[test]
fn an_untagged_row_is_format_2_byte_for_byte() {
    let row = object(Lww::default());
    let old = Format2ObjectRow {
        timestamp_msec: 1,
        version: [5; 16],
        size: 2,
        etag: "e".into(),
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum: None,
        data: ObjectData::Inline(b"hi".to_vec()),
    };
    let mut expected = vec![ROW_FORMAT];
    rmp_serde::encode::write_named(&mut expected, &old).unwrap();
    assert_eq!(encode::<ObjectTable>(&row), expected);
    // And a format-2 row reads with no tags.
    let back: ObjectRow = rmp_serde::from_slice(&expected[1..]).unwrap();
    assert_eq!(back, row);
}

#[test]
fn a_tagged_row_is_format_3_with_its_tags_last() {
    let tags = TagSet::from([("k".to_owned(), "v".to_owned())]);
    let v = encode::<ObjectTable>(&object(Lww::new(0, tags.clone())));
    assert_eq!(v[0], TAGS_CORS_ROW_FORMAT);
    assert_eq!(v[1], 0x89, "a map of 9 fields");
    // a4 "tags" 82 a2 "ts" 00 a5 "value" 81 a1 "k" a1 "v"
    let mut tail = s("tags");
    tail.push(0x82);
    tail.extend(s("ts"));
    tail.push(0x00);
    tail.extend(s("value"));
    tail.push(0x81);
    tail.extend(s("k"));
    tail.extend(s("v"));
    assert!(v.ends_with(&tail), "{v:02x?}");
    // Removed tags keep their register (timestamp), so still format 3.
    let mut removed = Lww::new(0, tags);
    removed.update(7, TagSet::new());
    assert_eq!(
        encode::<ObjectTable>(&object(removed))[0],
        TAGS_CORS_ROW_FORMAT
    );
}

#[test]
fn bucket_configuration_and_upload_tags_are_format_3() {
    let mut b = BucketRow::new("photos", "ab".repeat(32), 1, 1);
    assert_eq!(encode::<BucketTable>(&b)[0], ROW_FORMAT);
    b.cors.update(
        9,
        vec![CorsRule {
            id: None,
            allowed_origins: vec!["*".into()],
            allowed_methods: vec!["GET".into()],
            allowed_headers: Vec::new(),
            expose_headers: Vec::new(),
            max_age_seconds: Some(60),
        }],
    );
    let v = encode::<BucketTable>(&b);
    assert_eq!(v[0], TAGS_CORS_ROW_FORMAT);
    assert_eq!(v[1], 0x86, "tags absent, cors present");
    // a4 "cors" 82 a2 "ts" 09 a5 "value" 91 86 a2 "id" c0 af "allowed_origins" 91 a1 "*" …
    let mut cors = s("cors");
    cors.push(0x82);
    cors.extend(s("ts"));
    cors.push(0x09);
    cors.extend(s("value"));
    cors.extend([0x91, 0x86]);
    cors.extend(s("id"));
    cors.push(0xc0);
    cors.extend(s("allowed_origins"));
    cors.push(0x91);
    cors.extend(s("*"));
    assert!(v.windows(cors.len()).any(|w| w == cors), "{v:02x?}");
    let back: BucketRow = rmp_serde::from_slice(&v[1..]).unwrap();
    assert_eq!(back, b);

    let mut m = crate::test_support::plain_upload();
    assert_eq!(encode::<MpuTable>(&m)[0], ROW_FORMAT);
    m.tags.insert("a".into(), "b".into());
    assert_eq!(encode::<MpuTable>(&m)[0], TAGS_CORS_ROW_FORMAT);
}

#[tokio::test]
async fn the_table_writes_and_reads_both_formats() {
    let (_d, db) = test_db();
    let t = Replica::<ObjectTable>::new(db.clone());
    let part = [3u8; 32];
    let tagged = object(Lww::new(0, TagSet::from([("a".into(), "1".into())])));
    db.write({
        let tagged = tagged.clone();
        move |tx| {
            Replica::<ObjectTable>::tx_insert(tx, &part, b"plain", &object(Lww::default()))?;
            Replica::<ObjectTable>::tx_insert(tx, &part, b"tagged", &tagged)?;
            Ok::<_, hangar_table::TableError>(())
        }
    })
    .await
    .unwrap();
    let raw = |k: &'static [u8]| {
        let db = db.clone();
        async move {
            db.get_async(ObjectTable::TREE, storage_key::<ObjectTable>(&part, k))
                .await
                .unwrap()
                .unwrap()
        }
    };
    assert_eq!(raw(b"plain").await[0], ROW_FORMAT);
    assert_eq!(raw(b"tagged").await[0], TAGS_CORS_ROW_FORMAT);
    assert_eq!(t.get(&part, b"tagged").await.unwrap(), Some(tagged));
}

#[tokio::test]
async fn tags_set_through_the_model_change_the_register_only() {
    let (_d, model) = test_model().await;
    let b = model.buckets().create_bucket("photos", None).await.unwrap();
    let row = model
        .objects()
        .publish(&b, "o", object(Lww::default()))
        .await
        .unwrap();
    let tags = TagSet::from([("team".into(), "web".into())]);
    let tagged = model
        .objects()
        .set_object_tags(&b, "o", tags.clone())
        .await
        .unwrap()
        .unwrap();
    let got = model.objects().get(&b, "o").await.unwrap().unwrap();
    assert_eq!(got.tag_set(), &tags);
    assert_eq!(got.timestamp_msec, row.timestamp_msec, "LastModified kept");
    assert_eq!(got.version, row.version);
    assert_eq!(got, tagged);
    assert!(
        model
            .objects()
            .set_object_tags(&b, "missing", tags.clone())
            .await
            .unwrap()
            .is_none()
    );

    let b = model
        .buckets()
        .set_bucket_tags("photos", tags.clone())
        .await
        .unwrap();
    assert_eq!(b.tags.value, tags);
    let b = model
        .buckets()
        .set_bucket_cors("photos", Vec::new())
        .await
        .unwrap();
    assert!(b.cors_rules().is_empty());
    let stored = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(stored.tags.value, tags);
    assert!(
        model
            .buckets()
            .set_bucket_tags("nope", TagSet::new())
            .await
            .is_err()
    );
}
