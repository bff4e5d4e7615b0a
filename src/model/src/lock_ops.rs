//! The Object Lock changes of a version: its retention and legal hold
//! (rules in [`crate::object_lock`]; a bucket's configuration is
//! [`crate::Buckets::set_bucket_object_lock`]). Each is a register of the
//! version's row, stamped past the register and merged at the partition's
//! write quorum, like tags.

use hangar_util::time::now_msec;

use crate::Objects;
use crate::bucket::BucketRow;
use crate::object_lock::{Retention, retention_change_allowed};
use crate::version_ops::FoundVersion;
use crate::{ModelError, Result};

impl Objects {
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
        Ok(self
            .rows()
            .insert_one(&bucket.id_bytes(), &found.sort, row)
            .await?)
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
        Ok(self
            .rows()
            .insert_one(&bucket.id_bytes(), &found.sort, row)
            .await?)
    }
}
