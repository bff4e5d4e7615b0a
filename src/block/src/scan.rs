//! The orphan scan: finds block files that no reference-count row knows.
//!
//! A block's count row is queued before its file is written and committed
//! no later than the file's reference, so a file can lack a row only
//! across a crash: one between the file's write and that commit, or, with
//! `metadata_fsync` off, one that rolls back the last metadata commits
//! while the files they described stay on disk. At start, the scan walks
//! the data directories and gives every unknown file a zero count and a GC
//! visit, so it is deleted after the grace delay unless an upload
//! references it first.

use std::sync::Arc;

use hangar_db::DbError;
use hangar_util::Hash;
use hangar_util::time::now_msec;
use hangar_util::worker::{WorkerRegistry, WorkerState};

use crate::manager::BlockManager;
use crate::refcount::{read_rc, touch};
use crate::{BlockError, Result};

/// Hashes of the block files under `dirs` (`ab/cd/<hex>[.zst]`).
pub(crate) fn list_block_files(dirs: &[std::path::PathBuf]) -> Vec<Hash> {
    let mut out = Vec::new();
    let entries = |p: &std::path::Path| std::fs::read_dir(p).into_iter().flatten().flatten();
    for d in dirs {
        for l1 in entries(d) {
            for l2 in entries(&l1.path()) {
                for f in entries(&l2.path()) {
                    let name = f.file_name();
                    let name = name.to_string_lossy();
                    if let Some(h) = Hash::from_hex(name.strip_suffix(".zst").unwrap_or(&name)) {
                        out.push(h);
                    }
                }
            }
        }
    }
    out
}

/// Gives every block file without a count row a zero count and a GC visit.
/// Returns (files seen, orphans found).
pub async fn scan_orphans(mgr: &BlockManager) -> Result<(u64, u64)> {
    let files = mgr.files().clone();
    // The one walk that also counts what is stored (crate::tally).
    let hashes = tokio::task::spawn_blocking(move || files.tally().walk(files.dirs()))
        .await
        .map_err(|e| BlockError::Task(e.to_string()))?;
    let mut orphans = 0;
    for h in &hashes {
        let h = *h;
        let _guard = mgr.lock_for(&h).lock().await;
        let found = mgr
            .db()
            .write(move |tx| {
                if read_rc(tx, &h)?.is_some() {
                    return Ok::<_, DbError>(false);
                }
                touch(tx, &h, now_msec())?;
                Ok(true)
            })
            .await?;
        orphans += u64::from(found);
    }
    Ok((hashes.len() as u64, orphans))
}

/// Runs the scan once in the background, reporting as worker `block-scan`.
pub fn spawn_orphan_scan(mgr: Arc<BlockManager>, workers: &WorkerRegistry) {
    let w = workers.register("block-scan");
    tokio::spawn(async move {
        w.set_state(WorkerState::Busy);
        match scan_orphans(&mgr).await {
            Ok((seen, orphans)) => {
                w.add_processed(seen);
                w.set_progress(
                    format!("{seen} block files, {orphans} orphans scheduled for GC"),
                    None,
                );
                if orphans > 0 {
                    tracing::info!(
                        "block scan: {orphans} of {seen} block files had no reference count; they will be collected"
                    );
                }
            }
            Err(e) => {
                tracing::error!("block scan: {e}");
                w.record_error(&e);
            }
        }
        w.set_state(WorkerState::Done);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockFiles, collect_due};
    use bytes::Bytes;
    use hangar_db::{Db, DbOptions, SledEngine};
    use std::time::Duration;

    #[tokio::test]
    async fn files_without_a_count_are_collected_and_known_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
        let db = Db::new(Arc::new(engine), DbOptions::default());
        let files = BlockFiles::new(vec![d.path().join("data")], Some(1), false, true).unwrap();
        let mgr = BlockManager::new(files.clone(), db, 30);
        let kept = Bytes::from_static(b"referenced block");
        let kh = Hash::of(&kept);
        mgr.store(kh, kept, [1; 16], |_| Ok(())).await.unwrap();
        // A file left by a crash whose metadata was rolled back.
        let orphan = b"orphan block".to_vec();
        let oh = Hash::of(&orphan);
        files.write(&oh, &orphan).unwrap();

        assert_eq!(scan_orphans(&mgr).await.unwrap(), (2, 1));
        tokio::time::sleep(Duration::from_millis(60)).await;
        collect_due(&mgr).await.unwrap();
        assert!(!mgr.has_file(&oh));
        assert!(mgr.has_file(&kh));
    }
}
