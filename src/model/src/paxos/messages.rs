//! The messages of a conditional write's Paxos round (doc/rpc.md,
//! "Conditional writes"): MessagePack, one typed endpoint each.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::Ballot;
use super::decided::{DecidedLog, ValueId};

/// Longest object key an acceptor takes (S3's limit is 1024 bytes).
pub const MAX_OBJECT_KEY: usize = 1024;

/// The register a round decides about: one object key of one bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaxosKey {
    /// The bucket id (32 bytes; the object table's partition key).
    pub bucket: ByteBuf,
    pub key: String,
}

impl PaxosKey {
    pub fn new(bucket: &[u8; 32], key: &str) -> PaxosKey {
        PaxosKey {
            bucket: ByteBuf::from(bucket.to_vec()),
            key: key.to_owned(),
        }
    }

    /// The acceptor's storage key: bucket id then object key.
    pub(crate) fn storage_key(&self) -> Vec<u8> {
        let mut k = self.bucket.to_vec();
        k.extend_from_slice(self.key.as_bytes());
        k
    }

    /// Refuses what a peer should never send (the acceptor's handlers call
    /// it before anything else).
    pub fn check(&self) -> Result<(), String> {
        if self.bucket.len() != 32 || self.key.len() > MAX_OBJECT_KEY {
            return Err("bad bucket id or object key".into());
        }
        Ok(())
    }
}

/// A value a round may decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proposal {
    /// Merge object row `row` (as stored: format byte and row,
    /// doc/table-rows.md) at sort key `sort` of the bucket's partition.
    Publish { sort: ByteBuf, row: ByteBuf },
    /// Nothing is written: decided by a proposer whose condition failed
    /// after one of its values may have been accepted somewhere, so that
    /// this value can never be completed by a later round.
    Nothing,
}

impl Proposal {
    /// This value's name in the acceptors' logs of decided values.
    pub fn id(&self) -> ValueId {
        ValueId::of(self)
    }

    /// Refuses a value larger than a peer may send (the accept handler
    /// calls it before anything else).
    pub fn check(&self) -> Result<(), String> {
        match self {
            Proposal::Publish { sort, row }
                if sort.len() > hangar_table::wire::MAX_KEY_LEN
                    || row.len() > hangar_table::wire::MAX_VALUE_LEN =>
            {
                Err("proposed row too large".into())
            }
            _ => Ok(()),
        }
    }
}

/// A value an acceptor accepted, and the ballot it accepted it in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub ballot: Ballot,
    pub value: Proposal,
}

/// Phase 1: promise to refuse every ballot below `ballot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepare {
    pub key: PaxosKey,
    pub ballot: Ballot,
}

/// The acceptor's answer to [`Prepare`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum PrepareReply {
    /// Promised: the value it accepted last (if not yet known committed)
    /// and the highest ballot it knows committed for this key.
    Promise {
        accepted: Option<Accepted>,
        committed: Option<Ballot>,
        /// The values it knows decided lately ([`DecidedLog`]); `None`
        /// from a binary that keeps no such log.
        #[serde(default)]
        decided: Option<DecidedLog>,
    },
    /// It promised `promised` (at least as high) already.
    Rejected { promised: Ballot },
}

/// Phase 2: accept `value` in `ballot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accept {
    pub key: PaxosKey,
    pub ballot: Ballot,
    pub value: Proposal,
}

/// The acceptor's answer to [`Accept`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AcceptReply {
    Accepted,
    Rejected { promised: Ballot },
}

/// The value accepted in `ballot` is published: the acceptor forgets
/// every value accepted in `ballot` or before, and logs `value` (the
/// published value's id, when the sender knows it) as decided in `ballot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Commit {
    pub key: PaxosKey,
    pub ballot: Ballot,
    #[serde(default)]
    pub value: Option<ValueId>,
}
