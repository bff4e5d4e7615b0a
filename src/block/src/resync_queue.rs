//! The persisted queue of blocks for the resync worker to look at.
//!
//! A block is queued whenever something suggests its file may not agree
//! with what this node should hold: its reference count changed (the table
//! hook of [`crate::refcount`]), a read found it missing or corrupt, the
//! layout moved partitions, a peer reported a corrupt copy, or an operator
//! asked (`hangar repair blocks`). The worker ([`crate::resync`]) decides
//! what to do when it looks; the queue only says *when* to look.
//!
//! Trees, all written in the caller's transaction:
//! - `resync_queue`: `due_msec(8, BE) ++ hash(32)` → empty, read in key
//!   order a page at a time, so memory stays bounded however long it grows;
//! - `resync_due`: `hash(32)` → `due_msec(8, BE)`: one entry per queued
//!   block (a block queued twice is looked at once, at the earlier time);
//! - `resync_errors`: `hash(32)` → [`ErrorRow`]: blocks whose last attempt
//!   failed, with their retry count and backoff (`hangar block list-errors`);
//! - `resync_meta`: `b"len"` → `u64` (BE): how many blocks are queued.

use std::ops::Bound;
use std::time::Duration;

use hangar_db::{Db, DbError, Tx};
use hangar_util::Hash;
use hangar_util::time::now_msec;
use serde::{Deserialize, Serialize};

use crate::Result;

pub const QUEUE_TREE: &str = "resync_queue";
pub const DUE_TREE: &str = "resync_due";
pub const ERRORS_TREE: &str = "resync_errors";
const META_TREE: &str = "resync_meta";
const LEN_KEY: &[u8] = b"len";

/// Delay before the first retry of a failed block.
pub const FIRST_RETRY: Duration = Duration::from_secs(10);
/// Longest delay between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(3600);

/// The last failure of a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorRow {
    /// Failed attempts in a row.
    pub tries: u32,
    /// When the first of them failed (ms since the epoch).
    pub first_msec: u64,
    /// When the last one failed.
    pub last_msec: u64,
    /// When the block is tried next.
    pub next_msec: u64,
    pub error: String,
}

/// The delay before try `tries + 1`: exponential from [`FIRST_RETRY`],
/// capped at [`MAX_RETRY`].
pub fn retry_delay(tries: u32) -> Duration {
    let shift = tries.saturating_sub(1).min(20);
    (FIRST_RETRY * (1u32 << shift)).min(MAX_RETRY)
}

fn queue_key(due: u64, hash: &Hash) -> Vec<u8> {
    let mut k = Vec::with_capacity(40);
    k.extend_from_slice(&due.to_be_bytes());
    k.extend_from_slice(hash.as_bytes());
    k
}

fn be_u64(v: &[u8]) -> u64 {
    v.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

fn add_len(tx: &mut Tx<'_>, delta: i64) -> std::result::Result<(), DbError> {
    let len = tx.get(META_TREE, LEN_KEY)?.map_or(0, |v| be_u64(&v));
    let len = len.saturating_add_signed(delta);
    tx.put(META_TREE, LEN_KEY.to_vec(), len.to_be_bytes().to_vec());
    Ok(())
}

/// Queues `hash` to be looked at `due_msec`, or keeps it queued for an
/// earlier time that is still to come. A block already due is moved to
/// `due_msec`: the worker may be looking at it now, before this change,
/// and its [`tx_done`] must not take the later look away.
pub fn tx_enqueue(tx: &mut Tx<'_>, hash: &Hash, due_msec: u64) -> std::result::Result<(), DbError> {
    let current = tx.get(DUE_TREE, hash.as_bytes())?.map(|v| be_u64(&v));
    if current.is_some_and(|d| d <= due_msec && d > now_msec()) {
        return Ok(());
    }
    tx_place(tx, hash, current, due_msec)
}

/// Queues `hash` for `due_msec`, replacing an earlier time (a retry after a
/// failure must wait its backoff).
fn tx_reschedule(tx: &mut Tx<'_>, hash: &Hash, due_msec: u64) -> std::result::Result<(), DbError> {
    let current = tx.get(DUE_TREE, hash.as_bytes())?.map(|v| be_u64(&v));
    tx_place(tx, hash, current, due_msec)
}

/// Moves `hash` from its `current` due time (if queued) to `due_msec`.
fn tx_place(
    tx: &mut Tx<'_>,
    hash: &Hash,
    current: Option<u64>,
    due_msec: u64,
) -> std::result::Result<(), DbError> {
    match current {
        Some(d) => tx.delete(QUEUE_TREE, queue_key(d, hash)),
        None => add_len(tx, 1)?,
    }
    tx.put(QUEUE_TREE, queue_key(due_msec, hash), Vec::new());
    tx.put(
        DUE_TREE,
        hash.as_bytes().to_vec(),
        due_msec.to_be_bytes().to_vec(),
    );
    Ok(())
}

/// Queues every block of `hashes` for `due_msec` (at most a few thousand
/// per call: one transaction).
pub async fn enqueue(db: &Db, hashes: Vec<Hash>, due_msec: u64) -> Result<()> {
    db.write(move |tx| {
        for h in &hashes {
            tx_enqueue(tx, h, due_msec)?;
        }
        Ok::<_, DbError>(())
    })
    .await?;
    Ok(())
}

/// A queued block, as read from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub hash: Hash,
    pub due_msec: u64,
}

