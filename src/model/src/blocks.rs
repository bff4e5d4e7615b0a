//! The blocks of object versions: the service that owns each version's
//! block list (the version table, [`crate::block_list`]) and reaches the
//! cluster's block store ([`ReplicatedBlocks`], on the nodes the layout
//! assigns each block, and this node's own files). It stores a version's
//! blocks (entry first, reference second), reads them, finds the blocks of
//! a byte range, lets a copy or a completed upload share another version's
//! blocks, and drops a collected version's references. It promises that a
//! block named by a live entry keeps its reference, and that a reference no
//! entry names is never left behind (the entry is always written first).
//! It does not decide when a version dies: the object and upload tables'
//! hooks queue dead versions, and the version collector
//! ([`crate::garbage`]), woken by [`Blocks::wake_collector`], releases them.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use hangar_block::{BlockManager, ReplicatedBlocks};
use hangar_util::Hash;
use tokio::sync::Notify;

use crate::block_list::{BlockEntry, VersionTable};
use crate::version_parts::VersionPartTable;
use crate::{ModelError, Result, VersionId};
use hangar_table::Table;

/// The block service of one node.
pub struct Blocks {
    /// The cluster this node belongs to (of one node, alone or laid out).
    cluster: hangar_cluster::Cluster,
    /// This node's block files and references.
    local: Arc<BlockManager>,
    /// The cluster's blocks, on the nodes the layout assigns them.
    replicated: Arc<ReplicatedBlocks>,
    versions: Table<VersionTable>,
    /// Where each part of a completed upload's version lies.
    parts: Table<VersionPartTable>,
    collector_wakeup: Notify,
}

impl Blocks {
    pub(crate) fn new(
        cluster: hangar_cluster::Cluster,
        local: Arc<BlockManager>,
        replicated: Arc<ReplicatedBlocks>,
        versions: Table<VersionTable>,
        parts: Table<VersionPartTable>,
    ) -> Blocks {
        Blocks {
            cluster,
            local,
            replicated,
            versions,
            parts,
            collector_wakeup: Notify::new(),
        }
    }

    /// This node's block files and references, for tests that store blocks
    /// as an older binary did.
    #[cfg(test)]
    pub(crate) fn local(&self) -> &Arc<BlockManager> {
        &self.local
    }

    /// The block lists' rows.
    pub(crate) fn rows(&self) -> &Table<VersionTable> {
        &self.versions
    }

    /// The rows of completed uploads' parts ([`crate::version_parts`]).
    pub(crate) fn part_rows(&self) -> &Table<VersionPartTable> {
        &self.parts
    }

    /// Whether a block put of this node failed for overload within the
    /// last `window`.
    pub fn overloaded_within(&self, window: std::time::Duration) -> bool {
        self.replicated.overloaded_within(window)
    }

    /// Asks the version collector to run now.
    pub fn wake_collector(&self) {
        self.collector_wakeup.notify_one();
    }

    /// What the version collector waits on between passes.
    pub(crate) fn collector_wakeup(&self) -> &Notify {
        &self.collector_wakeup
    }

    /// Stores block number `index` of `version`, which starts at byte
    /// `offset` of the version, named by its blake3 hash (computed here, off
    /// the async threads).
    pub async fn store(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        data: Bytes,
    ) -> Result<()> {
        let plain_len = data.len() as u64;
        self.store_as(version, index, offset, plain_len, data, true)
            .await
    }

    /// Stores block `index` of an SSE-C version: `sealed` is the block as
    /// [`crate::sse_c::SseC::seal`] made it, named by its own blake3 hash
    /// (so equal plaintexts under other keys are other blocks) and never
    /// compressed; the entry records `plain_len`, the plaintext's length,
    /// which offsets and ranges count in.
    pub async fn store_sealed(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        plain_len: u64,
        sealed: Bytes,
    ) -> Result<()> {
        self.store_as(version, index, offset, plain_len, sealed, false)
            .await
    }

    async fn store_as(
        &self,
        version: VersionId,
        index: u32,
        offset: u64,
        plain_len: u64,
        data: Bytes,
        compress: bool,
    ) -> Result<()> {
        let (hash, data) = tokio::task::spawn_blocking(move || (Hash::of(&data), data))
            .await
            .map_err(|e| ModelError::Invalid(format!("hashing task failed: {e}")))?;
        let entry = BlockEntry {
            hash,
            size: plain_len,
            deleted: false,
            offset,
        };
        // The entry first: an entry whose block never got its reference is
        // harmless to the collector (dropping a reference that is not there
        // does nothing), a reference no entry names would never be dropped.
        self.versions
            .insert_one(&version, &index.to_be_bytes(), entry)
            .await?;
        if compress {
            self.replicated.put(hash, data, version).await?;
        } else {
            self.replicated
                .put_incompressible(hash, data, version)
                .await?;
        }
        Ok(())
    }

