//! The block endpoints: how nodes send each other blocks (doc/block-files.md,
//! "Replication", gives the bytes).
//!
//! - `hangar/block/put`: [`PutBlock`] + body = the block as stored →
//!   [`PutBlockReply`]. The receiver checks the block (decompressed, of the
//!   announced length, hashing to its name), writes the received bytes as
//!   the block file without recompressing them, and records the reference
//!   (hash, version), like a local [`BlockManager::store`].
//! - `hangar/block/get`: [`GetBlock`] → [`GetBlockReply`] + body = the
//!   block as stored (unchecked: the reader checks it); a block this node
//!   does not have is the typed answer `found: None`.
//! - `hangar/block/unref`: [`UnrefBlock`] → `()`: removes the reference
//!   (hash, version) on the receiver.
//! - `hangar/block/ref`: [`UnrefBlock`] (the same pair) → `bool`: adds the
//!   reference (hash, version) if the receiver has the block's file, and
//!   says whether it had (a copy shares the blocks of its source this way,
//!   [`BlockManager::add_ref_existing`]).
//!
//! Sizes are bounded before anything is buffered: an announced plain length
//! above the block size, or a body longer than the announced length allows,
//! is refused ([`BlockError::TooLarge`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use hangar_net::{Body, Endpoint, Handler, HandlerError, Mesh, NetError, Request, Response};
use hangar_util::Hash;
use serde::{Deserialize, Serialize};

use crate::files::EncodedBlock;
use crate::manager::BlockManager;
use crate::{BlockError, Result};

/// Path of the put endpoint.
pub const PUT_PATH: &str = "hangar/block/put";
/// Path of the get endpoint.
pub const GET_PATH: &str = "hangar/block/get";
/// Path of the unref endpoint.
pub const UNREF_PATH: &str = "hangar/block/unref";
/// Path of the ref endpoint.
pub const REF_PATH: &str = "hangar/block/ref";

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

/// A reference to remove (`unref`) or to add to a block already stored
/// (`ref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnrefBlock {
    pub hash: Hash,
    #[serde(with = "hangar_util::serde_id16")]
    pub version: [u8; 16],
}

/// The size bounds of what a node accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLimits {
    /// Largest plain block (the configured `block_size`).
    pub max_plain_len: u64,
}

impl BlockLimits {
    /// Largest stored form of a block of `plain_len` bytes: the plain length,
    /// or zstd's bound for a frame of that content.
    pub fn max_stored_len(plain_len: u64, compressed: bool) -> u64 {
        if compressed {
            zstd::zstd_safe::compress_bound(plain_len as usize) as u64
        } else {
            plain_len
        }
    }

    /// Largest stored form of any block.
    pub fn max_stored(&self) -> u64 {
        Self::max_stored_len(self.max_plain_len, true)
    }
}

/// The three block endpoints of a mesh.
#[derive(Clone)]
pub struct BlockEndpoints {
    pub put: Arc<Endpoint<PutBlock, PutBlockReply>>,
    pub get: Arc<Endpoint<GetBlock, GetBlockReply>>,
    pub unref: Arc<Endpoint<UnrefBlock, ()>>,
    pub add_ref: Arc<Endpoint<UnrefBlock, bool>>,
}

impl BlockEndpoints {
    /// The block endpoints of `mesh`, without handlers.
    pub fn of(mesh: &Mesh) -> std::result::Result<BlockEndpoints, NetError> {
        Ok(BlockEndpoints {
            put: mesh.endpoint(PUT_PATH)?,
            get: mesh.endpoint(GET_PATH)?,
            unref: mesh.endpoint(UNREF_PATH)?,
            add_ref: mesh.endpoint(REF_PATH)?,
        })
    }

    /// Installs the handlers that serve this node's blocks from `mgr`. At
    /// most `queue` calls of each kind are inside a handler at once (more
    /// are refused as overloaded), so received blocks held in memory never
    /// exceed `queue` × the largest stored block.
    pub fn serve(&self, mgr: &Arc<BlockManager>, limits: BlockLimits, queue: usize) {
        self.put
            .set_handler(PutHandler::new(mgr.clone(), limits), queue);
        self.get.set_handler(GetHandler::new(mgr.clone()), queue);
        self.unref
            .set_handler(UnrefHandler::new(mgr.clone()), queue.max(1024));
        self.add_ref
            .set_handler(UnrefHandler::new(mgr.clone()), queue.max(1024));
    }
}

/// Serves `hangar/block/put` from a block manager.
pub struct PutHandler {
    mgr: Arc<BlockManager>,
    limits: BlockLimits,
}

impl PutHandler {
    pub fn new(mgr: Arc<BlockManager>, limits: BlockLimits) -> PutHandler {
        PutHandler { mgr, limits }
    }
}

