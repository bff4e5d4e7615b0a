//! A conditional write of a small (inline) body whose Paxos round a crash
//! cut off after one acceptor accepted its value: the start-up scan of the
//! interrupted uploads must settle its key, so that once the node is back
//! the write is published or never will be. Left unsettled, the next
//! conditional write of the key — maybe hours later, through any node —
//! completes it first and then fails on it with 412 (found by
//! `test_crash_acked.py`, an If-Match refused after a whole-cluster kill).
//! Three real meshes in one process, with a layout; the other two nodes'
//! acceptors refuse accepts while the write runs, as if they had crashed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use hangar_model::ModelError;
use hangar_model::WriteCondition;
use hangar_model::garbage::{abandon_uploads, stale_uploads};
use hangar_model::object::{ObjectData, ObjectRow};
use hangar_model::paxos::Acceptor;
use hangar_model::paxos::link::ACCEPT_PATH;
use hangar_model::paxos::messages::{Accept, AcceptReply};
use hangar_net::{Handler, HandlerError, Request, Response};

/// An acceptor's accept endpoint that fails while `down` is set (the node
/// crashed), and accepts as the real one does otherwise.
struct Crashable {
    acceptor: Arc<Acceptor>,
    down: Arc<AtomicBool>,
}

#[async_trait]
impl Handler<Accept, AcceptReply> for Crashable {
    async fn handle(&self, req: Request<Accept>) -> Result<Response<AcceptReply>, HandlerError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(HandlerError::new("crashed"));
        }
        let m = req.msg;
        let r = self
            .acceptor
            .accept(&m.key, m.ballot, m.value)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(r))
    }
}

fn inline_row(body: &[u8]) -> ObjectRow {
    let mut row = ObjectRow::tombstone(
        hangar_model::new_version_id(),
        hangar_util::time::now_msec(),
    );
    row.data = ObjectData::Inline(body.to_vec());
    row.size = body.len() as u64;
    row.etag = format!("etag-{}", body.len());
    row
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_inline_conditional_write_is_settled_at_start() {
    let nodes = common::three_model_nodes().await;
    common::apply_layout(&nodes).await;
    let bucket = nodes[0]
        .model
        .buckets()
        .create_bucket("settled", None)
        .await
        .unwrap();
    let down = Arc::new(AtomicBool::new(true));
    for n in &nodes[1..] {
        n.mesh
            .endpoint::<Accept, AcceptReply>(ACCEPT_PATH)
            .unwrap()
            .set_handler(
                Crashable {
                    acceptor: Acceptor::new(n.db.clone()),
                    down: down.clone(),
                },
                16,
            );
    }
    let if_none_match = WriteCondition {
        if_none_match_any: true,
        if_match: None,
    };
    let row = inline_row(b"cut off");
    let version = row.version;
    let cut = nodes[0]
        .model
        .objects()
        .publish_if(&bucket, "k", row, if_none_match.clone())
        .await;
    match &cut {
        Err(e @ ModelError::ConditionalWrite { .. }) => {
            assert!(e.outcome_unknown(), "only node 0 accepted: {e}")
        }
        other => panic!("the round should fail with its outcome unknown: {other:?}"),
    }
    // The node "restarts": the interrupted uploads it finds are those the
    // crash left, and the write must be among them for its key to be
    // settled.
    down.store(false, Ordering::SeqCst);
    let stale = stale_uploads(&nodes[0].model).await.unwrap();
    assert_eq!(
        stale.len(),
        1,
        "the interrupted conditional write {version:?} left no upload record"
    );
    abandon_uploads(&nodes[0].model, &stale).await.unwrap();
    // Settled: what a read shows now is final, and conditional writes that
    // agree with it succeed, one through each node.
    for (i, n) in nodes.iter().enumerate() {
        let cond = match n.model.objects().get(&bucket, "k").await.unwrap() {
            None => if_none_match.clone(),
            Some(o) => WriteCondition {
                if_none_match_any: false,
                if_match: Some(o.etag),
            },
        };
        let next = inline_row(format!("write {i}").as_bytes());
        let published = n
            .model
            .objects()
            .publish_if(&bucket, "k", next, cond)
            .await
            .unwrap_or_else(|e| panic!("write {i} through node {i} after the settlement: {e}"));
        let read = n.model.objects().get(&bucket, "k").await.unwrap();
        assert_eq!(read.map(|o| o.version), Some(published.version));
    }
}
