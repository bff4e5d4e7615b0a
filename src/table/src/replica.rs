//! This node's replica of a table (the local half of every [`crate::Table`]).

use std::marker::PhantomData;
use std::ops::Bound;

use hangar_db::{Db, Tx};

use crate::stored::RowTrees;
use crate::{
    Crdt, Result, Schema, TableError, decode, encode, fence, merkle, storage_key, tombstones,
};

/// This node's replica of table `S`: the rows it stores, read and written
/// in its own metadata store, with no remote call. Every replicated
/// [`crate::Table`] keeps one; its transactional operations
/// ([`Replica::tx_insert`] and the others) are how a schema's rows change
/// on a node, whoever asked for the change.
pub struct Replica<S: Schema> {
    db: Db,
    _schema: PhantomData<S>,
}

impl<S: Schema> Clone for Replica<S> {
    fn clone(&self) -> Self {
        Replica {
            db: self.db.clone(),
            _schema: PhantomData,
        }
    }
}

/// Rows of a table whose sort key is a big-endian `u32`, with their
/// numbers (a row with another sort key is left out).
pub(crate) fn numbered<R>(rows: Vec<(Vec<u8>, R)>) -> Vec<(u32, R)> {
    rows.into_iter()
        .filter_map(|(k, r)| Some((u32::from_be_bytes(k.try_into().ok()?), r)))
        .collect()
}

impl<S: Schema> Replica<S> {
    pub fn new(db: Db) -> Self {
        Replica {
            db,
            _schema: PhantomData,
        }
    }

