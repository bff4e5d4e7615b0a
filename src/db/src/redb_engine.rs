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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
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
    db: Arc<Database>,
    path: PathBuf,
    /// Set after a non-durable commit, cleared by the flusher.
    dirty: Arc<AtomicBool>,
    /// Dropping the sender stops the flusher, which then flushes once more.
    flusher: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
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
            db,
            path: path.to_path_buf(),
            dirty,
            flusher: Some((stop, handle)),
        })
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
        if let Some((stop, handle)) = self.flusher.take() {
            drop(stop);
            let _ = handle.join();
        }
    }
}

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.db.begin_read().map_err(err)?;
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
        let txn = self.db.begin_read().map_err(err)?;
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
        let mut txn = self.db.begin_write().map_err(err)?;
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
        let r = durable_commit(&self.db);
        if r.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        r
    }

    fn size_on_disk(&self) -> Result<u64> {
        std::fs::metadata(&self.path).map(|m| m.len()).map_err(err)
    }

    fn trees(&self) -> Result<Vec<String>> {
        let txn = self.db.begin_read().map_err(err)?;
        let mut names: Vec<String> = txn
            .list_tables()
            .map_err(err)?
            .map(|h| h.name().to_string())
            .collect();
        names.sort();
        Ok(names)
    }

    fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let txn = self.db.begin_write().map_err(err)?;
        {
            let mut t = txn.open_table(table(tree)).map_err(err)?;
            for (k, v) in &entries {
                t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }
}
