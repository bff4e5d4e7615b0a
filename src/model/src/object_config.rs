//! Changes of an object version's configuration registers: its canned ACL
//! and its tags. Each is a register of the version's row (object.rs): a
//! change is stamped past the register's timestamp and merged at the
//! partition's write quorum, and never changes the version's data.

use hangar_util::time::now_msec;

use crate::Objects;
use crate::Result;
use crate::bucket::BucketRow;
use crate::object::{ObjectRow, TagSet};

impl Objects {
    /// Replaces the ACL of version `found` (read by
    /// [`Objects::find_version`]): its canned ACL and its other grants
    /// (a version that never had any keeps its row format); a version
    /// removed meanwhile stays removed (the ACL is merged onto that
    /// version only).
    pub async fn set_version_acl(
        &self,
        bucket: &BucketRow,
        found: &crate::version_ops::FoundVersion,
        acl: crate::access::CannedAcl,
        users: Vec<crate::access::AclGrant>,
    ) -> Result<()> {
        let mut row = found.row.clone();
        let now = now_msec();
        row.acl.update(now, Some(acl));
        if !users.is_empty() || !row.grants.is_unset() {
            row.grants.update(now, users);
        }
        Ok(self
            .rows()
            .insert_one(&bucket.id_bytes(), &found.sort, row)
            .await?)
    }

    /// Replaces the tags of the current version of `key`; `None` if there
    /// is no such object. A version published meanwhile keeps its own tags:
    /// the merge drops these with the version they were set on.
    pub async fn set_object_tags(
        &self,
        bucket: &BucketRow,
        key: &str,
        tags: TagSet,
    ) -> Result<Option<ObjectRow>> {
        let part = bucket.id_bytes();
        let Some(mut row) = self
            .rows()
            .get(&part, key.as_bytes())
            .await?
            .filter(|o| !o.is_deleted())
        else {
            return Ok(None);
        };
        row.tags.update(now_msec(), tags);
        self.rows()
            .insert_one(&part, key.as_bytes(), row.clone())
            .await?;
        Ok(Some(row))
    }
}
