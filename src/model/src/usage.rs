//! What each bucket holds: its stored object versions and their bytes,
//! counted incrementally so that quotas and `hangar stats` read two numbers
//! instead of listing the bucket.
//!
//! Each node counts the object rows it stores, per bucket: the object
//! table's update hook ([`tx_account`]) adds the difference the merge made
//! (the merged row's share minus the stored row's) in the transaction that
//! writes the row, in the local tree [`USAGE_TREE`]. So the counters never
//! drift from the rows, whatever crashes (a kill -9 loses the row and its
//! count together, or neither), and a row merged twice adds nothing the
//! second time. A row counts when it holds data (inline or blocks): every
//! stored version of a versioned bucket counts, its bytes included (storage
//! used); delete markers and tombstones count nothing.
//!
//! Rows stored before the counters existed are counted once, at start-up,
//! before the node serves anything ([`backfill`], marker `usage_counted`
//! in `model_state`).
//!
//! In a cluster a bucket's object rows all live on the nodes of one layout
//! partition (its id's), each holding a complete count once in sync. A
//! reader asks a read quorum of them (`hangar/bucket/usage`) and takes the
//! largest of each counter ([`crate::Model::bucket_usage`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::AtomicU64;

use async_trait::async_trait;
use hangar_db::{Db, DbError, Tx};
use hangar_net::{Handler, HandlerError, Request, Response};
use hangar_table::Schema;
use serde::{Deserialize, Serialize};

use crate::object::{ObjectData, ObjectRow, ObjectTable};

/// Local tree: bucket id (32 bytes) → objects (u64 BE) ++ bytes (u64 BE)
/// of the bucket's object rows this node stores. Absent: zero.
pub const USAGE_TREE: &str = "bucket_usage";
/// Marker in `model_state`: the rows stored before the counters existed
/// were counted.
pub(crate) const USAGE_COUNTED: &[u8] = b"usage_counted";
/// The endpoint that answers this node's counters of one bucket.
pub const PATH: &str = "hangar/bucket/usage";
/// Calls the endpoint admits at once.
pub(crate) const QUEUE: usize = 1024;

/// Writes this node refused because they would pass a bucket's object
/// quota (`hangar_quota_refusals_total{quota="objects"}`).
pub static OBJECT_QUOTA_REFUSALS: AtomicU64 = AtomicU64::new(0);
/// Writes this node refused because they would pass a bucket's size quota
/// (`hangar_quota_refusals_total{quota="size"}`).
pub static SIZE_QUOTA_REFUSALS: AtomicU64 = AtomicU64::new(0);

/// Object versions stored, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub objects: u64,
    pub bytes: u64,
}

impl Usage {
    fn decode(v: &[u8]) -> Usage {
        let word = |i: usize| {
            v.get(i * 8..i * 8 + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_be_bytes)
        };
        Usage {
            objects: word(0),
            bytes: word(1),
        }
    }

    fn encode(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&self.objects.to_be_bytes());
        v.extend_from_slice(&self.bytes.to_be_bytes());
        v
    }

    /// The larger of each counter (replicas that disagree while they sync).
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            objects: self.objects.max(other.objects),
            bytes: self.bytes.max(other.bytes),
        }
    }
}

/// What one object row adds to its bucket's counters.
pub(crate) fn share(row: &ObjectRow) -> Usage {
    match row.data {
        ObjectData::Inline(_) | ObjectData::Blocks { .. } => Usage {
            objects: 1,
            bytes: row.size,
        },
        ObjectData::Deleted | ObjectData::DeleteMarker => Usage::default(),
    }
}

