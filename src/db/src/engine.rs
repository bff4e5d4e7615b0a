//! The engine trait: what Hangar needs of an embedded ordered key-value store.

use std::ops::Bound;

use crate::Result;

/// One write of an atomic batch: set `key` in `tree` to `value`, or delete it
/// when `value` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOp {
    pub tree: &'static str,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// An embedded, ordered key-value store.
///
/// Trees are namespaces of keys; an engine may store them as separate tables
/// or as prefixes of one keyspace. Every method may be called from several
/// threads at once, but [`Engine::apply`] is only ever called by one thread
/// at a time (the group committer), so engines need not handle write-write
/// conflicts.
pub trait Engine: Send + Sync + 'static {
    /// The engine's name as written in `db_engine`.
    fn name(&self) -> &'static str;

    /// The value of `key` in `tree`.
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Up to `limit` entries of `tree` between `start` and `end`, ascending
    /// (descending when `reverse`).
    fn range(
        &self,
        tree: &str,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Applies every write of `batch` atomically: after a crash, all of them
    /// or none are visible. When `sync` is true the batch is durable on return.
    fn apply(&self, batch: Vec<WriteOp>, sync: bool) -> Result<()>;

    /// Approximate on-disk size of the store, in bytes.
    fn size_on_disk(&self) -> Result<u64>;
}
