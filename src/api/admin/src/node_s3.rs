//! The handle through which the admin endpoint's console reaches this
//! node's S3 endpoint (held in [`crate::admin_endpoint::AdminEndpoint`]).

use std::sync::Arc;

/// This node's S3 endpoint as the console's proxy calls it: in-process,
/// counted in the S3 endpoint's own metrics.
pub struct NodeS3 {
    pub endpoint: hangar_api_s3::server::Endpoint,
    pub metrics: Arc<hangar_api_s3::metrics::S3Metrics>,
}
