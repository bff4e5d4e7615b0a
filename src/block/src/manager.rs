//! The block manager: stores and reads blocks, keeping files and reference
//! counts consistent with each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hangar_db::{Db, DbError, Tx};
use hangar_util::Hash;
use hangar_util::low_priority::LowPriorityPool;
use hangar_util::time::now_msec;
use tokio::sync::Mutex;

use crate::files::{EncodedBlock, StoredBlock};
use crate::messages::{CheckReply, HaveBlock};
use crate::refcount::{self, add_ref, remove_ref, tx_has_live_ref};
use crate::resync_queue;
use crate::{BlockError, BlockFiles, Result};

const LOCK_STRIPES: usize = 1024;

/// Threads of [`BlockManager::background`]: enough for the default resync
/// window's transfers and a scrub to each have one.
const BACKGROUND_THREADS: usize = 4;

/// Counters of the block store, for metrics.
#[derive(Debug, Default)]
pub struct BlockStats {
    pub blocks_written: AtomicU64,
    pub bytes_written_plain: AtomicU64,
    pub bytes_written_stored: AtomicU64,
    pub blocks_deduplicated: AtomicU64,
    pub blocks_read: AtomicU64,
    pub blocks_deleted: AtomicU64,
    pub corrupt_reads: AtomicU64,
    /// Block copies sent to other nodes by `ReplicatedBlocks::put` and
    /// acknowledged.
    pub remote_puts: AtomicU64,
    /// Block copies of `ReplicatedBlocks::put` that failed or timed out
    /// (this node's own copy included).
    pub remote_put_errors: AtomicU64,
    /// Copies received from other nodes and stored (or found present).
    pub puts_received: AtomicU64,
    /// Copies received from other nodes and refused (bad size or content).
    pub puts_refused: AtomicU64,
    /// Blocks read from another node by `ReplicatedBlocks::get`.
    pub remote_gets: AtomicU64,
    /// Reads from another node that failed (error, timeout, not found).
    pub remote_get_errors: AtomicU64,
    /// Reads that asked a further replica because the first was slow.
    pub hedged_reads: AtomicU64,
    /// Copies, here or on another node, found not to match their hash.
    pub corrupt_replicas: AtomicU64,
    /// Puts refused because the RAM budget stayed spent past the deadline.
    pub puts_overloaded: AtomicU64,
    /// Bytes of the RAM budget in use by puts (foreground and background).
    pub ram_in_use_bytes: AtomicU64,
    /// Bytes held for copies still being sent after their put returned.
    pub background_pending_bytes: AtomicU64,
    /// Copies still being sent after their put returned.
    pub background_copies_pending: AtomicU64,
    /// Copies given up after their put returned, because their node's
    /// stragglers held their cap or the copy ran past its deadline
    /// (`stragglers.rs`); the replica's resync brings it those blocks.
    pub background_copies_abandoned: AtomicU64,
    /// Local copies found corrupt and moved to quarantine.
    pub blocks_quarantined: AtomicU64,
    /// Resync reads of other nodes answered `deferred` because this node's
    /// clients were being served (the caller had another source).
    pub resync_deferred: AtomicU64,
    /// Blocks read for other nodes' resync (`resync_get`) and sent.
    pub resync_served: AtomicU64,
}

/// Blocks of this node: files plus reference counts.
///
/// A block's file and its count row are only changed under that block's
/// lock (striped by hash), so the GC can never delete a file between an
/// upload finding it on disk and the upload's reference being committed.
pub struct BlockManager {
    files: BlockFiles,
    db: Db,
    locks: Vec<Mutex<()>>,
    /// How long a count must stay zero before the file is deleted (ms).
    pub(crate) grace_msec: u64,
    stats: BlockStats,
    /// Where the file work of background tasks runs (blocks fetched or
    /// handed over, checked or served for another node's resync, scrubbed):
    /// below the priority of client work, which uses tokio's blocking pool.
    background: LowPriorityPool,
}

impl BlockManager {
    pub fn new(files: BlockFiles, db: Db, grace_msec: u64) -> Arc<Self> {
        Arc::new(BlockManager {
            files,
            db,
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            grace_msec,
            stats: BlockStats::default(),
            background: LowPriorityPool::new("hangar-block-bg", BACKGROUND_THREADS)
                .expect("starting the background block threads"),
        })
    }

