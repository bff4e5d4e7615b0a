//! Fences: a partition key of a table closed to new live rows.
//!
//! An operation that must find a partition key empty and keep it empty —
//! deleting a bucket, whose objects are the object table's rows under the
//! bucket's id — cannot read the rows and then act: a write acknowledged
//! between the read and the act would be lost with the bucket. Instead it
//! *closes* the partition key on a write quorum of the key's nodes (in
//! every active layout version) and only then reads, on the same nodes:
//!
//! - a replica stores the fence (one transaction, [`FenceOp::Close`]) and
//!   then looks for a live row of the key (not a tombstone,
//!   [`Schema::is_tombstone`]); it answers whether it found one;
//! - from then on the replica refuses every live row of that key sent by a
//!   writer (the update endpoint, and a single node's own writes:
//!   [`Replica::tx_insert_admitted`]), with [`TableError::Fenced`];
//!   tombstones still pass.
//!
//! Why that is enough: a write is acknowledged once a write quorum of
//! replicas stored its row, and the fence was stored on a write quorum; the
//! two quorums share a replica. If that replica stored the row first, its
//! look after the fence finds it and the deletion gives up (the bucket is
//! not empty); if it stored the fence first, it refused the row, so the
//! write lacks that replica and reaches its quorum only if some other
//! replica of the fence's quorum stored the row before its fence — which
//! that replica's look then finds. So a deletion that found no live row on
//! its quorum has no acknowledged write to lose, and none can be
//! acknowledged after it.
//!
//! A fence has an owner's token and an expiry in the replica's own clock:
//! a closing that is abandoned (the owner found rows and
//! [`FenceOp::Open`]ed it, or died) stops refusing writes at the latest
//! [`MAX_TTL`] later. The owner makes a fence permanent with
//! [`FenceOp::Seal`] (which looks for live rows again, in case a replica's
//! fence expired meanwhile) before it commits its deletion, so that a
//! writer that found the bucket before its deletion and publishes long
//! after it is still refused.
//!
//! Anti-entropy and the tombstone collector ignore fences: they spread or
//! remove rows some replica already stored, which acknowledges nothing.
//!
//! Stored form (tree [`Schema::FENCE_TREE`], key = the partition key): a
//! sequence of 16-byte records, the owner's token then the expiry in ms
//! since the epoch by this node's clock (`u64::MAX` when sealed), both
//! big-endian; at most [`MAX_FENCES`] records, expired ones dropped when
//! the key is next written (doc/table-rows.md, "Fences").

use std::ops::Bound;

use async_trait::async_trait;
use hangar_db::{DbError, Tx};
use hangar_net::{Handler, HandlerError, Request, Response};

pub use crate::wire::{FenceAnswer, FenceOp, FenceRequest};
use crate::{Replica, Result, Schema, TableError};

/// Text every refusal of a fenced row carries (in [`TableError::Fenced`]
/// and so in the message a peer's refusal arrives with), by which a writer
/// tells a fence from any other failure.
pub const FENCED: &str = "its partition key is fenced (closed to new rows)";
/// Longest a [`FenceOp::Close`] holds without its owner sealing it.
pub const MAX_TTL: u64 = 10 * 60 * 1000;
/// Most fences one partition key holds at once (closings in progress and
/// the seal of a done deletion); more are refused.
pub const MAX_FENCES: usize = 16;
/// Expiry of a sealed fence: never.
const SEALED: u64 = u64::MAX;
/// Rows read at a time while looking for a live one.
const LOOK_CHUNK: usize = 256;

/// The fences of one key, decoded.
fn records(value: Option<&[u8]>) -> Vec<(u64, u64)> {
    value
        .unwrap_or_default()
        .chunks_exact(16)
        .map(|c| {
            let token = u64::from_be_bytes(c[..8].try_into().expect("8 bytes"));
            let until = u64::from_be_bytes(c[8..].try_into().expect("8 bytes"));
            (token, until)
        })
        .collect()
}

fn encode_records(recs: &[(u64, u64)]) -> Vec<u8> {
    recs.iter()
        .flat_map(|(t, u)| t.to_be_bytes().into_iter().chain(u.to_be_bytes()))
        .collect()
}

/// Whether `row`, written by a writer (not anti-entropy), must be refused:
/// it is live and its partition key holds an unexpired fence.
pub(crate) fn tx_refuses<S: Schema>(
    tx: &Tx<'_>,
    partition: &[u8],
    row: &S::Row,
    now_msec: u64,
) -> std::result::Result<bool, DbError> {
    let Some(tree) = S::FENCE_TREE else {
        return Ok(false);
    };
    if S::is_tombstone(row) {
        return Ok(false);
    }
    let v = tx.get(tree, partition)?;
    Ok(records(v.as_deref())
        .iter()
        .any(|(_, until)| *until > now_msec))
}

