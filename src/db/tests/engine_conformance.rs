//! The same behaviour asked of every engine, on real files.

use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::path::Path;
use std::sync::Arc;

use hangar_db::{Db, DbError, DbOptions, Engine, RedbEngine, SledEngine, WriteOp};

fn put(tree: &'static str, key: &[u8], value: &[u8]) -> WriteOp {
    WriteOp {
        tree,
        key: key.to_vec(),
        value: Some(value.to_vec()),
    }
}

fn del(tree: &'static str, key: &[u8]) -> WriteOp {
    WriteOp {
        tree,
        key: key.to_vec(),
        value: None,
    }
}

fn keys(rows: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
    rows.iter().map(|(k, _)| k.clone()).collect()
}

/// Keys chosen to trip a prefixing scheme: empty, NUL and 0xFF bytes.
fn tricky_keys() -> Vec<Vec<u8>> {
    vec![
        vec![],
        vec![0],
        vec![0, 0],
        vec![1],
        b"a".to_vec(),
        b"a\0b".to_vec(),
        b"ab".to_vec(),
        vec![0xff],
        vec![0xff, 0xff, 0],
    ]
}

fn get_put_overwrite_delete(e: &dyn Engine) {
    assert_eq!(e.get("t", b"k").unwrap(), None);
    e.apply(vec![put("t", b"k", b"1")], true).unwrap();
    assert_eq!(e.get("t", b"k").unwrap(), Some(b"1".to_vec()));
    e.apply(vec![put("t", b"k", b"2")], false).unwrap();
    assert_eq!(e.get("t", b"k").unwrap(), Some(b"2".to_vec()));
    e.apply(vec![del("t", b"k")], true).unwrap();
    assert_eq!(e.get("t", b"k").unwrap(), None);
    // Deleting a key that is not there, in a tree that never existed, is fine.
    e.apply(vec![del("never", b"k")], true).unwrap();
    assert_eq!(e.get("never", b"k").unwrap(), None);
    // Empty values are values.
    e.apply(vec![put("t", b"empty", b"")], true).unwrap();
    assert_eq!(e.get("t", b"empty").unwrap(), Some(vec![]));
}

fn range_bounds_reverse_limit(e: &dyn Engine) {
    let ops = (0u8..10).map(|i| put("r", &[i], &[i * 2])).collect();
    e.apply(ops, true).unwrap();
    let r = |s: Bound<&[u8]>, en: Bound<&[u8]>, rev: bool, lim: usize| {
        keys(&e.range("r", s, en, rev, lim).unwrap())
            .into_iter()
            .map(|k| k[0])
            .collect::<Vec<_>>()
    };
    assert_eq!(
        r(Unbounded, Unbounded, false, 100),
        (0..10).collect::<Vec<_>>()
    );
    assert_eq!(r(Included(&[2]), Excluded(&[5]), false, 100), vec![2, 3, 4]);
    assert_eq!(r(Excluded(&[2]), Included(&[5]), false, 100), vec![3, 4, 5]);
    assert_eq!(
        r(Included(&[2]), Included(&[5]), true, 100),
        vec![5, 4, 3, 2]
    );
    assert_eq!(r(Excluded(&[2]), Excluded(&[5]), true, 100), vec![4, 3]);
    assert_eq!(r(Unbounded, Unbounded, true, 3), vec![9, 8, 7]);
    assert_eq!(r(Included(&[7]), Unbounded, false, 2), vec![7, 8]);
    assert_eq!(r(Unbounded, Excluded(&[3]), true, 2), vec![2, 1]);
    assert_eq!(r(Unbounded, Unbounded, false, 0), Vec::<u8>::new());
    // Inverted and empty ranges are empty, not a panic.
    assert_eq!(
        r(Included(&[5]), Included(&[2]), false, 100),
        Vec::<u8>::new()
    );
    assert_eq!(
        r(Included(&[5]), Excluded(&[5]), true, 100),
        Vec::<u8>::new()
    );
    assert_eq!(
        r(Excluded(&[5]), Included(&[5]), false, 100),
        Vec::<u8>::new()
    );
    assert_eq!(r(Included(&[5]), Included(&[5]), false, 100), vec![5]);
    // Values come with their keys.
    assert_eq!(
        e.range("r", Included(&[3]), Included(&[3]), false, 1)
            .unwrap(),
        vec![(vec![3], vec![6])]
    );
    // A tree that does not exist is empty.
    assert!(
        e.range("nothing", Unbounded, Unbounded, false, 10)
            .unwrap()
            .is_empty()
    );
}

