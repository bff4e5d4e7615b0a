//! The Merkle index of a sharded table: per layout partition, a hash tree
//! over the table's rows, updated in the transaction that changes a row, so
//! that two replicas of a partition find the rows they disagree on by
//! comparing a few tree nodes instead of every row ([`super::sync`]).
//!
//! It lives in the local tree [`crate::Schema::MERKLE_TREE`] (by convention
//! `merkle:<tree>`), with two kinds of entries per layout partition `p`:
//!
//! ```text
//! held : p (1) ++ 'H' (0x48)                    → empty
//! leaf : p (1) ++ 'L' (0x4c) ++ h (32)          → vh (32) ++ storage key
//! node : p (1) ++ 'N' (0x4e) ++ d (1) ++ h[..d]  → digest (32) ++ count (u64 BE)
//! ```
//!
//! A `held` mark says this node held partition `p` of the table in an
//! assigned layout version: only the rows of a partition it held are
//! dropped when it holds it no longer ([`drop_rows`]; rows written before
//! the node's first layout, in partitions never assigned to it, are kept).
//!
//! where `h = blake3(storage key)` and `vh = blake3(stored row value)` (the
//! format byte included). A node covers the rows whose `h` starts with its
//! `d`-byte prefix, `d` from 0 (the partition's root) to [`DEPTH`]: `count`
//! is how many rows it covers and `digest` the XOR over those rows of
//! `blake3(h ++ vh)`. A node covering no row is absent.
//!
//! What it promises:
//!
//! - The index of a partition (every entry, so the root) depends only on
//!   the set of (storage key, stored value) of the partition's rows, never
//!   on the order of the writes that made it (property-tested below).
//! - A row write costs [`DEPTH`] + 1 node reads and writes and one leaf
//!   write, whatever the table's size: a node's digest changes by
//!   `old contribution XOR new contribution`, without reading its siblings.
//! - Two replicas compare a partition in `O(differences × DEPTH)` messages:
//!   equal roots (digest and count) mean equal rows; otherwise the children
//!   of differing nodes are compared (at most 256 per node), and the leaves
//!   under the differing nodes of depth [`DEPTH`] (or of smaller nodes, see
//!   [`super::sync`]) name the differing rows.
//!
//! The node digests are an XOR set hash rather than a hash of the children:
//! that is what makes updates independent of the siblings. Against accidental
//! differences it is as good as a 256-bit hash; it is not meant to resist a
//! peer crafting rows to collide (peers are authenticated cluster members).

use std::ops::Bound;

use hangar_db::{Db, DbError, Tx};
use hangar_layout::Partition;

use crate::stored::RowTrees;

/// Depth of the deepest interior nodes: 2 bytes of `h`, so 65536 buckets of
/// leaves per partition (a bucket holds one row per 65536 of the partition).
pub const DEPTH: usize = 2;

const HELD: u8 = b'H';
const LEAF: u8 = b'L';
const NODE: u8 = b'N';

/// What a node of the tree summarizes: the XOR digest and the row count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub digest: [u8; 32],
    pub count: u64,
}

impl Summary {
    fn decode(v: &[u8]) -> Result<Summary, DbError> {
        if v.len() != 40 {
            return Err(bad(format!("merkle node of {} bytes", v.len())));
        }
        let mut digest = [0; 32];
        digest.copy_from_slice(&v[..32]);
        let count = u64::from_be_bytes(v[32..].try_into().expect("8 bytes"));
        Ok(Summary { digest, count })
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(40);
        v.extend_from_slice(&self.digest);
        v.extend_from_slice(&self.count.to_be_bytes());
        v
    }
}

/// One row as the index sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    /// blake3 of the storage key.
    pub h: [u8; 32],
    /// blake3 of the stored value.
    pub vh: [u8; 32],
    pub key: Vec<u8>,
}

fn bad(message: String) -> DbError {
    DbError::Engine {
        engine: "merkle index",
        message,
    }
}

fn leaf_key(p: Partition, h: &[u8; 32]) -> Vec<u8> {
    let mut k = Vec::with_capacity(34);
    k.push(p);
    k.push(LEAF);
    k.extend_from_slice(h);
    k
}

fn node_key(p: Partition, prefix: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(3 + prefix.len());
    k.push(p);
    k.push(NODE);
    k.push(prefix.len() as u8);
    k.extend_from_slice(prefix);
    k
}

