//! Fences of a sharded table, the caller's side: closing, sealing and
//! opening a partition key on its nodes ([`crate::fence`] is the replica's
//! side and says why a quorum of fences is enough).

use hangar_net::CallOpts;
use serde_bytes::ByteBuf;

use super::Sharded;
use crate::wire::{FenceAnswer, FenceOp, FenceRequest};
use crate::{Result, Schema, Table, TableError};

impl<S: Schema> Table<S, Sharded> {
    /// Applies a fence operation to `partition` on its nodes. Close and
    /// Seal return once a write quorum of every active layout version's
    /// set applied it, with whether any of those replicas holds a live row
    /// of the key; Open is sent to every node and returns once a quorum
    /// removed it (the rest expire).
    pub async fn fence(&self, partition: &[u8], token: u64, op: FenceOp) -> Result<FenceAnswer> {
        let Some(ep) = &self.eps.fence else {
            return Err(TableError::NotFenceable { tree: S::TREE });
        };
        let p = S::layout_partition(partition);
        let nodes = self.cluster().storage_nodes_of_partition(p);
        let answers = self
            .cluster()
            .call_write_quorum(
                ep,
                &nodes,
                FenceRequest {
                    partition: ByteBuf::from(partition.to_vec()),
                    token,
                    op,
                },
                CallOpts::default(),
            )
            .await
            .map_err(|e| self.quorum_error("fence", p, &nodes.nodes(), e))?;
        Ok(FenceAnswer {
            live: answers.iter().any(|(_, a)| a.live),
        })
    }
}