    /// The plain content of block `hash`: from this node's disk, or from
    /// the nodes that hold it (the closest first, hedged).
    pub async fn read(&self, hash: Hash) -> Result<Bytes> {
        Ok(self.replicated.get(hash).await?)
    }

    /// Adds `version`'s reference to block `hash` if the block is still
    /// stored; returns whether it was (a copy shares its source's blocks).
    async fn add_ref(&self, hash: Hash, version: VersionId) -> Result<bool> {
        Ok(self.replicated.add_ref(hash, version).await?)
    }

    /// Drops `version`'s references to `hashes`, wherever the blocks are.
    pub(crate) async fn drop_refs(&self, version: VersionId, hashes: Vec<Hash>) -> Result<()> {
        // The references this node holds of partitions it no longer stores
        // (a lone node's, written before a layout gave them to other
        // nodes): no unref below reaches them. Those of the partitions it
        // stores are dropped by the unref below, once.
        let moved: Vec<Hash> = hashes
            .iter()
            .filter(|h| {
                !self
                    .cluster
                    .stores_partition(hangar_layout::partition_of(h))
            })
            .copied()
            .collect();
        if !moved.is_empty() {
            self.local.unref_held(moved, version).await?;
        }
        let unrefs = futures::stream::iter(
            hashes
                .into_iter()
                .map(|h| async move { self.replicated.unref(h, version).await }),
        )
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
        for r in unrefs {
            r?;
        }
        Ok(())
    }

    /// Makes version `to` use the `count` blocks of version `from` (a copy
    /// shares blocks instead of duplicating them), and, for a version
    /// completed from parts (`multipart`), gives it `from`'s part
    /// boundaries; fails with [`ModelError::SourceChanged`] if `from` lost
    /// blocks meanwhile. `to` must have been registered with
    /// [`crate::Objects::begin_upload`].
    pub async fn share(
        &self,
        from: VersionId,
        count: u32,
        to: VersionId,
        multipart: bool,
    ) -> Result<()> {
        self.share_at(from, count, to, 0, 0).await?;
        // A version uploaded in one request has no parts to read.
        if multipart {
            self.share_parts(from, to).await?;
        }
        Ok(())
    }

    /// Makes version `to` use the `count` blocks of `from`, numbered from
    /// `first` and placed from byte `first_offset` of `to`. Offsets are
    /// recomputed from the block sizes, so a source written by row format 1
    /// (no offsets) gives entries with offsets. `to`'s entries are written
    /// before its references (as for any upload), and a reference is only
    /// added to a block whose file is still there, under the block's lock
    /// ([`hangar_block::BlockManager::add_ref_existing`]): a block the
    /// source's collection released is kept for the grace delay, so the
    /// reference either lands in time or finds the block gone. If the
    /// source lost any of its entries or blocks (it was overwritten or
    /// deleted and collected meanwhile), nothing more is shared and
    /// [`ModelError::SourceChanged`] is returned: the caller releases `to`.
    pub(crate) async fn share_at(
        &self,
        from: VersionId,
        count: u32,
        to: VersionId,
        first: u32,
        first_offset: u64,
    ) -> Result<()> {
        const BATCH: u32 = 256;
        let mut next = 0u32;
        let mut offset = first_offset;
        while next < count {
            let want = count.min(next.saturating_add(BATCH)) - next;
            let page = self
                .versions
                .range_numbered(&from, next, want as usize)
                .await?;
            let mut entries = Vec::with_capacity(page.len());
            for (k, (idx, mut e)) in page.into_iter().enumerate() {
                if idx != next + k as u32 || e.deleted {
                    return Err(ModelError::SourceChanged);
                }
                e.offset = offset;
                offset += e.size;
                entries.push(e);
            }
            if entries.len() != want as usize {
                return Err(ModelError::SourceChanged);
            }
            let rows = entries
                .iter()
                .enumerate()
                .map(|(k, e)| {
                    let idx = first + next + k as u32;
                    (to.to_vec(), idx.to_be_bytes().to_vec(), e.clone())
                })
                .collect();
            self.versions.insert(rows).await?;
            for e in &entries {
                if !self.add_ref(e.hash, to).await? {
                    return Err(ModelError::SourceChanged);
                }
            }
            next += want;
        }
        Ok(())
    }

    /// Up to `limit` block entries of `version` from block `from` on.
    pub async fn list(
        &self,
        version: &VersionId,
        from: u32,
        limit: usize,
    ) -> Result<Vec<(u32, BlockEntry)>> {
        Ok(self.versions.range_numbered(version, from, limit).await?)
    }
}
