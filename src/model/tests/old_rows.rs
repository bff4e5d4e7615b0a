//! A node upgraded in place reads the rows it wrote in format 1.

use std::collections::BTreeMap;
use std::sync::Arc;

use hangar_db::{Db, DbOptions, RedbEngine};
use hangar_model::key::{KeyTable, Permission};
use hangar_table::{Replica, Schema};
use serde::Serialize;

#[derive(Serialize)]
struct KeyRowV1 {
    access_key_id: String,
    name: String,
    secret: String,
    allow_create_bucket: bool,
    buckets: BTreeMap<String, Permission>,
    created_msec: u64,
    updated_msec: u64,
    deleted: bool,
}

#[tokio::test]
async fn a_format_1_key_row_reads_as_registers_stamped_with_its_last_change() {
    let dir = tempfile::tempdir().unwrap();
    let engine = RedbEngine::open(&dir.path().join("db"), 8 << 20).unwrap();
    let db = Db::new(Arc::new(engine), DbOptions::default());
    let rw = Permission {
        read: true,
        write: true,
        owner: false,
    };
    let old = KeyRowV1 {
        access_key_id: "GK000000000000000000000001".into(),
        name: "app".into(),
        secret: "s".repeat(64),
        allow_create_bucket: true,
        buckets: [("photos".to_owned(), rw)].into(),
        created_msec: 5,
        updated_msec: 9,
        deleted: false,
    };
    let mut value = vec![1u8];
    rmp_serde::encode::write_named(&mut value, &old).unwrap();
    let id = old.access_key_id.clone();
    db.write(move |tx| {
        tx.put(KeyTable::TREE, id.into_bytes(), value);
        Ok::<_, hangar_db::DbError>(())
    })
    .await
    .unwrap();

    let row = Replica::<KeyTable>::new(db)
        .get(b"", old.access_key_id.as_bytes())
        .await
        .unwrap()
        .expect("the old row reads");
    assert_eq!(row.name.value, "app");
    assert_eq!(row.name.ts, 9);
    assert_eq!(row.secret.value, old.secret);
    assert!(row.allow_create_bucket.value);
    assert_eq!(row.permission("photos"), rw);
    assert_eq!(row.created_msec, 5);
    assert!(!row.is_deleted());
}