/// Stores or removes fence `token` of `partition` in `tx`.
fn tx_apply(
    tx: &mut Tx<'_>,
    tree: &'static str,
    partition: &[u8],
    token: u64,
    op: FenceOp,
    now_msec: u64,
) -> std::result::Result<(), FenceRefused> {
    let old = tx.get(tree, partition).map_err(FenceRefused::Db)?;
    let mut recs: Vec<(u64, u64)> = records(old.as_deref())
        .into_iter()
        .filter(|(t, until)| *t != token && *until > now_msec)
        .collect();
    match op {
        FenceOp::Close { ttl_msec } => {
            recs.push((token, now_msec.saturating_add(ttl_msec.min(MAX_TTL))));
        }
        FenceOp::Seal => recs.push((token, SEALED)),
        FenceOp::Open => {}
    }
    if recs.len() > MAX_FENCES {
        return Err(FenceRefused::TooMany);
    }
    if recs.is_empty() {
        tx.delete(tree, partition.to_vec());
    } else {
        tx.put(tree, partition.to_vec(), encode_records(&recs));
    }
    Ok(())
}

enum FenceRefused {
    Db(DbError),
    TooMany,
}

impl From<DbError> for FenceRefused {
    fn from(e: DbError) -> Self {
        FenceRefused::Db(e)
    }
}

/// Applies a fence operation to this node's replica: stores it (committed
/// before anything else), then, but for [`FenceOp::Open`], looks for a live
/// row of the key: a replica's half of every fence request.
pub async fn apply_local<S: Schema>(
    replica: &Replica<S>,
    partition: &[u8],
    token: u64,
    op: FenceOp,
) -> Result<FenceAnswer> {
    let Some(tree) = S::FENCE_TREE else {
        return Err(TableError::NotFenceable { tree: S::TREE });
    };
    let p = partition.to_vec();
    let now = hangar_util::time::now_msec();
    replica
        .db()
        .write(move |tx| {
            tx_apply(tx, tree, &p, token, op, now).map_err(|e| match e {
                FenceRefused::Db(e) => TableError::Db(e),
                FenceRefused::TooMany => TableError::TooManyFences { tree: S::TREE },
            })
        })
        .await?;
    if op == FenceOp::Open {
        return Ok(FenceAnswer::default());
    }
    // The fence is committed: a row stored after this point was refused or
    // is a tombstone, and a row stored before it is seen by this read.
    let mut from: Bound<Vec<u8>> = Bound::Unbounded;
    loop {
        let page = replica
            .range(
                partition,
                from.as_ref().map(|v| v.as_slice()),
                Bound::Unbounded,
                false,
                LOOK_CHUNK,
            )
            .await?;
        if page.iter().any(|(_, r)| !S::is_tombstone(r)) {
            return Ok(FenceAnswer { live: true });
        }
        match page.last() {
            Some((k, _)) if page.len() == LOOK_CHUNK => from = Bound::Excluded(k.clone()),
            _ => return Ok(FenceAnswer::default()),
        }
    }
}

/// The handler of `hangar/table/<tree>/fence`.
pub(crate) struct FenceHandler<S: Schema> {
    pub(crate) replica: Replica<S>,
}

#[async_trait]
impl<S: Schema> Handler<FenceRequest, FenceAnswer> for FenceHandler<S> {
    async fn handle(
        &self,
        req: Request<FenceRequest>,
    ) -> std::result::Result<Response<FenceAnswer>, HandlerError> {
        let FenceRequest {
            partition,
            token,
            op,
        } = req.msg;
        if partition.len() != S::PARTITION_LEN {
            return Err(HandlerError::new(format!(
                "partition key of {} bytes",
                partition.len()
            )));
        }
        apply_local(&self.replica, &partition, token, op)
            .await
            .map(Response::new)
            .map_err(HandlerError::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_ignore_a_torn_tail() {
        let recs = vec![(1, 2), (u64::MAX, SEALED), (7, 0)];
        let mut v = encode_records(&recs);
        assert_eq!(records(Some(&v)), recs);
        v.extend_from_slice(&[1, 2, 3]);
        assert_eq!(records(Some(&v)), recs);
        assert!(records(None).is_empty());
    }
}
