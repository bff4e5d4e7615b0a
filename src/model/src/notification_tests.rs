//! The events of object row changes (`ObjectRow::events_since`) and the
//! queue the object table's hook writes: one key per event on every
//! replica, whatever order the replica merged the rows in, and nothing
//! more when a row is merged again.

use std::collections::BTreeSet;

use hangar_db::Db;
use hangar_table::{Crdt, Schema};
use proptest::prelude::*;

use crate::bucket::{BucketRow, BucketTable};
use crate::notification::{
    BucketRules, DestinationKind, NOTIFY_QUEUE_TREE, NOTIFY_RULES_TREE, NotificationRule,
    QueuedEvent, partition_of_bucket,
};
use crate::object::{ObjectData, ObjectRow, ObjectTable};
use crate::test_support::test_db;

const BUCKET: [u8; 32] = [7; 32];

fn row(ts: u64, version: u8, etag: &str) -> ObjectRow {
    ObjectRow {
        size: 3,
        etag: etag.into(),
        data: ObjectData::Inline(b"abc".to_vec()),
        ..ObjectRow::tombstone([version; 16], ts)
    }
}

fn names(old: Option<&ObjectRow>, merged: &ObjectRow) -> Vec<&'static str> {
    merged
        .events_since(old)
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn each_change_of_a_row_is_the_event_s3_sends() {
    let v1 = row(10, 1, "e1");
    let v2 = row(20, 2, "e2-3");
    assert_eq!(names(None, &v1), ["s3:ObjectCreated:Put"]);
    assert_eq!(
        names(Some(&v1), &v2),
        ["s3:ObjectCreated:CompleteMultipartUpload"]
    );
    assert_eq!(names(Some(&v1), &v1), Vec::<&str>::new());
    let gone = ObjectRow::tombstone([3; 16], 30);
    assert_eq!(names(Some(&v1), &gone), ["s3:ObjectRemoved:Delete"]);
    assert_eq!(
        names(Some(&gone), &ObjectRow::tombstone([4; 16], 40)),
        ["s3:ObjectRemoved:Delete"]
    );
    let marker = ObjectRow::delete_marker([5; 16], 50);
    assert_eq!(
        names(Some(&v1), &marker),
        ["s3:ObjectRemoved:DeleteMarkerCreated"]
    );
    let mut tagged = v1.clone();
    tagged
        .tags
        .update(15, [("k".to_owned(), "v".to_owned())].into());
    assert_eq!(
        tagged.events_since(Some(&v1)),
        [("s3:ObjectTagging:Put", 15)]
    );
    let mut untagged = tagged.clone();
    untagged.tags.update(16, Default::default());
    assert_eq!(names(Some(&tagged), &untagged), ["s3:ObjectTagging:Delete"]);
    let mut shared = v1.clone();
    shared
        .acl
        .update(17, Some(crate::access::CannedAcl::PublicRead));
    assert_eq!(shared.events_since(Some(&v1)), [("s3:ObjectAcl:Put", 17)]);
}

fn rules() -> BucketRules {
    BucketRules {
        name: "b".into(),
        versioned: false,
        rules: vec![NotificationRule {
            id: "all".into(),
            kind: DestinationKind::Queue,
            target: "arn".into(),
            events: vec!["s3:ObjectCreated:*".into(), "s3:ObjectRemoved:*".into()],
            prefix: String::new(),
            suffix: String::new(),
        }],
    }
}

/// Merges `rows` into key `k` of `db` one at a time, as a replica does,
/// running the table's hook; returns the queue's keys and events.
async fn merge_all(db: &Db, rows: Vec<ObjectRow>) -> Vec<(Vec<u8>, QueuedEvent)> {
    for r in rows {
        db.write(move |tx| {
            let storage = [&BUCKET[..], b"k"].concat();
            let old: Option<ObjectRow> = tx
                .get(ObjectTable::TREE, &storage)?
                .map(|v| rmp_serde::from_slice(&v).unwrap());
            let mut merged = old.clone().unwrap_or_else(|| r.clone());
            merged.merge(&r);
            ObjectTable::updated(tx, &BUCKET, b"k", old.as_ref(), &r, &merged)?;
            tx.put(
                ObjectTable::TREE,
                storage,
                rmp_serde::to_vec_named(&merged).unwrap(),
            );
            Ok::<_, crate::ModelError>(())
        })
        .await
        .unwrap();
    }
    db.range(
        NOTIFY_QUEUE_TREE,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        false,
        10_000,
    )
    .unwrap()
    .into_iter()
    .map(|(k, v)| (k, rmp_serde::from_slice(&v).unwrap()))
    .collect()
}

