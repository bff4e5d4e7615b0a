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
//! - `hangar/block/resync_get`: [`ResyncGet`] → [`ResyncGetReply`] + body,
//!   `get` for the resync workers of other nodes: its own handler bound
//!   (`resync_serve_max`), so a node serving resyncs keeps room for client
//!   reads; while this node's clients are being served, a caller that has
//!   other sources is answered `deferred`, and one that has none waits up
//!   to `resync_yield_msec` for them to go quiet ([`ResyncGetHandler`]).
//! - `hangar/block/need`: [`GetBlock`] → [`HaveBlock`]: whether the
//!   receiver has the block's file and a live reference to it.
//! - `hangar/block/hand_over`: [`HandOver`] + body = the block as stored →
//!   [`HaveBlock`]: a node giving up a partition sends the blocks its new
//!   holders lack; the receiver checks and writes the file (no reference:
//!   references travel in the `block_refs` table). Bounded like
//!   `resync_get`.
//! - `hangar/block/check`: [`GetBlock`] → [`CheckReply`]: a reader found
//!   the receiver's copy corrupt; the receiver verifies it, quarantines it
//!   if it is, and queues the block for resync.
//!
//! Sizes are bounded before anything is buffered: an announced plain length
//! above the block size, or a body longer than the announced length allows,
//! is refused ([`BlockError::TooLarge`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::files::EncodedBlock;
use crate::manager::BlockManager;
pub use crate::messages::{
    BlockForm, CHECK_PATH, CheckReply, GET_PATH, GetBlock, GetBlockReply, HAND_OVER_PATH, HandOver,
    HaveBlock, NEED_PATH, PUT_PATH, PutBlock, PutBlockReply, REF_PATH, RESYNC_GET_PATH, ResyncGet,
    ResyncGetReply, UNREF_PATH, UnrefBlock,
};
use crate::resync_settings::ResyncSettings;
use crate::{BlockError, Result};
use async_trait::async_trait;
use hangar_net::{
    Body, Endpoint, Handler, HandlerError, Mesh, NetError, NodeId, Request, Response,
};
use hangar_util::Hash;

/// How often a yielding resync read looks whether the clients went quiet.
const YIELD_POLL: std::time::Duration = std::time::Duration::from_millis(2);

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

/// The block endpoints of a mesh.
#[derive(Clone)]
pub struct BlockEndpoints {
    pub put: Arc<Endpoint<PutBlock, PutBlockReply>>,
    pub get: Arc<Endpoint<GetBlock, GetBlockReply>>,
    pub unref: Arc<Endpoint<UnrefBlock, ()>>,
    pub add_ref: Arc<Endpoint<UnrefBlock, bool>>,
    pub resync_get: Arc<Endpoint<ResyncGet, ResyncGetReply>>,
    pub need: Arc<Endpoint<GetBlock, HaveBlock>>,
    pub hand_over: Arc<Endpoint<HandOver, HaveBlock>>,
    pub check: Arc<Endpoint<GetBlock, CheckReply>>,
}

impl BlockEndpoints {
    /// The block endpoints of `mesh`, without handlers.
    pub fn of(mesh: &Mesh) -> std::result::Result<BlockEndpoints, NetError> {
        Ok(BlockEndpoints {
            put: mesh.endpoint(PUT_PATH)?,
            get: mesh.endpoint(GET_PATH)?,
            unref: mesh.endpoint(UNREF_PATH)?,
            add_ref: mesh.endpoint(REF_PATH)?,
            resync_get: mesh.endpoint(RESYNC_GET_PATH)?,
            need: mesh.endpoint(NEED_PATH)?,
            hand_over: mesh.endpoint(HAND_OVER_PATH)?,
            check: mesh.endpoint(CHECK_PATH)?,
        })
    }

    /// Installs the handlers that serve this node's blocks from `mgr`. At
    /// most `queue` calls of each kind are inside a handler at once (more
    /// are refused as overloaded), so received blocks held in memory never
    /// exceed `queue` × the largest stored block.
    /// Resync transfers (`resync_get`, `hand_over`) are bounded
    /// separately, by `resync_queue` each.
    pub fn serve(
        &self,
        me: NodeId,
        mgr: &Arc<BlockManager>,
        limits: BlockLimits,
        queue: usize,
        resync_queue: usize,
        resync: Arc<ResyncSettings>,
    ) {
        self.put
            .set_handler(PutHandler::new(mgr.clone(), limits, me), queue);
        self.get.set_handler(GetHandler::new(mgr.clone()), queue);
        self.unref
            .set_handler(UnrefHandler::new(mgr.clone()), queue.max(1024));
        self.add_ref
            .set_handler(UnrefHandler::new(mgr.clone()), queue.max(1024));
        self.resync_get.set_handler(
            ResyncGetHandler {
                get: GetHandler::new(mgr.clone()),
                settings: resync,
            },
            resync_queue.max(1),
        );
        self.need
            .set_handler(ResyncHandler::new(mgr.clone(), limits), 1024);
        self.hand_over
            .set_handler(ResyncHandler::new(mgr.clone(), limits), resync_queue.max(1));
        self.check
            .set_handler(ResyncHandler::new(mgr.clone(), limits), queue.max(4));
    }
}