/// Accounts the merge of an object row of bucket `bucket`: the stored row
/// was `old`, it is `merged` now. Called by the object table's hook, in
/// the row's transaction.
pub(crate) fn tx_account(
    tx: &mut Tx<'_>,
    bucket: &[u8],
    old: Option<&ObjectRow>,
    merged: &ObjectRow,
) -> Result<(), DbError> {
    let (before, after) = (old.map(share).unwrap_or_default(), share(merged));
    if before == after {
        return Ok(());
    }
    let cur = tx
        .get(USAGE_TREE, bucket)?
        .map(|v| Usage::decode(&v))
        .unwrap_or_default();
    // Never below zero: the counts only ever remove what they added.
    let new = Usage {
        objects: (cur.objects + after.objects).saturating_sub(before.objects),
        bytes: cur
            .bytes
            .saturating_add(after.bytes)
            .saturating_sub(before.bytes),
    };
    if new == Usage::default() {
        tx.delete(USAGE_TREE, bucket.to_vec());
    } else {
        tx.put(USAGE_TREE, bucket.to_vec(), new.encode());
    }
    Ok(())
}

/// Takes `row` out of bucket `bucket`'s counters, in `tx`: the row leaves
/// this node (its partition moved away, `Schema::dropped`), so that the
/// counters still count exactly the rows stored here.
pub(crate) fn tx_forget(tx: &mut Tx<'_>, bucket: &[u8], row: &ObjectRow) -> Result<(), DbError> {
    let gone = share(row);
    if gone == Usage::default() {
        return Ok(());
    }
    let cur = tx
        .get(USAGE_TREE, bucket)?
        .map(|v| Usage::decode(&v))
        .unwrap_or_default();
    let new = Usage {
        objects: cur.objects.saturating_sub(gone.objects),
        bytes: cur.bytes.saturating_sub(gone.bytes),
    };
    if new == Usage::default() {
        tx.delete(USAGE_TREE, bucket.to_vec());
    } else {
        tx.put(USAGE_TREE, bucket.to_vec(), new.encode());
    }
    Ok(())
}

/// This node's counters of bucket `bucket` (its id).
pub async fn local(db: &Db, bucket: &[u8]) -> Result<Usage, DbError> {
    Ok(db
        .get_async(USAGE_TREE, bucket.to_vec())
        .await?
        .map(|v| Usage::decode(&v))
        .unwrap_or_default())
}

/// This node's counters of every bucket it stores rows of, by bucket id.
pub async fn local_all(db: &Db) -> Result<BTreeMap<Vec<u8>, Usage>, DbError> {
    let mut out = BTreeMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.take().map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(USAGE_TREE, start, Bound::Unbounded, false, 1000)
            .await?;
        let n = page.len();
        after = page.last().map(|(k, _)| k.clone());
        for (k, v) in page {
            out.insert(k, Usage::decode(&v));
        }
        if n < 1000 {
            return Ok(out);
        }
    }
}

/// Counts the object rows stored before the counters existed, once: reads
/// the whole object tree and writes every bucket's counters and the
/// marker in one transaction. Run at start-up before anything writes the
/// object table (the node serves nothing yet), so the scan sees every row
/// and no hook runs meanwhile. Answers how many rows were counted (0 when
/// already done).
pub async fn backfill(db: &Db) -> Result<u64, DbError> {
    use crate::model::MODEL_STATE_TREE;
    if db
        .get_async(MODEL_STATE_TREE, USAGE_COUNTED.to_vec())
        .await?
        .is_some()
    {
        return Ok(0);
    }
    const PAGE: usize = 1000;
    let mut counts: BTreeMap<Vec<u8>, Usage> = BTreeMap::new();
    let mut rows = 0u64;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.take().map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(ObjectTable::TREE, start, Bound::Unbounded, false, PAGE)
            .await?;
        let n = page.len();
        after = page.last().map(|(k, _)| k.clone());
        for (k, v) in page {
            if k.len() < ObjectTable::PARTITION_LEN {
                continue;
            }
            let row = hangar_table::decode::<ObjectTable>(&v).map_err(DbError::from)?;
            let s = share(&row);
            let c = counts
                .entry(k[..ObjectTable::PARTITION_LEN].to_vec())
                .or_default();
            c.objects += s.objects;
            c.bytes = c.bytes.saturating_add(s.bytes);
            rows += 1;
        }
        if n < PAGE {
            break;
        }
    }
    let existing: Vec<Vec<u8>> = local_all(db).await?.into_keys().collect();
    db.write(move |tx| {
        for k in existing {
            tx.delete(USAGE_TREE, k);
        }
        for (k, u) in counts {
            if u != Usage::default() {
                tx.put(USAGE_TREE, k, u.encode());
            }
        }
        tx.put(MODEL_STATE_TREE, USAGE_COUNTED.to_vec(), Vec::new());
        Ok::<_, DbError>(())
    })
    .await?;
    Ok(rows)
}

