//! Opening the engine named by `db_engine`.

use std::path::Path;
use std::sync::Arc;

use hangar_util::config::DbEngine;

use crate::{DbError, Engine, RedbEngine, Result, SledEngine};

/// Page cache given to either engine.
const CACHE_BYTES: u64 = 256 << 20;

/// Opens the metadata engine `engine` inside `metadata_dir`, creating it if
/// needed. Each engine has its own file name (`db.sled`, a directory, and
/// `db.redb`, a file) so that a node never opens one engine's files with
/// another.
pub fn open_engine(engine: DbEngine, metadata_dir: &Path) -> Result<Arc<dyn Engine>> {
    match engine {
        DbEngine::Sled => Ok(Arc::new(SledEngine::open(
            &metadata_dir.join("db.sled"),
            CACHE_BYTES,
        )?)),
        DbEngine::Redb => {
            std::fs::create_dir_all(metadata_dir).map_err(|e| {
                DbError::engine("redb", format!("creating {}: {e}", metadata_dir.display()))
            })?;
            Ok(Arc::new(RedbEngine::open(
                &metadata_dir.join("db.redb"),
                CACHE_BYTES,
            )?))
        }
    }
}

/// Opens an engine at its own path (the `db.sled` directory or the `db.redb`
/// file itself), as named on the command line of `hangar convert-db`.
pub fn open_engine_at(engine: DbEngine, path: &Path) -> Result<Arc<dyn Engine>> {
    match engine {
        DbEngine::Sled => Ok(Arc::new(SledEngine::open(path, CACHE_BYTES)?)),
        DbEngine::Redb => Ok(Arc::new(RedbEngine::open(path, CACHE_BYTES)?)),
    }
}
