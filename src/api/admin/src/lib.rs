//! Hangar's admin surface: the typed operations an operator asks a node
//! (`proto`), the two transports that carry them — the local Unix socket
//! (`socket`) and the admin HTTP API on `[admin] api_bind_addr`
//! (`http_api`, `routes`, served by `server` within connection bounds) —
//! and the CLI's client for both (`client`). The binary supplies the code
//! that runs the operations (`ops::AdminOps`), once for both transports.
//!
//! The HTTP endpoint also serves `GET /metrics` (doc/metrics.md; OpenMetrics
//! or Prometheus text per the `Accept` header, [`exposition`]; bearer
//! `metrics_token` when set) and `GET /health` (`200` when this node can
//! serve reads and writes at its consistency mode, `503` otherwise).
//! doc/admin-api.yaml is the OpenAPI description of every route.

mod admin_endpoint;
pub mod answers;
pub mod auth;
pub mod block_answers;
pub mod client;
mod cluster_collector;
mod collector;
pub mod console;
pub mod exposition;
mod families;
pub mod history;
pub mod history_answers;
pub mod http_api;
mod http_reply;
pub mod layout_answers;
mod node_s3;
#[cfg(test)]
mod openapi_check;
pub mod ops;
pub mod proto;
pub mod routes;
pub mod sampler;
pub mod server;
pub mod socket;

pub use cluster_collector::ClusterCollector;
pub use collector::NodeCollector;
pub use http_api::AdminEndpoint;
pub use server::serve;
