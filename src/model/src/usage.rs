//! What each bucket holds: its stored object versions and their bytes,
//! counted incrementally so that quotas and `hangar stats` read two numbers
//! instead of listing the bucket.
//!
//! Each node counts the object rows it stores, per bucket: the object
//! table's update hook ([`tx_change`]) adds the difference the merge made
//! (the merged row's share minus the stored row's) in the transaction that
//! writes the row, in the local tree [`USAGE_TREE`]. So the counters never
//! drift from the rows, whatever crashes (a kill -9 loses the row and its
//! count together, or neither), and a row merged twice adds nothing the
//! second time. A row counts when it holds data (inline or blocks): every
//! stored version of a versioned bucket counts, its bytes included (storage
//! used); delete markers and tombstones count nothing.
//!
//! Rows stored before the counters existed are counted once, at start-up,
//! before the node serves anything (`crate::usage_backfill`, marker
//! `usage_counted` in `model_state`).
//!
//! In a cluster a bucket's object rows all live on the nodes of one layout
//! partition (its id's), each holding a complete count once in sync. A
//! reader asks a read quorum of them (`hangar/bucket/usage`) and takes the
//! largest of each counter ([`crate::Objects::bucket_usage`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::AtomicU64;

use async_trait::async_trait;
use hangar_db::{Db, DbError, Tx};
use hangar_net::{Handler, HandlerError, Request, Response};
use serde::{Deserialize, Serialize};

/// Local tree: bucket id (32 bytes) → objects (u64 BE) ++ bytes (u64 BE)
/// of the bucket's object rows this node stores. Absent: zero.
pub const USAGE_TREE: &str = "bucket_usage";
/// Marker in `model_state`: the rows stored before the counters existed
/// were counted.
pub(crate) const USAGE_COUNTED: &[u8] = b"usage_counted";
/// Length of a bucket id, the object table's partition key (a test checks
/// they agree).
pub const BUCKET_ID_LEN: usize = 32;
/// The endpoint that answers this node's counters of one bucket.
pub const PATH: &str = "hangar/bucket/usage";
/// Calls the endpoint admits at once.
pub(crate) const QUEUE: usize = 1024;

/// Writes this node refused because they would pass a bucket's object
/// quota (`hangar_quota_refusals_total{quota="objects"}`).
pub static OBJECT_QUOTA_REFUSALS: AtomicU64 = AtomicU64::new(0);
/// Writes this node refused because they would pass a bucket's size quota
/// (`hangar_quota_refusals_total{quota="size"}`).
pub static SIZE_QUOTA_REFUSALS: AtomicU64 = AtomicU64::new(0);

/// Object versions stored, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub objects: u64,
    pub bytes: u64,
}

impl Usage {
    pub(crate) fn decode(v: &[u8]) -> Usage {
        let word = |i: usize| {
            v.get(i * 8..i * 8 + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_be_bytes)
        };
        Usage {
            objects: word(0),
            bytes: word(1),
        }
    }

    pub(crate) fn encode(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&self.objects.to_be_bytes());
        v.extend_from_slice(&self.bytes.to_be_bytes());
        v
    }

    /// The larger of each counter (replicas that disagree while they sync).
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            objects: self.objects.max(other.objects),
            bytes: self.bytes.max(other.bytes),
        }
    }
}

/// Moves bucket `bucket`'s counters from one row's share `before` to its
/// share `after` ([`crate::object::ObjectRow::usage`]), in `tx`: the object
/// table's update hook calls it with the stored and the merged row, in the
/// row's transaction, and `Schema::dropped` with the row and nothing when
/// the row leaves this node with its partition.
pub(crate) fn tx_change(
    tx: &mut Tx<'_>,
    bucket: &[u8],
    before: Usage,
    after: Usage,
) -> Result<(), DbError> {
    if before == after {
        return Ok(());
    }
    let cur = tx
        .get(USAGE_TREE, bucket)?
        .map(|v| Usage::decode(&v))
        .unwrap_or_default();
    // Never below zero: the counts only ever remove what they added.
    let new = Usage {
        objects: cur
            .objects
            .saturating_add(after.objects)
            .saturating_sub(before.objects),
        bytes: cur
            .bytes
            .saturating_add(after.bytes)
            .saturating_sub(before.bytes),
    };
    if new == Usage::default() {
        tx.delete(USAGE_TREE, bucket.to_vec());
    } else {
        tx.put(USAGE_TREE, bucket.to_vec(), new.encode());
    }
    Ok(())
}

/// This node's counters of bucket `bucket` (its id).
pub async fn local(db: &Db, bucket: &[u8]) -> Result<Usage, DbError> {
    Ok(db
        .get_async(USAGE_TREE, bucket.to_vec())
        .await?
        .map(|v| Usage::decode(&v))
        .unwrap_or_default())
}

/// This node's counters of every bucket it stores rows of, by bucket id.
pub async fn local_all(db: &Db) -> Result<BTreeMap<Vec<u8>, Usage>, DbError> {
    let mut out = BTreeMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.take().map_or(Bound::Unbounded, Bound::Excluded);
        let page = db
            .range_async(USAGE_TREE, start, Bound::Unbounded, false, 1000)
            .await?;
        let n = page.len();
        after = page.last().map(|(k, _)| k.clone());
        for (k, v) in page {
            out.insert(k, Usage::decode(&v));
        }
        if n < 1000 {
            return Ok(out);
        }
    }
}

/// A request for this node's counters of one bucket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UsageRequest {
    /// The bucket id (the object table's partition key).
    #[serde(with = "serde_bytes")]
    pub bucket: Vec<u8>,
}

/// Answers [`UsageRequest`]s from this node's counters.
pub(crate) struct UsageHandler {
    pub(crate) db: Db,
}

#[async_trait]
impl Handler<UsageRequest, Usage> for UsageHandler {
    async fn handle(
        &self,
        req: Request<UsageRequest>,
    ) -> std::result::Result<Response<Usage>, HandlerError> {
        if req.msg.bucket.len() != BUCKET_ID_LEN {
            return Err(HandlerError::new("bad bucket id"));
        }
        let u = local(&self.db, &req.msg.bucket)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(u))
    }
}
