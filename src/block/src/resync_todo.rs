//! The durable list of block copies to fix, for the resync worker.
//!
//! Whatever the replicated block layer could not do at once is written here
//! rather than forgotten: a copy of a put that failed or timed out on one
//! node (or was not sent because the node was down), an unref a node did
//! not acknowledge, a copy found corrupt or missing on a node during a read.
//!
//! Tree `resync_todo`, one row per (block, node, what):
//! - key: `hash(32) ++ node(32) ++ kind(1) ++ version(16)` (`version` is
//!   zeros for [`TodoKind::Repair`]);
//! - value: MessagePack [`TodoRow`] `[due_msec, tries, reason]`.
//!
//! Recording the same thing again counts one more try and pushes its due
//! time back (exponential, from [`FIRST_RETRY`] up to [`MAX_RETRY`]). The
//! rows are advice: the worker that acts on them must check that they still
//! apply (the version still exists, the node still holds the partition).

use std::time::Duration;

use hangar_db::{Db, DbError};
use hangar_util::time::now_msec;
use hangar_util::{Hash, NodeId};
use serde::{Deserialize, Serialize};

use crate::Result;

/// The tree of things to fix.
pub const TODO_TREE: &str = "resync_todo";
/// Delay before the first retry of something recorded.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// Longest delay between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(3600);

/// What a node lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TodoKind {
    /// The node did not acknowledge a put of the block for `version`: it
    /// may lack the file and the reference (hash, version).
    Put,
    /// The node did not acknowledge the removal of reference (hash, version).
    Unref,
    /// The node's copy is corrupt or missing: it needs a good copy.
    Repair,
}

impl TodoKind {
    fn byte(self) -> u8 {
        match self {
            TodoKind::Put => 1,
            TodoKind::Unref => 2,
            TodoKind::Repair => 3,
        }
    }

    fn from_byte(b: u8) -> Option<TodoKind> {
        match b {
            1 => Some(TodoKind::Put),
            2 => Some(TodoKind::Unref),
            3 => Some(TodoKind::Repair),
            _ => None,
        }
    }
}

/// The stored value of a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoRow {
    /// When to try next (ms since the epoch).
    pub due_msec: u64,
    /// How many times this was recorded (1 the first time).
    pub tries: u32,
    /// The last failure, for operators.
    pub reason: String,
}

/// One thing to fix, as listed by [`list_todo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncTodo {
    pub hash: Hash,
    pub node: NodeId,
    pub kind: TodoKind,
    /// The version of a put or unref; zeros for a repair.
    pub version: [u8; 16],
    pub row: TodoRow,
}

fn todo_key(hash: &Hash, node: &NodeId, kind: TodoKind, version: &[u8; 16]) -> Vec<u8> {
    let mut k = Vec::with_capacity(81);
    k.extend_from_slice(hash.as_bytes());
    k.extend_from_slice(&node.0);
    k.push(kind.byte());
    k.extend_from_slice(version);
    k
}

fn retry_delay(tries: u32) -> Duration {
    let shift = tries.saturating_sub(1).min(20);
    (FIRST_RETRY * (1u32 << shift)).min(MAX_RETRY)
}

/// Records that `node` needs `kind` done for block `hash` (and `version`),
/// because of `reason`.
pub async fn record_todo(
    db: &Db,
    hash: Hash,
    node: NodeId,
    kind: TodoKind,
    version: [u8; 16],
    reason: String,
) -> Result<()> {
    let key = todo_key(&hash, &node, kind, &version);
    db.write(move |tx| {
        let tries = match tx.get(TODO_TREE, &key)? {
            Some(v) => rmp_serde::from_slice::<TodoRow>(&v)
                .map(|r| r.tries)
                .unwrap_or(0),
            None => 0,
        } + 1;
        let row = TodoRow {
            due_msec: now_msec() + retry_delay(tries).as_millis() as u64,
            tries,
            reason,
        };
        tx.put(
            TODO_TREE,
            key,
            rmp_serde::to_vec(&row).expect("TodoRow encodes"),
        );
        Ok::<_, DbError>(())
    })
    .await?;
    Ok(())
}

/// Up to `limit` recorded things to fix, in key order (by block).
pub async fn list_todo(db: &Db, limit: usize) -> Result<Vec<ResyncTodo>> {
    use std::ops::Bound::Unbounded;
    let rows = db
        .range_async(TODO_TREE, Unbounded, Unbounded, false, limit)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(k, v)| {
            if k.len() != 81 {
                return None;
            }
            Some(ResyncTodo {
                hash: Hash::from_slice(&k[..32])?,
                node: NodeId(k[32..64].try_into().ok()?),
                kind: TodoKind::from_byte(k[64])?,
                version: k[65..81].try_into().ok()?,
                row: rmp_serde::from_slice(&v).ok()?,
            })
        })
        .collect())
}

/// Removes a thing to fix once it is done.
pub async fn clear_todo(
    db: &Db,
    hash: Hash,
    node: NodeId,
    kind: TodoKind,
    version: [u8; 16],
) -> Result<()> {
    let key = todo_key(&hash, &node, kind, &version);
    db.write(move |tx| {
        tx.delete(TODO_TREE, key);
        Ok::<_, DbError>(())
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_db::{DbOptions, SledEngine};
    use std::sync::Arc;

    #[tokio::test]
    async fn recording_twice_counts_tries_and_backs_off() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::new(
            Arc::new(SledEngine::open(d.path(), 8 << 20).unwrap()),
            DbOptions::default(),
        );
        let (h, n, v) = (Hash::of(b"x"), NodeId([3; 32]), [9u8; 16]);
        record_todo(&db, h, n, TodoKind::Put, v, "timeout".into())
            .await
            .unwrap();
        let first = list_todo(&db, 10).await.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].hash, first[0].node), (h, n));
        assert_eq!((first[0].kind, first[0].version), (TodoKind::Put, v));
        assert_eq!(first[0].row.tries, 1);
        record_todo(&db, h, n, TodoKind::Put, v, "refused".into())
            .await
            .unwrap();
        record_todo(&db, h, n, TodoKind::Repair, [0; 16], "corrupt".into())
            .await
            .unwrap();
        let all = list_todo(&db, 10).await.unwrap();
        assert_eq!(all.len(), 2);
        let put = all.iter().find(|t| t.kind == TodoKind::Put).unwrap();
        assert_eq!(put.row.tries, 2);
        assert_eq!(put.row.reason, "refused");
        assert!(put.row.due_msec > first[0].row.due_msec);
        clear_todo(&db, h, n, TodoKind::Put, v).await.unwrap();
        assert_eq!(list_todo(&db, 10).await.unwrap().len(), 1);
        assert_eq!(retry_delay(100), MAX_RETRY);
    }
}
