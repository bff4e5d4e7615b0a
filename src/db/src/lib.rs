//! Hangar's embedded metadata store.
//!
//! An [`Engine`] is an ordered map of byte keys, divided into named trees, that
//! can apply a batch of writes atomically and make it durable. [`Db`] wraps an
//! engine with *group commit*: every write is a closure handed to one
//! committer thread, which runs the closures of all writers waiting at that
//! moment, applies their combined changes in one atomic batch, syncs once
//! (when `metadata_fsync` is on) and only then answers each writer. The sync
//! of one batch overlaps the closures and apply of the next. No lock is held
//! by a writer across an fsync; a lone writer waits for nobody. Without
//! `metadata_fsync`, each batch is appended to a journal before it is
//! applied (`journal.rs`), so a process crash loses nothing acknowledged.
//!
//! Reads go straight to the engine. Async callers use the `*_async` methods,
//! which run on tokio's blocking pool so that database work never stalls the
//! runtime's worker threads.

mod committer;
mod convert;
mod engine;
mod error;
mod group_commit;
mod journal;
mod open;
mod redb_engine;
mod sled_engine;
mod tx;

pub use committer::Pipelining;
pub use convert::{
    ConvertProgress, convert, convert_db, convert_db_with_progress, convert_with_progress,
    parse_engine_path,
};
pub use engine::{Engine, WriteOp};
pub use error::DbError;
pub use group_commit::{CommitStats, Db, DbOptions};
pub use journal::{Journaled, Replayed, replay};
pub use open::{engine_path, open_engine, open_engine_at};
pub use redb_engine::RedbEngine;
pub use sled_engine::SledEngine;
pub use tx::Tx;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, DbError>;
