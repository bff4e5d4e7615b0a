//! Block references and reference counts, kept in the metadata store.
//!
//! - `block_refs` ([`BlockRefTable`], a `hangar_table` table): key
//!   `hash(32) ++ version(16)` → [`BlockRef`]: version `version` uses (or,
//!   once `deleted`, no longer uses) block `hash`. In a cluster it is a
//!   sharded table placed by the block's own partition (the first byte of
//!   its hash), so a block's references live on the nodes that store the
//!   block, and reach a node that lacks them through the table's
//!   anti-entropy (a node that was down, or wiped). Rows are CRDTs: a
//!   reference once deleted stays deleted (version ids are never reused),
//!   so a put delivered after its unref does not bring the reference back.
//! - `block_rc`: `hash(32)` → [`RcRow`]: how many live references the block
//!   has here. Kept by the table's update hook, in the transaction that
//!   changes a reference, so a count never disagrees with the rows.
//! - `block_gc`: `since_msec(8, BE) ++ hash(32)` → empty: the block's count
//!   became zero at `since`; the GC worker looks at it again once the grace
//!   delay has passed, and deletes it if its count is still zero.
//!
//! A block that gains a live reference is also queued for the resync
//! worker ([`crate::resync_queue`]), which makes the file agree with the
//! count: fetched when referenced and missing, handed over when this node
//! no longer stores the block's partition. Losing a reference queues
//! nothing: the worker's decision needs a live count, so a check after a
//! decrement could only find what the check after the increment (or its
//! retry) already handles, and an unreferenced file is the GC's.
//!
//! Nodes that stored references before this table existed kept them in the
//! tree `block_ref` (`hash ++ version` → empty); [`migrate_legacy_refs`]
//! converts them.

use hangar_db::{Db, DbError, Tx};
use hangar_table::{Crdt, Replica, Schema};
use hangar_util::Hash;
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};

use crate::resync_queue;

/// Tree of reference counts.
pub const RC_TREE: &str = "block_rc";
/// Blocks whose count fell to zero, waiting for the GC (its queue).
pub const GC_TREE: &str = "block_gc";
/// The tree of references before [`BlockRefTable`].
const LEGACY_REF_TREE: &str = "block_ref";

/// How long after a count change the resync worker looks at the block:
/// long enough for the put that changed it to have written its file.
pub const CHECK_DELAY_MSEC: u64 = 2_000;

/// The table of block references.
pub struct BlockRefTable;

/// One reference: a version using a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BlockRef {
    /// The version no longer uses the block (a tombstone).
    pub deleted: bool,
}

impl BlockRef {
    pub const LIVE: BlockRef = BlockRef { deleted: false };
    pub const DELETED: BlockRef = BlockRef { deleted: true };
}

impl Crdt for BlockRef {
    /// Deleted wins: a reference is added once and removed once.
    fn merge(&mut self, other: &Self) {
        self.deleted |= other.deleted;
    }
}

impl Schema for BlockRefTable {
    const TREE: &'static str = "block_refs";
    const PARTITION_LEN: usize = 32;
    type Row = BlockRef;
    type Replication = hangar_table::Sharded;
    const MERKLE_TREE: Option<&'static str> = Some("merkle:block_refs");
    /// A reference leaves with its block, at hand-over, never before.
    const DROP_LOST_PARTITIONS: bool = false;

    fn is_tombstone(row: &BlockRef) -> bool {
        row.deleted
    }

    /// The block's own partition, so references live beside their block.
    fn layout_partition(partition: &[u8]) -> hangar_layout::Partition {
        partition.first().copied().unwrap_or(0)
    }

    /// Keeps the block's count: +1 when a reference becomes live (and the
    /// block is queued for the resync worker), -1 when a live one is
    /// deleted (and the block queued for the GC once unreferenced).
    fn updated(
        tx: &mut Tx<'_>,
        partition: &[u8],
        _sort: &[u8],
        old: Option<&BlockRef>,
        _inserted: &BlockRef,
        merged: &BlockRef,
    ) -> Result<(), DbError> {
        let was = old.is_some_and(|r| !r.deleted);
        let is = !merged.deleted;
        if was == is {
            return Ok(());
        }
        let Some(hash) = Hash::from_slice(partition) else {
            return Ok(());
        };
        let now = now_msec();
        let mut rc = read_rc(tx, &hash)?.unwrap_or_default();
        if is {
            rc.count += 1;
            rc.zero_since_msec = None;
        } else {
            rc.count = rc.count.saturating_sub(1);
            if rc.count == 0 {
                rc.zero_since_msec = Some(now);
                tx.put(GC_TREE, gc_key(now, &hash), Vec::new());
            }
        }
        tx.put(RC_TREE, hash.as_bytes().to_vec(), rc.encode());
        if is {
            resync_queue::tx_enqueue(tx, &hash, now + CHECK_DELAY_MSEC)?;
        }
        Ok(())
    }
}

/// The reference count of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RcRow {
    pub count: u64,
    /// When the count last became zero (ms since epoch); `None` while referenced.
    pub zero_since_msec: Option<u64>,
}

