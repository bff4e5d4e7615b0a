//! Where a row of a table is stored on this node: in the table's tree or,
//! for a tombstone that every replica holds, in the table's tree of buried
//! tombstones ([`Schema::BURIED_TREE`], [`crate::tombstones`] "Burial"). A
//! key is in at most one of the two. Every read by key, every merge and
//! every removal goes through [`RowTrees`], so a buried tombstone stays
//! the row of its key; only ranges read the table's tree alone, which is
//! what burial is for.

use hangar_db::{Db, DbError, Tx};

use crate::Schema;

/// The trees holding one table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowTrees {
    /// The table's tree: its live rows and the tombstones not yet buried.
    pub tree: &'static str,
    /// The tree of its buried tombstones, for a table that buries them.
    pub buried: Option<&'static str>,
}

/// A stored row value and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub value: Vec<u8>,
    /// In the tree of buried tombstones.
    pub buried: bool,
}

impl RowTrees {
    /// The trees of schema `S`.
    pub const fn of<S: Schema>() -> RowTrees {
        RowTrees {
            tree: S::TREE,
            buried: S::BURIED_TREE,
        }
    }

    /// The stored value of `key` in a transaction, and where it is.
    pub fn tx_get(&self, tx: &Tx<'_>, key: &[u8]) -> Result<Option<Stored>, DbError> {
        if let Some(value) = tx.get(self.tree, key)? {
            return Ok(Some(Stored {
                value,
                buried: false,
            }));
        }
        let Some(buried) = self.buried else {
            return Ok(None);
        };
        Ok(tx.get(buried, key)?.map(|value| Stored {
            value,
            buried: true,
        }))
    }

    /// The stored value of `key`, read outside a transaction (the caller's
    /// task, as [`Db::get_async`]). The table's tree is read first: a
    /// burial moves a row from it to the buried tree in one transaction,
    /// so a read racing with it finds the row in one or the other. A write
    /// that brings a buried key back to life may be missed by a read racing
    /// with it (both trees read before and after its commit), which then
    /// answers no row, as a read ordered before that write would.
    pub async fn get_async(&self, db: &Db, key: Vec<u8>) -> Result<Option<Vec<u8>>, DbError> {
        if let Some(v) = db.get_async(self.tree, key.clone()).await? {
            return Ok(Some(v));
        }
        match self.buried {
            Some(buried) => db.get_async(buried, key).await,
            None => Ok(None),
        }
    }

    /// [`RowTrees::get_async`] for a blocking task.
    pub fn get(&self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        if let Some(v) = db.get(self.tree, key)? {
            return Ok(Some(v));
        }
        match self.buried {
            Some(buried) => db.get(buried, key),
            None => Ok(None),
        }
    }

    /// Puts `value` at `key` in the table's tree (a row written or merged
    /// is never buried) and takes the key out of the buried tree if
    /// `was_buried`.
    pub fn tx_put(&self, tx: &mut Tx<'_>, key: Vec<u8>, value: Vec<u8>, was_buried: bool) {
        if was_buried && let Some(buried) = self.buried {
            tx.delete(buried, key.clone());
        }
        tx.put(self.tree, key, value);
    }

    /// Deletes `key` from wherever it is stored.
    pub fn tx_delete(&self, tx: &mut Tx<'_>, key: &[u8]) {
        if let Some(buried) = self.buried {
            tx.delete(buried, key.to_vec());
        }
        tx.delete(self.tree, key.to_vec());
    }