/// Up to `limit` queued blocks due at `now_msec` or before, earliest
/// first, after `after` (the last one of the previous page).
pub async fn due(
    db: &Db,
    now_msec: u64,
    after: Option<Queued>,
    limit: usize,
) -> Result<Vec<Queued>> {
    let start = match after {
        Some(q) => Bound::Excluded(queue_key(q.due_msec, &q.hash)),
        None => Bound::Unbounded,
    };
    let end = Bound::Excluded((now_msec + 1).to_be_bytes().to_vec());
    let rows = db.range_async(QUEUE_TREE, start, end, false, limit).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(k, _)| {
            if k.len() != 40 {
                return None;
            }
            Some(Queued {
                due_msec: be_u64(&k[..8]),
                hash: Hash::from_slice(&k[8..])?,
            })
        })
        .collect())
}

/// When the next queued block is due, if any.
pub async fn next_due(db: &Db) -> Result<Option<u64>> {
    let rows = db
        .range_async(QUEUE_TREE, Bound::Unbounded, Bound::Unbounded, false, 1)
        .await?;
    Ok(rows.first().map(|(k, _)| be_u64(&k[..8.min(k.len())])))
}

/// How many blocks are queued.
pub async fn len(db: &Db) -> Result<u64> {
    Ok(db
        .get_async(META_TREE, LEN_KEY.to_vec())
        .await?
        .map_or(0, |v| be_u64(&v)))
}

/// Removes `q` from the queue once it was handled, and its error if any;
/// a block queued again meanwhile for a later time stays queued.
pub fn tx_done(tx: &mut Tx<'_>, q: &Queued) -> std::result::Result<(), DbError> {
    tx.delete(ERRORS_TREE, q.hash.as_bytes().to_vec());
    match tx.get(DUE_TREE, q.hash.as_bytes())? {
        Some(v) if be_u64(&v) == q.due_msec => {
            tx.delete(DUE_TREE, q.hash.as_bytes().to_vec());
            tx.delete(QUEUE_TREE, queue_key(q.due_msec, &q.hash));
            add_len(tx, -1)
        }
        _ => {
            tx.delete(QUEUE_TREE, queue_key(q.due_msec, &q.hash));
            Ok(())
        }
    }
}

/// Records that handling `q` failed with `error`: the block is tried again
/// after its backoff. Returns the error row.
pub fn tx_failed(
    tx: &mut Tx<'_>,
    q: &Queued,
    error: String,
) -> std::result::Result<ErrorRow, DbError> {
    let now = now_msec();
    let prev = tx
        .get(ERRORS_TREE, q.hash.as_bytes())?
        .and_then(|v| rmp_serde::from_slice::<ErrorRow>(&v).ok());
    let tries = prev.as_ref().map_or(0, |p| p.tries) + 1;
    let row = ErrorRow {
        tries,
        first_msec: prev.as_ref().map_or(now, |p| p.first_msec),
        last_msec: now,
        next_msec: now + retry_delay(tries).as_millis() as u64,
        error,
    };
    tx.put(
        ERRORS_TREE,
        q.hash.as_bytes().to_vec(),
        rmp_serde::to_vec(&row).expect("ErrorRow encodes"),
    );
    tx_reschedule(tx, &q.hash, row.next_msec)?;
    Ok(row)
}

/// Records that `q` must be looked at again after `delay` without counting
/// a failure (a source was busy, or a peer is not ready yet).
pub fn tx_later(tx: &mut Tx<'_>, q: &Queued, delay: Duration) -> std::result::Result<(), DbError> {
    tx_reschedule(tx, &q.hash, now_msec() + delay.as_millis() as u64)
}

/// Up to `limit` blocks whose last attempt failed, after `after`.
pub async fn errors(db: &Db, after: Option<Hash>, limit: usize) -> Result<Vec<(Hash, ErrorRow)>> {
    let start = after.map_or(Bound::Unbounded, |h| Bound::Excluded(h.as_bytes().to_vec()));
    let rows = db
        .range_async(ERRORS_TREE, start, Bound::Unbounded, false, limit)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(k, v)| Some((Hash::from_slice(&k)?, rmp_serde::from_slice(&v).ok()?)))
        .collect())
}

