//! Typed RPC endpoints: one per message type, found by path, with a handler
//! on the receiving side and `call` on the sending side.

use std::marker::PhantomData;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Serialize, de::DeserializeOwned};
use tokio::sync::Semaphore;

use crate::body::Body;
use crate::error::NetError;
use crate::frame::{self, decode, encode};
use crate::identity::NodeId;
pub use crate::priority::Priority;
use crate::registry::{ServeEndpoint, ServeError, ServeOk};
use crate::state::MeshInner;

/// A type that can travel as an RPC message (MessagePack via serde).
pub trait Message: Serialize + DeserializeOwned + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> Message for T {}

/// Per-call options.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOpts {
    /// Deadline for the call; `None` means the mesh's `rpc_timeout`.
    pub timeout: Option<Duration>,
    pub priority: Priority,
}

impl CallOpts {
    /// Options for background traffic (resync and the like).
    pub fn background() -> CallOpts {
        CallOpts {
            timeout: None,
            priority: Priority::Background,
        }
    }

    /// The same options with another deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> CallOpts {
        self.timeout = Some(timeout);
        self
    }
}

/// What a handler receives.
pub struct Request<T> {
    /// The calling node (this node for local calls).
    pub from: NodeId,
    pub msg: T,
    /// The streamed body, if the caller sent one.
    pub body: Option<Body>,
}

/// What a handler returns, and what a caller gets back.
pub struct Response<T> {
    pub msg: T,
    /// A streamed body sent after the message, if any.
    pub body: Option<Body>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for Response<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("msg", &self.msg)
            .field("has_body", &self.body.is_some())
            .finish()
    }
}

impl<T> Response<T> {
    /// A response without body.
    pub fn new(msg: T) -> Response<T> {
        Response { msg, body: None }
    }

    /// A response followed by a streamed body.
    pub fn with_body(msg: T, body: Body) -> Response<T> {
        Response {
            msg,
            body: Some(body),
        }
    }
}

/// An error returned by a handler; the caller gets it as
/// [`NetError::Remote`] with this text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(pub String);

impl HandlerError {
    pub fn new(msg: impl std::fmt::Display) -> HandlerError {
        HandlerError(msg.to_string())
    }
}

/// The receiving side of an endpoint.
#[async_trait]
pub trait Handler<Req: Message, Resp: Message>: Send + Sync + 'static {
    async fn handle(&self, req: Request<Req>) -> Result<Response<Resp>, HandlerError>;
}

struct HandlerSlot<Req, Resp> {
    handler: Arc<dyn Handler<Req, Resp>>,
    /// Admission: one permit per call inside the handler. No permit left
    /// means the queue is full and the call is refused as overloaded.
    queue: Arc<Semaphore>,
}

impl<Req, Resp> Clone for HandlerSlot<Req, Resp> {
    fn clone(&self) -> Self {
        HandlerSlot {
            handler: self.handler.clone(),
            queue: self.queue.clone(),
        }
    }
}

/// A typed RPC endpoint: requests of type `Req` answered with `Resp`.
///
/// Get one with [`crate::Mesh::endpoint`]; the same path always gives the
/// same endpoint, and asking for it with other types is an error, so a
/// handler can never receive a message of the wrong type.
pub struct Endpoint<Req, Resp> {
    path: String,
    mesh: Weak<MeshInner>,
    slot: RwLock<Option<HandlerSlot<Req, Resp>>>,
    _types: PhantomData<fn(Req) -> Resp>,
}

/// Default number of calls a handler admits at once.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;

impl<Req: Message, Resp: Message> Endpoint<Req, Resp> {
    pub(crate) fn new(path: String, mesh: Weak<MeshInner>) -> Endpoint<Req, Resp> {
        Endpoint {
            path,
            mesh,
            slot: RwLock::new(None),
            _types: PhantomData,
        }
    }

    /// The endpoint's path (its name on the wire).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Installs the handler. At most `queue_capacity` calls are inside it
    /// at once; further calls are refused at once with
    /// [`NetError::Overloaded`] rather than queued without bound.
    pub fn set_handler(&self, handler: impl Handler<Req, Resp>, queue_capacity: usize) {
        let slot = HandlerSlot {
            handler: Arc::new(handler),
            queue: Arc::new(Semaphore::new(queue_capacity)),
        };
        *self.slot.write().expect("handler lock") = Some(slot);
    }

    fn slot(&self) -> Option<HandlerSlot<Req, Resp>> {
        self.slot.read().expect("handler lock").clone()
    }