    /// Buries the tombstone at `key` if the table's tree stores exactly
    /// `expected` there: moves it to the buried tree, unchanged (so its
    /// Merkle leaf stays right). Returns whether it did.
    pub fn tx_bury(
        &self,
        tx: &mut Tx<'_>,
        key: &[u8],
        expected: &[u8; 32],
    ) -> Result<bool, DbError> {
        match self.tx_queued(tx, key, expected)? {
            Some(v) if self.buried.is_some() => {
                self.tx_move_to_buried(tx, key, v);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The value at `key` in the table's tree if it is exactly the one
    /// whose blake3 is `expected` (a queued tombstone, unchanged since).
    pub fn tx_queued(
        &self,
        tx: &Tx<'_>,
        key: &[u8],
        expected: &[u8; 32],
    ) -> Result<Option<Vec<u8>>, DbError> {
        Ok(tx
            .get(self.tree, key)?
            .filter(|v| hangar_util::Hash::of(v).as_bytes() == expected))
    }

    /// Moves `value`, read at `key` in the table's tree, to the buried
    /// tree (no-op for a table that does not bury).
    pub fn tx_move_to_buried(&self, tx: &mut Tx<'_>, key: &[u8], value: Vec<u8>) {
        if let Some(buried) = self.buried {
            tx.delete(self.tree, key.to_vec());
            tx.put(buried, key.to_vec(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Burial is invisible to every read by key and to the Merkle index,
    //! and hides exactly the buried tombstones from ranges, whatever the
    //! order of writes, burials and removals.

    use std::collections::{BTreeMap, BTreeSet};
    use std::ops::Bound;
    use std::sync::Arc;

    use hangar_db::{DbOptions, SledEngine};
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::{Crdt, Replica, TableError, encode, merkle, storage_key};

    /// A last-writer-wins row; an empty value is a tombstone.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    struct R {
        ts: u8,
        val: String,
    }
    impl Crdt for R {
        fn merge(&mut self, o: &Self) {
            if (o.ts, &o.val) > (self.ts, &self.val) {
                *self = o.clone();
            }
        }
    }
    struct T;
    impl Schema for T {
        const TREE: &'static str = "t";
        const PARTITION_LEN: usize = 2;
        const MERKLE_TREE: Option<&'static str> = Some("merkle:t");
        const BURIED_TREE: Option<&'static str> = Some("buried:t");
        type Row = R;
        type Replication = crate::Sharded;
        fn is_tombstone(row: &R) -> bool {
            row.val.is_empty()
        }
    }
    const PK: &[u8] = b"pk";

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, R),
        /// Bury the key's row if it is a tombstone (what the burial
        /// worker does once every replica holds it).
        Bury(u8),
        /// Remove the key's row (the tombstone collector).
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let row = (0u8..12, prop_oneof![Just(""), Just("x"), Just("y")])
            .prop_map(|(ts, v)| R { ts, val: v.into() });
        prop_oneof![
            3 => (0u8..4, row).prop_map(|(k, r)| Op::Insert(k, r)),
            2 => (0u8..4).prop_map(Op::Bury),
            1 => (0u8..4).prop_map(Op::Remove),
        ]
    }

    fn open(dir: &std::path::Path) -> Db {
        Db::new(
            Arc::new(SledEngine::open(dir, 1 << 20).unwrap()),
            DbOptions::default(),
        )
    }

    async fn run(ops: Vec<Op>) {
        let d = tempfile::tempdir().unwrap();
        let db = open(&d.path().join("a"));
        let replica = Replica::<T>::new(db.clone());
        let trees = RowTrees::of::<T>();
        let mut model: BTreeMap<u8, R> = BTreeMap::new();
        let mut buried: BTreeSet<u8> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Insert(k, r) => {
                    let merged = db
                        .write(move |tx| Replica::<T>::tx_insert(tx, PK, &[k], &r))
                        .await
                        .unwrap();
                    if model.get(&k) != Some(&merged) {
                        buried.remove(&k);
                    }
                    model.insert(k, merged);
                }
                Op::Bury(k) => {
                    let Some(row) = model.get(&k).filter(|r| T::is_tombstone(r)) else {
                        continue;
                    };
                    let hash = *hangar_util::Hash::of(&encode::<T>(row)).as_bytes();
                    let done = db
                        .write(move |tx| trees.tx_bury(tx, &storage_key::<T>(PK, &[k]), &hash))
                        .await
                        .unwrap();
                    // A row buried already is not in the table's tree.
                    assert_eq!(done, !buried.contains(&k), "bury {k}");
                    buried.insert(k);
                }
                Op::Remove(k) => {
                    db.write(move |tx| Replica::<T>::tx_remove(tx, PK, &[k]))
                        .await
                        .unwrap();
                    model.remove(&k);
                    buried.remove(&k);
                }
            }
            for k in 0u8..4 {
                let key = storage_key::<T>(PK, &[k]);
                assert_eq!(replica.get(PK, &[k]).await.unwrap().as_ref(), model.get(&k));
                let (main, grave) = (
                    db.get("t", &key).unwrap(),
                    db.get("buried:t", &key).unwrap(),
                );
                assert!(main.is_none() || grave.is_none(), "{k} stored twice");
                assert_eq!(grave.is_some(), buried.contains(&k), "{k} buried");
            }
            let ranged: Vec<(Vec<u8>, R)> = replica
                .range(PK, Bound::Unbounded, Bound::Unbounded, false, 100)
                .await
                .unwrap();
            let expected: Vec<(Vec<u8>, R)> = model
                .iter()
                .filter(|(k, _)| !buried.contains(k))
                .map(|(k, r)| (vec![*k], r.clone()))
                .collect();
            assert_eq!(ranged, expected);
        }
        // The Merkle index is the one of the same rows never buried.
        let plain = open(&d.path().join("b"));
        let rows = model.clone();
        plain
            .write(move |tx| {
                for (k, r) in &rows {
                    Replica::<T>::tx_insert(tx, PK, &[*k], r)?;
                }
                Ok::<_, TableError>(())
            })
            .await
            .unwrap();
        let p = T::layout_partition(PK);
        let a = merkle::root(&db, "merkle:t", p).await.unwrap();
        let b = merkle::root(&plain, "merkle:t", p).await.unwrap();
        assert_eq!((a.digest, a.count), (b.digest, b.count));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn burial_hides_buried_tombstones_from_ranges_and_nothing_else(
            ops in proptest::collection::vec(op(), 1..40)
        ) {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(run(ops));
        }
    }
}
