//! The redb engine. Each Hangar tree is a redb table of the same name with
//! raw byte keys and values; one group-commit batch is one redb write
//! transaction, which is atomic across tables.
//!
//! Durability: a batch applied with `sync` commits with
//! [`redb::Durability::Immediate`] (one fsync; durable when `apply` returns).
//! Without `sync` it commits with [`redb::Durability::None`]: visible to
//! readers at once and crash-consistent (after a crash the file opens at the
//! last durable commit, never at a torn one), but not durable until a later
//! durable commit. A background thread makes such commits durable within
//! [`FLUSH_EVERY`] by committing an empty durable transaction, as sled's
//! `flush_every_ms` does, which also lets redb reuse the pages freed by the
//! non-durable commits (it cannot until a durable commit).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, TableDefinition, TableError, TableHandle};

use crate::engine::range_is_empty;
use crate::{DbError, Engine, Result, WriteOp};

const NAME: &str = "redb";

/// Longest time a write applied without `sync` stays non-durable.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);

type Bytes = &'static [u8];

fn table(tree: &str) -> TableDefinition<'_, Bytes, Bytes> {
    TableDefinition::new(tree)
}

fn err(e: impl std::fmt::Display) -> DbError {
    DbError::engine(NAME, e)
}

/// Hangar's metadata in one redb file.
pub struct RedbEngine {
    /// `None` once closed ([`Engine::close`]).
    db: RwLock<Option<Arc<Database>>>,
    path: PathBuf,
    /// Set after a non-durable commit, cleared by the flusher.
    dirty: Arc<AtomicBool>,
    /// Dropping the sender stops the flusher, which then flushes once more.
    flusher: Mutex<Option<(mpsc::Sender<()>, JoinHandle<()>)>>,
}

impl RedbEngine {
    /// Opens (or creates) the store in the file `path`, whose directory must
    /// exist. After a crash, redb checks and repairs the file while opening.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<Self> {
        let db = Database::builder()
            .set_cache_size(usize::try_from(cache_bytes).unwrap_or(usize::MAX))
            .create(path)
            .map_err(err)?;
        let db = Arc::new(db);
        let dirty = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = mpsc::channel();
        let (d, f) = (db.clone(), dirty.clone());
        let handle = std::thread::Builder::new()
            .name("redb-flusher".into())
            .spawn(move || flusher(d, f, stopped))
            .map_err(err)?;
        Ok(RedbEngine {
            db: RwLock::new(Some(db)),
            path: path.to_path_buf(),
            dirty,
            flusher: Mutex::new(Some((stop, handle))),
        })
    }

    fn db(&self) -> Result<Arc<Database>> {
        self.db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| err("the store is closed"))
    }

    /// Stops the flusher, which flushes once more.
    fn stop_flusher(&self) {
        let flusher = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((stop, handle)) = flusher {
            drop(stop);
            let _ = handle.join();
        }
    }
}

