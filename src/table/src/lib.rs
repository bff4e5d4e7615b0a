//! Hangar's tables: sets of typed rows keyed by (partition key, sort key).
//!
//! A [`Schema`] names a tree of the metadata store and the row type stored in
//! it. Rows are CRDTs ([`Crdt`]): inserting a row merges it into the one
//! already stored, so that replicas that received writes in different orders
//! converge. On a single node a table is one tree of `hangar_db`;
//! [`replicated::FullTable`] replicates a table to every node and
//! [`sharded::ShardedTable`] to the nodes of each row's layout partition,
//! with a Merkle index ([`merkle`]) and anti-entropy ([`sharded_sync`])
//! (doc/replication.md).
//!
//! Storage key: `partition(Schema::PARTITION_LEN bytes) ++ sort key`. Row
//! value: one format byte ([`ROW_FORMAT`], or a newer one of the row's
//! schema: [`Schema::format_of`]) then the row as a MessagePack map (field
//! names included, so a field added with `#[serde(default)]` reads old
//! rows). Rows of [`LEGACY_ROW_FORMAT`] are still read. What each newer
//! format adds is the schema's own history: this crate only knows the
//! range of formats a schema reads ([`Schema::NEWEST_FORMAT`]). See
//! `doc/table-rows.md`.

pub mod crdt;
pub mod fence;
pub mod full_sync;
pub mod full_table;
pub mod gc_rpc;
pub mod merkle;
pub mod sharded;
mod sharded_fence;
pub mod sharded_gc;
mod sharded_pages;
pub mod sharded_sync;
pub mod tombstones;

use std::marker::PhantomData;
use std::ops::Bound;

use hangar_db::{Db, DbError, Tx};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crdt::{Crdt, Lww, LwwMap, max_by_content};

/// The first byte of a row written now, unless the row needs a newer
/// format of its schema ([`Schema::format_of`], [`Schema::NEWEST_FORMAT`]).
///
/// Format 2: hashes and ids are MessagePack `bin` (format 1 wrote them as
/// arrays of integers); block entries carry their byte offset; key rows are
/// field registers. Rows of format 1 are still read
/// ([`Schema::decode_old`]): most tables have the same MessagePack map
/// layout, and the field decoders of the row types (`hangar_util::Hash`,
/// `hangar_util::serde_id16`, `#[serde(default)]` on added fields) accept
/// both encodings; key rows are converted. A node upgraded in place keeps
/// its data, and a row of format 1 is rewritten as format 2 the next time
/// it is merged.
pub const ROW_FORMAT: u8 = 2;

/// The previous format, still read.
pub const LEGACY_ROW_FORMAT: u8 = 1;

