//! The handlers of a sharded table's endpoints (the replica's side).

use std::collections::BTreeSet;
use std::ops::Bound;

use async_trait::async_trait;
use hangar_cluster::WeakClusterLayout;
use hangar_db::Db;
use hangar_layout::Partition;
use hangar_net::{Handler, HandlerError, Request, Response};
use hangar_util::NodeId;
use serde_bytes::ByteBuf;

use super::merkle::{self, DEPTH};
use crate::wire::{
    MAX_ANSWER_BYTES, MAX_KEY_LEN, MAX_ROWS_PER_MESSAGE, MerkleRequest, MerkleResponse, RangeRows,
    ReadRange, ReadRow, UpdateRows, WireLeaf, WireRow, WireSummary,
};
use crate::{Replica, Schema};

/// Rows read from the store at a time while filling an answer.
const READ_CHUNK: usize = 100;

/// The handlers of a sharded table's endpoints.
pub(super) struct Handlers<S: Schema> {
    pub(super) replica: Replica<S>,
    pub(super) index: &'static str,
    /// This node's layout, to refuse rows of partitions it does not hold.
    pub(super) layout: WeakClusterLayout,
    pub(super) me: NodeId,
}

impl<S: Schema> Clone for Handlers<S> {
    fn clone(&self) -> Self {
        Handlers {
            replica: self.replica.clone(),
            index: self.index,
            layout: self.layout.clone(),
            me: self.me,
        }
    }
}

impl<S: Schema> Handlers<S> {
    /// Refuses `rows` when one of them belongs to a layout partition that
    /// no active layout version of this node assigns to it and that it
    /// never held (no `held` mark, [`merkle::held_marks`]), once some
    /// version assigns partitions at all: only a node holding a stale
    /// layout, its own or this one's, sends such rows, and merging them
    /// would keep rows nobody syncs or collects. The two nodes exchange
    /// layouts at once, so the stale one catches up. Rows of a partition
    /// this node held in a retired version are still merged (a coordinator
    /// that has not yet learnt of the retirement writes to the old set too)
    /// and leave again with the next sync pass's drop.
    async fn check_held(
        &self,
        from: NodeId,
        rows: &[WireRow],
    ) -> std::result::Result<(), HandlerError> {
        let Some(layout) = self.layout.upgrade() else {
            return Err(HandlerError::new("node is stopping"));
        };
        let h = layout.history();
        if !h.versions.iter().any(|v| v.is_assigned()) {
            return Ok(());
        }
        let partitions: BTreeSet<Partition> = rows
            .iter()
            .map(|r| S::layout_partition(&r.key[..S::PARTITION_LEN.min(r.key.len())]))
            .collect();
        for p in partitions {
            if h.versions
                .iter()
                .any(|v| v.nodes_of_partition(p).contains(&self.me))
                || merkle::is_marked_held(self.replica.db(), self.index, p)
                    .await
                    .map_err(HandlerError::new)?
            {
                continue;
            }
            layout.exchange_soon(from);
            return Err(HandlerError::new(format!(
                "{}: rows of layout partition {p}, which node {} never held and holds in no active layout version (current {}): the sender's layout or this node's is stale",
                S::TREE,
                self.me.short(),
                h.current().version
            )));
        }
        Ok(())
    }
}

fn check_bound(b: &Bound<ByteBuf>) -> std::result::Result<(), HandlerError> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_LEN => {
            Err(HandlerError::new(format!("bound of {} bytes", k.len())))
        }
        _ => Ok(()),
    }
}

#[async_trait]
impl<S: Schema> Handler<UpdateRows, ()> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<UpdateRows>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        self.check_held(req.from, &req.msg.rows).await?;
        crate::serve::serve_update(&self.replica, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRow, Option<ByteBuf>> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRow>,
    ) -> std::result::Result<Response<Option<ByteBuf>>, HandlerError> {
        crate::serve::serve_read(&self.replica, req).await
    }
}

