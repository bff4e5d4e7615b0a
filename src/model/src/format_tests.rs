//! Rows of format 1 (ids and hashes as arrays of integers, no block
//! offsets) are still read: each row type is encoded the old way, with a
//! struct mirroring the old layout, stored raw and read through its table.

use std::collections::BTreeMap;

use hangar_db::Db;
use hangar_table::{LEGACY_ROW_FORMAT, ROW_FORMAT, Replica, Schema, TableError, storage_key};
use hangar_util::Hash;
use serde::Serialize;

use crate::block_list::VersionTable;
use crate::bucket::BucketTable;
use crate::key::KeyTable;
use crate::multipart::{MpuTable, PartTable, mpu_sort_key};
use crate::object::{ObjectData, ObjectTable};
use crate::test_support::{test_db, test_model};

// ---- the layout of format 1 ----

#[derive(Serialize)]
pub(crate) struct LegacyChecksum {
    pub algorithm: String,
    pub value: String,
}

#[derive(Serialize)]
pub(crate) enum LegacyObjectData {
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    Blocks { count: u32 },
}

#[derive(Serialize)]
pub(crate) struct LegacyObjectRow {
    pub version: [u8; 16],
    pub timestamp_msec: u64,
    pub size: u64,
    pub etag: String,
    pub headers: BTreeMap<String, String>,
    pub user_meta: BTreeMap<String, String>,
    pub checksum: Option<LegacyChecksum>,
    pub data: LegacyObjectData,
}

#[derive(Serialize)]
pub(crate) struct LegacyBlockEntry {
    pub hash: [u8; 32],
    pub size: u64,
}

#[derive(Serialize)]
pub(crate) struct LegacyMpuRow {
    pub upload_id: [u8; 16],
    pub key: String,
    pub initiated_msec: u64,
    pub headers: BTreeMap<String, String>,
    pub user_meta: BTreeMap<String, String>,
    pub checksum_algorithm: Option<String>,
}

#[derive(Serialize)]
pub(crate) struct LegacyPartRow {
    pub version: [u8; 16],
    pub size: u64,
    pub etag: String,
    pub checksum: Option<LegacyChecksum>,
    pub timestamp_msec: u64,
    pub blocks: u32,
}

#[derive(Serialize)]
pub(crate) struct LegacyPermission {
    pub read: bool,
    pub write: bool,
    pub owner: bool,
}

#[derive(Serialize)]
pub(crate) struct LegacyKeyRow {
    pub access_key_id: String,
    pub name: String,
    pub secret: String,
    pub allow_create_bucket: bool,
    pub buckets: BTreeMap<String, LegacyPermission>,
    pub created_msec: u64,
    pub updated_msec: u64,
    pub deleted: bool,
}

#[derive(Serialize)]
pub(crate) struct LegacyBucketRow {
    pub name: String,
    pub id: String,
    pub created_msec: u64,
    pub updated_msec: u64,
    pub deleted: bool,
}

/// A row value as format 1 wrote it.
pub(crate) fn legacy_value<R: Serialize>(row: &R) -> Vec<u8> {
    let mut v = vec![LEGACY_ROW_FORMAT];
    rmp_serde::encode::write_named(&mut v, row).unwrap();
    v
}

/// Stores a format-1 row of table `S` as the old code did.
pub(crate) async fn put_legacy<S: Schema, R: Serialize>(
    db: &Db,
    partition: &[u8],
    sort: &[u8],
    row: &R,
) {
    let (k, v) = (storage_key::<S>(partition, sort), legacy_value(row));
    db.write(move |tx| {
        tx.put(S::TREE, k, v);
        Ok::<_, TableError>(())
    })
    .await
    .unwrap();
}

/// Ids and hashes with bytes above 127, so that the legacy arrays hold both
/// positive fixints and `cc xx` integers.
pub(crate) fn id(seed: u8) -> [u8; 16] {
    std::array::from_fn(|i| seed.wrapping_add((i as u8).wrapping_mul(37)))
}

