//! Every message a table sends to a peer, and the bounds a receiver holds
//! them to (doc/replication.md describes the exchanges).
//!
//! Endpoints are named `hangar/table/<tree>/<op>` ([`endpoint_path`]):
//!
//! | op | request → answer | tables |
//! |---|---|---|
//! | `update` | [`UpdateRows`] → `()` | both: merge a writer's rows |
//! | `read` | [`ReadRow`] → `Option<bin>` | both: one stored row |
//! | `pull` | [`PullRows`] → [`RowPage`] | full: a page of rows and the table's digest |
//! | `range` | [`ReadRange`] → [`RangeRows`] | sharded: one partition key's rows |
//! | `merkle` | [`MerkleRequest`] → [`MerkleResponse`] | sharded: anti-entropy |
//! | `gc` | [`GcRows`] → `Vec<bool>` | sharded: tombstone collection |
//! | `fence` | [`FenceRequest`] → [`FenceAnswer`] | sharded, with fences |
//!
//! A row travels as stored: its storage key, then the format byte and the
//! MessagePack row (doc/table-rows.md); the receiver decodes it (refusing
//! what does not decode) before it merges it, so the wire and the disk
//! never disagree. Nothing a peer sends is trusted for size.

use std::ops::Bound;

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::Schema;
use crate::merkle;

/// Most rows one update or page carries.
pub const MAX_ROWS_PER_MESSAGE: usize = 1000;
/// Largest storage key accepted from a peer.
pub const MAX_KEY_LEN: usize = 4096;
/// Largest row value accepted from a peer.
pub const MAX_VALUE_LEN: usize = 1 << 20;
/// Bytes of row values one answer or update carries, about: an answer stops
/// adding rows once it holds this many (so it always carries at least one
/// row when there is one), and updates are cut into messages of at most
/// this many bytes of keys and values (or one row), well under the mesh's
/// 16 MiB message limit.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The endpoint path of operation `op` of table `S`.
pub fn endpoint_path<S: Schema>(op: &str) -> String {
    format!("hangar/table/{}/{op}", S::TREE)
}

/// One row on the wire: its storage key and its stored value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireRow {
    pub key: ByteBuf,
    pub value: ByteBuf,
}

/// Rows to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateRows {
    pub rows: Vec<WireRow>,
}

/// One row to read, by storage key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadRow {
    pub key: ByteBuf,
}

/// A page of rows after `after` (from the start when `None`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullRows {
    pub after: Option<ByteBuf>,
    pub limit: u32,
}

/// A page of the table, and the digest of the whole table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowPage {
    pub rows: Vec<WireRow>,
    /// True when rows follow the last one of this page.
    pub more: bool,
    /// [`crate::full::digest`] of the sender's whole table.
    pub digest: ByteBuf,
}

/// A range of one partition key's rows, by sort key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadRange {
    /// The partition key (`Schema::PARTITION_LEN` bytes).
    pub partition: ByteBuf,
    /// Sort-key bounds.
    pub start: Bound<ByteBuf>,
    pub end: Bound<ByteBuf>,
    /// Descending sort-key order when true.
    pub reverse: bool,
    /// At most this many rows (at most [`MAX_ROWS_PER_MESSAGE`]).
    pub limit: u32,
}

/// The answer to a [`ReadRange`]: stored rows in the asked order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RangeRows {
    /// Storage keys and stored values.
    pub rows: Vec<WireRow>,
    /// True when the replica may hold rows of the range after the last one
    /// sent (it sent `limit` rows, or stopped at [`MAX_ANSWER_BYTES`]).
    pub more: bool,
}

/// A question about a replica's Merkle index ([`crate::merkle`]), or its
/// rows by key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MerkleRequest {
    /// The root of each layout partition listed (one byte each).
    Roots { partitions: ByteBuf },
    /// The non-empty children of node `prefix` (shorter than
    /// [`merkle::DEPTH`]) of layout partition `partition`.
    Children { partition: u8, prefix: ByteBuf },
    /// Up to `limit` leaves under `prefix`, after leaf `after` (a key hash).
    Leaves {
        partition: u8,
        prefix: ByteBuf,
        after: Option<ByteBuf>,
        limit: u32,
    },
    /// The stored rows of these storage keys (those it holds).
    Rows { keys: Vec<ByteBuf> },
}

/// A node summary on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSummary {
    /// XOR digest, 32 bytes.
    pub digest: ByteBuf,
    pub count: u64,
}

/// A leaf on the wire; the receiver recomputes the key hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireLeaf {
    pub key: ByteBuf,
    /// blake3 of the stored value, 32 bytes.
    pub value_hash: ByteBuf,
}

/// The answers to [`MerkleRequest`], variant for variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MerkleResponse {
    Roots(Vec<WireSummary>),
    Children(Vec<(u8, WireSummary)>),
    Leaves { leaves: Vec<WireLeaf>, more: bool },
    Rows(Vec<WireRow>),
}

impl From<merkle::Summary> for WireSummary {
    fn from(s: merkle::Summary) -> Self {
        WireSummary {
            digest: ByteBuf::from(s.digest.to_vec()),
            count: s.count,
        }
    }
}

/// One row to check or remove: its storage key and the blake3 of its value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GcRow {
    pub key: ByteBuf,
    pub hash: ByteBuf,
}

/// A round of tombstone collection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GcRows {
    pub rows: Vec<GcRow>,
    /// False: only check; true: remove.
    pub commit: bool,
}

/// What a fence request does on a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceOp {
    /// Store the fence `token`, refusing writes for `ttl_msec` (at most
    /// [`crate::fence::MAX_TTL`]), then look for a live row.
    Close { ttl_msec: u64 },
    /// Make fence `token` permanent (storing it if it expired or never
    /// arrived), then look for a live row.
    Seal,
    /// Remove fence `token`.
    Open,
}

/// `hangar/table/<tree>/fence`: one fence operation on one partition key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FenceRequest {
    /// The partition key (`Schema::PARTITION_LEN` bytes).
    pub partition: ByteBuf,
    /// The owner's token (random per operation).
    pub token: u64,
    pub op: FenceOp,
}

/// A replica's answer: whether it holds a live row of the key, looked for
/// after the fence was stored (always false for [`FenceOp::Open`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceAnswer {
    pub live: bool,
}

/// Cuts `rows` into messages of at most [`MAX_ROWS_PER_MESSAGE`] rows and
/// about [`MAX_ANSWER_BYTES`] bytes, in order.
pub(crate) fn batches(rows: Vec<WireRow>) -> Vec<Vec<WireRow>> {
    let mut out: Vec<Vec<WireRow>> = Vec::new();
    let mut bytes = 0usize;
    for r in rows {
        let len = r.key.len() + r.value.len();
        match out.last_mut() {
            Some(b) if b.len() < MAX_ROWS_PER_MESSAGE && bytes + len <= MAX_ANSWER_BYTES => {
                bytes += len;
                b.push(r);
            }
            _ => {
                bytes = len;
                out.push(vec![r]);
            }
        }
    }
    out
}