    /// Calls node `to` with `msg` and no body; a body in the response, if
    /// any, is dropped.
    pub async fn call(&self, to: NodeId, msg: Req, opts: CallOpts) -> Result<Resp, NetError> {
        Ok(self.call_with_body(to, msg, None, opts).await?.msg)
    }

    /// Calls node `to` with `msg` and an optional streamed body. The deadline
    /// (`opts.timeout` or the mesh's `rpc_timeout`) covers sending the request
    /// and receiving the response message; each chunk of a response body must
    /// then arrive within the same duration. Calls to this node itself run
    /// the handler directly, without the network or encoding.
    pub async fn call_with_body(
        &self,
        to: NodeId,
        msg: Req,
        body: Option<Body>,
        opts: CallOpts,
    ) -> Result<Response<Resp>, NetError> {
        let mesh = self.mesh.upgrade().ok_or(NetError::Shutdown)?;
        let timeout = opts.timeout.unwrap_or(mesh.rpc_timeout());
        let start = Instant::now();
        let result = if to == mesh.id() {
            self.call_local(to, msg, body, timeout).await
        } else {
            match mesh
                .call_remote(to, &self.path, encode(&msg)?, body, opts.priority, timeout)
                .await
            {
                Ok((bytes, body)) => decode(&bytes).map(|msg| Response { msg, body }),
                Err(e) => Err(e),
            }
        };
        mesh.metrics()
            .record_call(&self.path, &to, start.elapsed(), result.as_ref().err());
        result
    }

    async fn call_local(
        &self,
        me: NodeId,
        msg: Req,
        body: Option<Body>,
        timeout: Duration,
    ) -> Result<Response<Resp>, NetError> {
        let slot = self
            .slot()
            .ok_or_else(|| NetError::NoSuchEndpoint(self.path.clone()))?;
        let _permit = slot
            .queue
            .clone()
            .try_acquire_owned()
            .map_err(|_| NetError::Overloaded(self.path.clone()))?;
        let req = Request {
            from: me,
            msg,
            body,
        };
        match tokio::time::timeout(timeout, slot.handler.handle(req)).await {
            Err(_) => Err(NetError::Timeout {
                endpoint: self.path.clone(),
                after: timeout,
            }),
            Ok(Err(e)) => Err(NetError::Remote {
                endpoint: self.path.clone(),
                message: e.0,
            }),
            Ok(Ok(resp)) => Ok(resp),
        }
    }
}

#[async_trait]
impl<Req: Message, Resp: Message> ServeEndpoint for Endpoint<Req, Resp> {
    async fn serve(
        &self,
        from: NodeId,
        msg: &[u8],
        body: Option<Body>,
        timeout: Duration,
    ) -> Result<ServeOk, ServeError> {
        let err = |status, message: String| ServeError { status, message };
        let slot = self.slot().ok_or_else(|| {
            err(
                frame::STATUS_NO_SUCH_ENDPOINT,
                format!("no handler for {}", self.path),
            )
        })?;
        let permit = slot.queue.clone().try_acquire_owned().map_err(|_| {
            err(
                frame::STATUS_OVERLOADED,
                format!("{} queue is full", self.path),
            )
        })?;
        let msg: Req = decode(msg).map_err(|e| err(frame::STATUS_BAD_REQUEST, e.to_string()))?;
        let req = Request { from, msg, body };
        let resp = match tokio::time::timeout(timeout, slot.handler.handle(req)).await {
            Err(_) => {
                return Err(err(
                    frame::STATUS_TIMEOUT,
                    format!("handler did not answer within {timeout:?}"),
                ));
            }
            Ok(Err(e)) => return Err(err(frame::STATUS_HANDLER_ERROR, e.0)),
            Ok(Ok(resp)) => resp,
        };
        let bytes =
            encode(&resp.msg).map_err(|e| err(frame::STATUS_HANDLER_ERROR, e.to_string()))?;
        Ok(ServeOk {
            msg: bytes,
            body: resp.body,
            _permit: permit,
        })
    }
}

impl MeshInner {
    /// The endpoint registered at `path`, if it has these types.
    pub(crate) fn typed_endpoint<Req: Message, Resp: Message>(
        &self,
        path: &str,
    ) -> Option<Arc<Endpoint<Req, Resp>>> {
        self.serve_entry(path)?
            .typed
            .downcast::<Endpoint<Req, Resp>>()
            .ok()
    }
}