/// Checks and stores one received block copy (the put handler's work).
pub async fn receive_put(
    mgr: &BlockManager,
    limits: BlockLimits,
    msg: PutBlock,
    body: Option<Body>,
) -> Result<PutBlockReply> {
    let hash = msg.hash;
    if msg.plain_len > limits.max_plain_len {
        return Err(BlockError::TooLarge {
            hash,
            len: msg.plain_len,
            max: limits.max_plain_len,
        });
    }
    let max = BlockLimits::max_stored_len(msg.plain_len, msg.compressed);
    let body = body.ok_or_else(|| BlockError::Corrupt {
        hash,
        reason: "put without a body".into(),
    })?;
    let data = body.collect(max as usize).await.map_err(|e| match e {
        NetError::BodyTooLarge(_) => BlockError::TooLarge {
            hash,
            len: max + 1,
            max,
        },
        e => BlockError::Net(e),
    })?;
    let enc = EncodedBlock {
        data,
        compressed: msg.compressed,
        plain_len: msg.plain_len,
    };
    let stored = mgr.store_encoded(hash, enc, msg.version).await?;
    Ok(PutBlockReply {
        written: stored.written,
    })
}

#[async_trait]
impl Handler<PutBlock, PutBlockReply> for PutHandler {
    async fn handle(
        &self,
        req: Request<PutBlock>,
    ) -> std::result::Result<Response<PutBlockReply>, HandlerError> {
        let stats = self.mgr.stats();
        match receive_put(&self.mgr, self.limits, req.msg, req.body).await {
            Ok(r) => {
                stats.puts_received.fetch_add(1, Ordering::Relaxed);
                Ok(Response::new(r))
            }
            Err(e) => {
                stats.puts_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(from = %req.from.short(), "block put refused: {e}");
                Err(HandlerError::new(e))
            }
        }
    }
}

/// Serves `hangar/block/get` from a block manager.
pub struct GetHandler {
    mgr: Arc<BlockManager>,
}

impl GetHandler {
    pub fn new(mgr: Arc<BlockManager>) -> GetHandler {
        GetHandler { mgr }
    }
}

#[async_trait]
impl Handler<GetBlock, GetBlockReply> for GetHandler {
    async fn handle(
        &self,
        req: Request<GetBlock>,
    ) -> std::result::Result<Response<GetBlockReply>, HandlerError> {
        match self.mgr.read_encoded(req.msg.hash).await {
            Ok(enc) => Ok(Response::with_body(
                GetBlockReply {
                    found: Some(BlockForm {
                        compressed: enc.compressed,
                        plain_len: enc.plain_len,
                    }),
                },
                Body::from_bytes(enc.data),
            )),
            Err(BlockError::Missing(_)) => Ok(Response::new(GetBlockReply { found: None })),
            Err(e) => Err(HandlerError::new(e)),
        }
    }
}

/// Serves `hangar/block/unref` from a block manager.
pub struct UnrefHandler {
    mgr: Arc<BlockManager>,
}

impl UnrefHandler {
    pub fn new(mgr: Arc<BlockManager>) -> UnrefHandler {
        UnrefHandler { mgr }
    }
}

#[async_trait]
impl Handler<UnrefBlock, ()> for UnrefHandler {
    async fn handle(
        &self,
        req: Request<UnrefBlock>,
    ) -> std::result::Result<Response<()>, HandlerError> {
        self.mgr
            .unref(req.msg.hash, req.msg.version)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(()))
    }
}

#[async_trait]
impl Handler<UnrefBlock, bool> for UnrefHandler {
    async fn handle(
        &self,
        req: Request<UnrefBlock>,
    ) -> std::result::Result<Response<bool>, HandlerError> {
        let present = self
            .mgr
            .add_ref_existing(req.msg.hash, req.msg.version)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(present))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlockFiles;
    use bytes::Bytes;
    use hangar_db::{Db, DbOptions, SledEngine};

    fn manager() -> (tempfile::TempDir, Arc<BlockManager>) {
        let d = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
        let db = Db::new(Arc::new(engine), DbOptions::default());
        let files = BlockFiles::new(vec![d.path().join("data")], Some(1), false, true).unwrap();
        (d, BlockManager::new(files, db, 60_000))
    }

    const LIMITS: BlockLimits = BlockLimits {
        max_plain_len: 64 * 1024,
    };

    fn put_msg(hash: Hash, enc: &EncodedBlock) -> PutBlock {
        PutBlock {
            hash,
            version: [5; 16],
            compressed: enc.compressed,
            plain_len: enc.plain_len,
        }
    }

    #[tokio::test]
    async fn a_good_copy_is_stored_as_received_and_referenced() {
        let (_d, mgr) = manager();
        let plain = Bytes::from(vec![3u8; 40_000]);
        let h = Hash::of(&plain);
        let enc = mgr.block_files().encode(plain.clone());
        assert!(enc.compressed);
        let r = receive_put(
            &mgr,
            LIMITS,
            put_msg(h, &enc),
            Some(Body::from_bytes(enc.data.clone())),
        )
        .await
        .unwrap();
        assert!(r.written);
        assert_eq!(mgr.refcount(h).await.unwrap(), 1);
        assert_eq!(mgr.read_encoded(h).await.unwrap(), enc, "stored as sent");
        assert_eq!(mgr.read(h).await.unwrap(), plain);
    }

