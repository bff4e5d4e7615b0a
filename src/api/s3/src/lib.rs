//! Hangar's S3 API.
//!
//! The s3s crate does the protocol: routing, SigV4 (headers, presigned URLs,
//! aws-chunked bodies with signed chunks or unsigned trailers), XML, and the
//! DTOs generated from the AWS model. This crate maps each operation onto
//! [`hangar_model`]: [`auth`] answers "whose secret is this" and "may this
//! key do that", the `ops_*` modules implement the operations, [`error`]
//! maps every internal error to its S3 code in one place, [`cors`] answers
//! preflights and adds CORS headers around s3s, and [`server`] accepts
//! connections. Operations not listed in `doc/s3-compatibility.md`
//! answer `501 NotImplemented` (s3s's default for an unimplemented method).

pub mod access;
pub mod access_log;
mod access_log_spool;
mod admission;
pub mod auth;
pub mod body_limits;
mod checksum;
mod conditions;
pub mod cors;
mod cors_rules;
mod counted_body;
pub mod error;
mod expect_continue;
pub mod header_limits;
mod held_body;
pub mod http_conn;
mod lifecycle_rules;
mod lingering_body;
pub mod metrics;
mod multipart_checksum;
pub mod notify_targets;
pub mod notify_worker;
mod object_parts;
mod ops_acl;
mod ops_attributes;
mod ops_bucket;
mod ops_copy;
mod ops_cors;
mod ops_delete;
mod ops_encryption;
mod ops_get;
mod ops_lifecycle;
mod ops_list;
mod ops_logging;
mod ops_multipart;
mod ops_notification;
mod ops_object_lock;
mod ops_ownership;
mod ops_policy;
mod ops_post;
mod ops_put;
mod ops_tagging;
mod ops_versioning;
mod ops_website;
mod payload_hash;
pub mod policy;
pub mod policy_eval;
mod post_errors;
mod post_gate;
pub mod presign;
pub mod request_id;
pub mod request_time;
mod s3_impl;
pub mod server;
mod sse_c;
mod sse_managed;
mod tagging;
mod time;
pub mod upload_gate;
mod user_meta;
pub mod web;
mod website_rules;
mod wildcard;
mod xml_text;

use std::sync::Arc;

use hangar_model::Model;

/// Settings of the S3 API that come from the config file.
#[derive(Debug, Clone)]
pub struct S3Settings {
    pub region: String,
    pub root_domain: Option<String>,
    pub block_size: usize,
    pub inline_threshold: usize,
    /// RAM for block buffers of requests in flight (`s3_ram_buffer_max`).
    pub ram_buffer_max: u64,
    /// RAM the requests waiting for a share may ask for together
    /// (`s3_ram_queue_max`); past it a request is refused at once.
    pub ram_queue_max: u64,
    /// Longest wait for a share of that RAM before `503 SlowDown`.
    pub admission_wait: std::time::Duration,
    /// How long after a block put failed for overload new uploads are
    /// refused on arrival (`s3_shed_after_overload_msec`; zero: never).
    pub shed_after_overload: std::time::Duration,
    /// Uploads that wait for `100 Continue` are refused while their blocks
    /// would wait longer than this (`s3_upload_latency_target_msec`; zero:
    /// never).
    pub upload_latency_target: std::time::Duration,
    /// Refuse SSE-C requests without `X-Forwarded-Proto: https`
    /// (`[s3_api] sse_c_require_https`).
    pub sse_c_require_https: bool,
    /// The cluster's master key of SSE-S3 and SSE-KMS (`sse_master_key`,
    /// else derived from `rpc_secret`).
    pub sse_master_key: hangar_model::sse_managed::MasterKey,
    /// How often server access log lines are written into their target
    /// buckets (`s3_access_log_flush_secs`).
    pub access_log_flush: std::time::Duration,
    /// Where the lines waiting for a flush are spooled, so that a process
    /// that dies loses none (`<metadata_dir>/access-log-spool`); `None`:
    /// in memory only.
    pub access_log_spool: Option<std::path::PathBuf>,
    /// Accept requests signed with Signature Version 2, held to V4's time
    /// bounds (`[s3_api] allow_signature_v2`); refused otherwise
    /// ([`request_time`]).
    pub allow_signature_v2: bool,
    /// The targets bucket notifications may name (`[[notify_webhook]]`,
    /// `[[notify_redis]]`).
    pub notify_targets: Vec<notify_targets::NotifyTarget>,
}

/// The S3 API of one node.
#[derive(Clone)]
pub struct S3Api {
    pub(crate) model: Arc<Model>,
    pub(crate) settings: Arc<S3Settings>,
    pub(crate) budget: admission::RamBudget,
    pub(crate) uploads: upload_gate::UploadGate,
}

impl S3Api {
    pub fn new(model: Arc<Model>, settings: S3Settings) -> Self {
        let budget = admission::RamBudget::new(
            settings.ram_buffer_max,
            settings.ram_queue_max,
            settings.block_size,
            settings.admission_wait,
        );
        // Eight blocks queued are always admitted: enough to keep the disk
        // and the replicas busy while the rate is being measured.
        let block = settings.block_size.max(1) as u64;
        let uploads =
            upload_gate::UploadGate::new(settings.upload_latency_target, 8 * block, block);
        S3Api {
            model,
            settings: Arc::new(settings),
            budget,
            uploads,
        }
    }

    /// The RAM budget of requests in flight.
    pub fn budget(&self) -> &admission::RamBudget {
        &self.budget
    }

    /// The admission of uploads by the wait their blocks would have.
    pub fn uploads(&self) -> &upload_gate::UploadGate {
        &self.uploads
    }
}
