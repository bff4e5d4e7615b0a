//! Other nodes' histories: the mesh endpoint `hangar/admin/history`,
//! answered by every node from its own ring ([`super::History`]), and
//! [`gather`], which asks several nodes at once so that one node's admin
//! API draws the whole cluster.
//!
//! Both requests carry a window, bounded by the ring's hour; an answer is
//! at most [`super::CAPACITY`] points, well under the mesh's message
//! bound. The endpoint admits [`QUEUE`] calls at once; a caller waits
//! [`TIMEOUT`] per node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar_layout::NodeId;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, Mesh, NetError, Request, Response};
use serde::{Deserialize, Serialize};

use super::History;
use crate::history_answers::{NodeHistory, UsagePoint};

/// The mesh endpoint of histories.
pub const PATH: &str = "hangar/admin/history";
/// Calls a node answers at once; more are refused as overloaded.
const QUEUE: usize = 8;
/// How long a caller waits for each node's answer.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// The longest window asked: the ring's.
pub const MAX_WINDOW_SECS: u64 = super::CAPACITY as u64 * super::INTERVAL_SECS;

/// What a node is asked for, over the last `secs` seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HistoryRequest {
    /// Its own history.
    Node { secs: u64 },
    /// Its usage points of one bucket (id, 64 hex digits).
    Bucket { id: String, secs: u64 },
}

/// A node's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HistoryAnswer {
    Node(NodeHistory),
    Bucket(Vec<UsagePoint>),
}

/// The endpoint's type.
pub type HistoryEndpoint = Endpoint<HistoryRequest, HistoryAnswer>;

struct HistoryHandler(History);

#[async_trait]
impl Handler<HistoryRequest, HistoryAnswer> for HistoryHandler {
    async fn handle(
        &self,
        req: Request<HistoryRequest>,
    ) -> Result<Response<HistoryAnswer>, HandlerError> {
        Ok(Response::new(match req.msg {
            HistoryRequest::Node { secs } => {
                HistoryAnswer::Node(self.0.node(secs.min(MAX_WINDOW_SECS)))
            }
            HistoryRequest::Bucket { id, secs } => {
                let id = hex::decode(&id).map_err(|_| HandlerError::new("bad bucket id"))?;
                HistoryAnswer::Bucket(self.0.bucket(&id, secs.min(MAX_WINDOW_SECS)))
            }
        }))
    }
}

/// Registers the endpoint on the node's mesh and answers it from `history`.
pub fn serve(mesh: &Mesh, history: History) -> Result<Arc<HistoryEndpoint>, NetError> {
    let ep = mesh.endpoint::<HistoryRequest, HistoryAnswer>(PATH)?;
    ep.set_handler(HistoryHandler(history), QUEUE);
    Ok(ep)
}

/// Each node's answer to `req`, or why it has none (down, no answer in
/// time, an older version): asked at once, at most [`TIMEOUT`] each.
pub async fn gather(
    ep: &HistoryEndpoint,
    nodes: impl IntoIterator<Item = NodeId>,
    req: HistoryRequest,
) -> BTreeMap<NodeId, Result<HistoryAnswer, String>> {
    let calls = nodes.into_iter().map(|id| {
        let req = req.clone();
        async move {
            let opts = CallOpts {
                timeout: Some(TIMEOUT),
                ..CallOpts::default()
            };
            (id, ep.call(id, req, opts).await.map_err(|e| e.to_string()))
        }
    });
    futures::future::join_all(calls).await.into_iter().collect()
}
