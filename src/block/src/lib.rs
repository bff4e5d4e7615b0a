//! Hangar's block store.
//!
//! Object data is cut into blocks; each block is a file named by the blake3
//! hash of its plain content, stored zstd-compressed when that saves at least
//! an eighth of its size. Identical blocks are stored once. A reference count
//! per block (kept in the metadata store, changed in the same transaction as
//! the rows that reference the block) decides when a file may go: a block
//! whose count stayed zero for the grace delay is deleted by the GC worker.
//!
//! Across the cluster ([`replicated`], doc/block-files.md "Replication"):
//! each block is stored on its partition's nodes, sent in its stored form on
//! the endpoints of [`rpc`]; [`ReplicatedBlocks`] writes at the write quorum
//! within a RAM byte budget, reads locally or hedged over the replicas, and
//! leaves what it could not do to the anti-entropy of the block reference
//! table ([`refcount`]) and the resync worker ([`resync`]), which fetches
//! what this node lacks and hands over what it no longer stores, from the
//! persisted queue of [`resync_queue`].

mod error;
mod files;
mod gc;
mod manager;
mod messages;
pub mod refcount;
pub mod replicated_blocks;
pub mod resync;
pub mod resync_queue;
mod resync_settings;
mod resync_sources;
mod resync_window;
pub mod rpc;
mod scan;
pub mod scrub;
mod stragglers;
mod tally;

pub use error::BlockError;
pub use files::{BlockFiles, EncodedBlock, StoredBlock};
pub use gc::{collect_due, spawn_gc_worker};
pub use manager::{BlockManager, BlockStats};
pub use refcount::GC_TREE as BLOCK_GC_TREE;
pub use refcount::{BlockRef, BlockRefTable, RC_TREE, RcRow, add_ref, remove_ref};
pub use replicated_blocks::{ReplicatedBlocks, ReplicatedConfig};
pub use resync::{Resync, ResyncSettings};
pub use scan::{scan_orphans, spawn_orphan_scan};
pub use scrub::{Scrub, ScrubCommand, ScrubState, ScrubStatus};
pub use tally::{StoreTally, Stored};

/// Bytes a stored block may have beyond `block_size`: room for an
/// encryption envelope around a full block (SSE-C adds 28: a nonce and a
/// tag), so that the nodes receiving such a block accept it.
pub const BLOCK_ENVELOPE_MAX: u64 = 64;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, BlockError>;
