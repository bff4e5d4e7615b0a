//! Opening the engine named by `db_engine`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hangar_util::config::DbEngine;

use crate::journal::{Journaled, replay};
use crate::{DbError, Engine, RedbEngine, Result, SledEngine};

/// Page cache given to either engine.
const CACHE_BYTES: u64 = 256 << 20;

/// Opens the metadata engine `engine` inside `metadata_dir`, creating it if
/// needed, and replays its journal if a crash left one (crate::journal).
/// Each engine has its own file name (`db.sled`, a directory, and `db.redb`,
/// a file) so that a node never opens one engine's files with another.
///
/// With `fsync` (`metadata_fsync`) the group committer makes every batch
/// durable itself; without it the engine is wrapped in a [`Journaled`], so
/// that a batch acknowledged without fsync still survives a process crash.
pub fn open_engine(engine: DbEngine, metadata_dir: &Path, fsync: bool) -> Result<Arc<dyn Engine>> {
    let path = engine_path(engine, metadata_dir);
    if engine == DbEngine::Redb {
        std::fs::create_dir_all(metadata_dir).map_err(|e| {
            DbError::engine("redb", format!("creating {}: {e}", metadata_dir.display()))
        })?;
    }
    let opened = open_engine_at(engine, &path)?;
    if fsync {
        Ok(opened)
    } else {
        Ok(Journaled::start(opened, &path)?)
    }
}

/// Where `engine` keeps its files inside `metadata_dir`.
pub fn engine_path(engine: DbEngine, metadata_dir: &Path) -> PathBuf {
    match engine {
        DbEngine::Sled => metadata_dir.join("db.sled"),
        DbEngine::Redb => metadata_dir.join("db.redb"),
    }
}

/// Opens an engine at its own path (the `db.sled` directory or the `db.redb`
/// file itself), as named on the command line of `hangar convert-db`, and
/// replays its journal if a crash left one.
pub fn open_engine_at(engine: DbEngine, path: &Path) -> Result<Arc<dyn Engine>> {
    let opened: Arc<dyn Engine> = match engine {
        DbEngine::Sled => Arc::new(SledEngine::open(path, CACHE_BYTES)?),
        DbEngine::Redb => Arc::new(RedbEngine::open(path, CACHE_BYTES)?),
    };
    replay(opened.as_ref(), path)?;
    Ok(opened)
}
