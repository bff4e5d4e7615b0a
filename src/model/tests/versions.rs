//! Versioned buckets on a real metadata and block store: random sequences
//! of writes, deletes, permanent deletes and state changes, checked after
//! each run against a plain model of S3's rules (the latest version of
//! each key, every version in S3's order, pages of any size), and the
//! blocks of a removed version collected while those of the versions kept
//! stay readable.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use hangar_model::bucket::{BucketRow, Versioning};
use hangar_model::garbage::{UploadOf, collect_versions};
use hangar_model::object::{ObjectData, ObjectRow};
use hangar_model::version_keys::VersionRef;
use hangar_model::version_list::{ListedVersion, VersionCursor};
use hangar_model::{VersionId, new_version_id};
use rand::{Rng, SeedableRng};

type Node = common::ModelNode;

async fn node() -> Node {
    let n = common::lone_node().await;
    n.model
        .buckets()
        .create_bucket("versions", None)
        .await
        .unwrap();
    n
}

async fn bucket(n: &Node) -> BucketRow {
    n.model
        .buckets()
        .get_bucket("versions")
        .await
        .unwrap()
        .unwrap()
}

/// A row of `fill` bytes: inline, or one stored block when `block`.
async fn row(n: &Node, bucket: &BucketRow, key: &str, fill: u8, block: bool) -> ObjectRow {
    let version = new_version_id();
    let data = if block {
        n.model
            .objects()
            .begin_upload(version, &UploadOf::object(&bucket.id_bytes(), key))
            .await
            .unwrap();
        n.model
            .blocks()
            .store(version, 0, 0, Bytes::from(vec![fill; 100]))
            .await
            .unwrap();
        ObjectData::Blocks { count: 1 }
    } else {
        ObjectData::Inline(vec![fill; 100])
    };
    ObjectRow {
        timestamp_msec: 0,
        version,
        size: 100,
        etag: format!("{fill}"),
        headers: Default::default(),
        user_meta: Default::default(),
        checksum: None,
        data,
        tags: Default::default(),
        retention: Default::default(),
        legal_hold: Default::default(),
        sse_c: None,
        acl: Default::default(),
        grants: hangar_table::Lww::default(),
    }
}

/// What S3 keeps of one key: its versions, newest first, each with its
/// id and content (`None`: a delete marker).
type Reference = BTreeMap<String, Vec<(VersionRef, Option<String>)>>;

fn id_of(bucket: &BucketRow, r: &ObjectRow) -> VersionRef {
    match bucket.versioning() {
        Versioning::Enabled => VersionRef::Id {
            ts: r.timestamp_msec,
            id: r.version,
        },
        _ => VersionRef::Null,
    }
}

/// Adds a new latest version to the reference: a null one replaces the
/// key's old null version wherever it was.
fn push_version(reference: &mut Reference, key: &str, id: VersionRef, etag: Option<String>) {
    let vs = reference.entry(key.to_owned()).or_default();
    if id == VersionRef::Null {
        vs.retain(|(v, _)| *v != VersionRef::Null);
    }
    vs.insert(0, (id, etag));
}

async fn all_versions(n: &Node, b: &BucketRow, page: usize) -> Vec<ListedVersion> {
    let mut out: Vec<ListedVersion> = Vec::new();
    let mut cursor = VersionCursor::KeyFrom(Vec::new());
    loop {
        let got = n
            .model
            .objects()
            .list_versions(b, b"", &cursor, page)
            .await
            .unwrap();
        let full = got.len() == page;
        if let Some(l) = got.last() {
            cursor = VersionCursor::After(l.key.clone(), l.id);
        }
        out.extend(got);
        if !full {
            return out;
        }
    }
}

