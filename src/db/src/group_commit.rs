//! Group commit: many writers, one committer, one sync per batch.
//!
//! A writer hands [`Db::write`] a closure that reads and writes through a
//! [`Tx`]. The committer thread takes every closure waiting in the queue (up
//! to `max_batch`), runs them one after the other — each sees the writes of
//! those before it — applies the surviving writes as one atomic engine batch,
//! and answers every writer once that batch is synced (with `fsync`). A
//! closure that returns an error has its own writes discarded and gets its
//! own error back; its batch-mates are unaffected. If the engine fails to
//! apply or sync the batch, every writer of that batch gets the error and
//! none of them is acknowledged. How the fsync of one batch overlaps the next
//! is described in `committer.rs`.
//!
//! There is no timer: a writer arriving at an idle committer is served at
//! once, and writers arriving while a sync is under way form the next batch.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::{mpsc, oneshot};

use crate::committer::{Pipelining, committer};
use crate::tx::{Job, Msg, Tx};
use crate::{DbError, Engine, Result};

/// Options of the group committer.
#[derive(Debug, Clone, Copy)]
pub struct DbOptions {
    /// Sync every batch to disk before acknowledging it (`metadata_fsync`).
    pub fsync: bool,
    /// Most writes in one batch; 1 disables batching (one sync per write).
    pub max_batch: usize,
    /// Writes that may wait for the committer before writers are held back.
    pub queue_len: usize,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            fsync: false,
            max_batch: 256,
            queue_len: 4096,
        }
    }
}

/// Counters of the committer, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct CommitStats {
    pub batches: AtomicU64,
    pub writes: AtomicU64,
    pub failed_writes: AtomicU64,
    pub syncs: AtomicU64,
    /// When the engine began applying the batch it is applying now (ms
    /// since the epoch), 0 when it is not: [`Db::applying_for`].
    pub applying_since_msec: AtomicU64,
}

/// The metadata store: an engine plus its group committer.
#[derive(Clone)]
pub struct Db {
    engine: Arc<dyn Engine>,
    jobs: mpsc::Sender<Msg>,
    stats: Arc<CommitStats>,
}

impl Db {
    /// Starts the committer thread over `engine`.
    pub fn new(engine: Arc<dyn Engine>, opts: DbOptions) -> Db {
        Db::with_pipelining(engine, opts, Pipelining::On)
    }

    /// Starts the committer thread over `engine`, choosing whether a batch's
    /// fsync may overlap the next batch ([`Db::new`] says yes).
    pub fn with_pipelining(engine: Arc<dyn Engine>, opts: DbOptions, p: Pipelining) -> Db {
        let (jobs, rx) = mpsc::channel(opts.queue_len.max(1));
        let stats = Arc::new(CommitStats::default());
        let (e, s, wake) = (engine.clone(), stats.clone(), jobs.downgrade());
        std::thread::Builder::new()
            .name("db-committer".into())
            .spawn(move || committer(e, rx, wake, opts, s, p))
            .expect("spawn db committer thread");
        Db {
            engine,
            jobs,
            stats,
        }
    }

