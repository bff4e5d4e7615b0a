//! The sled engine. All trees share one sled tree, each key prefixed with its
//! tree name and a NUL byte, so that a batch touching several trees is still
//! a single atomic `apply_batch` (sled's cross-tree transactions are slower
//! and retry on conflict, which one committer never has).

use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::engine::range_is_empty;
use crate::{DbError, Engine, Result, WriteOp};

const NAME: &str = "sled";

/// Hangar's metadata on sled 0.34.
pub struct SledEngine {
    db: sled::Db,
    kv: sled::Tree,
    /// sled's log file, opened again only to fsync it (see [`Engine::sync`]).
    log: std::fs::File,
}

impl SledEngine {
    /// Opens (or creates) the store in `path`. With `fsync` off, sled still
    /// flushes its log in the background every 500 ms.
    ///
    /// sled releases its file lock from background threads some time after
    /// the last handle is dropped, so reopening a store in the same process
    /// (a restarted node in a test) can find it still locked: opening retries
    /// for up to [`LOCK_WAIT`] before reporting the lock error.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<Self> {
        let started = Instant::now();
        let waited_enough = || started.elapsed() >= LOCK_WAIT;
        let db = loop {
            if !remove_unfinished_snapshots(path)? && !waited_enough() {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let r = sled::Config::new()
                .path(path)
                .cache_capacity(cache_bytes)
                .flush_every_ms(Some(500))
                .open();
            match r {
                // sled reports the lock as an Other I/O error with this text.
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock") && !waited_enough() =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.map_err(|e| DbError::engine(NAME, e))?,
            }
        };
        let kv = db
            .open_tree("hangar")
            .map_err(|e| DbError::engine(NAME, e))?;
        let log = std::fs::File::open(path.join("db"))
            .map_err(|e| DbError::engine(NAME, format!("opening sled's log to fsync it: {e}")))?;
        Ok(SledEngine { db, kv, log })
    }
}

/// Deletes the snapshot files sled was still writing when its process died.
///
/// sled 0.34 writes a snapshot to `snap.<lsn>.generating`, fsyncs it and
/// renames it to `snap.<lsn>`; but when opening it reads the file whose name
/// sorts last, `.generating` ones included, and fails with "Read corrupted
/// data" on a partial one (sled issues #1509, #1527, #1533). The crash test
/// (`hangar-crash-meta`) hit this after about 150 kill -9 rounds, on a store
/// that then never opened again. A `.generating` file was never published, so
/// removing it makes sled recover from the previous snapshot and its log, as
/// if the snapshot had not been started.
///
/// This is done under sled's own lock (an exclusive flock on the `db` file),
/// so that the snapshot being written by a process that has the store open
/// is never touched. Returns false, having removed nothing, if the store is
/// locked.
fn remove_unfinished_snapshots(path: &Path) -> Result<bool> {
    let lock = match std::fs::File::open(path.join("db")) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(DbError::engine(NAME, format!("{}: {e}", path.display()))),
    };
    if lock.try_lock().is_err() {
        return Ok(false);
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| DbError::engine(NAME, format!("{}: {e}", path.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            tracing::warn!("removing unfinished sled snapshot {name} left by a crash");
            std::fs::remove_file(entry.path()).map_err(|e| {
                DbError::engine(NAME, format!("removing {}: {e}", entry.path().display()))
            })?;
        }
    }
    Ok(true)
}

/// How long [`SledEngine::open`] waits for a lock left by a dropped handle.
pub const LOCK_WAIT: Duration = Duration::from_secs(3);

/// `tree` ++ NUL ++ `key`.
pub(crate) fn prefixed(tree: &str, key: &[u8]) -> Vec<u8> {
    debug_assert!(!tree.contains('\0'), "tree names hold no NUL byte");
    let mut k = Vec::with_capacity(tree.len() + 1 + key.len());
    k.extend_from_slice(tree.as_bytes());
    k.push(0);
    k.extend_from_slice(key);
    k
}

/// The first key after every key of `tree`.
pub(crate) fn tree_end(tree: &str) -> Vec<u8> {
    let mut k = tree.as_bytes().to_vec();
    k.push(1);
    k
}

/// Maps a bound inside `tree` to a bound on prefixed keys.
pub(crate) fn prefixed_bound(tree: &str, b: Bound<&[u8]>, is_end: bool) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(prefixed(tree, k)),
        Bound::Excluded(k) => Bound::Excluded(prefixed(tree, k)),
        Bound::Unbounded if is_end => Bound::Excluded(tree_end(tree)),
        Bound::Unbounded => Bound::Included(prefixed(tree, b"")),
    }
}

impl Engine for SledEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.kv
            .get(prefixed(tree, key))
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| DbError::engine(NAME, e))
    }

    fn range(
        &self,
        tree: &str,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if limit == 0 || range_is_empty(start, end) {
            return Ok(Vec::new());
        }
        let range = (
            prefixed_bound(tree, start, false),
            prefixed_bound(tree, end, true),
        );
        let strip = tree.len() + 1;
        let iter = self.kv.range(range);
        let take = |it: &mut dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>| {
            it.take(limit)
                .map(|r| {
                    r.map(|(k, v)| (k[strip..].to_vec(), v.to_vec()))
                        .map_err(|e| DbError::engine(NAME, e))
                })
                .collect::<Result<Vec<_>>>()
        };
        if reverse {
            take(&mut iter.rev())
        } else {
            take(&mut { iter })
        }
    }

    fn apply(&self, batch: Vec<WriteOp>, sync: bool) -> Result<()> {
        let mut b = sled::Batch::default();
        for op in batch {
            let k = prefixed(op.tree, &op.key);
            match op.value {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.kv
            .apply_batch(b)
            .map_err(|e| DbError::engine(NAME, e))?;
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // sled's flush writes its log buffers and waits for them with
        // sync_file_range(2) on Linux, which neither flushes the drive's
        // write cache nor the file's metadata (newly allocated blocks, size):
        // it survives kill -9 but not a power cut. fdatasync on our own
        // handle of the same file makes it durable. Both are safe to run
        // while another thread applies batches.
        self.db.flush().map_err(|e| DbError::engine(NAME, e))?;
        self.log
            .sync_data()
            .map_err(|e| DbError::engine(NAME, format!("fdatasync of sled's log: {e}")))?;
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.db.size_on_disk().map_err(|e| DbError::engine(NAME, e))
    }

    fn trees(&self) -> Result<Vec<String>> {
        // Jump from one tree's first key to the next tree's: one seek per
        // tree rather than a scan of every key.
        let mut trees = Vec::new();
        let mut from = Vec::new();
        loop {
            let first = self
                .kv
                .range(from..)
                .next()
                .transpose()
                .map_err(|e| DbError::engine(NAME, e))?;
            let Some((k, _)) = first else {
                return Ok(trees);
            };
            let nul = k.iter().position(|&b| b == 0).ok_or_else(|| {
                DbError::engine(NAME, format!("key without a tree prefix: {:?}", &k[..]))
            })?;
            let tree = String::from_utf8(k[..nul].to_vec())
                .map_err(|e| DbError::engine(NAME, format!("tree name is not UTF-8: {e}")))?;
            from = tree_end(&tree);
            trees.push(tree);
        }
    }

    fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let mut b = sled::Batch::default();
        for (k, v) in entries {
            b.insert(prefixed(tree, &k), v);
        }
        self.kv
            .apply_batch(b)
            .map_err(|e| DbError::engine(NAME, e))?;
        self.sync()
    }
}
