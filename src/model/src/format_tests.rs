//! Rows of format 1 (ids and hashes as arrays of integers, no block
//! offsets) are still read: each row type is encoded the old way, with a
//! struct mirroring the old layout, stored raw and read through its table.

use std::collections::BTreeMap;
use std::sync::Arc;

use hangar_db::{Db, DbOptions, SledEngine};
use hangar_table::{LEGACY_ROW_FORMAT, ROW_FORMAT, Schema, Table, TableError, storage_key};
use hangar_util::Hash;
use serde::Serialize;

use crate::bucket::BucketTable;
use crate::key::KeyTable;
use crate::multipart::{MpuTable, PartTable, mpu_sort_key};
use crate::object::{ObjectData, ObjectTable};
use crate::version::VersionTable;

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

pub(crate) fn test_db() -> (tempfile::TempDir, Db) {
    let d = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
    (d, Db::new(Arc::new(engine), DbOptions::default()))
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
    let t = Table::<ObjectTable>::new(db.clone());
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
        Table::<ObjectTable>::tx_delete(tx, &bucket, b"small");
        Table::<ObjectTable>::tx_insert(tx, &bucket, b"small", &row2)?;
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
    let t = Table::<VersionTable>::new(db.clone());
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

    let m = Table::<MpuTable>::new(db.clone())
        .get(&bucket, &sk)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.upload_id, upload);
    assert_eq!(m.key, "k");
    assert_eq!(m.initiated_msec, 42);
    assert_eq!(m.checksum_algorithm.as_deref(), Some("SHA256"));
    let parts = Table::<PartTable>::new(db.clone())
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

    let k = Table::<KeyTable>::new(db.clone())
        .get(b"", key.access_key_id.as_bytes())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((k.name.as_str(), k.secret.as_str()), ("k", "s"));
    assert!(k.allow_create_bucket);
    let p = k.permission("b");
    assert!(p.read && !p.write && p.owner);
    let b = Table::<BucketTable>::new(db.clone())
        .get(b"", b"b")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.id_bytes(), hash(5));
}

/// A model on a fresh node directory (`db` and `data` under the tempdir).
pub(crate) fn test_model() -> (tempfile::TempDir, Arc<crate::Model>) {
    let d = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
    model_on(d, Arc::new(engine))
}

fn model_on(
    d: tempfile::TempDir,
    engine: Arc<dyn hangar_db::Engine>,
) -> (tempfile::TempDir, Arc<crate::Model>) {
    let db = Db::new(engine, DbOptions::default());
    let files =
        hangar_block::BlockFiles::new(vec![d.path().join("data")], Some(1), false, true).unwrap();
    let blocks = hangar_block::BlockManager::new(files, db.clone(), 60_000);
    (d, crate::Model::new(db, blocks, 60_000, false))
}