pub(crate) fn hash(seed: u8) -> [u8; 32] {
    std::array::from_fn(|i| seed.wrapping_add((i as u8).wrapping_mul(41)))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The MessagePack array of 16 (or 32) integers format 1 wrote for an id.
fn legacy_array(bytes: &[u8]) -> Vec<u8> {
    rmp_serde::to_vec(&bytes.to_vec()).unwrap()
}

fn bin(bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![0xc4, bytes.len() as u8];
    v.extend_from_slice(bytes);
    v
}

async fn raw(db: &Db, tree: &'static str, key: Vec<u8>) -> Vec<u8> {
    db.get_async(tree, key).await.unwrap().unwrap()
}

fn checksum() -> Option<LegacyChecksum> {
    Some(LegacyChecksum {
        algorithm: "CRC32".into(),
        value: "AAAAAA==".into(),
    })
}

#[tokio::test]
async fn legacy_object_rows_are_read() {
    let (_d, db) = test_db();
    let t = Replica::<ObjectTable>::new(db.clone());
    let bucket = hash(9);
    let mut headers = BTreeMap::new();
    headers.insert("content-type".to_owned(), "text/plain".to_owned());
    let big = LegacyObjectRow {
        version: id(200),
        timestamp_msec: 1_700_000_000_000,
        size: 3 << 20,
        etag: "0123456789abcdef0123456789abcdef".into(),
        headers: headers.clone(),
        user_meta: BTreeMap::from([("a".to_owned(), "b".to_owned())]),
        checksum: checksum(),
        data: LegacyObjectData::Blocks { count: 3 },
    };
    let v = legacy_value(&big);
    assert!(contains(&v, &legacy_array(&id(200))), "format 1 has arrays");
    put_legacy::<ObjectTable, _>(&db, &bucket, b"big", &big).await;
    let small = LegacyObjectRow {
        data: LegacyObjectData::Inline(b"hello".to_vec()),
        size: 5,
        version: id(3),
        checksum: None,
        ..big
    };
    put_legacy::<ObjectTable, _>(&db, &bucket, b"small", &small).await;

    let row = t.get(&bucket, b"big").await.unwrap().unwrap();
    assert_eq!(row.version, id(200));
    assert_eq!(row.timestamp_msec, 1_700_000_000_000);
    assert_eq!(row.size, 3 << 20);
    assert_eq!(row.headers, headers);
    assert_eq!(row.user_meta["a"], "b");
    assert_eq!(row.checksum.as_ref().unwrap().algorithm, "CRC32");
    assert_eq!(row.data, ObjectData::Blocks { count: 3 });
    let row = t.get(&bucket, b"small").await.unwrap().unwrap();
    assert_eq!(row.version, id(3));
    assert_eq!(row.data, ObjectData::Inline(b"hello".to_vec()));
    assert!(row.checksum.is_none());

    // Written again, the row is format 2 with the id as a bin.
    let row2 = row.clone();
    db.write(move |tx| {
        Replica::<ObjectTable>::tx_remove(tx, &bucket, b"small")?;
        Replica::<ObjectTable>::tx_insert(tx, &bucket, b"small", &row2)?;
        Ok::<_, TableError>(())
    })
    .await
    .unwrap();
    let v = raw(&db, "object", storage_key::<ObjectTable>(&bucket, b"small")).await;
    assert_eq!(v[0], ROW_FORMAT);
    assert!(contains(&v, &bin(&id(3))));
    assert_eq!(t.get(&bucket, b"small").await.unwrap().unwrap(), row);
}

#[tokio::test]
async fn legacy_block_entries_are_read() {
    let (_d, db) = test_db();
    let t = Replica::<VersionTable>::new(db.clone());
    let v = id(77);
    for i in 0..3u32 {
        let e = LegacyBlockEntry {
            hash: hash(i as u8 * 50),
            size: 1000 + i as u64,
        };
        assert!(contains(&legacy_value(&e), &legacy_array(&e.hash)));
        put_legacy::<VersionTable, _>(&db, &v, &i.to_be_bytes(), &e).await;
    }
    let rows = t.range_numbered(&v, 0, 10).await.unwrap();
    assert_eq!(rows.len(), 3);
    for (i, (n, e)) in rows.iter().enumerate() {
        assert_eq!(*n, i as u32);
        assert_eq!(e.hash, Hash(hash(i as u8 * 50)));
        assert_eq!(e.size, 1000 + i as u64);
        assert_eq!(e.offset, 0, "format 1 has no offsets");
        assert_eq!(e.has_offset(*n), *n == 0);
    }
}

#[tokio::test]
async fn legacy_multipart_rows_are_read() {
    let (_d, db) = test_db();
    let bucket = hash(1);
    let upload = id(250);
    let mpu = LegacyMpuRow {
        upload_id: upload,
        key: "k".into(),
        initiated_msec: 42,
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum_algorithm: Some("SHA256".into()),
    };
    let sk = mpu_sort_key("k", &upload);
    put_legacy::<MpuTable, _>(&db, &bucket, &sk, &mpu).await;
    let part = LegacyPartRow {
        version: id(128),
        size: 5 << 20,
        etag: "e".into(),
        checksum: checksum(),
        timestamp_msec: 43,
        blocks: 5,
    };
    assert!(contains(&legacy_value(&part), &legacy_array(&id(128))));
    put_legacy::<PartTable, _>(&db, &upload, &7u32.to_be_bytes(), &part).await;

    let m = Replica::<MpuTable>::new(db.clone())
        .get(&bucket, &sk)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.upload_id, upload);
    assert_eq!(m.key, "k");
    assert_eq!(m.initiated_msec, 42);
    assert_eq!(m.checksum_algorithm.as_deref(), Some("SHA256"));
    let parts = Replica::<PartTable>::new(db.clone())
        .range_numbered(&upload, 0, 10)
        .await
        .unwrap();
    assert_eq!(parts.len(), 1);
    let (n, p) = &parts[0];
    assert_eq!(*n, 7);
    assert_eq!(p.version, id(128));
    assert_eq!((p.size, p.blocks, p.timestamp_msec), (5 << 20, 5, 43));
    assert_eq!(p.checksum.as_ref().unwrap().value, "AAAAAA==");
}

