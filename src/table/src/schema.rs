//! A table's schema: its tree, its row type, how its rows are replicated,
//! and the byte format of a stored row.
//!
//! Storage key: `partition(Schema::PARTITION_LEN bytes) ++ sort key`. Row
//! value: one format byte ([`ROW_FORMAT`], or a newer one of the row's
//! schema: [`Schema::format_of`]) then the row as a MessagePack map (field
//! names included, so a field added with `#[serde(default)]` reads old
//! rows). Rows of [`LEGACY_ROW_FORMAT`] are still read. What each newer
//! format adds is the schema's own history: this crate only knows the
//! range of formats a schema reads ([`Schema::NEWEST_FORMAT`]). See
//! `doc/table-rows.md`.

use hangar_db::{DbError, Tx};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Crdt, Replication, Result, TableError};

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

/// A table's name and row type.
pub trait Schema: Send + Sync + 'static {
    /// The metadata tree holding the rows.
    const TREE: &'static str;
    /// Length of the partition key in bytes.
    const PARTITION_LEN: usize;
    /// The row type.
    type Row: Serialize + DeserializeOwned + Crdt + Clone + Send + Sync + 'static;
    /// How the table's rows are spread over the cluster: [`crate::Full`]
    /// (every node holds every row; keys, buckets, aliases) or
    /// [`crate::Sharded`] (each row on the nodes of its layout partition;
    /// objects, versions, uploads, block references), which then needs a
    /// [`Schema::MERKLE_TREE`]. [`crate::Table`]`<Self>` is replicated so.
    type Replication: Replication;

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
    /// tombstone delay (see [`crate::tombstones`]). Tables that keep their
    /// tombstones (the default) answer `false`.
    fn is_tombstone(row: &Self::Row) -> bool {
        let _ = row;
        false
    }

    /// `Some(tree)` for the tables replicated [`crate::Sharded`] (spread over
    /// the `replication_factor` nodes of each layout partition): the local
    /// tree holding the table's Merkle index ([`crate::merkle`]), which
    /// [`crate::Replica::tx_insert`] and [`crate::Replica::tx_remove`] update in the
    /// transaction that changes the row, and which anti-entropy compares
    /// between replicas. By convention `"merkle:<TREE>"`. Tables on one node
    /// or on every node (the default, `None`) have no index.
    ///
    /// The tombstones of a sharded table are queued like any other
    /// ([`crate::tombstones`]), but the caller removes them only where that is
    /// safe: a replica that removed one alone would be given the row back
    /// by the others, or bring a deleted row back to them.
    const MERKLE_TREE: Option<&'static str> = None;

    /// `Some(tree)` for a sharded table whose tombstones are buried once
    /// every replica holds them ([`crate::tombstones`], "Burial"): the
    /// local tree they move to, out of [`Schema::TREE`], so that ranges
    /// (listings) no longer read past them. A buried tombstone is still the
    /// row of its key for every read by key, every merge and the Merkle
    /// index; only ranges skip it. By convention `"buried:<TREE>"`. `None`
    /// (the default): tombstones stay in the table's tree until collected.
    const BURIED_TREE: Option<&'static str> = None;

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
    /// to new live rows ([`crate::fence`]): the local tree holding the fences.
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

/// The layout partition of the rows of partition key `partition`: the
/// partition of its blake3 hash (`hangar_layout::partition_of`). Every row of
/// one partition key (one bucket's objects, one version's blocks) is stored
/// on the same `replication_factor` nodes.
pub fn layout_partition_of(partition: &[u8]) -> hangar_layout::Partition {
    hangar_layout::partition_of(&hangar_util::Hash::of(partition))
}