/// Serves `hangar/block/put` from a block manager.
pub struct PutHandler {
    mgr: Arc<BlockManager>,
    limits: BlockLimits,
    /// This node, whose own puts (the mesh's local calls, `from` this
    /// node) carry blocks it encoded itself from data it hashed.
    me: NodeId,
}

impl PutHandler {
    /// The handler of node `me`: a peer's blocks are checked against their
    /// hash; its own puts are stored without decoding them again (a lone
    /// node's PUT of 1 MiB hashed its block twice, +2.7 % instructions,
    /// script/profile-requests). `from` is the mesh's authenticated peer,
    /// so no peer can pass for this node.
    pub fn new(mgr: Arc<BlockManager>, limits: BlockLimits, me: NodeId) -> PutHandler {
        PutHandler { mgr, limits, me }
    }
}

/// Checks and stores one received block copy (the put handler's work).
pub async fn receive_put(
    mgr: &BlockManager,
    limits: BlockLimits,
    msg: PutBlock,
    body: Option<Body>,
) -> Result<PutBlockReply> {
    receive(mgr, limits, msg, body, true).await
}

/// Stores one received block copy, its content checked against its hash
/// unless this node encoded it itself (`check` false,
/// [`PutHandler::new`]); its length is bounded either way.
async fn receive(
    mgr: &BlockManager,
    limits: BlockLimits,
    msg: PutBlock,
    body: Option<Body>,
    check: bool,
) -> Result<PutBlockReply> {
    let enc = collect_block(msg.hash, msg.compressed, msg.plain_len, limits, body).await?;
    let stored = if check {
        mgr.store_encoded(msg.hash, enc, msg.version).await?
    } else {
        mgr.store_own_encoded(msg.hash, enc, msg.version).await?
    };
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
        let check = self.me != req.from;
        match receive(&self.mgr, self.limits, req.msg, req.body, check).await {
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
        self.serve(req.msg.hash, false).await
    }
}