#[tokio::test]
async fn legacy_key_and_bucket_rows_are_read() {
    let (_d, db) = test_db();
    let key = LegacyKeyRow {
        access_key_id: "GK0123456789abcdef01234567".into(),
        name: "k".into(),
        secret: "s".into(),
        allow_create_bucket: true,
        buckets: BTreeMap::from([(
            "b".to_owned(),
            LegacyPermission {
                read: true,
                write: false,
                owner: true,
            },
        )]),
        created_msec: 1,
        updated_msec: 2,
        deleted: false,
    };
    put_legacy::<KeyTable, _>(&db, b"", key.access_key_id.as_bytes(), &key).await;
    let bucket = LegacyBucketRow {
        name: "b".into(),
        id: hex::encode(hash(5)),
        created_msec: 1,
        updated_msec: 2,
        deleted: false,
    };
    put_legacy::<BucketTable, _>(&db, b"", b"b", &bucket).await;

    let k = Replica::<KeyTable>::new(db.clone())
        .get(b"", key.access_key_id.as_bytes())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((k.name.value.as_str(), k.secret.value.as_str()), ("k", "s"));
    assert!(k.allow_create_bucket.value);
    let p = k.permission("b");
    assert!(p.read && !p.write && p.owner);
    let b = Replica::<BucketTable>::new(db.clone())
        .get(b"", b"b")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.id_bytes(), hash(5));
}

