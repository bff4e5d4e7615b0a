//! Copying a whole store from one engine to another (`hangar convert-db`).

use std::ops::Bound;
use std::path::PathBuf;

use hangar_util::config::DbEngine;

use crate::{DbError, Engine, Result, open_engine_at};

/// Keys copied per destination batch: large enough to amortise the sync,
/// small enough to bound memory.
const CHUNK: usize = 4096;

/// Copies every key of every tree of `from` into `to`, which must be empty,
/// and returns the number of keys copied. Each chunk is written durably; a
/// conversion that fails half-way leaves a partial destination, to be deleted
/// before trying again (the source is never written).
pub fn convert(from: &dyn Engine, to: &dyn Engine) -> Result<u64> {
    convert_with_progress(from, to, &mut |_| {})
}

/// Where a conversion is, after each chunk written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertProgress {
    /// The tree being copied.
    pub tree: String,
    /// Trees copied entirely, of `trees`.
    pub trees_done: u64,
    pub trees: u64,
    /// Keys copied so far, all trees together.
    pub keys: u64,
}

/// [`convert`], calling `progress` after each chunk written and after
/// each tree.
pub fn convert_with_progress(
    from: &dyn Engine,
    to: &dyn Engine,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<u64> {
    let existing = to.trees()?;
    if !existing.is_empty() {
        return Err(DbError::engine(
            to.name(),
            format!("destination of the conversion is not empty (trees: {existing:?})"),
        ));
    }
    let mut copied = 0u64;
    let trees = from.trees()?;
    let total = trees.len() as u64;
    for (i, tree) in trees.into_iter().enumerate() {
        let report = |copied: u64, done: u64| ConvertProgress {
            tree: tree.clone(),
            trees_done: done,
            trees: total,
            keys: copied,
        };
        let mut after: Option<Vec<u8>> = None;
        loop {
            let start = match &after {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            let chunk = from.range(&tree, start, Bound::Unbounded, false, CHUNK)?;
            let Some((last, _)) = chunk.last() else { break };
            after = Some(last.clone());
            let n = chunk.len();
            to.load(&tree, chunk)?;
            copied += n as u64;
            progress(report(copied, i as u64));
            if n < CHUNK {
                break;
            }
        }
        progress(report(copied, i as u64 + 1));
        tracing::debug!("converted tree {tree}: {copied} keys so far");
    }
    Ok(copied)
}

/// Parses `ENGINE:PATH` as given to `hangar convert-db --from/--to`, where
/// PATH is the engine's own path (`…/db.sled` or `…/db.redb`).
pub fn parse_engine_path(spec: &str) -> std::result::Result<(DbEngine, PathBuf), String> {
    let (engine, path) = spec.split_once(':').ok_or_else(|| {
        format!("expected ENGINE:PATH (e.g. sled:/var/lib/hangar/meta/db.sled), got {spec:?}")
    })?;
    if path.is_empty() {
        return Err(format!("no path after {engine:?} in {spec:?}"));
    }
    Ok((DbEngine::parse(engine)?, PathBuf::from(path)))
}

/// Opens `from` and `to` (each `ENGINE:PATH`) and converts `from` into `to`;
/// returns the number of keys copied. The node must be stopped: both engines
/// lock their files, so a running node makes this fail rather than copy a
/// store that is changing.
pub fn convert_db(from: &str, to: &str) -> Result<u64> {
    convert_db_with_progress(from, to, &mut |_| {})
}

/// [`convert_db`], reporting its progress as [`convert_with_progress`].
pub fn convert_db_with_progress(
    from: &str,
    to: &str,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<u64> {
    let spec = |s: &str| parse_engine_path(s).map_err(|m| DbError::engine("convert-db", m));
    let (fe, fp) = spec(from)?;
    let (te, tp) = spec(to)?;
    if fp == tp {
        return Err(DbError::engine(
            "convert-db",
            "--from and --to are the same path",
        ));
    }
    let exists = match fe {
        DbEngine::Sled => fp.is_dir(),
        DbEngine::Redb => fp.is_file(),
    };
    if !exists {
        return Err(DbError::engine(
            "convert-db",
            format!("no {} store at {}", fe.name(), fp.display()),
        ));
    }
    let src = open_engine_at(fe, &fp)?;
    let dst = open_engine_at(te, &tp)?;
    convert_with_progress(src.as_ref(), dst.as_ref(), progress)
}
