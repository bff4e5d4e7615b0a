//! One in-process Hangar node for the S3 fuzz target: a real metadata store
//! (redb) and block store in a temporary directory, the model, and the S3
//! endpoint exactly as `hangar server` builds it (`hangar_api_s3::server::
//! service`: s3s with Hangar's auth, access control and virtual hosts, and
//! CORS),
//! with one key that may do everything on bucket `fuzz`, which holds the
//! object `known`.

use std::sync::Arc;
use std::time::Duration;

use hangar_api_s3::{S3Api, S3Settings};
use hangar_db::RedbEngine;
use hangar_model::PermissionChange;
use hangar_api_s3::server::Endpoint;

use crate::sigv4::{KEY_ID, REGION, SECRET};

/// The node; lives for the whole fuzzing process.
pub struct Node {
    pub rt: tokio::runtime::Runtime,
    pub service: Endpoint,
    _dir: tempfile::TempDir,
}

/// The bucket the key owns.
pub const BUCKET: &str = "fuzz";
/// Virtual-host root domain.
pub const ROOT_DOMAIN: &str = "s3.fuzz";

impl Node {
    pub fn start() -> Node {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        // On tmpfs when there is one: the fuzzer writes often.
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm")
        } else {
            tempfile::tempdir()
        }
        .expect("temporary directory");
        let service = rt.block_on(async {
            let engine = RedbEngine::open(&dir.path().join("db"), 8 << 20).expect("redb");
            // A lone node: its rows and blocks take a cluster's path, to
            // itself.
            let model = hangar_model::testkit::start_node(dir.path(), Arc::new(engine), 1)
                .await
                .model;
            model.keys().import(KEY_ID, SECRET, "fuzz").await.expect("key");
            model.keys().set_create_bucket(KEY_ID, true).await.expect("allow");
            model
                .buckets()
                .create_bucket(BUCKET, Some(KEY_ID))
                .await
                .expect("bucket");
            let all = PermissionChange {
                read: Some(true),
                write: Some(true),
                owner: Some(true),
            };
            model
                .buckets()
                .set_permission(BUCKET, KEY_ID, all)
                .await
                .expect("permission");
            let api = S3Api::new(
                model,
                S3Settings {
                    region: REGION.into(),
                    root_domain: Some(format!(".{ROOT_DOMAIN}")),
                    block_size: 64 * 1024,
                    inline_threshold: 3072,
                    ram_buffer_max: 16 << 20,
                    ram_queue_max: 16 << 20,
                    admission_wait: Duration::from_millis(5),
                    shed_after_overload: Duration::ZERO,
                    upload_latency_target: Duration::from_millis(1000),
                    sse_c_require_https: false,
                    sse_master_key: hangar_model::sse_managed::MasterKey::new([7; 32]),
                    access_log_flush: Duration::from_secs(60),
                    access_log_spool: None,
                    // So that V2 dates and expiries reach their parsers
                    // (request_time) rather than the refusal.
                    allow_signature_v2: true,
                    notify_targets: Vec::new(),
                },
            );
            hangar_api_s3::server::service(api)
        });
        Node {
            rt,
            service,
            _dir: dir,
        }
    }
}