    /// The engine's name.
    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    /// The underlying engine, for reads.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// Committer counters.
    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }

    /// How long the engine has been applying (and syncing) the batch it
    /// is applying now; `None` when it is not. A disk that stopped taking
    /// writes (frozen, failing, a hung controller) shows as a duration
    /// that keeps growing, while reads may still be served from the cache.
    pub fn applying_for(&self) -> Option<std::time::Duration> {
        match self
            .stats
            .applying_since_msec
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => None,
            since => Some(std::time::Duration::from_millis(
                hangar_util::time::now_msec().saturating_sub(since),
            )),
        }
    }

    /// Runs `f` in the next group commit and returns its result once the batch
    /// holding its writes is applied (and synced, with `fsync`). On error,
    /// none of `f`'s writes are applied.
    pub async fn write<R, E, F>(&self, f: F) -> std::result::Result<R, E>
    where
        F: FnOnce(&mut Tx<'_>) -> std::result::Result<R, E> + Send + 'static,
        R: Send + 'static,
        E: From<DbError> + Send + 'static,
    {
        let (s, r) = oneshot::channel::<std::result::Result<R, E>>();
        let job: Job = Box::new(move |tx| match f(tx) {
            Ok(v) => (
                true,
                Box::new(move |committed: Result<()>| {
                    let _ = s.send(committed.map(|_| v).map_err(E::from));
                }),
            ),
            Err(e) => (
                false,
                Box::new(move |_| {
                    let _ = s.send(Err(e));
                }),
            ),
        });
        self.jobs
            .send(Msg::Job(job))
            .await
            .map_err(|_| DbError::Closed)?;
        r.await.map_err(|_| DbError::Closed)?
    }

    /// Queues `f` for the next group commit and returns once it is queued,
    /// without waiting for the commit: for a write that need not be durable
    /// before the caller answers, because recovery after a crash tolerates
    /// its loss (the end of an upload's record, whose row already names the
    /// upload). Writes are applied in the order they are queued, so a later
    /// write of this node never lands before it. The queue is bounded: this
    /// waits while it is full. A failure is logged, not returned.
    pub async fn write_queued<E, F>(&self, what: &'static str, f: F) -> Result<()>
    where
        F: FnOnce(&mut Tx<'_>) -> std::result::Result<(), E> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let job: Job = Box::new(move |tx| match f(tx) {
            Ok(()) => (
                true,
                Box::new(move |committed: Result<()>| {
                    if let Err(e) = committed {
                        tracing::warn!("{what}: queued write not committed: {e}");
                    }
                }),
            ),
            Err(e) => (
                false,
                Box::new(move |_| tracing::warn!("{what}: queued write failed: {e}")),
            ),
        });
        self.jobs
            .send(Msg::Job(job))
            .await
            .map_err(|_| DbError::Closed)
    }

    /// Makes every write acknowledged so far durable, on the blocking pool.
    /// With `metadata_fsync` on they already are; with it off, a node calls
    /// this on a clean shutdown instead of relying on the engine's 500 ms
    /// background flush.
    pub async fn sync_async(&self) -> Result<()> {
        let e = self.engine.clone();
        blocking(move || e.sync()).await
    }

    /// Makes every write durable and closes the engine ([`Engine::close`]):
    /// for a node stopping, after its servers and workers stopped writing.
    pub async fn close_async(&self) -> Result<()> {
        let e = self.engine.clone();
        blocking(move || e.close()).await
    }

    /// Reads one key (blocking; see [`Db::get_async`]).
    pub fn get(&self, tree: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.engine.get(tree, key)
    }

    /// Reads one key, in the caller's task. A point read is a few
    /// microseconds when its pages are in the engine's or the kernel's
    /// cache, as a request's key, bucket and object rows are; handing it to
    /// the blocking pool cost more than the read (a 4 KiB PUT made seven,
    /// about 10 µs each and a pool thread's wake-up; measured in
    /// doc/put-cost.md). A read that misses both caches holds the
    /// worker for one disk read, as a read of Garage's engines does.
    pub async fn get_async(&self, tree: &'static str, key: Vec<u8>) -> Result<Option<Vec<u8>>> {
        self.engine.get(tree, &key)
    }

    /// Reads a range (blocking; see [`Db::range_async`]).
    pub fn range(
        &self,
        tree: &'static str,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.engine.range(tree, start, end, reverse, limit)
    }

    /// Reads up to `limit` entries in `[start, end)` (unbounded when `None`)
    /// on the blocking pool.
    pub async fn range_async(
        &self,
        tree: &'static str,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let e = self.engine.clone();
        blocking(move || {
            e.range(
                tree,
                start.as_ref().map(|v| v.as_slice()),
                end.as_ref().map(|v| v.as_slice()),
                reverse,
                limit,
            )
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DbError::Engine {
            engine: "blocking pool",
            message: e.to_string(),
        })?
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::SledEngine;

    fn open(fsync: bool, max_batch: usize) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(dir.path(), 16 << 20).unwrap();
        let db = Db::new(
            Arc::new(engine),
            DbOptions {
                fsync,
                max_batch,
                queue_len: 1024,
            },
        );
        (dir, db)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_are_batched_and_all_applied() {
        let (_d, db) = open(true, 256);
        let mut handles = Vec::new();
        for i in 0..200u32 {
            let db = db.clone();
            handles.push(tokio::spawn(async move {
                db.write(move |tx| {
                    tx.put("t", i.to_be_bytes().to_vec(), vec![1]);
                    Ok::<_, DbError>(i)
                })
                .await
            }));
        }
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.await.unwrap().unwrap(), i as u32);
        }
        let all = db
            .range("t", Bound::Unbounded, Bound::Unbounded, false, 1000)
            .unwrap();
        assert_eq!(all.len(), 200);
        let s = db.stats();
        assert_eq!(s.writes.load(Ordering::Relaxed), 200);
        assert!(s.batches.load(Ordering::Relaxed) <= 200);
    }

    #[tokio::test]
    async fn a_failing_writer_does_not_fail_its_batch_mates() {
        let (_d, db) = open(false, 256);
        let ok = db.write(|tx| {
            tx.put("t", b"a".to_vec(), b"1".to_vec());
            Ok::<_, DbError>(())
        });
        let bad = db.write(|tx| {
            tx.put("t", b"b".to_vec(), b"2".to_vec());
            Err::<(), _>(DbError::Closed)
        });
        let (ok, bad) = tokio::join!(ok, bad);
        ok.unwrap();
        assert!(bad.is_err());
        assert_eq!(db.get("t", b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get("t", b"b").unwrap(), None);
    }

    #[tokio::test]
    async fn queued_writes_land_in_order_before_later_writes() {
        let (_d, db) = open(true, 256);
        for i in 0..50u8 {
            db.write_queued("test", move |tx| {
                tx.put("q", vec![i], vec![i]);
                Ok::<_, DbError>(())
            })
            .await
            .unwrap();
        }
        db.write_queued("test", |tx| {
            tx.put("q", vec![99], vec![1]);
            Err::<(), _>(DbError::Closed)
        })
        .await
        .unwrap();
        // A write queued after them sees every one, and once it is
        // acknowledged they are all committed; the failed one wrote nothing.
        let seen = db
            .write(|tx| {
                let mut n = 0;
                for i in 0..50u8 {
                    n += usize::from(tx.get("q", &[i])?.is_some());
                }
                Ok::<_, DbError>(n)
            })
            .await
            .unwrap();
        assert_eq!(seen, 50);
        let all = db
            .range("q", Bound::Unbounded, Bound::Unbounded, false, 1000)
            .unwrap();
        assert_eq!(all.len(), 50);
        assert_eq!(db.get("q", &[99]).unwrap(), None);
    }

    #[tokio::test]
    async fn writers_see_earlier_writes_of_their_batch() {
        let (_d, db) = open(false, 256);
        let incr = |db: Db| async move {
            db.write(|tx| {
                let n = tx
                    .get("c", b"n")?
                    .map(|v| u64::from_be_bytes(v.try_into().unwrap()))
                    .unwrap_or(0);
                tx.put("c", b"n".to_vec(), (n + 1).to_be_bytes().to_vec());
                Ok::<_, DbError>(())
            })
            .await
        };
        let futs: Vec<_> = (0..100).map(|_| tokio::spawn(incr(db.clone()))).collect();
        for f in futs {
            f.await.unwrap().unwrap();
        }
        let v = db.get("c", b"n").unwrap().unwrap();
        assert_eq!(u64::from_be_bytes(v.try_into().unwrap()), 100);
    }

    #[tokio::test]
    async fn trees_are_separate_and_ranges_are_bounded() {
        let (_d, db) = open(false, 1);
        db.write(|tx| {
            for i in 0u8..10 {
                tx.put("a", vec![i], vec![i]);
                tx.put("ab", vec![i], vec![i]);
            }
            tx.delete("a", vec![3]);
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        let a = db
            .range_async(
                "a",
                Bound::Included(vec![2]),
                Bound::Excluded(vec![6]),
                false,
                100,
            )
            .await
            .unwrap();
        assert_eq!(
            a.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        let rev = db
            .range("a", Bound::Unbounded, Bound::Unbounded, true, 2)
            .unwrap();
        assert_eq!(
            rev.iter().map(|(k, _)| k[0]).collect::<Vec<_>>(),
            vec![9, 8]
        );
        assert_eq!(
            db.range("ab", Bound::Unbounded, Bound::Unbounded, false, 100)
                .unwrap()
                .len(),
            10
        );
    }

    /// Read-modify-write across batches with fsync on, both committer
    /// designs: a closure must see every earlier batch, synced or not yet.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pipelined_batches_see_the_batches_before_them() {
        for p in [Pipelining::On, Pipelining::Off] {
            let dir = tempfile::tempdir().unwrap();
            let engine = Arc::new(SledEngine::open(dir.path(), 16 << 20).unwrap());
            let opts = DbOptions {
                fsync: true,
                max_batch: 8,
                queue_len: 1024,
            };
            let db = Db::with_pipelining(engine, opts, p);
            let tasks: Vec<_> = (0..300)
                .map(|_| {
                    let db = db.clone();
                    tokio::spawn(async move {
                        db.write(|tx| {
                            let n = tx
                                .get("c", b"n")?
                                .map(|v| u64::from_be_bytes(v.try_into().unwrap()))
                                .unwrap_or(0);
                            tx.put("c", b"n".to_vec(), (n + 1).to_be_bytes().to_vec());
                            Ok::<_, DbError>(())
                        })
                        .await
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            let v = db.get("c", b"n").unwrap().unwrap();
            assert_eq!(u64::from_be_bytes(v.try_into().unwrap()), 300, "{p:?}");
            let s = db.stats();
            assert!(s.batches.load(Ordering::Relaxed) >= 300 / 8);
            assert!(s.syncs.load(Ordering::Relaxed) <= s.batches.load(Ordering::Relaxed));
        }
    }

    #[tokio::test]
    async fn a_panicking_writer_fails_alone() {
        let (_d, db) = open(true, 256);
        let bad = db.write(|tx| {
            tx.put("t", b"p".to_vec(), b"x".to_vec());
            if tx.get("t", b"p")?.is_some() {
                panic!("writer bug");
            }
            Ok::<_, DbError>(())
        });
        let good = db.write(|tx| {
            tx.put("t", b"g".to_vec(), b"1".to_vec());
            Ok::<_, DbError>(())
        });
        let (bad, good) = tokio::join!(bad, good);
        assert!(bad.is_err());
        good.unwrap();
        // The committer is still there.
        db.write(|tx| {
            tx.put("t", b"after".to_vec(), b"1".to_vec());
            Ok::<_, DbError>(())
        })
        .await
        .unwrap();
        assert_eq!(db.get("t", b"p").unwrap(), None);
        assert_eq!(db.get("t", b"g").unwrap(), Some(b"1".to_vec()));
    }

    /// A real sled store whose sync fails once asked to, and whose apply
    /// waits while `stall` is set: an fsync error or a disk that stops
    /// taking writes cannot be provoked on a healthy disk.
    struct Faulty {
        inner: SledEngine,
        fail: std::sync::atomic::AtomicBool,
        stall: std::sync::atomic::AtomicBool,
    }

    impl Faulty {
        fn new(dir: &std::path::Path) -> Faulty {
            Faulty {
                inner: SledEngine::open(dir, 16 << 20).unwrap(),
                fail: std::sync::atomic::AtomicBool::new(false),
                stall: std::sync::atomic::AtomicBool::new(false),
            }
        }
    }

    impl Engine for Faulty {
        fn name(&self) -> &'static str {
            "failing-sync"
        }
        fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(tree, key)
        }
        fn range(
            &self,
            tree: &str,
            start: Bound<&[u8]>,
            end: Bound<&[u8]>,
            reverse: bool,
            limit: usize,
        ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.inner.range(tree, start, end, reverse, limit)
        }
        fn apply(&self, batch: Vec<crate::WriteOp>, sync: bool) -> Result<()> {
            while self.stall.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.inner.apply(batch, false)?;
            if sync { self.sync() } else { Ok(()) }
        }
        fn sync(&self) -> Result<()> {
            if self.fail.load(Ordering::Relaxed) {
                return Err(DbError::engine("failing-sync", "EIO"));
            }
            self.inner.sync()
        }
        fn size_on_disk(&self) -> Result<u64> {
            self.inner.size_on_disk()
        }
        fn trees(&self) -> Result<Vec<String>> {
            self.inner.trees()
        }
        fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
            self.inner.load(tree, entries)
        }
    }

    /// A store with fsync over a [`Faulty`] engine in a fresh directory.
    fn faulty_db(p: Pipelining) -> (tempfile::TempDir, Arc<Faulty>, Db) {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(Faulty::new(dir.path()));
        let opts = DbOptions {
            fsync: true,
            max_batch: 256,
            queue_len: 16,
        };
        let db = Db::with_pipelining(engine.clone(), opts, p);
        (dir, engine, db)
    }

    #[tokio::test]
    async fn a_failed_sync_refuses_every_later_write() {
        for p in [Pipelining::On, Pipelining::Off] {
            let (_dir, engine, db) = faulty_db(p);
            let put = |k: &'static [u8]| {
                let db = db.clone();
                async move {
                    db.write(move |tx| {
                        tx.put("t", k.to_vec(), b"1".to_vec());
                        Ok::<_, DbError>(())
                    })
                    .await
                }
            };
            put(b"before").await.unwrap();
            engine.fail.store(true, Ordering::Relaxed);
            assert!(put(b"failed").await.is_err(), "{p:?}");
            // The disk "recovers", but the store stays refused.
            engine.fail.store(false, Ordering::Relaxed);
            assert!(put(b"after").await.is_err(), "{p:?}");
            assert_eq!(db.get("t", b"after").unwrap(), None);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_apply_shows_how_long_it_has_waited() {
        for p in [Pipelining::On, Pipelining::Off] {
            let (_dir, engine, db) = faulty_db(p);
            assert_eq!(db.applying_for(), None);
            engine.stall.store(true, Ordering::Relaxed);
            let w = {
                let db = db.clone();
                tokio::spawn(async move {
                    db.write(|tx| {
                        tx.put("t", b"k".to_vec(), b"v".to_vec());
                        Ok::<_, DbError>(())
                    })
                    .await
                })
            };
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            let waited = db.applying_for().expect("the engine is applying");
            assert!(
                waited >= std::time::Duration::from_millis(300),
                "{waited:?}"
            );
            engine.stall.store(false, Ordering::Relaxed);
            w.await.unwrap().unwrap();
            assert_eq!(db.applying_for(), None, "{p:?}");
        }
    }
}