#[async_trait]
impl<S: Schema> Handler<ReadRange, RangeRows> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<ReadRange>,
    ) -> std::result::Result<Response<RangeRows>, HandlerError> {
        let m = req.msg;
        if m.partition.len() != S::PARTITION_LEN {
            return Err(HandlerError::new(format!(
                "partition key of {} bytes",
                m.partition.len()
            )));
        }
        check_bound(&m.start)?;
        check_bound(&m.end)?;
        let limit = (m.limit as usize).min(MAX_ROWS_PER_MESSAGE);
        let mut rows: Vec<WireRow> = Vec::new();
        let mut bytes = 0usize;
        let (mut start, mut end) = (m.start, m.end);
        let mut more = false;
        // Read in chunks so that a page of large rows stops at the byte
        // budget without loading the whole limit first.
        while rows.len() < limit {
            let want = (limit - rows.len()).min(READ_CHUNK);
            let as_slice = |b: &Bound<ByteBuf>| match b {
                Bound::Included(k) => Bound::Included(k.to_vec()),
                Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
                Bound::Unbounded => Bound::Unbounded,
            };
            let (s, e) = (as_slice(&start), as_slice(&end));
            let chunk = self
                .replica
                .range_raw(&m.partition, s, e, m.reverse, want)
                .await
                .map_err(HandlerError::new)?;
            let got = chunk.len();
            for (k, v) in chunk {
                if bytes >= MAX_ANSWER_BYTES {
                    more = true;
                    break;
                }
                bytes += v.len();
                let next = Bound::Excluded(ByteBuf::from(k[S::PARTITION_LEN..].to_vec()));
                if m.reverse {
                    end = next;
                } else {
                    start = next;
                }
                rows.push(WireRow {
                    key: ByteBuf::from(k),
                    value: ByteBuf::from(v),
                });
            }
            if more || got < want {
                break;
            }
        }
        if rows.len() == limit {
            more = true;
        }
        Ok(Response::new(RangeRows { rows, more }))
    }
}

#[async_trait]
impl<S: Schema> Handler<MerkleRequest, MerkleResponse> for Handlers<S> {
    async fn handle(
        &self,
        req: Request<MerkleRequest>,
    ) -> std::result::Result<Response<MerkleResponse>, HandlerError> {
        let db = self.replica.db();
        let resp = match req.msg {
            MerkleRequest::Roots { partitions } => {
                // At most one per partition (256).
                let ps: BTreeSet<u8> = partitions.iter().copied().collect();
                if ps.len() != partitions.len() {
                    return Err(HandlerError::new("a partition listed twice"));
                }
                let roots = merkle::roots(db, self.index, partitions.into_vec())
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Roots(roots.into_iter().map(WireSummary::from).collect())
            }
            MerkleRequest::Children { partition, prefix } => {
                if prefix.len() >= DEPTH {
                    return Err(HandlerError::new(format!(
                        "prefix of {} bytes",
                        prefix.len()
                    )));
                }
                let kids = merkle::children(db, self.index, partition, &prefix)
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Children(kids.into_iter().map(|(b, s)| (b, s.into())).collect())
            }
            MerkleRequest::Leaves {
                partition,
                prefix,
                after,
                limit,
            } => {
                if prefix.len() > 32 {
                    return Err(HandlerError::new(format!(
                        "prefix of {} bytes",
                        prefix.len()
                    )));
                }
                let after = match after {
                    Some(a) => Some(
                        <[u8; 32]>::try_from(a.as_slice())
                            .map_err(|_| HandlerError::new("bad after"))?,
                    ),
                    None => None,
                };
                let limit = (limit as usize).min(MAX_ROWS_PER_MESSAGE);
                let leaves = merkle::leaves(db, self.index, partition, &prefix, after, limit)
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Leaves {
                    more: leaves.len() == limit,
                    leaves: leaves
                        .into_iter()
                        .map(|l| WireLeaf {
                            key: ByteBuf::from(l.key),
                            value_hash: ByteBuf::from(l.vh.to_vec()),
                        })
                        .collect(),
                }
            }
            MerkleRequest::Rows { keys } => {
                if keys.len() > MAX_ROWS_PER_MESSAGE
                    || keys
                        .iter()
                        .any(|k| k.len() > MAX_KEY_LEN || k.len() < S::PARTITION_LEN)
                {
                    return Err(HandlerError::new("bad row keys"));
                }
                let rows = read_rows::<S>(db, keys.into_iter().map(|k| k.into_vec()).collect())
                    .await
                    .map_err(HandlerError::new)?;
                MerkleResponse::Rows(rows)
            }
        };
        Ok(Response::new(resp))
    }
}

/// The stored rows of `keys` that this node holds, up to
/// [`MAX_ANSWER_BYTES`] of values (at least one), read in one task of the
/// blocking pool.
pub(crate) async fn read_rows<S: Schema>(
    db: &Db,
    keys: Vec<Vec<u8>>,
) -> std::result::Result<Vec<WireRow>, hangar_db::DbError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for k in keys {
            if bytes >= MAX_ANSWER_BYTES {
                break;
            }
            if let Some(v) = crate::RowTrees::of::<S>().get(&db, &k)? {
                bytes += v.len();
                out.push(WireRow {
                    key: ByteBuf::from(k),
                    value: ByteBuf::from(v),
                });
            }
        }
        Ok(out)
    })
    .await
    .map_err(|e| hangar_db::DbError::Engine {
        engine: "blocking pool",
        message: e.to_string(),
    })?
}
