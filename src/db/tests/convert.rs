//! Converting a store between engines copies every tree and key.

use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::Arc;

use hangar_db::{Engine, RedbEngine, SledEngine, WriteOp, convert, convert_db, parse_engine_path};
use hangar_util::config::DbEngine;

/// Every non-empty tree with its rows.
type Dump = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

fn dump(e: &dyn Engine) -> Dump {
    e.trees()
        .unwrap()
        .into_iter()
        .map(|t| {
            let rows = e
                .range(&t, Unbounded, Unbounded, false, usize::MAX)
                .unwrap();
            (t, rows)
        })
        .filter(|(_, rows)| !rows.is_empty())
        .collect()
}

/// Three trees, one larger than a conversion chunk, keys with NUL and 0xFF.
fn fill(e: &dyn Engine) -> u64 {
    let mut ops = Vec::new();
    for i in 0u32..10_000 {
        ops.push(WriteOp {
            tree: "object",
            key: i.to_be_bytes().to_vec(),
            value: Some(vec![i as u8; (i % 100) as usize]),
        });
    }
    for k in [vec![], vec![0], vec![0, 0xff], vec![0xff]] {
        ops.push(WriteOp {
            tree: "bucket",
            key: k.clone(),
            value: Some(k),
        });
    }
    ops.push(WriteOp {
        tree: "bucket_alias",
        key: b"photos".to_vec(),
        value: Some(b"id".to_vec()),
    });
    let n = ops.len() as u64;
    e.apply(ops, true).unwrap();
    n
}

fn sled(p: &Path) -> Arc<dyn Engine> {
    Arc::new(SledEngine::open(p, 8 << 20).unwrap())
}

fn redb(p: &Path) -> Arc<dyn Engine> {
    Arc::new(RedbEngine::open(p, 8 << 20).unwrap())
}

#[test]
fn sled_to_redb_and_back_keeps_every_key() {
    let d = tempfile::tempdir().unwrap();
    let a = sled(&d.path().join("a.sled"));
    let n = fill(a.as_ref());
    let b = redb(&d.path().join("b.redb"));
    assert_eq!(convert(a.as_ref(), b.as_ref()).unwrap(), n);
    assert_eq!(dump(b.as_ref()), dump(a.as_ref()));
    let c = sled(&d.path().join("c.sled"));
    assert_eq!(convert(b.as_ref(), c.as_ref()).unwrap(), n);
    assert_eq!(dump(c.as_ref()), dump(a.as_ref()));
    assert_eq!(dump(a.as_ref()).len(), 3);
}

#[test]
fn refuses_a_destination_that_is_not_empty() {
    let d = tempfile::tempdir().unwrap();
    let a = sled(&d.path().join("a.sled"));
    fill(a.as_ref());
    let b = redb(&d.path().join("b.redb"));
    fill(b.as_ref());
    assert!(convert(a.as_ref(), b.as_ref()).is_err());
}

#[test]
fn convert_db_opens_engines_by_spec() {
    let d = tempfile::tempdir().unwrap();
    let from = d.path().join("meta/db.sled");
    let n = {
        let a = sled(&from);
        fill(a.as_ref())
    };
    let to = d.path().join("meta/db.redb");
    let copied = convert_db(
        &format!("sled:{}", from.display()),
        &format!("redb:{}", to.display()),
    )
    .unwrap();
    assert_eq!(copied, n);
    let b = redb(&to);
    assert_eq!(
        b.get("bucket_alias", b"photos").unwrap(),
        Some(b"id".to_vec())
    );
    // A missing source is an error, not an empty conversion.
    let missing = d.path().join("nothing/db.redb");
    assert!(
        convert_db(
            &format!("redb:{}", missing.display()),
            &format!("sled:{}", d.path().join("x.sled").display()),
        )
        .is_err()
    );
    assert!(!missing.exists());
}

#[test]
fn parses_engine_paths() {
    assert_eq!(
        parse_engine_path("redb:/m/db.redb").unwrap(),
        (DbEngine::Redb, "/m/db.redb".into())
    );
    assert!(parse_engine_path("/m/db.redb").is_err());
    assert!(parse_engine_path("sled:").is_err());
    assert!(parse_engine_path("lmdb:/m/db.lmdb").is_err());
}
