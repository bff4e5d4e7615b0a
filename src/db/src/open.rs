//! Opening the engine named by `db_engine`.

use std::path::Path;
use std::sync::Arc;

use hangar_util::config::DbEngine;

use crate::{DbError, Engine, Result, SledEngine};

/// Opens the metadata engine `engine` inside `metadata_dir`, creating it if
/// needed. Each engine has its own file name (`db.sled`, `db.redb`) so that
/// a node never opens one engine's files with another.
pub fn open_engine(engine: DbEngine, metadata_dir: &Path) -> Result<Arc<dyn Engine>> {
    match engine {
        DbEngine::Sled => Ok(Arc::new(SledEngine::open(
            &metadata_dir.join("db.sled"),
            256 << 20,
        )?)),
        DbEngine::Redb => Err(DbError::Engine {
            engine: "redb",
            message: "the redb engine is not built yet; use db_engine = \"sled\"".into(),
        }),
    }
}