/// Makes non-durable commits durable every [`FLUSH_EVERY`], and once more
/// when the engine is dropped.
fn flusher(db: Arc<Database>, dirty: Arc<AtomicBool>, stop: mpsc::Receiver<()>) {
    loop {
        let last = !matches!(
            stop.recv_timeout(FLUSH_EVERY),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        if dirty.swap(false, Ordering::AcqRel)
            && let Err(e) = durable_commit(&db)
        {
            tracing::error!("redb background flush failed: {e}");
            dirty.store(true, Ordering::Release);
        }
        if last {
            return;
        }
    }
}

/// Commits an empty write transaction with Immediate durability, which
/// persists every non-durable commit before it (redb still writes a new
/// commit slot and fsyncs when a transaction changed nothing).
fn durable_commit(db: &Database) -> Result<()> {
    db.begin_write()
        .map_err(err)
        .and_then(|t| t.commit().map_err(err))
}

impl Drop for RedbEngine {
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.db()?.begin_read().map_err(err)?;
        let t = match txn.open_table(table(tree)) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(err(e)),
        };
        Ok(t.get(key).map_err(err)?.map(|v| v.value().to_vec()))
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
        let txn = self.db()?.begin_read().map_err(err)?;
        let t = match txn.open_table(table(tree)) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(err(e)),
        };
        let iter = t.range::<&[u8]>((start, end)).map_err(err)?;
        let collect = |it: &mut dyn Iterator<Item = _>| {
            it.take(limit)
                .map(
                    |r: std::result::Result<
                        (redb::AccessGuard<Bytes>, redb::AccessGuard<Bytes>),
                        _,
                    >| {
                        r.map(|(k, v)| (k.value().to_vec(), v.value().to_vec()))
                            .map_err(err)
                    },
                )
                .collect::<Result<Vec<_>>>()
        };
        if reverse {
            collect(&mut iter.rev())
        } else {
            collect(&mut { iter })
        }
    }

    fn apply(&self, batch: Vec<WriteOp>, sync: bool) -> Result<()> {
        let mut txn = self.db()?.begin_write().map_err(err)?;
        if !sync {
            txn.set_durability(Durability::None).map_err(err)?;
        }
        {
            // Batches from the group committer come sorted by tree, so each
            // table is opened once.
            let mut open: Option<(&str, redb::Table<Bytes, Bytes>)> = None;
            for op in &batch {
                if open.as_ref().is_none_or(|(name, _)| *name != op.tree) {
                    open = Some((op.tree, txn.open_table(table(op.tree)).map_err(err)?));
                }
                let (_, t) = open.as_mut().expect("table opened above");
                match &op.value {
                    Some(v) => {
                        t.insert(op.key.as_slice(), v.as_slice()).map_err(err)?;
                    }
                    None => {
                        t.remove(op.key.as_slice()).map_err(err)?;
                    }
                }
            }
        }
        txn.commit().map_err(err)?;
        if !sync {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // Cleared first: a non-durable commit that lands after this point is
        // either covered by the commit below or flagged again.
        self.dirty.store(false, Ordering::Release);
        let r = self.db().and_then(|d| durable_commit(&d));
        if r.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        r
    }

    /// Closes the file as redb does when its `Database` is dropped: a last
    /// commit that records the allocator's state, without which the next
    /// open rebuilds it by reading the whole file (31–62 s for the 7 GB
    /// store of 10 M objects in doc/scale.md). A process ends without
    /// running the destructors of what its threads hold, so this is done
    /// here. Reads still running after 2 s leave the file open (durable,
    /// and recovered at the next start).
    fn close(&self) -> Result<()> {
        self.stop_flusher();
        let Some(db) = self.db.write().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        durable_commit(&db)?;
        // Reads and writes that started before hold the database a moment
        // longer; none can start now.
        let mut db = db;
        for _ in 0..200 {
            match Arc::try_unwrap(db) {
                Ok(d) => return d.close().map_err(err),
                Err(still) => {
                    db = still;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        // Durable already (the commit above): only the next open's time is
        // at stake, which is no reason to fail a stop.
        tracing::warn!(
            "redb store still in use 2 s after the last commit: left open, the next start recovers it"
        );
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        std::fs::metadata(&self.path).map(|m| m.len()).map_err(err)
    }

    fn trees(&self) -> Result<Vec<String>> {
        let txn = self.db()?.begin_read().map_err(err)?;
        let mut names: Vec<String> = txn
            .list_tables()
            .map_err(err)?
            .map(|h| h.name().to_string())
            .collect();
        names.sort();
        Ok(names)
    }

    fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let txn = self.db()?.begin_write().map_err(err)?;
        {
            let mut t = txn.open_table(table(tree)).map_err(err)?;
            for (k, v) in &entries {
                t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(e: &RedbEngine, key: &[u8]) {
        let op = WriteOp {
            tree: "t",
            key: key.to_vec(),
            value: Some(b"v".to_vec()),
        };
        e.apply(vec![op], true).unwrap();
    }

    /// A process ends without dropping what its threads hold (the flusher
    /// holds the database): only `close` leaves the file as redb's own
    /// shutdown does, which a read-only open checks.
    #[test]
    fn a_closed_store_opens_without_recovery_and_keeps_its_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        let e = RedbEngine::open(&path, 1 << 20).unwrap();
        write(&e, b"a");
        let reader = e.db().unwrap();
        let closing = std::thread::spawn(move || {
            // A read in flight when the close begins.
            std::thread::sleep(Duration::from_millis(50));
            drop(reader);
        });
        e.close().unwrap();
        closing.join().unwrap();
        assert!(e.get("t", b"a").is_err(), "closed: no more reads");
        let ro = redb::ReadOnlyDatabase::open(&path).expect("opens without repair");
        let t = ro.begin_read().unwrap();
        let table = t.open_table(table("t")).unwrap();
        assert_eq!(table.get(b"a".as_slice()).unwrap().unwrap().value(), b"v");
    }
}
