//! Hangar's S3 API.
//!
//! The s3s crate does the protocol: routing, SigV4 (headers, presigned URLs,
//! aws-chunked bodies with signed chunks or unsigned trailers), XML, and the
//! DTOs generated from the AWS model. This crate maps each operation onto
//! [`hangar_model`]: [`auth`] answers "whose secret is this" and "may this
//! key do that", the `ops_*` modules implement the operations, [`error`]
//! maps every internal error to its S3 code in one place, and [`server`]
//! accepts connections. Operations not listed in `doc/s3-compatibility.md`
//! answer `501 NotImplemented` (s3s's default for an unimplemented method).

pub mod auth;
mod checksum;
mod conditions;
pub mod error;
mod expect_continue;
mod ops_bucket;
mod ops_copy;
mod ops_delete;
mod ops_get;
mod ops_list;
mod ops_multipart;
mod ops_put;
mod s3_impl;
pub mod server;
mod time;

use std::sync::Arc;

use hangar_model::Model;

/// Settings of the S3 API that come from the config file.
#[derive(Debug, Clone)]
pub struct S3Settings {
    pub region: String,
    pub root_domain: Option<String>,
    pub block_size: usize,
    pub inline_threshold: usize,
}

/// The S3 API of one node.
#[derive(Clone)]
pub struct S3Api {
    pub(crate) model: Arc<Model>,
    pub(crate) settings: Arc<S3Settings>,
}

impl S3Api {
    pub fn new(model: Arc<Model>, settings: S3Settings) -> Self {
        S3Api {
            model,
            settings: Arc::new(settings),
        }
    }
}