    #[tokio::test]
    async fn wrong_hash_wrong_length_and_bad_frames_are_refused() {
        let (_d, mgr) = manager();
        let plain = Bytes::from(vec![3u8; 40_000]);
        let enc = mgr.block_files().encode(plain.clone());
        let other = Hash::of(b"another block");
        let e = receive_put(
            &mgr,
            LIMITS,
            put_msg(other, &enc),
            Some(Body::from_bytes(enc.data.clone())),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, BlockError::Corrupt { reason, .. } if reason.contains("hashes to")),
            "{e}"
        );
        assert!(!mgr.has_file(&other));
        assert_eq!(mgr.refcount(other).await.unwrap(), 0);

        let h = Hash::of(&plain);
        let mut msg = put_msg(h, &enc);
        msg.plain_len -= 1;
        let e = receive_put(&mgr, LIMITS, msg, Some(Body::from_bytes(enc.data.clone())))
            .await
            .unwrap_err();
        assert!(matches!(e, BlockError::Corrupt { .. }), "{e}");

        let mut msg = put_msg(h, &enc);
        msg.compressed = true;
        let e = receive_put(&mgr, LIMITS, msg, Some(Body::from_bytes(plain.clone())))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, BlockError::Corrupt { reason, .. } if reason.contains("decompress")),
            "{e}"
        );
        let e = receive_put(&mgr, LIMITS, put_msg(h, &enc), None)
            .await
            .unwrap_err();
        assert!(matches!(e, BlockError::Corrupt { .. }), "{e}");
        assert!(!mgr.has_file(&h));
    }

    #[tokio::test]
    async fn oversized_blocks_and_bodies_are_refused() {
        let (_d, mgr) = manager();
        let plain = Bytes::from(vec![1u8; 64 * 1024 + 1]);
        let h = Hash::of(&plain);
        let msg = PutBlock {
            hash: h,
            version: [1; 16],
            compressed: false,
            plain_len: plain.len() as u64,
        };
        let e = receive_put(&mgr, LIMITS, msg, Some(Body::from_bytes(plain)))
            .await
            .unwrap_err();
        assert!(matches!(e, BlockError::TooLarge { .. }), "{e}");

        // A body longer than its announced plain length: refused while it is
        // read, not buffered whole (an endless body would do the same).
        let small = Bytes::from(vec![2u8; 1000]);
        let msg = PutBlock {
            hash: Hash::of(&small),
            version: [1; 16],
            compressed: false,
            plain_len: 1000,
        };
        let endless = Body::from_stream(futures::stream::repeat_with(|| {
            Ok(Bytes::from(vec![2u8; 4096]))
        }));
        let e = receive_put(&mgr, LIMITS, msg, Some(endless))
            .await
            .unwrap_err();
        assert!(matches!(e, BlockError::TooLarge { max: 1000, .. }), "{e}");
        assert!(!mgr.has_file(&Hash::of(&small)));
    }

    #[test]
    fn messages_encode_as_documented() {
        let h = Hash::of(b"x");
        let put = PutBlock {
            hash: h,
            version: [7; 16],
            compressed: true,
            plain_len: 1 << 20,
        };
        let b = rmp_serde::to_vec(&put).unwrap();
        let mut want = vec![0x94, 0xc4, 0x20];
        want.extend_from_slice(h.as_bytes());
        want.extend_from_slice(&[0xc4, 0x10]);
        want.extend_from_slice(&[7; 16]);
        want.extend_from_slice(&[0xc3, 0xce, 0x00, 0x10, 0x00, 0x00]);
        assert_eq!(b, want);
        assert_eq!(rmp_serde::from_slice::<PutBlock>(&b).unwrap(), put);

        let none = rmp_serde::to_vec(&GetBlockReply { found: None }).unwrap();
        assert_eq!(none, [0x91, 0xc0]);
        let some = rmp_serde::to_vec(&GetBlockReply {
            found: Some(BlockForm {
                compressed: false,
                plain_len: 5,
            }),
        })
        .unwrap();
        assert_eq!(some, [0x91, 0x92, 0xc2, 0x05]);
        assert_eq!(rmp_serde::to_vec(&()).unwrap(), [0xc0]);
        let unref = rmp_serde::to_vec(&UnrefBlock {
            hash: h,
            version: [7; 16],
        })
        .unwrap();
        assert_eq!(&unref[..3], &[0x92, 0xc4, 0x20]);
        assert_eq!(unref.len(), 1 + 34 + 18);
    }
}
