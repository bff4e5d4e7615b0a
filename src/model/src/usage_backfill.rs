//! The first count of the bucket usage counters (`crate::usage`): the
//! object rows a node stored before the counters existed, counted once at
//! start-up, and how an object row counts.

use std::collections::BTreeMap;
use std::ops::Bound;

use hangar_db::{Db, DbError};
use hangar_table::Schema;

use crate::object::ObjectTable;
use crate::state::MODEL_STATE_TREE;
use crate::usage::{USAGE_COUNTED, USAGE_TREE, Usage, local_all};

/// Counts the object rows stored before the counters existed, once: reads
/// the whole object tree and writes every bucket's counters and the
/// marker in one transaction. Run at start-up before anything writes the
/// object table (the node serves nothing yet), so the scan sees every row
/// and no hook runs meanwhile. Answers how many rows were counted (0 when
/// already done).
pub async fn backfill(db: &Db) -> Result<u64, DbError> {
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
            let s = row.usage();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VersionId;
    use crate::object::{ObjectData, ObjectRow};
    use crate::usage::{BUCKET_ID_LEN, tx_change};

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
            row(ObjectData::Inline(vec![1; 3]), 3).usage(),
            Usage {
                objects: 1,
                bytes: 3
            }
        );
        assert_eq!(
            row(ObjectData::Blocks { count: 2 }, 2_000_000)
                .usage()
                .bytes,
            2_000_000
        );
        assert_eq!(row(ObjectData::Deleted, 0).usage(), Usage::default());
        assert_eq!(row(ObjectData::DeleteMarker, 0).usage(), Usage::default());
        let u = Usage {
            objects: 7,
            bytes: u64::MAX,
        };
        assert_eq!(Usage::decode(&u.encode()), u);
        assert_eq!(Usage::decode(b"short"), Usage::default());
    }

    #[tokio::test]
    async fn a_row_that_leaves_with_its_partition_leaves_the_counters() {
        assert_eq!(BUCKET_ID_LEN, ObjectTable::PARTITION_LEN);
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
            tx_change(tx, &bucket, Usage::default(), a.usage())?;
            tx_change(tx, &bucket, Usage::default(), b.usage())?;
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
        db.write(move |tx| tx_change(tx, &bucket, a.usage(), Usage::default()))
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
        db.write(move |tx| tx_change(tx, &bucket, b.usage(), Usage::default()))
            .await
            .unwrap();
        assert_eq!(counted(&db), Usage::default());
        assert!(
            db.get(USAGE_TREE, &bucket).unwrap().is_none(),
            "nothing left behind"
        );
    }
}
