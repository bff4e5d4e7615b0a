//! What is published is what is kept: races between writers of one key,
//! copies of a source that changes, and deletes as tombstones, on a real
//! metadata store and block store.

mod common;

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use hangar_model::bucket::BucketRow;
use hangar_model::garbage::{UploadOf, collect_versions};
use hangar_model::object::{ObjectData, ObjectRow, ObjectTable};
use hangar_model::{Model, ModelError, VersionId, new_version_id};
use hangar_table::Replica;
use hangar_util::time::now_msec;

struct Node {
    _node: common::ModelNode,
    model: Arc<Model>,
    bucket: BucketRow,
}

async fn node() -> Node {
    let node = common::lone_node().await;
    let model = node.model.clone();
    let bucket = model.buckets().create_bucket("races", None).await.unwrap();
    Node {
        _node: node,
        model,
        bucket,
    }
}

/// Uploads a `blocks`-block version (not published) and returns its row,
/// stamped `timestamp_msec` as a writer that read its clock early would.
async fn upload(n: &Node, blocks: u32, fill: u8, timestamp_msec: u64) -> ObjectRow {
    let version = new_version_id();
    n.model
        .objects()
        .begin_upload(version, &UploadOf::object(&n.bucket.id_bytes(), "upload"))
        .await
        .unwrap();
    for i in 0..blocks {
        let data = Bytes::from(vec![fill.wrapping_add(i as u8); 4096]);
        n.model
            .blocks()
            .store(version, i, 4096 * u64::from(i), data)
            .await
            .unwrap();
    }
    ObjectRow {
        timestamp_msec,
        version,
        size: 4096 * blocks as u64,
        etag: format!("etag-{fill}"),
        headers: Default::default(),
        user_meta: Default::default(),
        checksum: None,
        data: ObjectData::Blocks { count: blocks },
        tags: Default::default(),
        retention: Default::default(),
        legal_hold: Default::default(),
        sse_c: None,
        acl: Default::default(),
        grants: hangar_table::Lww::default(),
    }
}

async fn live_blocks(n: &Node, version: &VersionId) -> u32 {
    let entries = n.model.blocks().list(version, 0, 10_000).await.unwrap();
    entries.iter().filter(|(_, e)| !e.deleted).count() as u32
}

#[tokio::test]
async fn a_publish_that_read_its_clock_early_still_wins_and_the_loser_is_collected() {
    let n = node().await;
    let late_clock = upload(&n, 3, 1, now_msec() + 60_000).await;
    let early_clock = upload(&n, 3, 50, 1).await;
    n.model
        .objects()
        .publish(&n.bucket, "k", late_clock.clone())
        .await
        .unwrap();
    let published = n
        .model
        .objects()
        .publish(&n.bucket, "k", early_clock.clone())
        .await
        .unwrap();
    assert!(published.timestamp_msec > late_clock.timestamp_msec);
    collect_versions(&n.model).await.unwrap();

    let current = n
        .model
        .objects()
        .get(&n.bucket, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        current.version, early_clock.version,
        "the last publish wins"
    );
    assert_eq!(current, published);
    assert_eq!(live_blocks(&n, &current.version).await, 3);
    assert_eq!(live_blocks(&n, &late_clock.version).await, 0);
}

