//! Hangar's admin HTTP endpoint (`[admin] api_bind_addr`):
//! - `GET /metrics`: the node's metrics (doc/metrics.md), as OpenMetrics or
//!   Prometheus text per the `Accept` header ([`exposition`]); bearer
//!   `metrics_token` when set;
//! - `GET /health`: `200` with the node's id and how many peers are up.
//!
//! The admin API proper (Garage's `/v1/...` routes, bearer `admin_token`)
//! is not built yet: those routes answer `501`. The operator CLI uses the
//! node's local admin socket instead.

mod cluster_collector;
mod collector;
pub mod exposition;
mod families;
pub mod sampler;
mod server;

pub use cluster_collector::ClusterCollector;
pub use collector::NodeCollector;
pub use server::{AdminEndpoint, serve};