/// The last failure of `hash`, if its last attempt failed.
pub async fn error_of(db: &Db, hash: Hash) -> Result<Option<ErrorRow>> {
    Ok(db
        .get_async(ERRORS_TREE, hash.as_bytes().to_vec())
        .await?
        .and_then(|v| rmp_serde::from_slice(&v).ok()))
}

/// Makes every failed block (or only `hash`) due now; returns how many.
pub async fn retry_now(db: &Db, hash: Option<Hash>) -> Result<u64> {
    let mut n = 0;
    let mut after = None;
    loop {
        let page: Vec<Hash> = match hash {
            Some(h) => {
                if after.is_some() {
                    break;
                }
                vec![h]
            }
            None => errors(db, after, 1000)
                .await?
                .into_iter()
                .map(|(h, _)| h)
                .collect(),
        };
        let Some(last) = page.last().copied() else {
            break;
        };
        after = Some(last);
        let full = page.len() >= 1000;
        let now = now_msec();
        n += db
            .write(move |tx| {
                let mut n = 0;
                for h in &page {
                    if tx.get(ERRORS_TREE, h.as_bytes())?.is_some() {
                        tx_reschedule(tx, h, now)?;
                        n += 1;
                    }
                }
                Ok::<_, DbError>(n)
            })
            .await?;
        if !full {
            break;
        }
    }
    Ok(n)
}

/// Empties the queue and the error list (`hangar repair
/// clear-resync-queue`); returns how many blocks were queued. Blocks whose
/// count changes again are queued again; `hangar repair blocks` requeues
/// everything.
pub async fn clear(db: &Db) -> Result<u64> {
    let mut cleared = 0;
    loop {
        let rows = db
            .range_async(DUE_TREE, Bound::Unbounded, Bound::Unbounded, false, 1000)
            .await?;
        if rows.is_empty() {
            break;
        }
        cleared += rows.len() as u64;
        db.write(move |tx| {
            for (k, v) in &rows {
                tx.delete(QUEUE_TREE, [v.as_slice(), k.as_slice()].concat());
                tx.delete(DUE_TREE, k.clone());
                tx.delete(ERRORS_TREE, k.clone());
                add_len(tx, -1)?;
            }
            Ok::<_, DbError>(())
        })
        .await?;
    }
    // Errors of blocks no longer queued, and queue keys without a due entry
    // (none are written, but a clear must leave the queue empty).
    loop {
        let rows = db
            .range_async(ERRORS_TREE, Bound::Unbounded, Bound::Unbounded, false, 1000)
            .await?;
        let q = db
            .range_async(QUEUE_TREE, Bound::Unbounded, Bound::Unbounded, false, 1000)
            .await?;
        if rows.is_empty() && q.is_empty() {
            break;
        }
        db.write(move |tx| {
            for (k, _) in rows.into_iter().chain(q) {
                tx.delete(ERRORS_TREE, k.clone());
                tx.delete(QUEUE_TREE, k);
            }
            tx.put(META_TREE, LEN_KEY.to_vec(), 0u64.to_be_bytes().to_vec());
            Ok::<_, DbError>(())
        })
        .await?;
    }
    Ok(cleared)
}

/// Queues, for `due_msec`, every block of layout partition `p` (the first
/// byte of its hash) that has a key in `tree` (keyed by block hash), a page
/// per transaction; returns how many.
pub async fn enqueue_partition(db: &Db, tree: &'static str, p: u8, due_msec: u64) -> Result<u64> {
    let end = if p == 255 {
        Bound::Unbounded
    } else {
        Bound::Excluded(vec![p + 1])
    };
    let mut start = Bound::Included(vec![p]);
    let mut n = 0;
    loop {
        let keys: Vec<Hash> = db
            .range_async(tree, start, end.clone(), false, 1000)
            .await?
            .into_iter()
            .filter_map(|(k, _)| Hash::from_slice(&k))
            .collect();
        let Some(last) = keys.last().copied() else {
            return Ok(n);
        };
        n += keys.len() as u64;
        let more = keys.len() == 1000;
        enqueue(db, keys, due_msec).await?;
        if !more {
            return Ok(n);
        }
        start = Bound::Excluded(last.as_bytes().to_vec());
    }
}

const HELD_KEY: &[u8] = b"held_partitions";

/// The layout partitions this node stored when last looked at (a bitmap,
/// partition `p` at bit `p % 8` of byte `p / 8`), if ever.
pub async fn held_partitions(db: &Db) -> Result<Option<[u8; 32]>> {
    Ok(db
        .get_async(META_TREE, HELD_KEY.to_vec())
        .await?
        .and_then(|v| <[u8; 32]>::try_from(v.as_slice()).ok()))
}