#[tokio::test]
async fn random_histories_read_and_list_as_s3_says() {
    for seed in 0..6u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let n = node().await;
        let mut reference: Reference = BTreeMap::new();
        let keys = ["a", "a/b", "b", "c"];
        // Writes before versioning are null versions.
        for k in &keys[..2] {
            let b = bucket(&n).await;
            let r = row(&n, &b, k, 1, true).await;
            let p = n.model.objects().publish(&b, k, r).await.unwrap();
            reference.insert((*k).to_owned(), vec![(VersionRef::Null, Some(p.etag))]);
        }
        n.model
            .buckets()
            .set_bucket_versioning("versions", Versioning::Enabled)
            .await
            .unwrap();
        for step in 0..60u32 {
            let b = bucket(&n).await;
            let key = keys[rng.random_range(0..keys.len())];
            match rng.random_range(0..10) {
                0..5 => {
                    let r = row(&n, &b, key, step as u8, rng.random_bool(0.5)).await;
                    let p = n.model.objects().publish(&b, key, r).await.unwrap();
                    push_version(&mut reference, key, id_of(&b, &p), Some(p.etag));
                }
                5 | 6 => {
                    let d = n
                        .model
                        .objects()
                        .delete_version(&b, key, None)
                        .await
                        .unwrap();
                    assert!(d.delete_marker);
                    push_version(&mut reference, key, d.id.unwrap(), None);
                }
                7 | 8 => {
                    // A permanent delete of a random version of the key.
                    let vs = reference.entry(key.to_owned()).or_default();
                    if vs.is_empty() {
                        continue;
                    }
                    let i = rng.random_range(0..vs.len());
                    let (v, etag) = vs.remove(i);
                    let d = n
                        .model
                        .objects()
                        .delete_version(&b, key, Some(v))
                        .await
                        .unwrap();
                    assert!(d.existed);
                    assert_eq!(d.delete_marker, etag.is_none());
                }
                _ => {
                    let state = if b.versioning() == Versioning::Enabled {
                        Versioning::Suspended
                    } else {
                        Versioning::Enabled
                    };
                    n.model
                        .buckets()
                        .set_bucket_versioning("versions", state)
                        .await
                        .unwrap();
                }
            }
        }
        let b = bucket(&n).await;
        // Every version, read by its id; the latest, read without one.
        for (k, vs) in &reference {
            for (v, etag) in vs {
                let f = n
                    .model
                    .objects()
                    .get_version(&b, k, *v)
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(f.row.is_delete_marker(), etag.is_none(), "{k} {v}");
                if let Some(e) = etag {
                    assert_eq!(&f.row.etag, e);
                }
            }
            let latest = n.model.objects().latest_version(&b, k).await.unwrap();
            assert_eq!(latest.map(|f| f.id.unwrap()), vs.first().map(|(v, _)| *v));
        }
        // ListObjects: keys whose latest version is not a delete marker.
        let want: Vec<(String, String)> = reference
            .iter()
            .filter_map(|(k, vs)| Some((k.clone(), vs.first()?.1.clone()?)))
            .collect();
        for page in [1usize, 2, 1000] {
            let mut got = Vec::new();
            let mut start: Option<Vec<u8>> = None;
            loop {
                let from = match &start {
                    Some(s) => Bound::Excluded(s.as_slice()),
                    None => Bound::Unbounded,
                };
                let p = n.model.objects().list(&b, from, page).await.unwrap();
                let full = p.len() == page;
                start = p.last().map(|(k, _)| k.clone());
                got.extend(
                    p.into_iter()
                        .map(|(k, r)| (String::from_utf8(k).unwrap(), r.etag)),
                );
                if !full {
                    break;
                }
            }
            assert_eq!(got, want, "seed {seed} page {page}");
        }
        // ListObjectVersions: every version once, in S3's order.
        let want: Vec<(String, VersionRef, bool, bool)> = reference
            .iter()
            .flat_map(|(k, vs)| {
                vs.iter()
                    .enumerate()
                    .map(move |(i, (v, e))| (k.clone(), *v, i == 0, e.is_none()))
            })
            .collect();
        for page in [1usize, 2, 3, 7, 1000] {
            let got: Vec<_> = all_versions(&n, &b, page)
                .await
                .into_iter()
                .map(|l| {
                    (
                        String::from_utf8(l.key).unwrap(),
                        l.id,
                        l.is_latest,
                        l.row.is_delete_marker(),
                    )
                })
                .collect();
            assert_eq!(got, want, "seed {seed} page {page}");
        }
    }
}

