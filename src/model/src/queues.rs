//! The durable queues of the model, written in the same transaction as the
//! row whose change they follow from (by the tables' update hooks, or by the
//! writer): uploads in progress, and versions to collect. The collector and
//! the start-up scan that read them are in [`crate::garbage`].

use hangar_db::{Db, Tx};
use serde::{Deserialize, Serialize};

use crate::{ModelError, Result, VersionId};

/// Tree of uploads in progress: version id → [`UploadOf`] (MessagePack).
pub const UPLOAD_TREE: &str = "upload";
/// Tree of versions to collect: version id → empty.
pub const VERSION_GC_TREE: &str = "version_gc";

/// Queues `version` for collection, inside a transaction.
pub fn queue_version_gc(tx: &mut Tx<'_>, version: &VersionId) {
    tx.delete(UPLOAD_TREE, version.to_vec());
    tx.put(VERSION_GC_TREE, version.to_vec(), Vec::new());
}

/// What an upload in progress will become, kept with it in [`UPLOAD_TREE`]
/// so that after a crash the start-up scan can tell an upload that was
/// published just before (its row names it: keep it) from one that was not
/// (collect it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UploadOf {
    /// A version of object `key` of the bucket whose id is `bucket`.
    Object {
        #[serde(with = "serde_bytes")]
        bucket: Vec<u8>,
        key: String,
        /// When the upload began (ms; 0 in the records of older binaries):
        /// a version of a versioned bucket is published at a later
        /// timestamp, which bounds the search for its row after a crash.
        #[serde(default)]
        started_msec: u64,
    },
    /// Part `part_number` of multipart upload `upload_id`.
    Part {
        #[serde(with = "hangar_util::serde_id16")]
        upload_id: VersionId,
        part_number: u32,
    },
}

impl UploadOf {
    pub fn object(bucket: &[u8; 32], key: &str) -> UploadOf {
        UploadOf::Object {
            bucket: bucket.to_vec(),
            key: key.to_owned(),
            started_msec: hangar_util::time::now_msec(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("upload records encode")
    }
}

/// Registers `version` as an upload in progress of `of`.
pub(crate) async fn record_upload(db: &Db, version: VersionId, of: &UploadOf) -> Result<()> {
    let value = of.encode();
    db.write(move |tx| {
        tx.put(UPLOAD_TREE, version.to_vec(), value);
        Ok::<_, ModelError>(())
    })
    .await
}

/// Ends the record of a published upload (its row now holds it). Queued,
/// not awaited: a record a crash leaves behind is found published by the
/// start-up scan ([`crate::garbage::abandon_uploads`]), so its end need
/// not be durable before the client is answered, which saves a PUT one
/// group commit's wait.
pub(crate) async fn end_upload_record(db: &Db, version: VersionId) -> Result<()> {
    db.write_queued("end of an upload record", move |tx| {
        tx.delete(UPLOAD_TREE, version.to_vec());
        Ok::<_, ModelError>(())
    })
    .await?;
    Ok(())
}