/// A request for this node's counters of one bucket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UsageRequest {
    /// The bucket id (the object table's partition key).
    #[serde(with = "serde_bytes")]
    pub bucket: Vec<u8>,
}

/// Answers [`UsageRequest`]s from this node's counters.
pub(crate) struct UsageHandler {
    pub(crate) db: Db,
}

#[async_trait]
impl Handler<UsageRequest, Usage> for UsageHandler {
    async fn handle(
        &self,
        req: Request<UsageRequest>,
    ) -> std::result::Result<Response<Usage>, HandlerError> {
        if req.msg.bucket.len() != ObjectTable::PARTITION_LEN {
            return Err(HandlerError::new("bad bucket id"));
        }
        let u = local(&self.db, &req.msg.bucket)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VersionId;

    fn row(data: ObjectData, size: u64) -> ObjectRow {
        ObjectRow {
            data,
            size,
            ..ObjectRow::tombstone(VersionId::default(), 1)
        }
    }

    #[test]
    fn shares() {
        assert_eq!(
            share(&row(ObjectData::Inline(vec![1; 3]), 3)),
            Usage {
                objects: 1,
                bytes: 3
            }
        );
        assert_eq!(
            share(&row(ObjectData::Blocks { count: 2 }, 2_000_000)).bytes,
            2_000_000
        );
        assert_eq!(share(&row(ObjectData::Deleted, 0)), Usage::default());
        assert_eq!(share(&row(ObjectData::DeleteMarker, 0)), Usage::default());
        let u = Usage {
            objects: 7,
            bytes: u64::MAX,
        };
        assert_eq!(Usage::decode(&u.encode()), u);
        assert_eq!(Usage::decode(b"short"), Usage::default());
    }

    #[tokio::test]
    async fn a_row_that_leaves_with_its_partition_leaves_the_counters() {
        use std::sync::Arc;

        use hangar_db::{DbOptions, SledEngine};

        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 1 << 20).unwrap()),
            DbOptions::default(),
        );
        let bucket = [3u8; 32];
        let a = row(ObjectData::Inline(vec![1; 10]), 10);
        let b = row(ObjectData::Blocks { count: 1 }, 5000);
        db.write(move |tx| {
            tx_account(tx, &bucket, None, &a)?;
            tx_account(tx, &bucket, None, &b)?;
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        let counted = |db: &Db| {
            db.get(USAGE_TREE, &bucket)
                .unwrap()
                .map(|v| Usage::decode(&v))
                .unwrap_or_default()
        };
        assert_eq!(
            counted(&db),
            Usage {
                objects: 2,
                bytes: 5010
            }
        );
        let a = row(ObjectData::Inline(vec![1; 10]), 10);
        db.write(move |tx| tx_forget(tx, &bucket, &a))
            .await
            .unwrap();
        assert_eq!(
            counted(&db),
            Usage {
                objects: 1,
                bytes: 5000
            }
        );
        let b = row(ObjectData::Blocks { count: 1 }, 5000);
        db.write(move |tx| tx_forget(tx, &bucket, &b))
            .await
            .unwrap();
        assert_eq!(counted(&db), Usage::default());
        assert!(
            db.get(USAGE_TREE, &bucket).unwrap().is_none(),
            "nothing left behind"
        );
    }
}
