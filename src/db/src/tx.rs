//! A writer's transaction inside a group commit ([`Tx`]) and the job that
//! carries it to the committer thread: the types both the writers' side
//! (`group_commit.rs`) and the committer (`committer.rs`) use.

use std::collections::BTreeMap;

use crate::{Engine, Result};

pub(crate) type PendingMap = BTreeMap<(&'static str, Vec<u8>), Option<Vec<u8>>>;

/// A writer's view of the store inside a group commit: reads see the engine,
/// then the batch still being committed (pipelined mode), then the writes of
/// earlier writers in the same batch, then its own.
pub struct Tx<'a> {
    pub(crate) engine: &'a dyn Engine,
    pub(crate) committing: Option<&'a PendingMap>,
    pub(crate) batch: &'a PendingMap,
    pub(crate) own: PendingMap,
}

impl Tx<'_> {
    /// The current value of `key`, including writes not yet committed.
    pub fn get(&self, tree: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let k = (tree, key.to_vec());
        let pending = self
            .own
            .get(&k)
            .or_else(|| self.batch.get(&k))
            .or_else(|| self.committing.and_then(|c| c.get(&k)));
        match pending {
            Some(v) => Ok(v.clone()),
            None => self.engine.get(tree, key),
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, tree: &'static str, key: Vec<u8>, value: Vec<u8>) {
        self.own.insert((tree, key), Some(value));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, tree: &'static str, key: Vec<u8>) {
        self.own.insert((tree, key), None);
    }
}

/// Answers one writer with the outcome of its batch.
pub(crate) type Completion = Box<dyn FnOnce(Result<()>) + Send>;
/// A writer's closure; returns whether it succeeded and how to answer it.
pub(crate) type Job = Box<dyn FnOnce(&mut Tx<'_>) -> (bool, Completion) + Send>;

/// What the committer thread receives.
pub(crate) enum Msg {
    /// A writer's closure.
    Job(Job),
    /// The syncer finished the batch it had (pipelined mode).
    Synced,
}
