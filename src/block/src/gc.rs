//! The block GC worker: deletes block files whose reference count stayed
//! zero for the grace delay.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use hangar_db::DbError;
use hangar_util::Hash;
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};

use crate::manager::BlockManager;
use crate::refcount::{GC_TREE, RC_TREE, RcRow, read_rc};
use crate::{BlockError, Result};

const BATCH: usize = 512;

/// Starts the GC worker, visiting due blocks every `interval`.
pub fn spawn_gc_worker(
    mgr: Arc<BlockManager>,
    workers: &WorkerRegistry,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let w = workers.register("block-gc");
    tokio::spawn(async move {
        loop {
            w.set_state(WorkerState::Busy);
            match collect_due(&mgr).await {
                Ok((visited, deleted)) => {
                    w.add_processed(visited);
                    if visited > 0 {
                        tracing::info!("block gc: visited {visited} blocks, deleted {deleted}");
                    }
                    w.set_progress(
                        format!("last pass: {visited} visited, {deleted} deleted"),
                        None,
                    );
                }
                Err(e) => {
                    tracing::error!("block gc: {e}");
                    w.record_error(&e);
                }
            }
            w.set_state(WorkerState::Idle);
            tokio::time::sleep(interval).await;
        }
    })
}

/// Visits every block whose count became zero at least the grace delay
/// ago; returns (visited, deleted).
pub async fn collect_due(mgr: &BlockManager) -> Result<(u64, u64)> {
    let (mut visited, mut deleted) = (0, 0);
    loop {
        let now = now_msec().saturating_sub(mgr.grace_msec);
        let due = mgr
            .db()
            .range_async(
                GC_TREE,
                Bound::Unbounded,
                Bound::Excluded((now + 1).to_be_bytes().to_vec()),
                false,
                BATCH,
            )
            .await?;
        if due.is_empty() {
            return Ok((visited, deleted));
        }
        for (key, _) in due {
            let Some(hash) = Hash::from_slice(&key[8..]) else {
                continue;
            };
            visited += 1;
            if collect_one(mgr, key, hash).await? {
                deleted += 1;
            }
        }
    }
}

async fn collect_one(mgr: &BlockManager, gc_key: Vec<u8>, hash: Hash) -> Result<bool> {
    let _guard = mgr.lock_for(&hash).lock().await;
    let grace = mgr.grace_msec;
    let now = now_msec();
    let delete = mgr
        .db()
        .write(move |tx| {
            tx.delete(GC_TREE, gc_key);
            let due = matches!(
                read_rc(tx, &hash)?,
                Some(RcRow { count: 0, zero_since_msec: Some(t) }) if t + grace <= now
            );
            if due {
                tx.delete(RC_TREE, hash.as_bytes().to_vec());
            }
            Ok::<_, DbError>(due)
        })
        .await?;
    if delete {
        let files = mgr.files().clone();
        tokio::task::spawn_blocking(move || files.delete(&hash))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))??;
        mgr.note_deleted();
    }
    Ok(delete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlockFiles;
    use crate::refcount::remove_ref;
    use bytes::Bytes;
    use hangar_db::{Db, DbOptions, SledEngine};

    async fn manager(grace: u64) -> (tempfile::TempDir, Arc<BlockManager>) {
        let d = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
        let db = Db::new(Arc::new(engine), DbOptions::default());
        let files = BlockFiles::new(vec![d.path().join("data")], Some(1), false, true).unwrap();
        (d, BlockManager::new(files, db, grace))
    }

    #[tokio::test]
    async fn referenced_blocks_survive_and_unreferenced_ones_go_after_grace() {
        let (_d, mgr) = manager(50).await;
        let data = Bytes::from(vec![1u8; 5000]);
        let h = Hash::of(&data);
        let v1 = [1u8; 16];
        let v2 = [2u8; 16];
        mgr.store(h, data.clone(), v1, |_| Ok(())).await.unwrap();
        let again = mgr.store(h, data.clone(), v2, |_| Ok(())).await.unwrap();
        assert!(!again.written, "identical blocks are stored once");
        assert_eq!(mgr.refcount(h).await.unwrap(), 2);

        tokio::time::sleep(Duration::from_millis(80)).await;
        collect_due(&mgr).await.unwrap();
        assert!(mgr.has_file(&h), "a referenced block is never collected");

        for v in [v1, v2] {
            mgr.db()
                .write(move |tx| remove_ref(tx, &h, &v))
                .await
                .unwrap();
        }
        assert_eq!(mgr.refcount(h).await.unwrap(), 0);
        collect_due(&mgr).await.unwrap();
        assert!(mgr.has_file(&h), "the grace delay is respected");
        tokio::time::sleep(Duration::from_millis(80)).await;
        let (_, deleted) = collect_due(&mgr).await.unwrap();
        assert_eq!(deleted, 1);
        assert!(!mgr.has_file(&h));
    }

    #[tokio::test]
    async fn a_block_referenced_again_during_grace_is_kept() {
        let (_d, mgr) = manager(30).await;
        let data = Bytes::from_static(b"reused block");
        let h = Hash::of(&data);
        let v1 = [1u8; 16];
        mgr.store(h, data.clone(), v1, |_| Ok(())).await.unwrap();
        mgr.db()
            .write(move |tx| remove_ref(tx, &h, &v1))
            .await
            .unwrap();
        mgr.store(h, data, [3u8; 16], |_| Ok(())).await.unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        let (visited, deleted) = collect_due(&mgr).await.unwrap();
        assert!(visited >= 1);
        assert_eq!(deleted, 0);
        assert_eq!(mgr.read(h).await.unwrap(), &b"reused block"[..]);
    }
}
