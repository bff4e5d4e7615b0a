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

    /// Makes every batch applied before this call durable. May run on
    /// another thread while [`Engine::apply`] applies later batches; those may
    /// or may not be made durable by this call.
    fn sync(&self) -> Result<()>;

    /// The process is about to end: makes every batch durable (as
    /// [`Engine::sync`]) and leaves the store so that the next open needs
    /// no recovery. Calls after it may fail.
    fn close(&self) -> Result<()> {
        self.sync()
    }

    /// Approximate on-disk size of the store, in bytes.
    fn size_on_disk(&self) -> Result<u64>;

    /// Names of the trees that hold at least one key, ascending. An engine
    /// may also list a tree whose keys were all deleted. Used to copy a whole
    /// store (see [`crate::convert`]).
    fn trees(&self) -> Result<Vec<String>>;

    /// Inserts `entries` into `tree` as one atomic, durable batch. This is the
    /// bulk path of [`crate::convert`], where tree names are only known at run
    /// time; normal writes go through [`Engine::apply`].
    fn load(&self, tree: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()>;
}

/// True when no key can lie between `start` and `end`. Engines check this
/// before iterating because their range functions panic or misbehave on an
/// inverted range, which callers may legitimately ask for (an empty listing).
pub(crate) fn range_is_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}