/// A node whose metadata was written by format 1 (the block files are the
/// same in both formats): its keys, buckets and objects are read, a range
/// of a multi-block object is served by the scan of the old block list, and
/// a multipart upload begun before the upgrade completes into a version
/// whose entries have offsets.
#[tokio::test]
async fn a_node_written_by_format_1_is_readable() {
    use crate::block_list::{BlockLookup, VersionTable};
    use crate::multipart::CompletedPart;

    let (_d, model) = test_model().await;
    let db = model.db().clone();
    let bucket_id = hash(0xab);
    let key_id = "GKaaaaaaaaaaaaaaaaaaaaaaaa";
    put_legacy::<KeyTable, _>(
        &db,
        b"",
        key_id.as_bytes(),
        &LegacyKeyRow {
            access_key_id: key_id.into(),
            name: "old".into(),
            secret: "s".into(),
            allow_create_bucket: false,
            buckets: BTreeMap::from([(
                "photos".to_owned(),
                LegacyPermission {
                    read: true,
                    write: true,
                    owner: false,
                },
            )]),
            created_msec: 1,
            updated_msec: 1,
            deleted: false,
        },
    )
    .await;
    put_legacy::<BucketTable, _>(
        &db,
        b"",
        b"photos",
        &LegacyBucketRow {
            name: "photos".into(),
            id: hex::encode(bucket_id),
            created_msec: 1,
            updated_msec: 1,
            deleted: false,
        },
    )
    .await;

    // An object of three blocks, stored as the old code did: block files,
    // then format-1 entries (no offsets) and object row.
    let version = id(0x90);
    let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
    let chunks: Vec<&[u8]> = vec![&data[..1000], &data[1000..2000], &data[2000..]];
    for (i, c) in chunks.iter().enumerate() {
        let h = Hash::of(c);
        model
            .blocks()
            .local()
            .store(h, bytes::Bytes::copy_from_slice(c), version, |_| Ok(()))
            .await
            .unwrap();
        let e = LegacyBlockEntry {
            hash: h.0,
            size: c.len() as u64,
        };
        put_legacy::<VersionTable, _>(&db, &version, &(i as u32).to_be_bytes(), &e).await;
    }
    let row = LegacyObjectRow {
        version,
        timestamp_msec: 5,
        size: data.len() as u64,
        etag: "e".into(),
        headers: BTreeMap::new(),
        user_meta: BTreeMap::new(),
        checksum: None,
        data: LegacyObjectData::Blocks { count: 3 },
    };
    put_legacy::<ObjectTable, _>(&db, &bucket_id, b"big.jpg", &row).await;
    let small = LegacyObjectRow {
        version: id(0x91),
        size: 2,
        data: LegacyObjectData::Inline(b"hi".to_vec()),
        ..row
    };
    put_legacy::<ObjectTable, _>(&db, &bucket_id, b"small.txt", &small).await;

    // A multipart upload in progress with two parts, of format 1.
    let upload = id(0xc0);
    let sk = mpu_sort_key("mp", &upload);
    put_legacy::<MpuTable, _>(
        &db,
        &bucket_id,
        &sk,
        &LegacyMpuRow {
            upload_id: upload,
            key: "mp".into(),
            initiated_msec: 3,
            headers: BTreeMap::new(),
            user_meta: BTreeMap::new(),
            checksum_algorithm: None,
        },
    )
    .await;
    let part_sizes: [&[u64]; 2] = [&[2 << 20, 2 << 20, (1 << 20) + 5], &[300]];
    for (n, sizes) in part_sizes.iter().enumerate() {
        let pv = id(0xd0 + n as u8);
        for (i, &size) in sizes.iter().enumerate() {
            let e = LegacyBlockEntry {
                hash: hash((n * 16 + i) as u8),
                size,
            };
            // The part's block file, as the old code stored it.
            let data = bytes::Bytes::from(vec![0u8; size as usize]);
            model
                .blocks()
                .local()
                .store(Hash(e.hash), data, pv, |_| Ok(()))
                .await
                .unwrap();
            put_legacy::<VersionTable, _>(&db, &pv, &(i as u32).to_be_bytes(), &e).await;
        }
        let part = LegacyPartRow {
            version: pv,
            size: sizes.iter().sum(),
            etag: format!("{:032x}", n + 1),
            checksum: None,
            timestamp_msec: 4,
            blocks: sizes.len() as u32,
        };
        let pn = (n as u32 + 1).to_be_bytes();
        put_legacy::<PartTable, _>(&db, &upload, &pn, &part).await;
    }

    // Everything reads through the model.
    let k = model.keys().get(key_id).await.unwrap().unwrap();
    assert!(k.permission("photos").write);
    let b = model.buckets().get_bucket("photos").await.unwrap().unwrap();
    assert_eq!(b.id_bytes(), bucket_id);
    let obj = model.objects().get(&b, "big.jpg").await.unwrap().unwrap();
    assert_eq!(obj.version, version);
    assert_eq!(obj.data, ObjectData::Blocks { count: 3 });
    let s = model.objects().get(&b, "small.txt").await.unwrap().unwrap();
    assert_eq!(s.data, ObjectData::Inline(b"hi".to_vec()));
    assert_eq!(
        model
            .objects()
            .list(&b, std::ops::Bound::Unbounded, 10)
            .await
            .unwrap()
            .len(),
        2
    );

    // A range GET of the old object, bytes included.
    assert_eq!(
        model.blocks().find(&version, 3, 1500).await.unwrap(),
        BlockLookup::NoOffsets
    );
    let range = 999..2001;
    let mut got = Vec::new();
    for sl in model
        .blocks()
        .for_range(&version, 3, 2500, range.clone())
        .await
        .unwrap()
    {
        let block = model.blocks().read(sl.hash).await.unwrap();
        got.extend_from_slice(&block[sl.from..sl.to]);
    }
    assert_eq!(got, &data[999..2001]);

    // The old upload completes; its version has offsets.
    let mpu = model
        .uploads()
        .get(&b, "mp", &upload)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        model
            .uploads()
            .list_parts(&upload, 0, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    let listed = [1u32, 2].map(|n| CompletedPart {
        part_number: n,
        etag: format!("{n:032x}"),
    });
    let done = model
        .uploads()
        .complete(&b, &mpu, &listed, &|_| Ok(None), Default::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.data, ObjectData::Blocks { count: 4 });
    let entries = model.blocks().list(&done.version, 0, 10).await.unwrap();
    let offsets: Vec<u64> = entries.iter().map(|(_, e)| e.offset).collect();
    assert_eq!(offsets, [0, 2 << 20, 4 << 20, (5 << 20) + 5]);
    assert_eq!(done.size, (5 << 20) + 305);
    let BlockLookup::Found(i, e) = model
        .blocks()
        .find(&done.version, 4, (5 << 20) + 6)
        .await
        .unwrap()
    else {
        panic!("the completed version has offsets");
    };
    assert_eq!((i, e.hash), (3, Hash(hash(16))));
    // Its rows are format 2.
    let v = raw(&db, "object", storage_key::<ObjectTable>(&bucket_id, b"mp")).await;
    assert_eq!(v[0], ROW_FORMAT);
    let v = raw(
        &db,
        "version",
        storage_key::<VersionTable>(&done.version, &3u32.to_be_bytes()),
    )
    .await;
    assert_eq!(v[0], ROW_FORMAT);
    assert!(contains(&v, &bin(&hash(16))));
}
