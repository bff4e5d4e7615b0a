//! Builds the AWS SDK S3 client the generator drives, and makes sure its bucket exists.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::DisplayErrorContext;

use crate::error::LoadgenError;

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub struct Target {
    /// Base URL of the S3 endpoint, e.g. `http://127.0.0.1:3900`.
    pub endpoint: String,
    /// Access key ID.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// SigV4 signing region.
    pub region: String,
}

/// A client for `target`: path-style addressing, the SDK's default request checksums
/// (CRC32 on uploads, as users send), no retries (a failed request is reported, not
/// hidden), and timeouts so that no request can hang a bounded run.
pub fn build(target: &Target) -> Client {
    // Plain-HTTP hyper 1 client: the endpoint is http on loopback, so the SDK's TLS
    // stack is neither compiled in nor needed.
    let http_client = aws_smithy_http_client::Builder::new().build_http();
    let credentials = Credentials::new(
        &target.access_key,
        &target.secret_key,
        None,
        None,
        "hangar-loadgen",
    );
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(target.region.clone()))
        .endpoint_url(&target.endpoint)
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(http_client)
        .retry_config(RetryConfig::standard().with_max_attempts(1))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_timeout(Duration::from_secs(120))
                .build(),
        )
        .build();
    Client::from_conf(config)
}

/// Creates `bucket` unless the key already owns it.
pub async fn ensure_bucket(client: &Client, bucket: &str) -> Result<(), LoadgenError> {
    if client.head_bucket().bucket(bucket).send().await.is_ok() {
        return Ok(());
    }
    match client.create_bucket().bucket(bucket).send().await {
        Ok(_) => Ok(()),
        Err(err)
            if err
                .as_service_error()
                .is_some_and(|e| e.is_bucket_already_owned_by_you()) =>
        {
            Ok(())
        }
        Err(err) => Err(LoadgenError::Setup {
            phase: "creating the bucket",
            message: DisplayErrorContext(&err).to_string(),
        }),
    }
}