async fn replica() -> (tempfile::TempDir, Db) {
    let (d, db) = test_db();
    let r = rmp_serde::to_vec_named(&rules()).unwrap();
    db.write(move |tx| {
        tx.put(NOTIFY_RULES_TREE, BUCKET.to_vec(), r);
        Ok::<_, crate::ModelError>(())
    })
    .await
    .unwrap();
    (d, db)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Two replicas merging the same versions in different orders queue
    /// each event they both see under one key, and the newest version's
    /// creation on both; merging everything again queues nothing more.
    #[test]
    fn replicas_queue_one_key_per_event_whatever_the_order(
        n in 1usize..6,
        deletes in proptest::collection::vec(any::<bool>(), 6),
        order in Just((0..6usize).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        // Recent: a change merged long after it was made queues nothing.
        let base = hangar_util::time::now_msec();
        let rows: Vec<ObjectRow> = (0..n)
            .map(|i| {
                let ts = base + 10 * i as u64;
                if deletes[i] && i > 0 {
                    ObjectRow::tombstone([i as u8; 16], ts)
                } else {
                    row(ts, i as u8, &format!("e{i}"))
                }
            })
            .collect();
        let shuffled: Vec<ObjectRow> = order.iter().filter(|&&i| i < n).map(|&i| rows[i].clone()).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (_da, a) = replica().await;
            let (_db, b) = replica().await;
            let qa = merge_all(&a, rows.clone()).await;
            let qb = merge_all(&b, shuffled).await;
            let by_event = |q: &[(Vec<u8>, QueuedEvent)]| -> BTreeSet<(u64, String, Vec<u8>)> {
                q.iter().map(|(k, e)| (e.time_msec, e.event.clone(), k.clone())).collect()
            };
            let (ea, eb) = (by_event(&qa), by_event(&qb));
            // One key per (time, event) across both replicas.
            let mut seen = std::collections::BTreeMap::new();
            for (t, e, k) in ea.iter().chain(eb.iter()) {
                let prev = seen.insert((*t, e.clone()), k.clone());
                prop_assert!(prev.is_none_or(|p| &p == k), "two keys for {e} at {t}");
            }
            // The last write's event is queued on both.
            let last = rows.last().unwrap();
            let last_event = if last.is_deleted() { "s3:ObjectRemoved:Delete" } else { "s3:ObjectCreated:Put" };
            for q in [&ea, &eb] {
                prop_assert!(q.iter().any(|(t, e, _)| *t == last.timestamp_msec && e == last_event));
            }
            // Merged again: nothing new.
            let again = merge_all(&a, rows.clone()).await;
            prop_assert_eq!(again.len(), qa.len());
            Ok(())
        })?;
    }
}

#[test]
fn the_bucket_hook_keeps_the_rules_index_in_step() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_d, db) = test_db();
        let mut b = BucketRow::new("b", hex::encode(BUCKET), 1, 1);
        let write = |old: Option<BucketRow>, merged: BucketRow| {
            db.write(move |tx| {
                BucketTable::updated(tx, &[], b"b", old.as_ref(), &merged, &merged)?;
                Ok::<_, crate::ModelError>(())
            })
        };
        let indexed = |db: &Db| db.get(NOTIFY_RULES_TREE, &BUCKET).unwrap();
        write(None, b.clone()).await.unwrap();
        assert!(indexed(&db).is_none());
        let before = b.clone();
        b.notification.update(2, rules().rules);
        write(Some(before), b.clone()).await.unwrap();
        let got: BucketRules = rmp_serde::from_slice(&indexed(&db).unwrap()).unwrap();
        assert_eq!(
            got,
            BucketRules {
                name: "b".into(),
                ..rules()
            }
        );
        let before = b.clone();
        b.deleted = true;
        write(Some(before), b.clone()).await.unwrap();
        assert!(indexed(&db).is_none());
    });
}

#[test]
fn a_change_merged_long_after_it_was_made_queues_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_d, db) = replica().await;
        let late =
            hangar_util::time::now_msec() - crate::notification::LATE.as_millis() as u64 - 1000;
        assert!(merge_all(&db, vec![row(late, 1, "e")]).await.is_empty());
        let now = hangar_util::time::now_msec();
        assert_eq!(merge_all(&db, vec![row(now, 2, "e")]).await.len(), 1);
    });
}

#[test]
fn the_queue_finds_a_buckets_partition_as_the_object_table_places_it() {
    for id in [[0u8; 32], [7; 32], *blake3::hash(b"bucket").as_bytes()] {
        assert_eq!(partition_of_bucket(&id), ObjectTable::layout_partition(&id));
    }
}

#[test]
fn a_replica_told_an_event_was_delivered_before_it_merged_the_change_queues_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The sender: queues the event, delivers it.
        let (_ds, sender) = replica().await;
        let r = row(hangar_util::time::now_msec(), 1, "e");
        let queued = merge_all(&sender, vec![r.clone()]).await;
        assert_eq!(queued.len(), 1);
        let key = queued[0].0.clone();
        // A lagging replica hears of the delivery first, then merges.
        let (_dl, lagging) = replica().await;
        lagging
            .write(move |tx| {
                tx.put(
                    crate::notification::NOTIFY_ACKED_TREE,
                    key,
                    hangar_util::time::now_msec().to_be_bytes().to_vec(),
                );
                Ok::<_, crate::ModelError>(())
            })
            .await
            .unwrap();
        assert!(merge_all(&lagging, vec![r]).await.is_empty());
    });
}

#[tokio::test]
async fn delivered_keys_are_forgotten_once_kept_their_time() {
    let (_d, model) = crate::test_support::test_model().await;
    let now = hangar_util::time::now_msec();
    let kept_for = crate::notification::ACKED_FOR.as_millis() as u64;
    let entries = [
        (b"old".to_vec(), now - kept_for - 1),
        (b"new".to_vec(), now - 1000),
    ];
    model
        .db()
        .write(move |tx| {
            for (k, at) in entries {
                tx.put(
                    crate::notification::NOTIFY_ACKED_TREE,
                    k,
                    at.to_be_bytes().to_vec(),
                );
            }
            Ok::<_, crate::ModelError>(())
        })
        .await
        .unwrap();
    assert_eq!(
        model.notifications().forget_delivered(now).await.unwrap(),
        1
    );
    let left = |k: &[u8]| {
        model
            .db()
            .get(crate::notification::NOTIFY_ACKED_TREE, k)
            .unwrap()
    };
    assert!(left(b"old").is_none() && left(b"new").is_some());
}