impl RcRow {
    /// Decodes a stored count row (public for the fuzz targets).
    pub fn decode(v: &[u8]) -> Result<RcRow, DbError> {
        rmp_serde::from_slice(v).map_err(|e| DbError::Engine {
            engine: "block_rc row",
            message: e.to_string(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).expect("RcRow encodes")
    }
}

pub(crate) fn read_rc(tx: &Tx<'_>, hash: &Hash) -> Result<Option<RcRow>, DbError> {
    tx.get(RC_TREE, hash.as_bytes())?
        .map(|v| RcRow::decode(&v))
        .transpose()
}

pub(crate) fn gc_key(since_msec: u64, hash: &Hash) -> Vec<u8> {
    let mut k = since_msec.to_be_bytes().to_vec();
    k.extend_from_slice(hash.as_bytes());
    k
}

/// Makes sure a block about to be written has a count row: a new or
/// unreferenced block gets a zero count and a GC visit, so a block written
/// by an upload that never completes is reclaimed.
pub(crate) fn touch(tx: &mut Tx<'_>, hash: &Hash, now: u64) -> Result<(), DbError> {
    match read_rc(tx, hash)? {
        Some(rc) if rc.count > 0 => {}
        _ => {
            let row = RcRow {
                count: 0,
                zero_since_msec: Some(now),
            };
            tx.put(RC_TREE, hash.as_bytes().to_vec(), row.encode());
            tx.put(GC_TREE, gc_key(now, hash), Vec::new());
        }
    }
    Ok(())
}

fn to_db(e: hangar_table::TableError) -> DbError {
    e.into()
}

/// Records that `version` uses block `hash` (idempotent; nothing if the
/// reference was already deleted).
pub fn add_ref(tx: &mut Tx<'_>, hash: &Hash, version: &[u8; 16]) -> Result<(), DbError> {
    Replica::<BlockRefTable>::tx_insert(tx, hash.as_bytes(), version, &BlockRef::LIVE)
        .map(drop)
        .map_err(to_db)
}

/// Records that `version` no longer uses block `hash` (idempotent); a block
/// left unreferenced is deleted after the grace delay.
pub fn remove_ref(tx: &mut Tx<'_>, hash: &Hash, version: &[u8; 16]) -> Result<(), DbError> {
    Replica::<BlockRefTable>::tx_insert(tx, hash.as_bytes(), version, &BlockRef::DELETED)
        .map(drop)
        .map_err(to_db)
}

/// Whether this node holds a live reference of `version` to `hash`.
pub fn tx_has_live_ref(tx: &Tx<'_>, hash: &Hash, version: &[u8; 16]) -> Result<bool, DbError> {
    Ok(
        Replica::<BlockRefTable>::tx_get(tx, hash.as_bytes(), version)
            .map_err(to_db)?
            .is_some_and(|r| !r.deleted),
    )
}

/// Converts the references of the legacy tree `block_ref` into rows of
/// [`BlockRefTable`], a page per transaction; the counts already include
/// them and are left as they are. Returns how many were converted.
pub async fn migrate_legacy_refs(db: &Db) -> Result<u64, DbError> {
    use std::ops::Bound::Unbounded;
    let mut converted = 0;
    loop {
        let page = db
            .range_async(LEGACY_REF_TREE, Unbounded, Unbounded, false, 1000)
            .await?;
        if page.is_empty() {
            return Ok(converted);
        }
        converted += page.len() as u64;
        db.write(move |tx| {
            for (k, _) in page {
                tx.delete(LEGACY_REF_TREE, k.clone());
                if k.len() != 48 || tx.get(BlockRefTable::TREE, &k)?.is_some() {
                    continue;
                }
                // The count already has this reference: take it out, and
                // let the table's hook put it back with the row.
                let hash = Hash::from_slice(&k[..32]).expect("32 bytes");
                let mut rc = read_rc(tx, &hash)?.unwrap_or_default();
                rc.count = rc.count.saturating_sub(1);
                tx.put(RC_TREE, hash.as_bytes().to_vec(), rc.encode());
                Replica::<BlockRefTable>::tx_insert(tx, &k[..32], &k[32..], &BlockRef::LIVE)
                    .map_err(to_db)?;
            }
            Ok::<_, DbError>(())
        })
        .await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_db::{DbOptions, SledEngine};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_reference_that_comes_queues_a_check_and_one_that_goes_does_not() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 8 << 20).unwrap()),
            DbOptions::default(),
        );
        let h = Hash::of(b"block");
        let (v1, v2) = ([1u8; 16], [2u8; 16]);
        db.write(move |tx| add_ref(tx, &h, &v1)).await.unwrap();
        assert_eq!(resync_queue::len(&db).await.unwrap(), 1);
        let far = now_msec() + 10 * CHECK_DELAY_MSEC;
        for q in resync_queue::due(&db, far, None, 10).await.unwrap() {
            db.write(move |tx| resync_queue::tx_done(tx, &q))
                .await
                .unwrap();
        }
        assert_eq!(resync_queue::len(&db).await.unwrap(), 0);

        db.write(move |tx| add_ref(tx, &h, &v2)).await.unwrap();
        assert_eq!(
            resync_queue::len(&db).await.unwrap(),
            1,
            "a second reference"
        );
        for q in resync_queue::due(&db, far, None, 10).await.unwrap() {
            db.write(move |tx| resync_queue::tx_done(tx, &q))
                .await
                .unwrap();
        }
        for v in [v1, v2] {
            db.write(move |tx| remove_ref(tx, &h, &v)).await.unwrap();
        }
        let rc = db.write(move |tx| read_rc(tx, &h)).await.unwrap().unwrap();
        assert_eq!(rc.count, 0);
        assert!(rc.zero_since_msec.is_some(), "the GC is told");
        assert_eq!(
            resync_queue::len(&db).await.unwrap(),
            0,
            "losing references queues no check"
        );
    }
}