impl GetHandler {
    /// Reads `hash` as stored for another node: for its client
    /// (`background` false) or its resync, on the low-priority threads.
    async fn serve(
        &self,
        hash: Hash,
        background: bool,
    ) -> std::result::Result<Response<GetBlockReply>, HandlerError> {
        let read = if background {
            self.mgr.read_encoded_in_background(hash).await
        } else {
            self.mgr.read_encoded(hash).await
        };
        match read {
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

/// Serves `hangar/block/resync_get`: a `get` that gives way to this
/// node's clients. While they are being served (the S3 layer held some of
/// its RAM budget within the last moments), a caller that has other
/// sources (`defer_if_busy`) is answered `deferred` at once, without a
/// disk read, so a refill is served by the replicas that are not serving
/// clients; a caller with no other source is served, after waiting for the
/// clients to go quiet up to the settings' yield bound (0 by default).
pub struct ResyncGetHandler {
    get: GetHandler,
    settings: Arc<ResyncSettings>,
}

#[async_trait]
impl Handler<ResyncGet, ResyncGetReply> for ResyncGetHandler {
    async fn handle(
        &self,
        req: Request<ResyncGet>,
    ) -> std::result::Result<Response<ResyncGetReply>, HandlerError> {
        let stats = self.get.mgr.stats();
        if req.msg.defer_if_busy && self.settings.foreground_busy() {
            stats.resync_deferred.fetch_add(1, Ordering::Relaxed);
            return Ok(Response::new(ResyncGetReply {
                found: None,
                deferred: true,
            }));
        }
        let until = tokio::time::Instant::now() + self.settings.yield_max();
        while self.settings.foreground_busy() && tokio::time::Instant::now() < until {
            tokio::time::sleep(YIELD_POLL).await;
        }
        let got = self.get.serve(req.msg.hash, true).await?;
        if got.msg.found.is_some() {
            stats.resync_served.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Response {
            msg: ResyncGetReply {
                found: got.msg.found,
                deferred: false,
            },
            body: got.body,
        })
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

/// Serves `need`, `hand_over` and `check` from a block manager.
pub struct ResyncHandler {
    mgr: Arc<BlockManager>,
    limits: BlockLimits,
}

impl ResyncHandler {
    pub fn new(mgr: Arc<BlockManager>, limits: BlockLimits) -> ResyncHandler {
        ResyncHandler { mgr, limits }
    }
}

#[async_trait]
impl Handler<GetBlock, HaveBlock> for ResyncHandler {
    async fn handle(
        &self,
        req: Request<GetBlock>,
    ) -> std::result::Result<Response<HaveBlock>, HandlerError> {
        let have = self
            .mgr
            .have(req.msg.hash)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(have))
    }
}

/// Checks and stores a handed-over block (the `hand_over` handler's work).
pub async fn receive_hand_over(
    mgr: &BlockManager,
    limits: BlockLimits,
    msg: HandOver,
    body: Option<Body>,
) -> Result<HaveBlock> {
    let enc = collect_block(msg.hash, msg.compressed, msg.plain_len, limits, body).await?;
    mgr.store_fetched(msg.hash, enc).await?;
    mgr.have(msg.hash).await
}

#[async_trait]
impl Handler<HandOver, HaveBlock> for ResyncHandler {
    async fn handle(
        &self,
        req: Request<HandOver>,
    ) -> std::result::Result<Response<HaveBlock>, HandlerError> {
        match receive_hand_over(&self.mgr, self.limits, req.msg, req.body).await {
            Ok(h) => Ok(Response::new(h)),
            Err(e) => {
                tracing::warn!(from = %req.from.short(), "block hand-over refused: {e}");
                Err(HandlerError::new(e))
            }
        }
    }
}

#[async_trait]
impl Handler<GetBlock, CheckReply> for ResyncHandler {
    async fn handle(
        &self,
        req: Request<GetBlock>,
    ) -> std::result::Result<Response<CheckReply>, HandlerError> {
        let r = self
            .mgr
            .verify(req.msg.hash)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(r))
    }
}

/// Reads the body of a block sent in its stored form, refusing it as soon
/// as it is longer than its announced form allows.
pub(crate) async fn collect_block(
    hash: Hash,
    compressed: bool,
    plain_len: u64,
    limits: BlockLimits,
    body: Option<Body>,
) -> Result<EncodedBlock> {
    if plain_len > limits.max_plain_len {
        return Err(BlockError::TooLarge {
            hash,
            len: plain_len,
            max: limits.max_plain_len,
        });
    }
    let max = BlockLimits::max_stored_len(plain_len, compressed);
    let body = body.ok_or_else(|| BlockError::Corrupt {
        hash,
        reason: "block sent without a body".into(),
    })?;
    let data = body.collect(max as usize).await.map_err(|e| match e {
        NetError::BodyTooLarge(_) => BlockError::TooLarge {
            hash,
            len: max + 1,
            max,
        },
        e => BlockError::Net(e),
    })?;
    Ok(EncodedBlock {
        data,
        compressed,
        plain_len,
    })
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

    /// A resync read of a stored block through [`ResyncGetHandler`], with
    /// the foreground busy as `busy` says and the caller allowing deferral
    /// as `defer_if_busy` says; how long it took, the answer, and the
    /// deferrals counted.
    async fn resync_read(
        yield_msec: u64,
        busy: Arc<std::sync::atomic::AtomicBool>,
        defer_if_busy: bool,
    ) -> (std::time::Duration, ResyncGetReply, bool, u64) {
        let (_d, mgr) = manager();
        let plain = Bytes::from(vec![7u8; 10_000]);
        let h = Hash::of(&plain);
        mgr.store(h, plain, [1; 16], |_| Ok(())).await.unwrap();
        let fg = hangar_util::foreground::Foreground::default();
        fg.set(move || busy.load(Ordering::Relaxed));
        let settings = ResyncSettings::new(4, 0, 0).yielding_to(fg, yield_msec);
        let handler = ResyncGetHandler {
            get: GetHandler::new(mgr.clone()),
            settings: Arc::new(settings),
        };
        let t0 = tokio::time::Instant::now();
        let r = handler
            .handle(Request {
                from: hangar_util::NodeId([9; 32]),
                msg: ResyncGet {
                    hash: h,
                    defer_if_busy,
                },
                body: None,
            })
            .await
            .unwrap();
        let deferred = mgr.stats().resync_deferred.load(Ordering::Relaxed);
        (t0.elapsed(), r.msg, r.body.is_some(), deferred)
    }

    async fn yielding_read(
        yield_msec: u64,
        busy: Arc<std::sync::atomic::AtomicBool>,
    ) -> (std::time::Duration, bool) {
        let (took, reply, _, _) = resync_read(yield_msec, busy, false).await;
        (took, reply.found.is_some())
    }

    #[tokio::test]
    async fn a_source_serving_clients_defers_only_callers_that_have_another_source() {
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;
        let (took, reply, body, deferred) =
            resync_read(300, Arc::new(AtomicBool::new(true)), true).await;
        assert!(reply.deferred && reply.found.is_none() && !body);
        assert_eq!(deferred, 1);
        assert!(took < Duration::from_millis(150), "at once: {took:?}");
        let (_, reply, body, deferred) =
            resync_read(0, Arc::new(AtomicBool::new(true)), false).await;
        assert!(
            !reply.deferred && reply.found.is_some() && body,
            "no other source: served"
        );
        assert_eq!(deferred, 0);
        let (_, reply, body, deferred) =
            resync_read(0, Arc::new(AtomicBool::new(false)), true).await;
        assert!(
            !reply.deferred && reply.found.is_some() && body,
            "idle: served"
        );
        assert_eq!(deferred, 0);
    }

    #[test]
    fn resync_get_without_deferral_is_encoded_as_a_get() {
        let hash = Hash::of(b"x");
        let plain = ResyncGet {
            hash,
            defer_if_busy: false,
        };
        let old = rmp_serde::to_vec(&GetBlock { hash }).unwrap();
        assert_eq!(rmp_serde::to_vec(&plain).unwrap(), old);
        assert_eq!(rmp_serde::from_slice::<ResyncGet>(&old).unwrap(), plain);
        let asked = ResyncGet {
            hash,
            defer_if_busy: true,
        };
        let bytes = rmp_serde::to_vec(&asked).unwrap();
        assert_eq!(rmp_serde::from_slice::<ResyncGet>(&bytes).unwrap(), asked);
        let found = Some(BlockForm {
            compressed: true,
            plain_len: 5,
        });
        let reply = ResyncGetReply {
            found,
            deferred: false,
        };
        let old = rmp_serde::to_vec(&GetBlockReply { found }).unwrap();
        assert_eq!(rmp_serde::to_vec(&reply).unwrap(), old);
        assert_eq!(
            rmp_serde::from_slice::<ResyncGetReply>(&old).unwrap(),
            reply
        );
    }

    #[tokio::test]
    async fn a_resync_read_waits_for_busy_clients_up_to_the_yield_bound_only() {
        use std::sync::atomic::AtomicBool;
        use std::time::Duration;
        // Quiet clients: served at once.
        let (took, found) = yielding_read(300, Arc::new(AtomicBool::new(false))).await;
        assert!(found && took < Duration::from_millis(150), "{took:?}");
        // Busy clients and no yield: served at once.
        let (took, found) = yielding_read(0, Arc::new(AtomicBool::new(true))).await;
        assert!(found && took < Duration::from_millis(150), "{took:?}");
        // Clients busy throughout: held back for the bound, then served.
        let (took, found) = yielding_read(300, Arc::new(AtomicBool::new(true))).await;
        assert!(found && took >= Duration::from_millis(300), "{took:?}");
        // Clients going quiet after about 100 ms (counted from before the
        // store is opened): served then, long before the bound.
        let busy = Arc::new(AtomicBool::new(true));
        let b = busy.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            b.store(false, Ordering::Relaxed);
        });
        let (took, found) = yielding_read(2000, busy).await;
        assert!(found, "served");
        assert!(took < Duration::from_millis(1500), "{took:?}");
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

    /// The handler of a node checks a block a peer sends, however the
    /// block came: only its own local calls skip the check.
    #[tokio::test]
    async fn a_node_checks_its_peers_puts_and_trusts_only_its_own() {
        let (_d, mgr) = manager();
        let (me, peer) = (NodeId([1; 32]), NodeId([2; 32]));
        let handler = PutHandler::new(mgr.clone(), LIMITS, me);
        let plain = Bytes::from(vec![3u8; 40_000]);
        let enc = mgr.block_files().encode(plain.clone());
        let wrong = Hash::of(b"another block");
        let put = |from, hash| Request {
            from,
            msg: put_msg(hash, &enc),
            body: Some(Body::from_bytes(enc.data.clone())),
        };
        let e = handler.handle(put(peer, wrong)).await;
        assert!(e.is_err(), "a peer's block under another hash is refused");
        assert_eq!(mgr.refcount(wrong).await.unwrap(), 0);
        let h = Hash::of(&plain);
        assert!(handler.handle(put(peer, h)).await.unwrap().msg.written);
        // This node's own put is stored as its caller encoded it.
        let (_d2, mgr2) = manager();
        let own = PutHandler::new(mgr2.clone(), LIMITS, me);
        assert!(own.handle(put(me, h)).await.unwrap().msg.written);
        assert_eq!(mgr2.read(h).await.unwrap(), plain);
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
