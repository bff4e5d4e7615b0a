//! The block endpoints' paths and the messages they carry: the wire types
//! of [`crate::rpc`] (doc/block-files.md, "Replication", gives the bytes).
//! A module of their own so that the block manager, which answers some of
//! them, and the endpoints, which call the manager, do not import each
//! other.

use hangar_util::Hash;
use serde::{Deserialize, Serialize};

/// Path of the put endpoint.
pub const PUT_PATH: &str = "hangar/block/put";
/// Path of the get endpoint.
pub const GET_PATH: &str = "hangar/block/get";
/// Path of the unref endpoint.
pub const UNREF_PATH: &str = "hangar/block/unref";
/// Path of the ref endpoint.
pub const REF_PATH: &str = "hangar/block/ref";
/// Path of the resync read endpoint.
pub const RESYNC_GET_PATH: &str = "hangar/block/resync_get";
/// Path of the need endpoint.
pub const NEED_PATH: &str = "hangar/block/need";
/// Path of the hand-over endpoint.
pub const HAND_OVER_PATH: &str = "hangar/block/hand_over";
/// Path of the check endpoint.
pub const CHECK_PATH: &str = "hangar/block/check";

/// A block copy to store; the body is the block as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutBlock {
    /// blake3 of the plain content: the block's name.
    pub hash: Hash,
    /// The object version that references the block.
    #[serde(with = "hangar_util::serde_id16")]
    pub version: [u8; 16],
    /// Whether the body is a zstd frame (else the plain bytes).
    pub compressed: bool,
    /// Length of the plain content.
    pub plain_len: u64,
}

/// The answer to a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutBlockReply {
    /// Whether this call wrote the file (false: it was already there).
    pub written: bool,
}

/// A block to read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetBlock {
    pub hash: Hash,
}

/// A block to read for another node's resync (`resync_get`).
///
/// Encoded as [`GetBlock`] when `defer_if_busy` is false (the field is left
/// out), so older nodes' calls decode unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResyncGet {
    pub hash: Hash,
    /// The caller has other sources to try: a source whose clients are
    /// being served answers `deferred` instead of reading the block.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defer_if_busy: bool,
}

/// The answer to `resync_get`: as [`GetBlockReply`], or `deferred` (no
/// body) when the caller allowed it and this node's clients are being
/// served. Encoded as `GetBlockReply` when not deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResyncGetReply {
    pub found: Option<BlockForm>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

/// How a block is stored, as sent before its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockForm {
    /// Whether the body is a zstd frame.
    pub compressed: bool,
    /// Length of the plain content.
    pub plain_len: u64,
}

/// The answer to a get: the block's form, followed by its body, or `None`
/// (and no body) when the node does not have the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetBlockReply {
    pub found: Option<BlockForm>,
}

/// What a node holds of a block (the answer to `need` and `hand_over`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaveBlock {
    /// The block's file is on the node's disk.
    pub file: bool,
    /// The node holds a live reference to the block (it will keep it).
    pub referenced: bool,
}

/// A block handed over to a node that now stores its partition; the body
/// is the block as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandOver {
    pub hash: Hash,
    pub compressed: bool,
    pub plain_len: u64,
}

/// What a node found when asked to check its copy of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckReply {
    /// The copy is there and matches its hash.
    Good,
    /// There is no copy.
    Missing,
    /// The copy was corrupt: quarantined, and queued for resync.
    Quarantined,
}

/// A reference to remove (`unref`) or to add to a block already stored
/// (`ref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnrefBlock {
    pub hash: Hash,
    #[serde(with = "hangar_util::serde_id16")]
    pub version: [u8; 16],
}
