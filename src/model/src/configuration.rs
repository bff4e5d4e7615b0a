//! Changes of the configuration registers of buckets and objects: tags and
//! CORS rules. Each is a register of its row (bucket.rs, object.rs): a
//! change is stamped past the register's timestamp and merged, so it
//! replicates like any other row and never changes the bucket or the
//! object version itself.

use hangar_table::Table;
use hangar_util::time::now_msec;

use crate::bucket::{BucketRow, BucketTable, CorsRule};
use crate::object::{ObjectRow, TagSet};
use crate::{Model, ModelError, Result};

impl Model {
    /// Applies `f` to the live bucket `name` (with the time of the change,
    /// read in the transaction), stores and replicates the result; an error
    /// of `f` changes nothing.
    pub(crate) async fn update_bucket(
        &self,
        name: &str,
        f: impl FnOnce(&mut BucketRow, u64) -> Result<()> + Send + 'static,
    ) -> Result<BucketRow> {
        self.buckets_writable()?;
        // A bucket known to another node only is fetched first.
        let seen = self
            .get_bucket(name)
            .await?
            .ok_or_else(|| ModelError::NoSuchBucket(name.to_owned()))?;
        // The bucket's own name, also when `name` is an alias.
        let name = seen.name.clone();
        let row: BucketRow = self
            .db()
            .write(move |tx| {
                // The same bucket as the one checked: not one re-created since.
                let mut b = Table::<BucketTable>::tx_get(tx, b"", name.as_bytes())?
                    .filter(|b| !b.deleted && b.id == seen.id)
                    .ok_or_else(|| ModelError::NoSuchBucket(name.clone()))?;
                f(&mut b, now_msec())?;
                Ok::<_, ModelError>(Table::<BucketTable>::tx_insert(
                    tx,
                    b"",
                    name.as_bytes(),
                    &b,
                )?)
            })
            .await?;
        self.replicate_bucket(&row).await?;
        Ok(row)
    }

    /// Replaces the tags of bucket `name` (an empty set removes them).
    pub async fn set_bucket_tags(&self, name: &str, tags: TagSet) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.tags.update(now, tags);
            Ok(())
        })
        .await
    }

    /// Replaces the CORS rules of bucket `name` (none: no configuration).
    pub async fn set_bucket_cors(&self, name: &str, rules: Vec<CorsRule>) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.cors.update(now, rules);
            Ok(())
        })
        .await
    }

    /// Replaces the lifecycle rules of bucket `name` (none: no
    /// configuration).
    pub async fn set_bucket_lifecycle(
        &self,
        name: &str,
        rules: Vec<crate::lifecycle::LifecycleRule>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.lifecycle.update(now, rules);
            Ok(())
        })
        .await
    }

    /// Replaces the policy document of bucket `name` (`None` removes it).
    /// The document is checked by the caller; only its size is bounded here.
    pub async fn set_bucket_policy(&self, name: &str, policy: Option<String>) -> Result<BucketRow> {
        if policy
            .as_ref()
            .is_some_and(|p| p.len() > crate::access::MAX_POLICY_LEN)
        {
            return Err(ModelError::Invalid(
                "the policy document is too large".into(),
            ));
        }
        self.update_bucket(name, move |b, now| {
            b.policy.update(now, policy);
            Ok(())
        })
        .await
    }

    /// Replaces the public access block of bucket `name` (`None` removes
    /// it).
    pub async fn set_bucket_public_access_block(
        &self,
        name: &str,
        block: Option<crate::access::PublicAccessBlock>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.public_access_block.update(now, block);
            Ok(())
        })
        .await
    }

    /// Replaces the canned ACL of bucket `name`.
    pub async fn set_bucket_acl(
        &self,
        name: &str,
        acl: crate::access::CannedAcl,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.acl.update(now, Some(acl));
            Ok(())
        })
        .await
    }

    /// Replaces the canned ACL of version `found` (read by
    /// [`Model::find_version`]); a version removed meanwhile stays removed
    /// (the ACL is merged onto that version only).
    pub async fn set_version_acl(
        &self,
        bucket: &BucketRow,
        found: &crate::version_ops::FoundVersion,
        acl: crate::access::CannedAcl,
    ) -> Result<()> {
        let mut row = found.row.clone();
        row.acl.update(now_msec(), Some(acl));
        self.object_rows()
            .insert(&bucket.id_bytes(), &found.sort, row)
            .await
    }

    /// Replaces the website configuration of bucket `name` (`None`
    /// removes it).
    pub async fn set_bucket_website(
        &self,
        name: &str,
        website: Option<crate::website::WebsiteConfig>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.website.update(now, website);
            Ok(())
        })
        .await
    }

    /// Sets the quotas of bucket `name` (replacing both limits).
    pub async fn set_bucket_quotas(
        &self,
        name: &str,
        quotas: crate::bucket::BucketQuotas,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.quotas.update(now, quotas);
            Ok(())
        })
        .await
    }

    /// Sets the versioning state of bucket `name` (enabled or suspended;
    /// a bucket never goes back to unversioned).
    pub async fn set_bucket_versioning(
        &self,
        name: &str,
        state: crate::bucket::Versioning,
    ) -> Result<BucketRow> {
        if state == crate::bucket::Versioning::Off {
            return Err(ModelError::Invalid(
                "versioning can be enabled or suspended, not removed".into(),
            ));
        }
        self.update_bucket(name, move |b, now| {
            // S3: a bucket with Object Lock cannot be suspended.
            if b.object_lock().is_some() && state != crate::bucket::Versioning::Enabled {
                return Err(ModelError::InvalidBucketState(
                    "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.".into(),
                ));
            }
            b.versioning.update(now, state);
            Ok(())
        })
        .await
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
            .object_rows()
            .get(&part, key.as_bytes())
            .await?
            .filter(|o| !o.is_deleted())
        else {
            return Ok(None);
        };
        row.tags.update(now_msec(), tags);
        self.object_rows()
            .insert(&part, key.as_bytes(), row.clone())
            .await?;
        Ok(Some(row))
    }
}