/// The first key after every key starting with `k`, if any.
fn prefix_end(k: &[u8]) -> Option<Vec<u8>> {
    let mut e = k.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xff {
            e.push(last + 1);
            return Some(e);
        }
    }
    None
}

fn xor_into(acc: &mut [u8; 32], x: &[u8; 32]) {
    for (a, b) in acc.iter_mut().zip(x) {
        *a ^= b;
    }
}

fn contribution(h: &[u8; 32], vh: &[u8; 32]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(h);
    hasher.update(vh);
    *hasher.finalize().as_bytes()
}

fn value_hash(v: &[u8]) -> [u8; 32] {
    *blake3::hash(v).as_bytes()
}

/// Records in `tx` that row `key` of partition `p` went from `old` to `new`
/// (stored values; `None`: no row). Called by [`crate::Table::tx_insert`]
/// and [`crate::Table::tx_remove`] for sharded tables, in the transaction
/// that writes the row.
pub(crate) fn tx_update(
    tx: &mut Tx<'_>,
    index: &'static str,
    p: Partition,
    key: &[u8],
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<(), DbError> {
    if old == new {
        return Ok(());
    }
    tx_update_hashed(tx, index, p, key, old.map(value_hash), new.map(value_hash))
}

/// [`tx_update`] with the value hashes instead of the values.
fn tx_update_hashed(
    tx: &mut Tx<'_>,
    index: &'static str,
    p: Partition,
    key: &[u8],
    old: Option<[u8; 32]>,
    new: Option<[u8; 32]>,
) -> Result<(), DbError> {
    if old == new {
        return Ok(());
    }
    let h = *blake3::hash(key).as_bytes();
    let zero = [0u8; 32];
    let mut delta = old.map_or(zero, |vh| contribution(&h, &vh));
    xor_into(&mut delta, &new.map_or(zero, |vh| contribution(&h, &vh)));
    for d in 0..=DEPTH {
        let nk = node_key(p, &h[..d]);
        let mut s = match tx.get(index, &nk)? {
            Some(v) => Summary::decode(&v)?,
            None => Summary::default(),
        };
        xor_into(&mut s.digest, &delta);
        match (old.is_some(), new.is_some()) {
            (false, true) => s.count += 1,
            (true, false) => s.count = s.count.saturating_sub(1),
            _ => {}
        }
        if s.count == 0 {
            tx.delete(index, nk);
        } else {
            tx.put(index, nk, s.encode());
        }
    }
    match new {
        Some(vh) => {
            let mut lv = Vec::with_capacity(32 + key.len());
            lv.extend_from_slice(&vh);
            lv.extend_from_slice(key);
            tx.put(index, leaf_key(p, &h), lv);
        }
        None => tx.delete(index, leaf_key(p, &h)),
    }
    Ok(())
}

/// What [`repair_index`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IndexRepair {
    /// Rows of the table looked at.
    pub rows: u64,
    /// Rows missing from the index, or indexed with another value.
    pub fixed: u64,
    /// Leaves of rows no longer in the table, removed.
    pub stale: u64,
}

/// The leaf of `key` as stored: its value hash.
fn tx_leaf_hash(
    tx: &Tx<'_>,
    index: &'static str,
    p: Partition,
    key: &[u8],
) -> Result<Option<[u8; 32]>, DbError> {
    let h = *blake3::hash(key).as_bytes();
    Ok(tx
        .get(index, &leaf_key(p, &h))?
        .and_then(|v| v.get(..32).and_then(|b| <[u8; 32]>::try_from(b).ok())))
}

