//! The node's replicated tables as their workers see them: the sharded
//! tables (objects, versions, completed parts, uploads, parts, block
//! references) and the
//! full tables (keys, buckets, aliases, KMS keys), handed to the anti-entropy
//! workers; their status for `hangar table status`; the one-time repair of
//! the Merkle indexes; and the burial and collection of tombstones with
//! every replica. Holds handles to the tables the services own (a clone of a
//! table is the same table).

use std::sync::Arc;

use hangar_block::refcount::BlockRefTable;
use hangar_db::Db;
use hangar_table::Schema;
use hangar_table::sharded::sync::ShardedSyncable;
use hangar_table::tombstones::Queue;
use hangar_table::{Sharded, Table};
use hangar_util::time::now_msec;

use crate::alias::AliasTable;
use crate::block_list::VersionTable;
use crate::bucket::BucketTable;
use crate::key::KeyTable;
use crate::kms::KmsKeyTable;
use crate::multipart::{MpuTable, PartTable};
use crate::object::ObjectTable;
use crate::state::MODEL_STATE_TREE;
use crate::version_parts::VersionPartTable;
use crate::{ModelError, Result};

/// Queue entries one pass of tombstone collection reads.
const TOMBSTONE_PAGE: usize = 4096;

/// Marker: the Merkle indexes of the sharded tables were repaired once.
const MERKLE_INDEXED: &[u8] = b"merkle_indexed";

/// The replicated tables of one node.
pub struct Tables {
    pub(crate) db: Db,
    pub(crate) cluster: hangar_cluster::Cluster,
    pub(crate) objects: Table<ObjectTable>,
    pub(crate) versions: Table<VersionTable>,
    pub(crate) version_parts: Table<VersionPartTable>,
    pub(crate) mpus: Table<MpuTable>,
    pub(crate) parts: Table<PartTable>,
    pub(crate) refs: Table<BlockRefTable>,
    pub(crate) keys: Table<KeyTable>,
    pub(crate) kms_keys: Table<KmsKeyTable>,
    pub(crate) buckets: Table<BucketTable>,
    pub(crate) aliases: Table<AliasTable>,
}

impl Tables {
    /// The sharded tables (objects, versions, completed parts, uploads,
    /// parts, block references), for their anti-entropy worker.
    pub fn sharded_tables(&self) -> Vec<Arc<dyn ShardedSyncable>> {
        vec![
            Arc::new(self.objects.clone()),
            Arc::new(self.versions.clone()),
            Arc::new(self.version_parts.clone()),
            Arc::new(self.mpus.clone()),
            Arc::new(self.parts.clone()),
            Arc::new(self.refs.clone()),
        ]
    }

    /// For each sharded table: the rows this node holds (as its Merkle index
    /// counts them) and a digest of its 256 partition roots; replicas that
    /// hold the same rows give the same digest.
    pub async fn table_status(&self) -> Result<Vec<(&'static str, u64, [u8; 32])>> {
        async fn one<S: Schema>(t: &Table<S, Sharded>) -> Result<(&'static str, u64, [u8; 32])> {
            let mut h = blake3::Hasher::new();
            let mut rows = 0u64;
            for p in 0..=255u8 {
                let s = t.merkle_root(p).await?;
                rows += s.count;
                h.update(&[p]);
                h.update(&s.digest);
                h.update(&s.count.to_be_bytes());
            }
            Ok((S::TREE, rows, *h.finalize().as_bytes()))
        }
        Ok(vec![
            one(&self.objects).await?,
            one(&self.versions).await?,
            one(&self.version_parts).await?,
            one(&self.mpus).await?,
            one(&self.parts).await?,
            one(&self.refs).await?,
        ])
    }

    /// Makes the Merkle index of each sharded table match its rows (rows
    /// written before the index existed), before their anti-entropy. Once
    /// done, every write keeps the index (in the row's transaction), so it
    /// is done once per node: a marker in the local tree
    /// [`MODEL_STATE_TREE`] records it, and later starts skip the scan.
    pub async fn repair_indexes(&self) -> Result<()> {
        let done = self
            .db
            .get_async(MODEL_STATE_TREE, MERKLE_INDEXED.to_vec())
            .await?;
        if done.is_some() {
            return Ok(());
        }
        self.objects.repair_index().await?;
        self.versions.repair_index().await?;
        self.mpus.repair_index().await?;
        self.parts.repair_index().await?;
        self.db
            .write(|tx| {
                tx.put(MODEL_STATE_TREE, MERKLE_INDEXED.to_vec(), Vec::new());
                Ok::<_, ModelError>(())
            })
            .await
    }

    /// Collects the due tombstones of the sharded tables with every replica
    /// of their partition (`hangar_table::sharded`, `collect_tombstones`); returns how many
    /// were removed and how many wait for a replica.
    pub async fn collect_replicated_tombstones(&self, delay_msec: u64) -> Result<(u64, u64)> {
        self.tombstone_pass(Queue::Collect, delay_msec, TOMBSTONE_PAGE)
            .await
    }

    /// Buries the tombstones of the sharded tables queued at least
    /// `delay_msec` ago that every replica of their partition holds
    /// (`hangar_table::sharded`, `bury_tombstones`), up to `limit` queue
    /// entries; returns how many were buried and how many wait for a
    /// replica.
    pub async fn bury_tombstones(&self, delay_msec: u64, limit: usize) -> Result<(u64, u64)> {
        self.tombstone_pass(Queue::Burial, delay_msec, limit).await
    }

    async fn tombstone_pass(
        &self,
        queue: Queue,
        delay_msec: u64,
        limit: usize,
    ) -> Result<(u64, u64)> {
        use crate::garbage::TOMBSTONE_TREES;
        let due = hangar_table::tombstones::due(
            &self.db,
            queue,
            TOMBSTONE_TREES,
            now_msec(),
            delay_msec,
            limit,
        )
        .await?;
        let (mut done, mut deferred) = (0u64, 0u64);
        let mut by_tree: std::collections::BTreeMap<&str, Vec<_>> = Default::default();
        for d in due {
            by_tree.entry(d.tree).or_default().push(d);
        }
        for (tree, entries) in by_tree {
            let (d, w) = match tree {
                t if t == ObjectTable::TREE => self.objects.tombstone_pass(queue, entries).await?,
                t if t == VersionTable::TREE => {
                    self.versions.tombstone_pass(queue, entries).await?
                }
                t if t == VersionPartTable::TREE => {
                    self.version_parts.tombstone_pass(queue, entries).await?
                }
                t if t == MpuTable::TREE => self.mpus.tombstone_pass(queue, entries).await?,
                t if t == PartTable::TREE => self.parts.tombstone_pass(queue, entries).await?,
                _ => continue,
            };
            done += d as u64;
            deferred += w as u64;
        }
        Ok((done, deferred))
    }

    /// Whether this node may remove tombstones of the object, version and
    /// multipart tables alone: when no other node holds their rows (a
    /// replication factor of 1). Otherwise a tombstone is
    /// removed only once every replica holds it
    /// ([`Tables::collect_replicated_tombstones`]), and not at all by a node
    /// that has no layout yet.
    pub fn tombstones_collectable(&self) -> bool {
        self.cluster.replication_factor() <= 1
    }

    /// The replicated control tables, for their anti-entropy worker.
    pub fn full_tables(&self) -> Vec<Box<dyn hangar_table::full::sync::Syncable>> {
        vec![
            Box::new(self.keys.clone()),
            Box::new(self.buckets.clone()),
            Box::new(self.aliases.clone()),
            Box::new(self.kms_keys.clone()),
        ]
    }
}