async fn live_blocks(n: &Node, version: &VersionId) -> usize {
    let entries = n.model.blocks().list(version, 0, 100).await.unwrap();
    entries.iter().filter(|(_, e)| !e.deleted).count()
}

#[tokio::test]
async fn blocks_are_collected_only_when_their_version_is_removed() {
    let n = node().await;
    let b = bucket(&n).await;
    let null = row(&n, &b, "k", 1, true).await;
    let null = n.model.objects().publish(&b, "k", null).await.unwrap();
    n.model
        .buckets()
        .set_bucket_versioning("versions", Versioning::Enabled)
        .await
        .unwrap();
    let b = bucket(&n).await;
    let v1 = row(&n, &b, "k", 2, true).await;
    let v1 = n.model.objects().publish(&b, "k", v1).await.unwrap();
    let v2 = row(&n, &b, "k", 3, true).await;
    let v2 = n.model.objects().publish(&b, "k", v2).await.unwrap();
    n.model
        .objects()
        .delete_version(&b, "k", None)
        .await
        .unwrap();
    collect_versions(&n.model).await.unwrap();
    for v in [&null, &v1, &v2] {
        assert_eq!(live_blocks(&n, &v.version).await, 1, "kept while listed");
    }
    // Removing v1 collects its block only.
    let d = n
        .model
        .objects()
        .delete_version(&b, "k", Some(id_of(&b, &v1)))
        .await
        .unwrap();
    assert!(d.existed && !d.delete_marker);
    collect_versions(&n.model).await.unwrap();
    assert_eq!(live_blocks(&n, &v1.version).await, 0);
    assert_eq!(live_blocks(&n, &v2.version).await, 1);
    assert_eq!(live_blocks(&n, &null.version).await, 1);
    // Suspended: a null write replaces the old null version, v2 stays.
    n.model
        .buckets()
        .set_bucket_versioning("versions", Versioning::Suspended)
        .await
        .unwrap();
    let b = bucket(&n).await;
    let again = row(&n, &b, "k", 4, true).await;
    let again = n.model.objects().publish(&b, "k", again).await.unwrap();
    collect_versions(&n.model).await.unwrap();
    assert_eq!(live_blocks(&n, &null.version).await, 0);
    assert_eq!(live_blocks(&n, &v2.version).await, 1);
    let latest = n
        .model
        .objects()
        .latest_version(&b, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.id, latest.row.version),
        (Some(VersionRef::Null), again.version)
    );
    // The bucket holds versions: it cannot be deleted.
    assert!(n.model.delete_bucket("versions").await.is_err());
}

#[tokio::test]
async fn an_upload_published_as_a_version_survives_the_start_up_scan() {
    let n = node().await;
    n.model
        .buckets()
        .set_bucket_versioning("versions", Versioning::Enabled)
        .await
        .unwrap();
    let b = bucket(&n).await;
    let r = row(&n, &b, "k", 9, true).await;
    // Published, but the crash came before the upload record was ended:
    // the record is written again as it was.
    let p = n.model.objects().publish(&b, "k", r).await.unwrap();
    n.model
        .objects()
        .begin_upload(p.version, &UploadOf::object(&b.id_bytes(), "k"))
        .await
        .unwrap();
    let stale = hangar_model::garbage::stale_uploads(&n.model)
        .await
        .unwrap();
    let dead = hangar_model::garbage::abandon_uploads(&n.model, &stale)
        .await
        .unwrap();
    assert_eq!(dead, 0, "a published version is not collected");
    collect_versions(&n.model).await.unwrap();
    assert_eq!(live_blocks(&n, &p.version).await, 1);
}
