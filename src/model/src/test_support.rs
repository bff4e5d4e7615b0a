//! Helpers of the crate's unit tests: a store and a model on a fresh
//! directory, the MessagePack bytes the row-format tests compare, and a
//! plain upload row they vary.

use std::sync::Arc;

use hangar_db::{Db, DbOptions, SledEngine};

/// A MessagePack fixstr: how a field name (or a short string) is written.
pub(crate) fn fixstr(text: &str) -> Vec<u8> {
    let mut v = vec![0xa0 | text.len() as u8];
    v.extend_from_slice(text.as_bytes());
    v
}

/// A metadata store on a fresh directory.
pub(crate) fn test_db() -> (tempfile::TempDir, Db) {
    let d = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
    (d, Db::new(Arc::new(engine), DbOptions::default()))
}

/// A model on a fresh node directory (`db` and `data` under the tempdir):
/// a lone node, whose rows and blocks go through the cluster's path to
/// itself ([`crate::testkit`]).
pub(crate) async fn test_model() -> (tempfile::TempDir, Arc<crate::Model>) {
    let d = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(&d.path().join("db"), 8 << 20).unwrap();
    let node = crate::testkit::start_node(d.path(), Arc::new(engine), 1).await;
    (d, node.model)
}

/// An upload row of key `k` with nothing but format 2's fields set.
pub(crate) fn plain_upload() -> crate::multipart::MpuRow {
    crate::multipart::MpuRow {
        deleted: false,
        upload_id: [1; 16],
        key: "k".into(),
        initiated_msec: 1,
        headers: Default::default(),
        user_meta: Default::default(),
        checksum_algorithm: None,
        tags: Default::default(),
        sse_c: None,
        checksum_type: None,
    }
}