fn trees_are_separate(e: &dyn Engine) {
    // "a" is a prefix of "ab", and keys hold NUL and 0xFF bytes: no key of one
    // tree may show up in the other, whatever the prefixing scheme.
    let mut ops = Vec::new();
    for k in tricky_keys() {
        ops.push(put("a", &k, b"in a"));
        ops.push(put("ab", &k, b"in ab"));
    }
    ops.push(put("b", b"only", b"in b"));
    e.apply(ops, true).unwrap();
    let mut sorted = tricky_keys();
    sorted.sort();
    for (tree, v) in [("a", b"in a".as_slice()), ("ab", b"in ab".as_slice())] {
        let all = e.range(tree, Unbounded, Unbounded, false, 100).unwrap();
        assert_eq!(keys(&all), sorted, "tree {tree}");
        assert!(all.iter().all(|(_, val)| val == v), "tree {tree}");
        let mut rev = keys(&e.range(tree, Unbounded, Unbounded, true, 100).unwrap());
        rev.reverse();
        assert_eq!(rev, sorted, "tree {tree} reversed");
        for k in tricky_keys() {
            assert_eq!(e.get(tree, &k).unwrap().as_deref(), Some(v));
        }
    }
    assert_eq!(e.get("a", b"only").unwrap(), None);
    assert_eq!(e.trees().unwrap(), vec!["a", "ab", "b"]);
}

fn batch_is_applied_whole(e: &dyn Engine) {
    e.apply(vec![put("x", b"gone", b"0")], true).unwrap();
    let ops = vec![
        put("x", b"1", b"one"),
        put("y", b"2", b"two"),
        del("x", b"gone"),
        put("z", b"3", b"three"),
    ];
    e.apply(ops, true).unwrap();
    assert_eq!(e.get("x", b"1").unwrap(), Some(b"one".to_vec()));
    assert_eq!(e.get("y", b"2").unwrap(), Some(b"two".to_vec()));
    assert_eq!(e.get("z", b"3").unwrap(), Some(b"three".to_vec()));
    assert_eq!(e.get("x", b"gone").unwrap(), None);
    assert!(e.size_on_disk().unwrap() > 0);
}

fn load_inserts_into_a_named_tree(e: &dyn Engine) {
    let tree = String::from("loaded");
    e.load(
        &tree,
        vec![
            (b"k1".to_vec(), b"v1".to_vec()),
            (b"k2".to_vec(), b"v2".to_vec()),
        ],
    )
    .unwrap();
    assert_eq!(
        e.range("loaded", Unbounded, Unbounded, false, 10).unwrap(),
        vec![
            (b"k1".to_vec(), b"v1".to_vec()),
            (b"k2".to_vec(), b"v2".to_vec())
        ]
    );
}

/// Writes survive closing and reopening, synced or not (a clean close
/// flushes).
fn survives_reopen(open: impl Fn() -> Arc<dyn Engine>) {
    {
        let e = open();
        e.apply(vec![put("p", b"synced", b"1")], true).unwrap();
        e.apply(vec![put("p", b"unsynced", b"2")], false).unwrap();
        e.apply(vec![put("p", b"synced later", b"3")], false)
            .unwrap();
        e.sync().unwrap();
    }
    let e = open();
    assert_eq!(e.get("p", b"synced").unwrap(), Some(b"1".to_vec()));
    assert_eq!(e.get("p", b"unsynced").unwrap(), Some(b"2".to_vec()));
    assert_eq!(e.get("p", b"synced later").unwrap(), Some(b"3".to_vec()));
}

