//! What the node supplies to the admin endpoint and socket: the code that
//! runs an operation. The binary implements [`AdminOps`] once, and both
//! transports call it, so the CLI and the HTTP API cannot disagree.

use std::future::Future;

use serde_json::Value;

use crate::proto::{AdminError, Request};

/// Whether this node can serve reads and writes at its consistency mode
/// now, as `/health` reports it.
#[derive(Debug, Clone)]
pub struct Health {
    /// `200` when true, `503` when not.
    pub ok: bool,
    /// The JSON body: at least `status` and a one-line `reason`.
    pub body: Value,
}

/// Runs the admin operations of a node.
pub trait AdminOps: Send + Sync + 'static {
    /// Runs one operation and answers with its JSON result.
    fn call(&self, req: Request) -> impl Future<Output = Result<Value, AdminError>> + Send;

    /// This node's health, for `/health`.
    fn health(&self) -> impl Future<Output = Health> + Send;
}