#[tokio::test]
async fn concurrent_publishes_of_one_key_keep_the_winner_whole() {
    let n = Arc::new(node().await);
    for round in 0..10u8 {
        let mut rows = Vec::new();
        for w in 0..8u8 {
            // Clocks read in any order, as concurrent writers do.
            let ts = now_msec() + (u64::from(w) * 37 + u64::from(round)) % 5;
            rows.push(upload(&n, 2, w * 10 + round, ts).await);
        }
        let tasks: Vec<_> = rows
            .into_iter()
            .map(|r| {
                let n = n.clone();
                tokio::spawn(async move {
                    n.model
                        .objects()
                        .publish(&n.bucket, "hot", r)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut acknowledged = Vec::new();
        for t in tasks {
            acknowledged.push(t.await.unwrap());
        }
        collect_versions(&n.model).await.unwrap();
        let current = n
            .model
            .objects()
            .get(&n.bucket, "hot")
            .await
            .unwrap()
            .unwrap();
        let newest = acknowledged.iter().max().unwrap();
        assert_eq!(
            &current, newest,
            "round {round}: the newest publication is kept"
        );
        assert_eq!(live_blocks(&n, &current.version).await, 2, "round {round}");
        for a in &acknowledged {
            if a.version != current.version {
                assert_eq!(live_blocks(&n, &a.version).await, 0, "losers are collected");
            }
        }
    }
}

#[tokio::test]
async fn a_copy_of_a_source_collected_meanwhile_fails_instead_of_publishing_holes() {
    let n = node().await;
    let src = upload(&n, 4, 1, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "src", src.clone())
        .await
        .unwrap();
    let newer = upload(&n, 1, 9, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "src", newer)
        .await
        .unwrap();
    collect_versions(&n.model).await.unwrap();

    let copy = new_version_id();
    n.model
        .objects()
        .begin_upload(copy, &UploadOf::object(&n.bucket.id_bytes(), "copy"))
        .await
        .unwrap();
    let r = n.model.blocks().share(src.version, 4, copy, false).await;
    assert!(matches!(r, Err(ModelError::SourceChanged)), "{r:?}");
}

#[tokio::test]
async fn a_copy_of_a_live_source_shares_every_block() {
    let n = node().await;
    let src = upload(&n, 4, 1, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "src", src.clone())
        .await
        .unwrap();
    let copy = new_version_id();
    n.model
        .objects()
        .begin_upload(copy, &UploadOf::object(&n.bucket.id_bytes(), "copy"))
        .await
        .unwrap();
    n.model
        .blocks()
        .share(src.version, 4, copy, false)
        .await
        .unwrap();
    assert_eq!(live_blocks(&n, &copy).await, 4);
}

#[tokio::test]
async fn a_deleted_object_is_a_tombstone_that_reads_as_nothing() {
    let n = node().await;
    let row = upload(&n, 2, 1, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "gone", row.clone())
        .await
        .unwrap();
    let keep = upload(&n, 1, 2, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "kept", keep)
        .await
        .unwrap();
    assert!(n.model.objects().delete(&n.bucket, "gone").await.unwrap());
    assert!(!n.model.objects().delete(&n.bucket, "gone").await.unwrap());
    collect_versions(&n.model).await.unwrap();

    assert!(
        n.model
            .objects()
            .get(&n.bucket, "gone")
            .await
            .unwrap()
            .is_none()
    );
    let listed = n
        .model
        .objects()
        .list(&n.bucket, Bound::Unbounded, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, b"kept");
    let stored = Replica::<ObjectTable>::new(n.model.db().clone())
        .get(&n.bucket.id_bytes(), b"gone")
        .await
        .unwrap()
        .expect("the tombstone row is kept");
    assert!(stored.is_deleted());
    assert!(stored.timestamp_msec > row.timestamp_msec);
    assert_eq!(live_blocks(&n, &row.version).await, 0);
}

#[tokio::test]
async fn listings_skip_runs_of_tombstones_and_still_fill_the_page() {
    let n = node().await;
    for i in 0..50 {
        let key = format!("k{i:03}");
        let row = upload(&n, 0, 0, 0).await;
        let row = ObjectRow {
            data: ObjectData::Inline(vec![1]),
            size: 1,
            ..row
        };
        n.model
            .objects()
            .publish(&n.bucket, &key, row)
            .await
            .unwrap();
        if i < 40 {
            n.model.objects().delete(&n.bucket, &key).await.unwrap();
        }
    }
    let page = n
        .model
        .objects()
        .list(&n.bucket, Bound::Unbounded, 5)
        .await
        .unwrap();
    let keys: Vec<_> = page
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    assert_eq!(keys, ["k040", "k041", "k042", "k043", "k044"]);
}

#[tokio::test]
async fn buried_tombstones_are_out_of_listings_and_a_collected_version_s_entries_are_gone() {
    let n = node().await;
    let mut rows = Vec::new();
    for i in 0..20 {
        let key = format!("k{i:03}");
        let row = upload(&n, 1, i as u8, 0).await;
        n.model
            .objects()
            .publish(&n.bucket, &key, row.clone())
            .await
            .unwrap();
        rows.push(row);
        if i % 5 != 0 {
            n.model.objects().delete(&n.bucket, &key).await.unwrap();
        }
    }
    collect_versions(&n.model).await.unwrap();
    let objects = Replica::<ObjectTable>::new(n.model.db().clone());
    let part = n.bucket.id_bytes();
    let stored = |objects: &Replica<ObjectTable>| {
        let objects = objects.clone();
        async move {
            objects
                .range(&part, Bound::Unbounded, Bound::Unbounded, false, 100)
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(
        stored(&objects).await,
        20,
        "tombstones are read before burial"
    );
    // Due means queued before this millisecond.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (buried, deferred) = n.model.tables().bury_tombstones(0, 1000).await.unwrap();
    assert_eq!(deferred, 0);
    // 16 object tombstones and 16 block entry tombstones of their versions.
    assert_eq!(buried, 32);
    assert_eq!(
        stored(&objects).await,
        4,
        "only the live rows are left in ranges"
    );
    let keys: Vec<_> = n
        .model
        .objects()
        .list(&n.bucket, Bound::Unbounded, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| String::from_utf8(k).unwrap())
        .collect();
    assert_eq!(keys, ["k000", "k005", "k010", "k015"]);
    assert!(
        objects
            .get(&part, b"k001")
            .await
            .unwrap()
            .unwrap()
            .is_deleted()
    );
    assert!(
        n.model
            .objects()
            .get(&n.bucket, "k001")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        n.model
            .blocks()
            .list(&rows[1].version, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A key written again after its burial is listed again.
    let again = upload(&n, 0, 0, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "k001", again)
        .await
        .unwrap();
    assert_eq!(stored(&objects).await, 5);
    // The collector still finds the buried tombstones after the delay.
    let (_, removed) = hangar_table::tombstones::collect_due(
        n.model.db(),
        hangar_model::garbage::TOMBSTONE_TREES,
        now_msec() + 1,
        0,
        100,
    )
    .await
    .unwrap();
    assert_eq!(
        removed, 31,
        "every tombstone but the one of k001, written again"
    );
    assert!(objects.get(&part, b"k002").await.unwrap().is_none());
}

#[tokio::test]
async fn tombstones_are_removed_after_the_delay_and_not_before() {
    use hangar_model::garbage::TOMBSTONE_TREES;
    use hangar_table::tombstones::collect_due;
    let n = node().await;
    let row = upload(&n, 3, 1, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "k", row.clone())
        .await
        .unwrap();
    n.model.objects().delete(&n.bucket, "k").await.unwrap();
    collect_versions(&n.model).await.unwrap();
    let objects = Replica::<ObjectTable>::new(n.model.db().clone());
    let part = n.bucket.id_bytes();

    let (_, early) = collect_due(n.model.db(), TOMBSTONE_TREES, now_msec(), 3_600_000, 100)
        .await
        .unwrap();
    assert_eq!(early, 0, "nothing is due before the delay");
    assert!(objects.get(&part, b"k").await.unwrap().is_some());

    let (_, removed) = collect_due(n.model.db(), TOMBSTONE_TREES, now_msec() + 1, 0, 100)
        .await
        .unwrap();
    assert_eq!(
        removed, 4,
        "the object tombstone and 3 block entry tombstones"
    );
    assert!(objects.get(&part, b"k").await.unwrap().is_none());
    assert!(
        n.model
            .blocks()
            .list(&row.version, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_tombstone_overwritten_by_a_new_object_is_not_collected() {
    use hangar_model::garbage::TOMBSTONE_TREES;
    use hangar_table::tombstones::collect_due;
    let n = node().await;
    let first = upload(&n, 1, 1, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "k", first)
        .await
        .unwrap();
    n.model.objects().delete(&n.bucket, "k").await.unwrap();
    let again = upload(&n, 1, 2, 0).await;
    n.model
        .objects()
        .publish(&n.bucket, "k", again.clone())
        .await
        .unwrap();
    collect_due(n.model.db(), TOMBSTONE_TREES, now_msec() + 1, 0, 100)
        .await
        .unwrap();
    let current = n
        .model
        .objects()
        .get(&n.bucket, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(current.version, again.version);
}

#[tokio::test]
async fn a_restart_after_a_publish_whose_upload_record_was_not_ended_keeps_the_object() {
    use hangar_model::garbage::abandon_stale_uploads;
    let n = node().await;
    // A crash between the object row and the end of the upload record: the
    // row is written as publish writes it, the record is left.
    let row = upload(&n, 2, 1, now_msec()).await;
    let part = n.bucket.id_bytes();
    let r = row.clone();
    n.model
        .db()
        .write(move |tx| Replica::<ObjectTable>::tx_insert(tx, &part, b"upload", &r).map(|_| ()))
        .await
        .unwrap();
    // And an upload that never got published.
    let dead = upload(&n, 1, 9, 0).await;

    assert_eq!(
        abandon_stale_uploads(&n.model).await.unwrap(),
        1,
        "only the dead one"
    );
    collect_versions(&n.model).await.unwrap();
    let current = n
        .model
        .objects()
        .get(&n.bucket, "upload")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(current.version, row.version);
    assert_eq!(live_blocks(&n, &row.version).await, 2);
    assert_eq!(live_blocks(&n, &dead.version).await, 0);
    assert_eq!(
        abandon_stale_uploads(&n.model).await.unwrap(),
        0,
        "records are gone"
    );
}

/// An upload in progress.
fn mpu(key: &str) -> hangar_model::multipart::MpuRow {
    hangar_model::multipart::MpuRow {
        deleted: false,
        upload_id: new_version_id(),
        key: key.into(),
        initiated_msec: now_msec(),
        headers: Default::default(),
        user_meta: Default::default(),
        checksum_algorithm: None,
        tags: Default::default(),
        sse_c: None,
        checksum_type: None,
    }
}

#[tokio::test]
async fn deleting_a_bucket_ends_its_uploads_and_refuses_one_started_from_before() {
    // A bucket without objects but with an upload in progress is deleted,
    // and the upload with it; a CreateMultipartUpload that found the
    // bucket before the deletion (the stale row) and records its upload
    // after is refused by the seal on the bucket's uploads, instead of
    // leaving an upload no client can reach in a deleted bucket.
    let n = node().await;
    n.model.uploads().create(&n.bucket, mpu("a")).await.unwrap();
    n.model.delete_bucket("races").await.unwrap();
    let left = n
        .model
        .uploads()
        .list(&n.bucket, Bound::Unbounded, 10)
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "uploads left in the deleted bucket: {left:?}"
    );
    let late = n.model.uploads().create(&n.bucket, mpu("b")).await;
    assert!(
        matches!(
            late,
            Err(ModelError::Table(hangar_table::TableError::Fenced { .. }))
        ),
        "{late:?}"
    );
    let left = n
        .model
        .uploads()
        .list(&n.bucket, Bound::Unbounded, 10)
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "an upload recorded after the deletion: {left:?}"
    );
}
