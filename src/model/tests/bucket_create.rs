//! Bucket creation on one node's real metadata store: the creator's retry
//! is `BucketAlreadyOwnedByYou` and finishes a creation that stopped after
//! its bucket row, another key gets `BucketAlreadyExists`, concurrent
//! creations of one name make one bucket, and a merge that hides a live
//! bucket is counted.

mod common;

use std::sync::atomic::Ordering;

use hangar_model::bucket::{BUCKET_ID_CONFLICTS, BucketRow, BucketTable, bucket_id};
use hangar_model::{Model, ModelError, PermissionChange};
use hangar_table::Replica;

type Node = common::ModelNode;

async fn node() -> Node {
    common::lone_node().await
}

/// Merges `row` into this node's bucket table, as a row from a peer is.
async fn merge(m: &Model, row: &BucketRow) -> BucketRow {
    let row = row.clone();
    m.db()
        .write(move |tx| Replica::<BucketTable>::tx_insert(tx, b"", row.name.as_bytes(), &row))
        .await
        .unwrap()
}

async fn key(m: &Model, name: &str) -> String {
    m.keys().create(name).await.unwrap().access_key_id
}

#[tokio::test]
async fn the_creator_is_recorded_and_its_retry_is_already_owned() {
    let n = node().await;
    let (a, b) = (key(&n.model, "a").await, key(&n.model, "b").await);
    let row = n
        .model
        .buckets()
        .create_bucket("photos", Some(&a))
        .await
        .unwrap();
    assert_eq!(row.created_by.as_deref(), Some(a.as_str()));
    assert_eq!(row.id, bucket_id("photos", None));
    assert!(matches!(
        n.model.buckets().create_bucket("photos", Some(&a)).await,
        Err(ModelError::BucketAlreadyOwnedByYou(_))
    ));
    assert!(matches!(
        n.model.buckets().create_bucket("photos", Some(&b)).await,
        Err(ModelError::BucketAlreadyExists(_))
    ));
    assert!(matches!(
        n.model.buckets().create_bucket("photos", None).await,
        Err(ModelError::BucketAlreadyExists(_))
    ));
    assert!(
        !n.model
            .keys()
            .get(&b)
            .await
            .unwrap()
            .unwrap()
            .permission("photos")
            .any()
    );
}

#[tokio::test]
async fn a_retry_finishes_a_creation_that_stopped_after_its_bucket_row() {
    let n = node().await;
    let a = key(&n.model, "a").await;
    // What a creation leaves when it stored the bucket row and then failed
    // (its key row, written after, replicated nowhere).
    let mut row = BucketRow::new("half", bucket_id("half", None), 1000, 1000);
    row.created_by = Some(a.clone());
    merge(&n.model, &row).await;
    assert!(
        !n.model
            .keys()
            .get(&a)
            .await
            .unwrap()
            .unwrap()
            .permission("half")
            .owner
    );
    assert!(matches!(
        n.model.buckets().create_bucket("half", Some(&a)).await,
        Err(ModelError::BucketAlreadyOwnedByYou(_))
    ));
    let k = n.model.keys().get(&a).await.unwrap().unwrap();
    let p = k.permission("half");
    assert!(p.read && p.write && p.owner);
    // Stamped as the first attempt would have stamped it.
    assert_eq!(k.buckets.entry(&"half".to_owned()).unwrap().ts, 1000);
}

#[tokio::test]
async fn a_retry_does_not_undo_a_later_revocation() {
    let n = node().await;
    let a = key(&n.model, "a").await;
    n.model
        .buckets()
        .create_bucket("kept", Some(&a))
        .await
        .unwrap();
    let revoke = PermissionChange {
        read: Some(false),
        write: Some(false),
        owner: Some(false),
    };
    n.model
        .buckets()
        .set_permission("kept", &a, revoke)
        .await
        .unwrap();
    assert!(matches!(
        n.model.buckets().create_bucket("kept", Some(&a)).await,
        Err(ModelError::BucketAlreadyOwnedByYou(_))
    ));
    assert!(
        !n.model
            .keys()
            .get(&a)
            .await
            .unwrap()
            .unwrap()
            .permission("kept")
            .any()
    );
}

#[tokio::test]
async fn a_recreated_bucket_gets_the_id_derived_from_its_tombstone() {
    let n = node().await;
    let a = key(&n.model, "a").await;
    let first = n
        .model
        .buckets()
        .create_bucket("again", Some(&a))
        .await
        .unwrap();
    n.model.delete_bucket("again").await.unwrap();
    let second = n
        .model
        .buckets()
        .create_bucket("again", Some(&a))
        .await
        .unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(second.id, bucket_id("again", Some(&first.id)));
}

#[tokio::test]
async fn concurrent_creations_of_one_name_make_one_bucket() {
    let n = node().await;
    let a = key(&n.model, "a").await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (m, a) = (n.model.clone(), a.clone());
            tokio::spawn(async move { m.buckets().create_bucket("race", Some(&a)).await })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => created += 1,
            Err(ModelError::BucketAlreadyOwnedByYou(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(created, 1);
}

#[tokio::test]
async fn a_live_bucket_hidden_by_a_merge_is_counted_and_a_successor_is_not() {
    let n = node().await;
    let before = BUCKET_ID_CONFLICTS.load(Ordering::Relaxed);
    let first = BucketRow::new("x1z", bucket_id("x1z", None), 10, 10);
    merge(&n.model, &first).await;
    // Deleted then re-created elsewhere: this node gets the successor.
    let next = BucketRow::new("x1z", bucket_id("x1z", Some(&first.id)), 20, 20);
    merge(&n.model, &next).await;
    assert_eq!(BUCKET_ID_CONFLICTS.load(Ordering::Relaxed), before);
    // Created elsewhere from another state: the live bucket `next` loses.
    let other = BucketRow::new("x1z", "ab".repeat(32), 30, 30);
    let kept = merge(&n.model, &other).await;
    assert_eq!(kept.id, other.id);
    assert_eq!(BUCKET_ID_CONFLICTS.load(Ordering::Relaxed), before + 1);
}

#[test]
fn a_bucket_row_with_its_creator_is_format_6_and_without_keeps_its_format() {
    let plain = BucketRow::new("fmt", bucket_id("fmt", None), 1, 1);
    assert_eq!(hangar_table::encode::<BucketTable>(&plain)[0], 2);
    let mut mine = plain.clone();
    mine.created_by = Some("GK000000000000000000000001".into());
    let bytes = hangar_table::encode::<BucketTable>(&mine);
    assert_eq!(bytes[0], hangar_model::row_format::CREATOR_ROW_FORMAT);
    // One more field in the map, appended: the rest is the format-2 row.
    let before = hangar_table::encode::<BucketTable>(&plain);
    assert_eq!((before[1], bytes[1]), (0x85, 0x86));
    assert_eq!(&bytes[2..before.len()], &before[2..]);
    let mut tail = vec![0xaa];
    tail.extend_from_slice(b"created_by");
    tail.push(0xba);
    tail.extend_from_slice(b"GK000000000000000000000001");
    assert_eq!(&bytes[before.len()..], &tail[..]);
    assert_eq!(hangar_table::decode::<BucketTable>(&bytes).unwrap(), mine);
}