    /// The metadata store under this table.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Reads one row (a buried tombstone too).
    pub async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let k = storage_key::<S>(partition, sort);
        RowTrees::of::<S>()
            .get_async(&self.db, k)
            .await?
            .map(|v| decode::<S>(&v))
            .transpose()
    }

    /// Reads up to `limit` rows of `partition` whose sort key is within
    /// (`start`, `end`), in sort-key order (reversed when `reverse`).
    /// Returns (sort key, row) pairs. Buried tombstones are not read (every
    /// replica holds them; [`crate::tombstones`], "Burial"); other
    /// tombstones are.
    pub async fn range(
        &self,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, S::Row)>> {
        let map = |b: Bound<&[u8]>| b.map(|s| s.to_vec());
        let rows = self
            .range_raw(partition, map(start), map(end), reverse, limit)
            .await?;
        rows.into_iter()
            .map(|(k, v)| Ok((k[S::PARTITION_LEN..].to_vec(), decode::<S>(&v)?)))
            .collect()
    }

    /// Every row of `partition` this node holds, in sort-key order, read a
    /// page of 1000 at a time (for the small tables every node holds:
    /// keys, KMS keys).
    pub async fn all(&self, partition: &[u8]) -> Result<Vec<S::Row>> {
        const PAGE: usize = 1000;
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let page = self
                .range(partition, start, Bound::Unbounded, false, PAGE)
                .await?;
            let full = page.len() == PAGE;
            after = page.last().map(|(k, _)| k.clone());
            out.extend(page.into_iter().map(|(_, r)| r));
            if !full {
                return Ok(out);
            }
        }
    }

    /// [`Replica::range`] without decoding: (storage key, stored value) pairs.
    pub async fn range_raw(
        &self,
        partition: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = |b: Bound<Vec<u8>>| b.map(|s| storage_key::<S>(partition, &s));
        let start = match map(start) {
            Bound::Unbounded => Bound::Included(partition.to_vec()),
            b => b,
        };
        let end = match map(end) {
            Bound::Unbounded => match partition_end(partition) {
                Some(e) => Bound::Excluded(e),
                None => Bound::Unbounded,
            },
            b => b,
        };
        Ok(self
            .db
            .range_async(S::TREE, start, end, reverse, limit)
            .await?)
    }

    /// For tables whose sort key is a big-endian `u32` (block and part
    /// numbers): up to `limit` rows of `partition` numbered `from` or more.
    pub async fn range_numbered(
        &self,
        partition: &[u8],
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, S::Row)>> {
        let rows = self
            .range(
                partition,
                Bound::Included(&from.to_be_bytes()),
                Bound::Unbounded,
                false,
                limit,
            )
            .await?;
        Ok(numbered(rows))
    }

    /// Reads a row (a buried tombstone too) inside a write transaction.
    pub fn tx_get(tx: &Tx<'_>, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        RowTrees::of::<S>()
            .tx_get(tx, &storage_key::<S>(partition, sort))?
            .map(|s| decode::<S>(&s.value))
            .transpose()
    }

    /// Merges `row` into the stored row (or stores it) inside a write
    /// transaction, runs the table's update hook ([`Schema::updated`]), and
    /// returns the merged row. A buried tombstone is merged like any
    /// stored row (so a write older than it changes nothing); a merge that
    /// changes it stores the result in the table's tree, unburied.
    pub fn tx_insert(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        row: &S::Row,
    ) -> Result<S::Row> {
        let trees = RowTrees::of::<S>();
        let key = storage_key::<S>(partition, sort);
        let stored = trees.tx_get(tx, &key)?;
        let was_buried = stored.as_ref().is_some_and(|s| s.buried);
        let old_value = stored.map(|s| s.value);
        let old = old_value.as_deref().map(decode::<S>).transpose()?;
        let merged = match &old {
            Some(o) => {
                let mut m = o.clone();
                m.merge(row);
                m
            }
            None => row.clone(),
        };
        S::updated(tx, partition, sort, old.as_ref(), row, &merged)?;
        let value = encode::<S>(&merged);
        if old_value.as_deref() == Some(value.as_slice()) {
            // Nothing new: no write, and no second queue entry for a
            // tombstone delivered twice.
            return Ok(merged);
        }
        if S::is_tombstone(&merged) {
            tombstones::queue(tx, trees, &key, &value, hangar_util::time::now_msec());
        }
        if let Some(index) = S::MERKLE_TREE {
            merkle::tx_update(
                tx,
                index,
                S::layout_partition(partition),
                &key,
                old_value.as_deref(),
                Some(&value),
            )?;
        }
        trees.tx_put(tx, key, value, was_buried);
        Ok(merged)
    }

    /// [`Replica::tx_insert`] for a writer's row (a client's write on this
    /// node, or one a peer sends to the update endpoint): a live row whose
    /// partition key is fenced is refused with [`TableError::Fenced`],
    /// nothing written. Anti-entropy merges with [`Replica::tx_insert`].
    pub fn tx_insert_admitted(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        row: &S::Row,
    ) -> Result<S::Row> {
        if fence::tx_refuses::<S>(tx, partition, row, hangar_util::time::now_msec())? {
            return Err(TableError::Fenced { tree: S::TREE });
        }
        Self::tx_insert(tx, partition, sort, row)
    }

    /// Deletes a row inside a write transaction. Only for rows whose
    /// deletion is already decided (a tombstone was merged and has been
    /// superseded, or the row is local bookkeeping). Not for sharded tables,
    /// whose Merkle index it would leave stale: use [`Replica::tx_remove`].
    pub fn tx_delete(tx: &mut Tx<'_>, partition: &[u8], sort: &[u8]) {
        debug_assert!(S::MERKLE_TREE.is_none(), "tx_delete on sharded {}", S::TREE);
        tx.delete(S::TREE, storage_key::<S>(partition, sort));
    }

    /// Deletes a row inside a write transaction and, for a sharded table,
    /// removes it from the Merkle index in the same transaction.
    pub fn tx_remove(tx: &mut Tx<'_>, partition: &[u8], sort: &[u8]) -> Result<()> {
        let trees = RowTrees::of::<S>();
        let key = storage_key::<S>(partition, sort);
        if let Some(index) = S::MERKLE_TREE {
            let old = trees.tx_get(tx, &key)?.map(|s| s.value);
            merkle::tx_update(
                tx,
                index,
                S::layout_partition(partition),
                &key,
                old.as_deref(),
                None,
            )?;
        }
        trees.tx_delete(tx, &key);
        Ok(())
    }
}

