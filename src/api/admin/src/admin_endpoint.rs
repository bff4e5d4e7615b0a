//! What the admin HTTP endpoint serves: the state its routes (`http_api`)
//! and the web console (`console`) share.

use std::sync::Arc;

use prometheus_client::registry::Registry;

use crate::auth::Tokens;
use crate::node_s3::NodeS3;

/// What the admin endpoint serves.
pub struct AdminEndpoint<H> {
    /// Rendered at `/metrics` (and recorded by the node's history).
    pub registry: Arc<Registry>,
    pub tokens: Tokens,
    pub ops: Arc<H>,
    /// This node's S3 endpoint, which the web console's object browser
    /// calls in-process (`console`); `None` when the node serves no S3.
    pub s3: Option<NodeS3>,
}