/// Group commit over the engine: concurrent read-modify-write closures all
/// land, and a failing closure leaves no trace.
async fn group_commit_over(engine: Arc<dyn Engine>) {
    let db = Db::new(
        engine,
        DbOptions {
            fsync: true,
            max_batch: 256,
            queue_len: 1024,
        },
    );
    let tasks: Vec<_> = (0..64u32)
        .map(|i| {
            let db = db.clone();
            tokio::spawn(async move {
                db.write(move |tx| {
                    let n = tx
                        .get("c", b"n")?
                        .map(|v| u32::from_be_bytes(v.try_into().unwrap()))
                        .unwrap_or(0);
                    tx.put("c", b"n".to_vec(), (n + 1).to_be_bytes().to_vec());
                    tx.put("w", i.to_be_bytes().to_vec(), vec![]);
                    if i % 8 == 7 {
                        return Err(DbError::Closed);
                    }
                    Ok(())
                })
                .await
            })
        })
        .collect();
    let mut ok = 0u32;
    for t in tasks {
        if t.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    assert_eq!(ok, 56);
    let n = db.get_async("c", b"n".to_vec()).await.unwrap().unwrap();
    assert_eq!(u32::from_be_bytes(n.try_into().unwrap()), 56);
    let w = db
        .range_async("w", Unbounded, Unbounded, false, 1000)
        .await
        .unwrap();
    assert_eq!(w.len(), 56);
    assert!(w.iter().all(|(k, _)| k[3] % 8 != 7));
}

fn open_sled(dir: &Path) -> Arc<dyn Engine> {
    Arc::new(SledEngine::open(&dir.join("db.sled"), 8 << 20).unwrap())
}

fn open_redb(dir: &Path) -> Arc<dyn Engine> {
    Arc::new(RedbEngine::open(&dir.join("db.redb"), 8 << 20).unwrap())
}

macro_rules! conformance {
    ($engine:ident, $open:ident) => {
        mod $engine {
            use super::*;

            fn fresh() -> (tempfile::TempDir, Arc<dyn Engine>) {
                let d = tempfile::tempdir().unwrap();
                let e = $open(d.path());
                (d, e)
            }

            #[test]
            fn get_put_overwrite_delete() {
                let (_d, e) = fresh();
                super::get_put_overwrite_delete(e.as_ref());
            }

            #[test]
            fn range_bounds_reverse_limit() {
                let (_d, e) = fresh();
                super::range_bounds_reverse_limit(e.as_ref());
            }

            #[test]
            fn trees_are_separate() {
                let (_d, e) = fresh();
                super::trees_are_separate(e.as_ref());
            }

            #[test]
            fn batch_is_applied_whole() {
                let (_d, e) = fresh();
                super::batch_is_applied_whole(e.as_ref());
            }

            #[test]
            fn load_inserts_into_a_named_tree() {
                let (_d, e) = fresh();
                super::load_inserts_into_a_named_tree(e.as_ref());
            }

            #[test]
            fn survives_reopen() {
                let d = tempfile::tempdir().unwrap();
                super::survives_reopen(|| $open(d.path()));
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn group_commit() {
                let (_d, e) = fresh();
                super::group_commit_over(e).await;
            }
        }
    };
}

conformance!(sled, open_sled);
conformance!(redb, open_redb);

/// sled 0.34 refuses to open a store holding a snapshot it was still writing
/// when killed; SledEngine removes such a file first.
#[test]
fn sled_opens_despite_an_unfinished_snapshot() {
    let d = tempfile::tempdir().unwrap();
    {
        let e = open_sled(d.path());
        e.apply(vec![put("t", b"k", b"v")], true).unwrap();
    }
    let partial = d.path().join("db.sled/snap.FFFFFFFFFFFFFFFF.generating");
    std::fs::write(&partial, b"half a snapshot").unwrap();
    let e = open_sled(d.path());
    assert_eq!(e.get("t", b"k").unwrap(), Some(b"v".to_vec()));
    assert!(!partial.exists());
}