/// Errors of the table layer.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("row of table {tree} cannot be decoded: {message}")]
    Decode { tree: &'static str, message: String },
    #[error(transparent)]
    Replication(#[from] full_table::ReplicationError),
    #[error(transparent)]
    Net(#[from] hangar_net::NetError),
    #[error("table {tree}: a peer sent a bad answer: {message}")]
    BadAnswer { tree: &'static str, message: String },
    /// A live row refused because its partition key is fenced
    /// ([`fence`]): on a writer's replica, or by enough replicas that the
    /// write lost its quorum.
    #[error("table {tree}: row refused: {}", fence::FENCED)]
    Fenced { tree: &'static str },
    #[error("table {tree} has no fences")]
    NotFenceable { tree: &'static str },
    #[error(
        "table {tree}: too many fences on one partition key (at most {})",
        fence::MAX_FENCES
    )]
    TooManyFences { tree: &'static str },
}

impl From<TableError> for DbError {
    fn from(e: TableError) -> DbError {
        match e {
            TableError::Db(d) => d,
            TableError::Decode { tree, message } => DbError::Engine {
                engine: tree,
                message,
            },
            e @ (TableError::Replication(_)
            | TableError::Net(_)
            | TableError::BadAnswer { .. }
            | TableError::Fenced { .. }
            | TableError::NotFenceable { .. }
            | TableError::TooManyFences { .. }) => DbError::Engine {
                engine: "table replication",
                message: e.to_string(),
            },
        }
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, TableError>;

/// A table's name and row type.
pub trait Schema: Send + Sync + 'static {
    /// The metadata tree holding the rows.
    const TREE: &'static str;
    /// Length of the partition key in bytes.
    const PARTITION_LEN: usize;
    /// The row type.
    type Row: Serialize + DeserializeOwned + Crdt + Clone + Send + Sync + 'static;

    /// Decodes the body of a row stored in an older `format` (below
    /// [`ROW_FORMAT`]). The default reads it as the current row type, which
    /// is right for tables whose rows only gained `#[serde(default)]` fields.
    fn decode_old(format: u8, body: &[u8]) -> std::result::Result<Self::Row, String> {
        let _ = format;
        rmp_serde::from_slice(body).map_err(|e| e.to_string())
    }

    /// The newest format byte this schema writes. Formats from
    /// [`ROW_FORMAT`] to it are format 2 plus fields and variants a reader
    /// of an older format would drop without noticing (MessagePack maps
    /// ignore unknown names), all read by the one decoder of the current
    /// row type; a newer byte is a row of a newer binary and is refused, so
    /// that a merge here never loses what it carries. Each schema keeps its
    /// own history of formats (the model's: `hangar_model::row_format`).
    const NEWEST_FORMAT: u8 = ROW_FORMAT;

    /// The format byte `row` is written with: [`ROW_FORMAT`], or a newer
    /// one, at most [`Schema::NEWEST_FORMAT`], when it carries a field that
    /// format adds (such fields are skipped when empty, so the bytes after
    /// the format byte are the same either way for a row without them).
    fn format_of(row: &Self::Row) -> u8 {
        let _ = row;
        ROW_FORMAT
    }

    /// Whether `row` is a tombstone to remove physically after the
    /// tombstone delay (see [`tombstones`]). Tables that keep their
    /// tombstones (the default) answer `false`.
    fn is_tombstone(row: &Self::Row) -> bool {
        let _ = row;
        false
    }

    /// `Some(tree)` for the tables of [`sharded::ShardedTable`] (spread over
    /// the `replication_factor` nodes of each layout partition): the local
    /// tree holding the table's Merkle index ([`merkle`]), which
    /// [`Table::tx_insert`] and [`Table::tx_remove`] update in the
    /// transaction that changes the row, and which anti-entropy compares
    /// between replicas. By convention `"merkle:<TREE>"`. Tables on one node
    /// or on every node (the default, `None`) have no index.
    ///
    /// The tombstones of a sharded table are queued like any other
    /// ([`tombstones`]), but the caller removes them only where that is
    /// safe: a replica that removed one alone would be given the row back
    /// by the others, or bring a deleted row back to them.
    const MERKLE_TREE: Option<&'static str> = None;

    /// Whether a sharded table's rows leave this node with their partition:
    /// once no active layout version assigns this node a partition it held
    /// (the old version retired, so every new holder reported holding every
    /// acknowledged row), the sync worker deletes its rows of that
    /// partition, without running [`Schema::updated`] (custody moves, the
    /// rows do not change). `false` for a table whose owner hands its rows
    /// over itself: the block reference table, whose rows leave with their
    /// blocks (block-files.md, "Resync").
    const DROP_LOST_PARTITIONS: bool = true;

    /// `Some(tree)` for a sharded table whose partition keys can be closed
    /// to new live rows ([`fence`]): the local tree holding the fences.
    /// `None` (the default): writes are never refused.
    const FENCE_TREE: Option<&'static str> = None;

    /// Called in the transaction that deletes `row` because its partition
    /// left this node ([`Schema::DROP_LOST_PARTITIONS`]): undoes what the
    /// row counts in this node's local state (a table whose hook keeps
    /// counters of its rows takes the row out of them). Effects on other
    /// tables, done where the row was merged, stay done. The default has
    /// none.
    fn dropped(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        row: &Self::Row,
    ) -> std::result::Result<(), DbError> {
        let _ = (tx, partition, sort, row);
        Ok(())
    }

    /// The layout partition of the rows of partition key `partition`: where
    /// a sharded table stores them. The default is
    /// [`layout_partition_of`] (the first byte of the key's blake3 hash);
    /// a table keyed by something that is already a uniform hash, and that
    /// must live where that hash's data lives (block references, beside
    /// their blocks), uses the key's own first byte.
    fn layout_partition(partition: &[u8]) -> hangar_layout::Partition {
        layout_partition_of(partition)
    }

    /// The table's update hook: called in every transaction that inserts a
    /// row, with the row's keys, the stored row before (`old`), the row
    /// inserted and the merge of both (what is stored now). It writes the effects the change
    /// has on other tables into `tx` — durable queues of this node, written
    /// in the same transaction as the row, so a crash between the row and
    /// its effects loses nothing. It runs on every replica that merges the
    /// row, and again when a row is delivered twice: effects must be
    /// idempotent. The default has none.
    fn updated(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        old: Option<&Self::Row>,
        inserted: &Self::Row,
        merged: &Self::Row,
    ) -> std::result::Result<(), DbError> {
        let _ = (tx, partition, sort, old, inserted, merged);
        Ok(())
    }
}

/// A typed view of one table.
pub struct Table<S: Schema> {
    db: Db,
    _schema: PhantomData<S>,
}

impl<S: Schema> Clone for Table<S> {
    fn clone(&self) -> Self {
        Table {
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

/// The storage key of row (`partition`, `sort`).
pub fn storage_key<S: Schema>(partition: &[u8], sort: &[u8]) -> Vec<u8> {
    assert_eq!(
        partition.len(),
        S::PARTITION_LEN,
        "partition key of {}",
        S::TREE
    );
    let mut k = Vec::with_capacity(partition.len() + sort.len());
    k.extend_from_slice(partition);
    k.extend_from_slice(sort);
    k
}

/// Encodes a row as it is stored (the format byte, then the row), as every
/// write of a table and every row sent to a peer is encoded.
pub fn encode<S: Schema>(row: &S::Row) -> Vec<u8> {
    let format = S::format_of(row);
    debug_assert!((ROW_FORMAT..=S::NEWEST_FORMAT).contains(&format));
    let mut v = vec![format];
    rmp_serde::encode::write_named(&mut v, row).expect("table rows encode");
    v
}

/// Decodes a stored row value (the format byte, then the row), as every
/// read of a table and every row received from a peer is decoded. Public
/// for the fuzz targets (`fuzz/`).
pub fn decode<S: Schema>(v: &[u8]) -> Result<S::Row> {
    let err = |message: String| TableError::Decode {
        tree: S::TREE,
        message,
    };
    match v.split_first() {
        // The formats of the schema from 2 on are format 2 with more
        // (defaulted) fields and variants: one decoder.
        Some((f, body)) if (ROW_FORMAT..=S::NEWEST_FORMAT).contains(f) => {
            rmp_serde::from_slice(body).map_err(|e| err(e.to_string()))
        }
        Some((&LEGACY_ROW_FORMAT, body)) => S::decode_old(LEGACY_ROW_FORMAT, body).map_err(err),
        Some((f, _)) => Err(err(format!("unknown row format {f}"))),
        None => Err(err("empty row".into())),
    }
}

impl<S: Schema> Table<S> {
    pub fn new(db: Db) -> Self {
        Table {
            db,
            _schema: PhantomData,
        }
    }

    /// The metadata store under this table.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Reads one row.
    pub async fn get(&self, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        let k = storage_key::<S>(partition, sort);
        self.db
            .get_async(S::TREE, k)
            .await?
            .map(|v| decode::<S>(&v))
            .transpose()
    }

    /// Reads up to `limit` rows of `partition` whose sort key is within
    /// (`start`, `end`), in sort-key order (reversed when `reverse`).
    /// Returns (sort key, row) pairs.
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

    /// [`Table::range`] without decoding: (storage key, stored value) pairs.
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

    /// Reads a row inside a write transaction.
    pub fn tx_get(tx: &Tx<'_>, partition: &[u8], sort: &[u8]) -> Result<Option<S::Row>> {
        tx.get(S::TREE, &storage_key::<S>(partition, sort))?
            .map(|v| decode::<S>(&v))
            .transpose()
    }

    /// Merges `row` into the stored row (or stores it) inside a write
    /// transaction, runs the table's update hook ([`Schema::updated`]), and
    /// returns the merged row.
    pub fn tx_insert(
        tx: &mut Tx<'_>,
        partition: &[u8],
        sort: &[u8],
        row: &S::Row,
    ) -> Result<S::Row> {
        let key = storage_key::<S>(partition, sort);
        let old_value = tx.get(S::TREE, &key)?;
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
            tombstones::queue(tx, S::TREE, &key, &value, hangar_util::time::now_msec());
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
        tx.put(S::TREE, key, value);
        Ok(merged)
    }

    /// [`Table::tx_insert`] for a writer's row (a client's write on this
    /// node, or one a peer sends to the update endpoint): a live row whose
    /// partition key is fenced is refused with [`TableError::Fenced`],
    /// nothing written. Anti-entropy merges with [`Table::tx_insert`].
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
    /// whose Merkle index it would leave stale: use [`Table::tx_remove`].
    pub fn tx_delete(tx: &mut Tx<'_>, partition: &[u8], sort: &[u8]) {
        debug_assert!(S::MERKLE_TREE.is_none(), "tx_delete on sharded {}", S::TREE);
        tx.delete(S::TREE, storage_key::<S>(partition, sort));
    }

    /// Deletes a row inside a write transaction and, for a sharded table,
    /// removes it from the Merkle index in the same transaction.
    pub fn tx_remove(tx: &mut Tx<'_>, partition: &[u8], sort: &[u8]) -> Result<()> {
        let key = storage_key::<S>(partition, sort);
        if let Some(index) = S::MERKLE_TREE {
            let old = tx.get(S::TREE, &key)?;
            merkle::tx_update(
                tx,
                index,
                S::layout_partition(partition),
                &key,
                old.as_deref(),
                None,
            )?;
        }
        tx.delete(S::TREE, key);
        Ok(())
    }
}

/// The layout partition of the rows of partition key `partition`: the
/// partition of its blake3 hash (`hangar_layout::partition_of`). Every row of
/// one partition key (one bucket's objects, one version's blocks) is stored
/// on the same `replication_factor` nodes.
pub fn layout_partition_of(partition: &[u8]) -> hangar_layout::Partition {
    hangar_layout::partition_of(&hangar_util::Hash::of(partition))
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
    use hangar_db::{DbOptions, SledEngine};
    use serde::Deserialize;
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
    }

    #[tokio::test]
    async fn rows_merge_and_ranges_stay_in_their_partition() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 1 << 20).unwrap()),
            DbOptions::default(),
        );
        let t = Table::<T>::new(db.clone());
        db.write(|tx| {
            Table::<T>::tx_insert(tx, b"p1", b"a", &MaxRow { v: 5 })?;
            Table::<T>::tx_insert(tx, b"p1", b"a", &MaxRow { v: 3 })?;
            Table::<T>::tx_insert(tx, b"p1", b"b", &MaxRow { v: 1 })?;
            Table::<T>::tx_insert(tx, b"p2", b"a", &MaxRow { v: 9 })?;
            Table::<T>::tx_insert(tx, &[0xff, 0xff], b"z", &MaxRow { v: 2 })?;
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
        let t = Table::<T>::new(db.clone());
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
            let merged = Table::<T>::tx_insert(tx, b"p1", b"old", &MaxRow { v: 3 })?;
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