/// Records the layout partitions this node stores now.
pub async fn set_held_partitions(db: &Db, held: [u8; 32]) -> Result<()> {
    db.write(move |tx| {
        tx.put(META_TREE, HELD_KEY.to_vec(), held.to_vec());
        Ok::<_, DbError>(())
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_db::{DbOptions, SledEngine};
    use std::sync::Arc;

    fn db() -> (tempfile::TempDir, Db) {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 8 << 20).unwrap()),
            DbOptions::default(),
        );
        (d, db)
    }

    #[tokio::test]
    async fn a_block_is_queued_once_at_its_earliest_time() {
        let (_d, db) = db();
        let t = now_msec() + 100_000;
        let (a, b) = (Hash::of(b"a"), Hash::of(b"b"));
        enqueue(&db, vec![a], t + 500).await.unwrap();
        enqueue(&db, vec![a, b], t + 300).await.unwrap();
        enqueue(&db, vec![a], t + 900).await.unwrap();
        assert_eq!(len(&db).await.unwrap(), 2);
        let d = due(&db, t + 1000, None, 10).await.unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d.iter().all(|q| q.due_msec == t + 300));
        assert!(due(&db, t + 299, None, 10).await.unwrap().is_empty());
        assert_eq!(next_due(&db).await.unwrap(), Some(t + 300));
        // Paging.
        let first = due(&db, t + 1000, None, 1).await.unwrap();
        let second = due(&db, t + 1000, first.last().copied(), 10).await.unwrap();
        assert_eq!(second.len(), 1);
        assert_ne!(first[0].hash, second[0].hash);
    }

    #[tokio::test]
    async fn a_change_while_a_block_is_handled_is_not_lost() {
        let (_d, db) = db();
        let a = Hash::of(b"a");
        let past = now_msec() - 10;
        enqueue(&db, vec![a], past).await.unwrap();
        let q = due(&db, now_msec(), None, 10).await.unwrap()[0];
        // The worker looks at `a`; meanwhile its count changes.
        let later = now_msec() + 10_000;
        enqueue(&db, vec![a], later).await.unwrap();
        db.write(move |tx| tx_done(tx, &q)).await.unwrap();
        assert_eq!(len(&db).await.unwrap(), 1);
        let d = due(&db, later, None, 10).await.unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].due_msec, later);
    }

    #[tokio::test]
    async fn done_failed_retry_and_clear() {
        let (_d, db) = db();
        let (a, b) = (Hash::of(b"a"), Hash::of(b"b"));
        enqueue(&db, vec![a, b], 100).await.unwrap();
        let qs = due(&db, 100, None, 10).await.unwrap();
        let qa = *qs.iter().find(|q| q.hash == a).unwrap();
        let qb = *qs.iter().find(|q| q.hash == b).unwrap();
        // A queued again while it was handled stays queued.
        enqueue(&db, vec![a], 50).await.unwrap();
        db.write(move |tx| tx_done(tx, &qb)).await.unwrap();
        assert_eq!(len(&db).await.unwrap(), 1);
        let qa2 = due(&db, 100, None, 10).await.unwrap()[0];
        assert_eq!(qa2.due_msec, 50);
        // A stale handle does not remove the newer entry.
        db.write(move |tx| tx_done(tx, &qa)).await.unwrap();
        assert_eq!(len(&db).await.unwrap(), 1);

        let row = db
            .write(move |tx| tx_failed(tx, &qa2, "no replica has it".into()))
            .await
            .unwrap();
        assert_eq!(row.tries, 1);
        assert!(row.next_msec >= now_msec() + 9_000);
        assert!(due(&db, now_msec(), None, 10).await.unwrap().is_empty());
        let errs = errors(&db, None, 10).await.unwrap();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].1.error, "no replica has it");
        let q3 = due(&db, row.next_msec, None, 10).await.unwrap()[0];
        let row2 = db
            .write(move |tx| tx_failed(tx, &q3, "still".into()))
            .await
            .unwrap();
        assert_eq!(row2.tries, 2);
        assert_eq!(row2.first_msec, row.first_msec);

        assert_eq!(retry_now(&db, None).await.unwrap(), 1);
        let now = due(&db, now_msec(), None, 10).await.unwrap();
        assert_eq!(now.len(), 1);
        assert_eq!(len(&db).await.unwrap(), 1);
        db.write(move |tx| tx_done(tx, &now[0])).await.unwrap();
        assert!(errors(&db, None, 10).await.unwrap().is_empty());
        assert_eq!(len(&db).await.unwrap(), 0);

        enqueue(&db, vec![a, b], 10).await.unwrap();
        assert_eq!(clear(&db).await.unwrap(), 2);
        assert_eq!(len(&db).await.unwrap(), 0);
        assert_eq!(next_due(&db).await.unwrap(), None);
        assert_eq!(retry_delay(100), MAX_RETRY);
    }
}