/// The first key after every key starting with `partition`, if any.
fn partition_end(partition: &[u8]) -> Option<Vec<u8>> {
    let mut e = partition.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xff {
            e.push(last + 1);
            return Some(e);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Crdt, Full, LEGACY_ROW_FORMAT, ROW_FORMAT};
    use hangar_db::{DbOptions, SledEngine};
    use serde::{Deserialize, Serialize};
    use std::sync::Arc;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct MaxRow {
        v: u64,
    }
    impl Crdt for MaxRow {
        fn merge(&mut self, o: &Self) {
            self.v = self.v.max(o.v);
        }
    }
    struct T;
    impl Schema for T {
        const TREE: &'static str = "t";
        const PARTITION_LEN: usize = 2;
        type Row = MaxRow;
        type Replication = Full;
    }

    #[tokio::test]
    async fn rows_merge_and_ranges_stay_in_their_partition() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 1 << 20).unwrap()),
            DbOptions::default(),
        );
        let t = Replica::<T>::new(db.clone());
        db.write(|tx| {
            Replica::<T>::tx_insert(tx, b"p1", b"a", &MaxRow { v: 5 })?;
            Replica::<T>::tx_insert(tx, b"p1", b"a", &MaxRow { v: 3 })?;
            Replica::<T>::tx_insert(tx, b"p1", b"b", &MaxRow { v: 1 })?;
            Replica::<T>::tx_insert(tx, b"p2", b"a", &MaxRow { v: 9 })?;
            Replica::<T>::tx_insert(tx, &[0xff, 0xff], b"z", &MaxRow { v: 2 })?;
            Ok::<_, TableError>(())
        })
        .await
        .unwrap();
        assert_eq!(t.get(b"p1", b"a").await.unwrap(), Some(MaxRow { v: 5 }));
        let p1 = t
            .range(b"p1", Bound::Unbounded, Bound::Unbounded, false, 10)
            .await
            .unwrap();
        assert_eq!(p1.len(), 2);
        assert_eq!(p1[1].0, b"b");
        let after_a = t
            .range(b"p1", Bound::Excluded(b"a"), Bound::Unbounded, false, 10)
            .await
            .unwrap();
        assert_eq!(after_a.len(), 1);
        let last = t
            .range(&[0xff, 0xff], Bound::Unbounded, Bound::Unbounded, true, 10)
            .await
            .unwrap();
        assert_eq!(last.len(), 1);
    }

    #[tokio::test]
    async fn format_1_rows_are_read_and_rewritten_as_format_2() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 1 << 20).unwrap()),
            DbOptions::default(),
        );
        let t = Replica::<T>::new(db.clone());
        // A row as format 1 wrote it, and a row of an unknown format.
        let mut legacy = vec![LEGACY_ROW_FORMAT];
        rmp_serde::encode::write_named(&mut legacy, &MaxRow { v: 7 }).unwrap();
        let mut unknown = legacy.clone();
        unknown[0] = T::NEWEST_FORMAT + 1;
        db.write(move |tx| {
            tx.put("t", storage_key::<T>(b"p1", b"old"), legacy);
            tx.put("t", storage_key::<T>(b"p1", b"bad"), unknown);
            Ok::<_, TableError>(())
        })
        .await
        .unwrap();
        assert_eq!(t.get(b"p1", b"old").await.unwrap(), Some(MaxRow { v: 7 }));
        assert!(matches!(
            t.get(b"p1", b"bad").await,
            Err(TableError::Decode { .. })
        ));

        db.write(|tx| {
            let merged = Replica::<T>::tx_insert(tx, b"p1", b"old", &MaxRow { v: 3 })?;
            assert_eq!(merged, MaxRow { v: 7 });
            Ok::<_, TableError>(())
        })
        .await
        .unwrap();
        let raw = db
            .get_async("t", storage_key::<T>(b"p1", b"old"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw[0], ROW_FORMAT);
        assert_eq!(ROW_FORMAT, 2);
        assert_eq!(t.get(b"p1", b"old").await.unwrap(), Some(MaxRow { v: 7 }));
    }
}