    pub(crate) fn lock_for(&self, hash: &Hash) -> &Mutex<()> {
        let b = hash.as_bytes();
        &self.locks[(u16::from_be_bytes([b[0], b[1]]) as usize) % LOCK_STRIPES]
    }

    pub(crate) fn files(&self) -> &BlockFiles {
        &self.files
    }

    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The block files (for their settings: compression level).
    pub fn block_files(&self) -> &BlockFiles {
        &self.files
    }

    /// This node's metadata store (where `resync_todo` lives).
    pub fn metadata(&self) -> &Db {
        &self.db
    }

    pub fn stats(&self) -> &BlockStats {
        &self.stats
    }

    /// Stores `data` (whose blake3 hash is `hash`) as a block used by
    /// `version`, and runs `also` in the same transaction that records the
    /// reference (the caller's row naming the block). Returns how the block
    /// was stored.
    pub async fn store<F>(
        &self,
        hash: Hash,
        data: Bytes,
        version: [u8; 16],
        also: F,
    ) -> Result<StoredBlock>
    where
        F: FnOnce(&mut Tx<'_>) -> std::result::Result<(), DbError> + Send + 'static,
    {
        let files = self.files.clone();
        self.store_with(hash, version, also, move || files.write(&hash, &data))
            .await
    }

    /// Like [`Self::store`] for data that does not compress (sealed SSE-C
    /// blocks): stored as given, never compressed.
    pub async fn store_incompressible(
        &self,
        hash: Hash,
        data: Bytes,
        version: [u8; 16],
    ) -> Result<StoredBlock> {
        let files = self.files.clone();
        self.store_with(
            hash,
            version,
            |_| Ok(()),
            move || files.write_as(&hash, &data, false),
        )
        .await
    }

    /// Stores a block received in its stored form (from another node) as a
    /// block used by `version`, exactly as [`Self::store`] does (count row,
    /// file, reference, under the block's lock), without recompressing it.
    /// The content is checked first ([`EncodedBlock::decode`]): a block that
    /// does not match `hash` or its announced length is refused with
    /// [`BlockError::Corrupt`] and nothing is written.
    pub async fn store_encoded(
        &self,
        hash: Hash,
        enc: EncodedBlock,
        version: [u8; 16],
    ) -> Result<StoredBlock> {
        let checked = enc.clone();
        tokio::task::spawn_blocking(move || checked.decode(&hash).map(drop))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))??;
        self.store_own_encoded(hash, enc, version).await
    }

    /// Stores a block this node encoded itself from data whose hash it
    /// computed (its own put, through the mesh's local call) as
    /// [`Self::store_encoded`] does, without decoding it again to check it.
    pub async fn store_own_encoded(
        &self,
        hash: Hash,
        enc: EncodedBlock,
        version: [u8; 16],
    ) -> Result<StoredBlock> {
        let files = self.files.clone();
        self.store_with(
            hash,
            version,
            |_| Ok(()),
            move || files.write_encoded(&hash, &enc),
        )
        .await
    }

    /// The common path of the stores: `write` (blocking) writes the file.
    async fn store_with<F, W>(
        &self,
        hash: Hash,
        version: [u8; 16],
        also: F,
        write: W,
    ) -> Result<StoredBlock>
    where
        F: FnOnce(&mut Tx<'_>) -> std::result::Result<(), DbError> + Send + 'static,
        W: FnOnce() -> Result<StoredBlock> + Send + 'static,
    {
        let _guard = self.lock_for(&hash).lock().await;
        self.queue_touch(hash).await?;
        let stored = tokio::task::spawn_blocking(write)
            .await
            .map_err(|e| BlockError::Task(e.to_string()))??;
        self.db
            .write(move |tx| {
                add_ref(tx, &hash, &version)?;
                also(tx)
            })
            .await?;
        if stored.written {
            self.stats.blocks_written.fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_written_stored
                .fetch_add(stored.stored_len, Ordering::Relaxed);
            self.stats
                .bytes_written_plain
                .fetch_add(stored.plain_len, Ordering::Relaxed);
        } else {
            self.stats
                .blocks_deduplicated
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(stored)
    }

    /// Queues a count row (and a GC visit) for a block about to be
    /// written, so that a file whose upload dies before its reference is
    /// reclaimed. Queued, not awaited: the committer applies writes in
    /// order, so it is durable no later than the reference written after
    /// the file, and the file's write and fsync overlap its commit instead
    /// of waiting for it. A crash between the file and that commit leaves a
    /// file without a row, which the start-up scan ([`crate::scan`]) gives
    /// one.
    async fn queue_touch(&self, hash: Hash) -> Result<()> {
        self.db
            .write_queued("block count row", move |tx| {
                refcount::touch(tx, &hash, now_msec())
            })
            .await?;
        Ok(())
    }

    /// Records that `version` uses block `hash` if the block's file is
    /// still there; returns whether it was. Under the block's lock, as the
    /// GC's deletion is, so a block is never deleted after this returned
    /// true (its count is no longer zero).
    pub async fn add_ref_existing(&self, hash: Hash, version: [u8; 16]) -> Result<bool> {
        let _guard = self.lock_for(&hash).lock().await;
        if !self.files.exists(&hash) {
            return Ok(false);
        }
        self.db
            .write(move |tx| add_ref(tx, &hash, &version))
            .await?;
        Ok(true)
    }

    /// Records that `version` no longer uses block `hash` on this node
    /// (idempotent); a block left unreferenced is deleted after the grace
    /// delay. Under the block's lock, like a store.
    pub async fn unref(&self, hash: Hash, version: [u8; 16]) -> Result<()> {
        let _guard = self.lock_for(&hash).lock().await;
        self.db
            .write(move |tx| remove_ref(tx, &hash, &version))
            .await?;
        Ok(())
    }

    /// Like [`Self::unref`] for every block of `hashes`, but only where this
    /// node holds a live reference (no tombstone is written for a reference
    /// it never had: a node that does not store a block's partition keeps
    /// no rows of it). In one transaction.
    pub async fn unref_held(&self, hashes: Vec<Hash>, version: [u8; 16]) -> Result<()> {
        self.db
            .write(move |tx| {
                for h in &hashes {
                    if tx_has_live_ref(tx, h, &version)? {
                        remove_ref(tx, h, &version)?;
                    }
                }
                Ok::<_, DbError>(())
            })
            .await?;
        Ok(())
    }

    /// Stores a block fetched or handed over by another node, without
    /// touching its references (they travel in the `block_refs` table):
    /// checked first like [`Self::store_encoded`], then written under the
    /// block's lock. A block without live references here gets a GC visit
    /// like any other new file. Returns whether this call wrote the file.
    /// The check and the write run on the low-priority threads: a client's
    /// upload of the same block meanwhile waits for the block's lock.
    pub async fn store_fetched(&self, hash: Hash, enc: EncodedBlock) -> Result<bool> {
        let checked = enc.clone();
        self.in_background(move || checked.decode(&hash).map(drop))
            .await?;
        let _guard = self.lock_for(&hash).lock().await;
        self.queue_touch(hash).await?;
        let files = self.files.clone();
        let stored = self
            .in_background(move || files.write_encoded(&hash, &enc))
            .await?;
        if stored.written {
            self.stats.blocks_written.fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_written_stored
                .fetch_add(stored.stored_len, Ordering::Relaxed);
            self.stats
                .bytes_written_plain
                .fetch_add(stored.plain_len, Ordering::Relaxed);
        }
        Ok(stored.written)
    }

    /// Whether this node has block `hash`'s file and a live reference.
    pub async fn have(&self, hash: Hash) -> Result<HaveBlock> {
        let referenced = self.refcount(hash).await? > 0;
        Ok(HaveBlock {
            file: self.files.exists(&hash),
            referenced,
        })
    }

    /// Reads this node's copy of `hash` whole and checks it against its
    /// name; a corrupt copy is quarantined ([`BlockFiles::quarantine`]) and
    /// the block queued for resync. A background task's work (scrub, a
    /// resync's check of a copy): it runs on the low-priority threads.
    pub async fn verify(&self, hash: Hash) -> Result<CheckReply> {
        let files = self.files.clone();
        let r = self
            .in_background(move || {
                files
                    .read_encoded(&hash)
                    .and_then(|enc| enc.decode(&hash).map(drop))
            })
            .await;
        match r {
            Ok(()) => Ok(CheckReply::Good),
            Err(BlockError::Missing(_)) => Ok(CheckReply::Missing),
            Err(e @ BlockError::Corrupt { .. }) => {
                if let Err(q) = self.quarantine(hash, &e.to_string()).await {
                    tracing::error!("block {hash}: {e}; cannot quarantine it: {q}");
                }
                Ok(CheckReply::Quarantined)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves this node's corrupt copy of `hash` aside and queues the block
    /// for resync, which fetches a good copy if the block is still needed.
    pub async fn quarantine(&self, hash: Hash, why: &str) -> Result<()> {
        let _guard = self.lock_for(&hash).lock().await;
        let files = self.files.clone();
        let moved = tokio::task::spawn_blocking(move || files.quarantine(&hash))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))??;
        if !moved.is_empty() {
            self.stats
                .blocks_quarantined
                .fetch_add(1, Ordering::Relaxed);
            tracing::error!("block {hash}: {why}; quarantined as {}", moved[0].display());
        }
        resync_queue::enqueue(&self.db, vec![hash], now_msec()).await
    }

    /// Deletes this node's file of `hash` once its new holders have it
    /// (the resync worker's hand-over), under the block's lock, then the
    /// block's reference rows and count here: this node no longer stores
    /// the partition, so no replica syncs these rows with it, and kept they
    /// would go stale (a reference deleted later would stay live here).
    pub(crate) async fn delete_handed_over(&self, hash: Hash) -> Result<()> {
        let _guard = self.lock_for(&hash).lock().await;
        let files = self.files.clone();
        tokio::task::spawn_blocking(move || files.delete(&hash))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))??;
        self.note_deleted();
        let refs = hangar_table::Replica::<crate::refcount::BlockRefTable>::new(self.db.clone());
        loop {
            let rows = refs
                .range(
                    hash.as_bytes(),
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    false,
                    1000,
                )
                .await
                .map_err(|e| BlockError::Db(e.into()))?;
            let last = rows.len() < 1000;
            self.db
                .write(move |tx| {
                    for (version, _) in &rows {
                        hangar_table::Replica::<crate::refcount::BlockRefTable>::tx_remove(
                            tx,
                            hash.as_bytes(),
                            version,
                        )?;
                    }
                    if last {
                        tx.delete(refcount::RC_TREE, hash.as_bytes().to_vec());
                    }
                    Ok::<_, DbError>(())
                })
                .await?;
            if last {
                return Ok(());
            }
        }
    }

    /// Reads block `hash` as stored, unchecked (to send to another node).
    pub async fn read_encoded(&self, hash: Hash) -> Result<EncodedBlock> {
        let files = self.files.clone();
        tokio::task::spawn_blocking(move || files.read_encoded(&hash))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?
    }

    /// [`Self::read_encoded`] for a background task (a block served to
    /// another node's resync or handed over): on the low-priority threads.
    pub async fn read_encoded_in_background(&self, hash: Hash) -> Result<EncodedBlock> {
        let files = self.files.clone();
        self.in_background(move || files.read_encoded(&hash)).await
    }

    /// Runs `f` on the low-priority threads of background work.
    async fn in_background<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.background
            .run(f)
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?
    }

    /// Reads block `hash`.
    pub async fn read(&self, hash: Hash) -> Result<Bytes> {
        let files = self.files.clone();
        let r = tokio::task::spawn_blocking(move || files.read(&hash))
            .await
            .map_err(|e| BlockError::Task(e.to_string()))?;
        match &r {
            Ok(_) => {
                self.stats.blocks_read.fetch_add(1, Ordering::Relaxed);
            }
            Err(e @ BlockError::Corrupt { .. }) => {
                self.stats.corrupt_reads.fetch_add(1, Ordering::Relaxed);
                if let Err(q) = self.quarantine(hash, &e.to_string()).await {
                    tracing::error!("block {hash}: {e}; cannot quarantine it: {q}");
                }
            }
            Err(_) => {}
        }
        r
    }

    /// The size of the block's file as stored, if it is there.
    pub fn stored_len(&self, hash: &Hash) -> Option<u64> {
        self.files.stored_len(hash)
    }

    /// Whether the block's file is present.
    pub fn has_file(&self, hash: &Hash) -> bool {
        self.files.exists(hash)
    }

    /// The current reference count of `hash` (0 when unknown).
    pub async fn refcount(&self, hash: Hash) -> Result<u64> {
        Ok(self
            .db
            .get_async(refcount::RC_TREE, hash.as_bytes().to_vec())
            .await?
            .map(|v| refcount::RcRow::decode(&v))
            .transpose()?
            .map(|r| r.count)
            .unwrap_or(0))
    }

    pub(crate) fn note_deleted(&self) {
        self.stats.blocks_deleted.fetch_add(1, Ordering::Relaxed);
    }
}
