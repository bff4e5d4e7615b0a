//! The acceptor's endpoints on the mesh, and the proposer's [`Link`] over
//! them: `hangar/object/paxos/{prepare,accept,commit}` (doc/rpc.md).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar_cluster::Cluster;
use hangar_layout::WriteSet;
use hangar_net::{CallOpts, Endpoint, Handler, HandlerError, Mesh, NetError, Request, Response};
use hangar_util::NodeId;

use super::Acceptor;
use super::messages::{Accept, AcceptReply, Commit, Prepare, PrepareReply};
use super::proposer::Link;

pub const PREPARE_PATH: &str = "hangar/object/paxos/prepare";
pub const ACCEPT_PATH: &str = "hangar/object/paxos/accept";
pub const COMMIT_PATH: &str = "hangar/object/paxos/commit";
/// Calls one endpoint admits at once (more are refused as overloaded).
const QUEUE: usize = 1024;
/// An acceptor answers after one small local write: a node that does not
/// answer in this long is treated as failed for the round.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The three endpoints of one node.
pub struct PaxosEndpoints {
    prepare: Arc<Endpoint<Prepare, PrepareReply>>,
    accept: Arc<Endpoint<Accept, AcceptReply>>,
    commit: Arc<Endpoint<Commit, ()>>,
}

impl PaxosEndpoints {
    /// Registers the endpoints on `mesh`, served by `acceptor`.
    pub fn new(mesh: &Mesh, acceptor: Arc<Acceptor>) -> Result<Arc<PaxosEndpoints>, NetError> {
        let eps = PaxosEndpoints {
            prepare: mesh.endpoint(PREPARE_PATH)?,
            accept: mesh.endpoint(ACCEPT_PATH)?,
            commit: mesh.endpoint(COMMIT_PATH)?,
        };
        let h = Handlers { acceptor };
        eps.prepare.set_handler(h.clone(), QUEUE);
        eps.accept.set_handler(h.clone(), QUEUE);
        eps.commit.set_handler(h, QUEUE);
        Ok(Arc::new(eps))
    }
}

#[derive(Clone)]
struct Handlers {
    acceptor: Arc<Acceptor>,
}

#[async_trait]
impl Handler<Prepare, PrepareReply> for Handlers {
    async fn handle(&self, req: Request<Prepare>) -> Result<Response<PrepareReply>, HandlerError> {
        let m = req.msg;
        m.key.check().map_err(HandlerError::new)?;
        let r = self
            .acceptor
            .prepare(&m.key, m.ballot)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(r))
    }
}

#[async_trait]
impl Handler<Accept, AcceptReply> for Handlers {
    async fn handle(&self, req: Request<Accept>) -> Result<Response<AcceptReply>, HandlerError> {
        let m = req.msg;
        m.key.check().map_err(HandlerError::new)?;
        m.value.check().map_err(HandlerError::new)?;
        let r = self
            .acceptor
            .accept(&m.key, m.ballot, m.value)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(r))
    }
}

#[async_trait]
impl Handler<Commit, ()> for Handlers {
    async fn handle(&self, req: Request<Commit>) -> Result<Response<()>, HandlerError> {
        let m = req.msg;
        m.key.check().map_err(HandlerError::new)?;
        self.acceptor
            .commit(&m.key, m.ballot, m.value)
            .await
            .map_err(HandlerError::new)?;
        Ok(Response::new(()))
    }
}

/// The acceptors of one key over the mesh: the nodes of its layout
/// partition in every active version, taken when the write starts.
pub struct MeshLink {
    cluster: Cluster,
    eps: Arc<PaxosEndpoints>,
    sets: Vec<WriteSet>,
}

impl MeshLink {
    pub fn new(cluster: Cluster, eps: Arc<PaxosEndpoints>, sets: Vec<WriteSet>) -> MeshLink {
        MeshLink { cluster, eps, sets }
    }
}

fn opts() -> CallOpts {
    CallOpts::default().with_timeout(CALL_TIMEOUT)
}

#[async_trait]
impl Link for MeshLink {
    fn me(&self) -> NodeId {
        self.cluster.id()
    }

    fn sets(&self) -> Vec<WriteSet> {
        self.sets.clone()
    }

    fn is_up(&self, n: NodeId) -> bool {
        self.cluster.is_up(n)
    }

    async fn prepare(&self, to: NodeId, m: Prepare) -> Result<PrepareReply, NetError> {
        self.eps.prepare.call(to, m, opts()).await
    }

    async fn accept(&self, to: NodeId, m: Accept) -> Result<AcceptReply, NetError> {
        self.eps.accept.call(to, m, opts()).await
    }

    async fn commit(&self, to: NodeId, m: Commit) -> Result<(), NetError> {
        self.eps.commit.call(to, m, opts()).await
    }
}
