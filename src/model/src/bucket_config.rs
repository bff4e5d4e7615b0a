//! Changes of a bucket's configuration registers: tags, CORS, lifecycle,
//! policy, public access block, ACL, website, quotas, versioning and
//! Object Lock. Each is a register of the bucket row (bucket.rs): a change
//! is stamped past the register's timestamp and merged, so it replicates
//! like any other row and never changes the bucket itself.

use hangar_table::Replica;
use hangar_util::time::now_msec;

use crate::bucket::{BucketRow, BucketTable, CorsRule, Versioning};
use crate::object::TagSet;
use crate::object_lock::ObjectLockConfig;
use crate::{Buckets, ModelError, Result};

impl Buckets {
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
                let mut b = Replica::<BucketTable>::tx_get(tx, b"", name.as_bytes())?
                    .filter(|b| !b.deleted && b.id == seen.id)
                    .ok_or_else(|| ModelError::NoSuchBucket(name.clone()))?;
                f(&mut b, now_msec())?;
                Ok::<_, ModelError>(Replica::<BucketTable>::tx_insert(
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

    /// Replaces the ACL of bucket `name`: its canned ACL and its grants to
    /// users (a bucket that never had any keeps its row format).
    pub async fn set_bucket_acl(
        &self,
        name: &str,
        acl: crate::access::CannedAcl,
        users: Vec<crate::access::AclGrant>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.acl.update(now, Some(acl));
            if !users.is_empty() || !b.grants.is_unset() {
                b.grants.update(now, users);
            }
            Ok(())
        })
        .await
    }

    /// Sets the object ownership of bucket `name` (`None` removes it).
    /// `BucketOwnerEnforced` is refused while the bucket's ACL grants to
    /// others, checked in the change's transaction.
    pub async fn set_bucket_ownership(
        &self,
        name: &str,
        ownership: Option<crate::access::ObjectOwnership>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            if ownership == Some(crate::access::ObjectOwnership::BucketOwnerEnforced)
                && (b.acl().is_public() || !b.grants.value.is_empty())
            {
                let grants = if b.grants.value.is_empty() {
                    b.acl().as_str().to_owned()
                } else {
                    format!("{} with other grants", b.acl().as_str())
                };
                return Err(ModelError::AclWithOwnershipEnforced(format!(
                    "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting (its ACL is {grants})"
                )));
            }
            b.ownership.update(now, ownership);
            Ok(())
        })
        .await
    }

    /// Sets where the server access logs of bucket `name` go (`None`:
    /// logging off).
    pub async fn set_bucket_logging(
        &self,
        name: &str,
        logging: Option<crate::bucket::BucketLogging>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.logging.update(now, logging);
            Ok(())
        })
        .await
    }

    /// Replaces the notification rules of bucket `name` (empty: none).
    pub async fn set_bucket_notification(
        &self,
        name: &str,
        rules: Vec<crate::notification::NotificationRule>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.notification.update(now, rules);
            Ok(())
        })
        .await
    }

    /// Sets the default encryption of bucket `name` (`None` removes it).
    pub async fn set_bucket_encryption(
        &self,
        name: &str,
        encryption: Option<crate::bucket::BucketEncryption>,
    ) -> Result<BucketRow> {
        self.update_bucket(name, move |b, now| {
            b.encryption.update(now, encryption);
            Ok(())
        })
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
}