/// Makes the index `index` of the table stored in `trees` (partition keys of
/// `partition_len` bytes, placed by `partition_of`) match the rows: indexes the rows it lacks or holds
/// with another value, and removes the leaves of rows that are gone. For
/// rows stored before their table had an index (a table that becomes
/// sharded), or an index suspected wrong; concurrent writes are safe (each
/// page is checked inside a write transaction). Reads the whole table and
/// the whole index, a page at a time.
pub async fn repair_index(
    db: &Db,
    trees: RowTrees,
    index: &'static str,
    partition_len: usize,
    partition_of: fn(&[u8]) -> Partition,
) -> Result<IndexRepair, DbError> {
    const PAGE: usize = 1000;
    let mut report = IndexRepair::default();
    for tree in std::iter::once(trees.tree).chain(trees.buried) {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.map_or(Bound::Unbounded, Bound::Excluded);
            let keys: Vec<Vec<u8>> = db
                .range_async(tree, start, Bound::Unbounded, false, PAGE)
                .await?
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| k.len() >= partition_len)
                .collect();
            let n = keys.len();
            after = keys.last().cloned();
            report.rows += n as u64;
            report.fixed += db
                .write(move |tx| {
                    let mut fixed = 0;
                    for k in &keys {
                        // Read again inside the transaction: the row may
                        // have changed (or been buried) since the page was
                        // read.
                        let Some(s) = trees.tx_get(tx, k)? else {
                            continue;
                        };
                        let p = partition_of(&k[..partition_len]);
                        let old = tx_leaf_hash(tx, index, p, k)?;
                        let new = value_hash(&s.value);
                        if old != Some(new) {
                            tx_update_hashed(tx, index, p, k, old, Some(new))?;
                            fixed += 1;
                        }
                    }
                    Ok::<_, DbError>(fixed)
                })
                .await?;
            if n < PAGE {
                break;
            }
        }
    }
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(index, start, Bound::Unbounded, false, PAGE)
            .await?;
        let n = page.len();
        after = page.last().map(|(k, _)| k.clone());
        let leaves: Vec<(Partition, Vec<u8>)> = page
            .into_iter()
            .filter(|(k, v)| k.len() == 34 && k[1] == LEAF && v.len() >= 32)
            .map(|(k, v)| (k[0], v[32..].to_vec()))
            .collect();
        report.stale += db
            .write(move |tx| {
                let mut stale = 0;
                for (p, key) in &leaves {
                    if trees.tx_get(tx, key)?.is_none()
                        && let Some(old) = tx_leaf_hash(tx, index, *p, key)?
                    {
                        tx_update_hashed(tx, index, *p, key, Some(old), None)?;
                        stale += 1;
                    }
                }
                Ok::<_, DbError>(stale)
            })
            .await?;
        if n < PAGE {
            break;
        }
    }
    Ok(report)
}

/// The root of partition `p` (all zero, count 0, when it holds no row).
pub async fn root(db: &Db, index: &'static str, p: Partition) -> Result<Summary, DbError> {
    Ok(roots(db, index, vec![p]).await?[0])
}

/// The roots of `partitions`, in the same order, read in one task of the
/// blocking pool.
pub async fn roots(
    db: &Db,
    index: &'static str,
    partitions: Vec<Partition>,
) -> Result<Vec<Summary>, DbError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        partitions
            .iter()
            .map(|p| match db.get(index, &node_key(*p, &[]))? {
                Some(v) => Summary::decode(&v),
                None => Ok(Summary::default()),
            })
            .collect()
    })
    .await
    .map_err(|e| bad(e.to_string()))?
}

/// The non-empty children of node `prefix` (shorter than [`DEPTH`]) of
/// partition `p`: (next byte of `h`, summary), by byte.
pub async fn children(
    db: &Db,
    index: &'static str,
    p: Partition,
    prefix: &[u8],
) -> Result<Vec<(u8, Summary)>, DbError> {
    if prefix.len() >= DEPTH {
        return Err(bad(format!("no children below depth {DEPTH}")));
    }
    let mut start = vec![p, NODE, prefix.len() as u8 + 1];
    start.extend_from_slice(prefix);
    let end = prefix_end(&start).map_or(Bound::Unbounded, Bound::Excluded);
    let d = prefix.len();
    db.range_async(index, Bound::Included(start), end, false, 256)
        .await?
        .into_iter()
        .map(|(k, v)| {
            let byte = *k
                .get(3 + d)
                .ok_or_else(|| bad("short merkle node key".into()))?;
            Ok((byte, Summary::decode(&v)?))
        })
        .collect()
}

/// Which of the 256 partitions carry a `held` mark, read in one task of
/// the blocking pool.
pub async fn held_marks(db: &Db, index: &'static str) -> Result<[bool; 256], DbError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let mut marks = [false; 256];
        for (p, m) in marks.iter_mut().enumerate() {
            *m = db.get(index, &[p as u8, HELD])?.is_some();
        }
        Ok(marks)
    })
    .await
    .map_err(|e| bad(e.to_string()))?
}

