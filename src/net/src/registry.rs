//! The registry of a node's endpoints as its stream server sees them: each
//! path's untyped face ([`ServeEndpoint`]: message bytes in, answer bytes
//! out) beside its typed value. Knows nothing of the mesh that holds it.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OwnedSemaphorePermit;

use crate::body::Body;
use crate::identity::NodeId;

pub(crate) struct ServeOk {
    pub msg: Vec<u8>,
    pub body: Option<Body>,
    pub _permit: OwnedSemaphorePermit,
}

pub(crate) struct ServeError {
    pub status: u8,
    pub message: String,
}

/// The untyped face of an endpoint, used by the stream server.
#[async_trait]
pub(crate) trait ServeEndpoint: Send + Sync {
    async fn serve(
        &self,
        from: NodeId,
        msg: &[u8],
        body: Option<Body>,
        timeout: Duration,
    ) -> Result<ServeOk, ServeError>;
}

/// An endpoint as kept in the mesh's registry: the untyped server face and
/// the typed value for [`crate::Mesh::endpoint`] to hand out again.
#[derive(Clone)]
pub(crate) struct EndpointEntry {
    pub serve: Arc<dyn ServeEndpoint>,
    pub typed: Arc<dyn Any + Send + Sync>,
}
