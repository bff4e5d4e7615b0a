//! The Object Lock changes of the model: a bucket's configuration, a
//! version's retention and legal hold (rules in [`crate::object_lock`]).
//! Each is a register of its row, stamped past the register and merged
//! (bucket rows replicated to every node, version rows to their
//! partition's write quorum), like tags.

use hangar_util::time::now_msec;

use crate::bucket::{BucketRow, Versioning};
use crate::object_lock::{ObjectLockConfig, Retention, retention_change_allowed};
use crate::version_ops::FoundVersion;
use crate::{Model, ModelError, Result};

impl Model {
    /// Enables Object Lock on bucket `name` with `config` (or replaces its
    /// default retention). With `enable_versioning` (a bucket created with
    /// `x-amz-bucket-object-lock-enabled`) versioning is enabled with it;
    /// otherwise versioning must already be enabled (S3's
    /// InvalidBucketState).
    pub async fn set_bucket_object_lock(
        &self,
        name: &str,
        config: ObjectLockConfig,
        enable_versioning: bool,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            if enable_versioning {
                if b.versioning() != Versioning::Enabled {
                    b.versioning.update(now, Versioning::Enabled);
                }
            } else if b.versioning() != Versioning::Enabled {
                return Err(ModelError::InvalidBucketState(
                    "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"
                        .into(),
                ));
            }
            b.object_lock.update(now, Some(config));
            Ok(())
        })
        .await
    }

    /// Replaces the retention of version `found` by `new` (`None` removes
    /// it), if the rules allow ([`retention_change_allowed`]): weakening a
    /// GOVERNANCE retention needs `bypass_governance`, a COMPLIANCE one in
    /// force only moves later. The version's register only: a version
    /// removed meanwhile stays removed.
    pub async fn set_version_retention(
        &self,
        bucket: &BucketRow,
        found: &FoundVersion,
        new: Option<Retention>,
        bypass_governance: bool,
    ) -> Result<()> {
        let now = now_msec();
        retention_change_allowed(found.row.retention(), new, now, bypass_governance)
            .map_err(|_| ModelError::ObjectLocked)?;
        let mut row = found.row.clone();
        row.retention.update(now, new);
        self.object_rows()
            .insert(&bucket.id_bytes(), &found.sort, row)
            .await
    }

    /// Sets or clears the legal hold of version `found`.
    pub async fn set_version_legal_hold(
        &self,
        bucket: &BucketRow,
        found: &FoundVersion,
        on: bool,
    ) -> Result<()> {
        let mut row = found.row.clone();
        row.legal_hold.update(now_msec(), on);
        self.object_rows()
            .insert(&bucket.id_bytes(), &found.sort, row)
            .await
    }
}