/// Whether partition `p` is marked held (see [`held_marks`]).
pub async fn is_marked_held(db: &Db, index: &'static str, p: Partition) -> Result<bool, DbError> {
    Ok(db.get_async(index, vec![p, HELD]).await?.is_some())
}

/// Marks `partitions` held (see the module documentation), in one
/// transaction.
pub async fn mark_held(
    db: &Db,
    index: &'static str,
    partitions: Vec<Partition>,
) -> Result<(), DbError> {
    db.write(move |tx| {
        for p in partitions {
            tx.put(index, vec![p, HELD], Vec::new());
        }
        Ok::<_, DbError>(())
    })
    .await
}

/// What [`drop_rows`] calls for each row it deletes, with the row's storage
/// key and stored value.
pub type Forget = fn(&mut Tx<'_>, &[u8], &[u8]) -> Result<(), DbError>;

/// Deletes up to `limit` rows of partition `p` from the table's `trees`,
/// with their index entries, in one transaction, and returns how many (0:
/// none is left). No update hook runs: the rows leave this node's custody,
/// their values do not change; `forget` is called in the transaction with
/// each row's storage key and stored value, to undo what the row counted
/// in local state. The `held` mark stays.
pub async fn drop_rows(
    db: &Db,
    trees: RowTrees,
    index: &'static str,
    p: Partition,
    limit: usize,
    forget: Forget,
) -> Result<u64, DbError> {
    let page = leaves(db, index, p, &[], None, limit).await?;
    if page.is_empty() {
        return Ok(0);
    }
    db.write(move |tx| {
        let mut dropped = 0;
        for leaf in &page {
            // Read again inside the transaction: a straggling write may
            // have changed the row since the page was read.
            if let Some(old) = tx_leaf_hash(tx, index, p, &leaf.key)? {
                if let Some(s) = trees.tx_get(tx, &leaf.key)? {
                    forget(tx, &leaf.key, &s.value)?;
                }
                trees.tx_delete(tx, &leaf.key);
                tx_update_hashed(tx, index, p, &leaf.key, Some(old), None)?;
                dropped += 1;
            }
        }
        Ok::<_, DbError>(dropped)
    })
    .await
}

/// Up to `limit` leaves of partition `p` whose `h` starts with `prefix`
/// and comes after `after`, by `h`.
pub async fn leaves(
    db: &Db,
    index: &'static str,
    p: Partition,
    prefix: &[u8],
    after: Option<[u8; 32]>,
    limit: usize,
) -> Result<Vec<Leaf>, DbError> {
    let mut lo = vec![p, LEAF];
    lo.extend_from_slice(prefix);
    let end = prefix_end(&lo).map_or(Bound::Unbounded, Bound::Excluded);
    let start = match after {
        Some(h) => Bound::Excluded(leaf_key(p, &h)),
        None => Bound::Included(lo),
    };
    db.range_async(index, start, end, false, limit)
        .await?
        .into_iter()
        .map(|(k, v)| {
            if k.len() != 34 || v.len() < 32 {
                return Err(bad("malformed merkle leaf".into()));
            }
            let mut h = [0; 32];
            h.copy_from_slice(&k[2..]);
            let mut vh = [0; 32];
            vh.copy_from_slice(&v[..32]);
            Ok(Leaf {
                h,
                vh,
                key: v[32..].to_vec(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hangar_db::{DbOptions, SledEngine};
    use proptest::prelude::*;

    use super::*;

    const INDEX: &str = "merkle:t";
    /// Test table `t`, which buries nothing.
    const T_ROWS: RowTrees = RowTrees {
        tree: "t",
        buried: None,
    };

    fn open() -> (tempfile::TempDir, Db) {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 1 << 20).unwrap()),
            DbOptions::default(),
        );
        (d, db)
    }

    /// Every entry of the index.
    async fn dump(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
        db.range_async(INDEX, Bound::Unbounded, Bound::Unbounded, false, 1 << 20)
            .await
            .unwrap()
    }

    /// (storage key, old value, new value) changes of rows.
    type Changes = Vec<(Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>)>;

    /// Applies changes, one transaction each.
    async fn apply(db: &Db, changes: Changes) {
        for (k, old, new) in changes {
            db.write(move |tx| tx_update(tx, INDEX, 7, &k, old.as_deref(), new.as_deref()))
                .await
                .unwrap();
        }
    }

    /// The changes that write `rows` in the order given by `order`, each
    /// row first written with an interim value (replaced later, or removed
    /// when its final value is `None`).
    fn changes(rows: &[(Vec<u8>, Option<Vec<u8>>)], order: &[usize]) -> Changes {
        let mut first = Vec::new();
        let mut last = Vec::new();
        for &i in order {
            let (k, v) = &rows[i % rows.len()];
            let interim = vec![0xee, i as u8];
            first.push((k.clone(), None, Some(interim.clone())));
            last.push((k.clone(), Some(interim), v.clone()));
        }
        // Interim values of every row, then the final ones, each stage in
        // the given order.
        first.into_iter().chain(last).collect()
    }

    #[tokio::test]
    async fn dropping_a_partition_removes_its_rows_and_index_and_nothing_else() {
        const TREE: &str = "t";
        let (_d, db) = open();
        // 1 200 rows in partition 7 (more than a page), 3 in partition 8.
        let rows: Vec<(Partition, Vec<u8>)> = (0..1200u32)
            .map(|i| (7, i.to_be_bytes().to_vec()))
            .chain((0..3u32).map(|i| (8, [b"x".as_slice(), &i.to_be_bytes()].concat())))
            .collect();
        db.write(move |tx| {
            for (p, k) in &rows {
                tx.put(TREE, k.clone(), vec![1]);
                tx_update(tx, INDEX, *p, k, None, Some(&[1]))?;
            }
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        let eight = root(&db, INDEX, 8).await.unwrap();
        assert_eq!(held_marks(&db, INDEX).await.unwrap(), [false; 256]);
        mark_held(&db, INDEX, vec![7, 8]).await.unwrap();
        let marks = held_marks(&db, INDEX).await.unwrap();
        assert!(marks[7] && marks[8] && marks.iter().filter(|m| **m).count() == 2);

        let mut dropped = 0;
        loop {
            let n = drop_rows(
                &db,
                RowTrees {
                    tree: TREE,
                    buried: None,
                },
                INDEX,
                7,
                500,
                |_, _, _| Ok(()),
            )
            .await
            .unwrap();
            assert!(n <= 500);
            if n == 0 {
                break;
            }
            dropped += n;
        }
        assert_eq!(dropped, 1200);
        assert_eq!(root(&db, INDEX, 7).await.unwrap(), Summary::default());
        assert_eq!(root(&db, INDEX, 8).await.unwrap(), eight);
        let left = db
            .range_async(TREE, Bound::Unbounded, Bound::Unbounded, false, 10_000)
            .await
            .unwrap();
        assert_eq!(left.len(), 3);
        // Partition 7's index is gone but its mark; partition 8's is whole.
        let index = dump(&db).await;
        assert!(
            index
                .iter()
                .filter(|(k, _)| k[0] == 7)
                .all(|(k, _)| k == &[7, HELD])
        );
        assert_eq!(held_marks(&db, INDEX).await.unwrap(), marks);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn the_index_depends_only_on_the_rows(
            rows in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 1..12),
                proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..8)),
                1..40,
            ),
            seed in any::<u64>(),
        ) {
            let rows: Vec<_> = rows.into_iter().collect();
            let forward: Vec<usize> = (0..rows.len()).collect();
            let mut shuffled = forward.clone();
            // A deterministic shuffle from the seed.
            let mut s = seed | 1;
            for i in (1..shuffled.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                shuffled.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                let (_d1, a) = open();
                let (_d2, b) = open();
                apply(&a, changes(&rows, &forward)).await;
                apply(&b, changes(&rows, &shuffled)).await;
                let (ia, ib) = (dump(&a).await, dump(&b).await);
                prop_assert_eq!(&ia, &ib);
                let ra = root(&a, INDEX, 7).await.unwrap();
                let live = rows.iter().filter(|(_, v)| v.is_some()).count();
                prop_assert_eq!(ra.count, live as u64);
                // The same rows written directly give the same index.
                let (_d3, c) = open();
                let direct = rows
                    .iter()
                    .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), None, Some(v))))
                    .collect();
                apply(&c, direct).await;
                prop_assert_eq!(&ia, &dump(&c).await);
                Ok(())
            })?;
        }
    }

    #[tokio::test]
    async fn repair_indexes_rows_written_without_it_and_drops_stale_leaves() {
        let (_d1, db) = open();
        let (_d2, reference) = open();
        // Partition keys of 2 bytes; every row's layout partition is that of
        // its key's first 2 bytes.
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..30u32)
            .map(|i| (vec![(i % 3) as u8, 0, i as u8], vec![i as u8; 3]))
            .collect();
        let (r, gone) = (rows.clone(), rows[5].0.clone());
        db.write(move |tx| {
            for (i, (k, v)) in r.iter().enumerate() {
                // A third of the rows indexed, one with a wrong value;
                // the others stored without the index.
                let p = crate::layout_partition_of(&k[..2]);
                if i % 3 == 0 {
                    tx_update(tx, INDEX, p, k, None, Some(if i == 3 { b"x" } else { v }))?;
                }
                tx.put("t", k.clone(), v.clone());
            }
            tx.delete("t", gone);
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        let r = rows.clone();
        reference
            .write(move |tx| {
                for (i, (k, v)) in r.iter().enumerate() {
                    if i != 5 {
                        let p = crate::layout_partition_of(&k[..2]);
                        tx_update(tx, INDEX, p, k, None, Some(v))?;
                    }
                }
                Ok::<_, DbError>(())
            })
            .await
            .unwrap();
        let report = repair_index(&db, T_ROWS, INDEX, 2, crate::layout_partition_of)
            .await
            .unwrap();
        // Rows 0, 6, 9, … were indexed right; 3 had a wrong value; 5 is gone
        // (its leaf was never written: only rows 0 mod 3 were indexed).
        assert_eq!(report.rows, 29);
        assert_eq!(report.fixed, 29 - 9);
        assert_eq!(report.stale, 0);
        assert_eq!(dump(&db).await, dump(&reference).await);
        // A leaf whose row was removed without the index is dropped.
        let k = rows[6].0.clone();
        db.write(move |tx| {
            tx.delete("t", k);
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        let report = repair_index(&db, T_ROWS, INDEX, 2, crate::layout_partition_of)
            .await
            .unwrap();
        assert_eq!((report.fixed, report.stale), (0, 1));
        let k = rows[6].0.clone();
        let v = rows[6].1.clone();
        reference
            .write(move |tx| {
                tx_update(
                    tx,
                    INDEX,
                    crate::layout_partition_of(&k[..2]),
                    &k,
                    Some(&v),
                    None,
                )
            })
            .await
            .unwrap();
        assert_eq!(dump(&db).await, dump(&reference).await);
    }

    #[tokio::test]
    async fn children_and_leaves_name_the_rows() {
        let (_d, db) = open();
        let rows: Vec<_> = (0..50u32)
            .map(|i| (i.to_be_bytes().to_vec(), None, Some(vec![i as u8])))
            .collect();
        apply(&db, rows).await;
        let r = root(&db, INDEX, 7).await.unwrap();
        assert_eq!(r.count, 50);
        assert_eq!(root(&db, INDEX, 8).await.unwrap(), Summary::default());
        let kids = children(&db, INDEX, 7, &[]).await.unwrap();
        assert_eq!(kids.iter().map(|(_, s)| s.count).sum::<u64>(), 50);
        let mut xor = [0u8; 32];
        for (_, s) in &kids {
            xor_into(&mut xor, &s.digest);
        }
        assert_eq!(xor, r.digest);
        let (b, s) = kids[0];
        let grand = children(&db, INDEX, 7, &[b]).await.unwrap();
        assert_eq!(grand.iter().map(|(_, s)| s.count).sum::<u64>(), s.count);
        let under = leaves(&db, INDEX, 7, &[b], None, 1000).await.unwrap();
        assert_eq!(under.len() as u64, s.count);
        assert!(under.iter().all(|l| l.h[0] == b));
        let all = leaves(&db, INDEX, 7, &[], None, 1000).await.unwrap();
        assert_eq!(all.len(), 50);
        let page = leaves(&db, INDEX, 7, &[], Some(all[9].h), 5).await.unwrap();
        assert_eq!(page, all[10..15].to_vec());
        // Removing every row empties the index.
        let gone = (0..50u32)
            .map(|i| (i.to_be_bytes().to_vec(), Some(vec![i as u8]), None))
            .collect();
        apply(&db, gone).await;
        assert!(dump(&db).await.is_empty());
    }
}
