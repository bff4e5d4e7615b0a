//! Put/GetBucketLogging: where a bucket's server access logs go, a
//! register of the bucket row (`hangar_model::bucket::BucketLogging`); the
//! logs themselves are [`crate::access_log`]'s.

use hangar_model::access::AclPermission;
use hangar_model::bucket::{BucketLogging, BucketRow, PartitionDate};
use s3s::dto::{
    BucketLogsPermission, GetBucketLoggingInput, GetBucketLoggingOutput, LoggingEnabled, Owner,
    PartitionDateSource, PartitionedPrefix, PutBucketLoggingInput, PutBucketLoggingOutput,
    TargetGrant, TargetObjectKeyFormat,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::{Caller, Need, signer};
use crate::error::OrS3;
use crate::ops_acl::{AskedAcl, bucket_owner, grantee_ref, grants};

impl S3Api {
    pub(crate) async fn do_put_bucket_logging(
        &self,
        req: S3Request<PutBucketLoggingInput>,
    ) -> S3Result<S3Response<PutBucketLoggingOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let logging = match input.bucket_logging_status.logging_enabled {
            None => None,
            Some(e) => {
                let caller = req.extensions.get::<Caller>().cloned().unwrap_or_default();
                Some(self.target(&caller, e).await?)
            }
        };
        self.model
            .buckets()
            .set_bucket_logging(&b.name, logging)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketLoggingOutput {}))
    }

    pub(crate) async fn do_get_bucket_logging(
        &self,
        req: S3Request<GetBucketLoggingInput>,
    ) -> S3Result<S3Response<GetBucketLoggingOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let Some(l) = b.logging() else {
            return Ok(S3Response::new(GetBucketLoggingOutput {
                logging_enabled: None,
            }));
        };
        // The grants given, as they were asked: not the owner's own.
        let target_grants = l.has_grants().then(|| {
            let nobody = Owner {
                display_name: None,
                id: None,
            };
            grants(l.object_acl.unwrap_or_default(), &l.object_grants, &nobody)
                .into_iter()
                .skip(1)
                .map(|g| TargetGrant {
                    grantee: g.grantee,
                    permission: g
                        .permission
                        .map(|p| BucketLogsPermission::from(p.as_str().to_owned())),
                })
                .collect()
        });
        Ok(S3Response::new(GetBucketLoggingOutput {
            logging_enabled: Some(LoggingEnabled {
                target_bucket: l.target_bucket.clone(),
                target_prefix: l.target_prefix.clone(),
                target_grants,
                target_object_key_format: key_format(l),
            }),
        }))
    }

    /// The target `e` names, checked: it exists, and the caller may write
    /// into it (the logs are written with the caller's say-so, as AWS
    /// asks a bucket policy for its logging service).
    async fn target(&self, caller: &Caller, e: LoggingEnabled) -> S3Result<BucketLogging> {
        let partitioned = partition_date(e.target_object_key_format.as_ref())?;
        let signer = caller.key.as_ref().map(|k| k.access_key_id.as_str());
        let target = self
            .model
            .buckets()
            .get_bucket_as(&e.target_bucket, signer)
            .await
            .or_s3()?
            .ok_or_else(|| {
                s3_error!(
                    InvalidTargetBucketForLogging,
                    "The target bucket for logging does not exist"
                )
            })?;
        if !caller.may(
            &target,
            Need::Write,
            "s3:PutObject",
            Some(e.target_prefix.as_str()),
        ) {
            return Err(s3_error!(
                InvalidTargetBucketForLogging,
                "You must have permission to write to the target bucket for logging"
            ));
        }
        let acl = self
            .log_object_acl(&target, e.target_grants.unwrap_or_default())
            .await?;
        Ok(BucketLogging {
            target_bucket: target.name,
            target_prefix: e.target_prefix,
            partitioned,
            object_acl: Some(acl.canned).filter(|c| c.is_public()),
            object_grants: acl.grants,
        })
    }

    /// The ACL `TargetGrants` give the log objects written into `target`,
    /// owned by its owner (who has full control of them): grants to users
    /// and to groups, read as a PutObjectAcl body is.
    /// A target whose ACLs are disabled (`BucketOwnerEnforced`) takes none
    /// (AWS API reference, TargetGrant), and one that blocks public ACLs
    /// no public one.
    async fn log_object_acl(
        &self,
        target: &BucketRow,
        grants: Vec<TargetGrant>,
    ) -> S3Result<AskedAcl> {
        if grants.is_empty() {
            return Ok(AskedAcl::default());
        }
        if !target.acls_enabled() {
            return Err(s3_error!(
                AccessControlListNotSupported,
                "The target bucket for logging does not allow ACLs"
            ));
        }
        let malformed = || {
            s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema"
            )
        };
        let mut named = Vec::new();
        for g in &grants {
            let grantee = g.grantee.as_ref().and_then(grantee_ref);
            let permission = g
                .permission
                .as_ref()
                .and_then(|p| AclPermission::parse(p.as_str()));
            named.push((
                grantee.ok_or_else(malformed)?,
                permission.ok_or_else(malformed)?,
            ));
        }
        let owner = bucket_owner(&self.model, target).await?;
        let acl = self.resolved_acl(&owner, named).await?;
        if acl.is_public()
            && target
                .public_access_block()
                .is_some_and(|p| p.block_public_acls)
        {
            return Err(s3_error!(
                AccessDenied,
                "Access Denied: the target bucket's public access block forbids public ACLs"
            ));
        }
        Ok(acl)
    }
}

/// The partition date a `TargetObjectKeyFormat` asks for: `None` for the
/// simple prefix (or none given); a `PartitionedPrefix` without its
/// `PartitionDateSource` is `EventTime`, as S3 defaults it. Both prefixes
/// at once, or an unknown date source, are `400 InvalidArgument`.
fn partition_date(f: Option<&TargetObjectKeyFormat>) -> S3Result<Option<PartitionDate>> {
    let Some(f) = f else { return Ok(None) };
    let Some(p) = &f.partitioned_prefix else {
        return Ok(None);
    };
    if f.simple_prefix.is_some() {
        return Err(s3_error!(
            InvalidArgument,
            "TargetObjectKeyFormat takes SimplePrefix or PartitionedPrefix, not both"
        ));
    }
    match p.partition_date_source.as_ref().map(|d| d.as_str()) {
        None | Some(PartitionDateSource::EVENT_TIME) => Ok(Some(PartitionDate::EventTime)),
        Some(PartitionDateSource::DELIVERY_TIME) => Ok(Some(PartitionDate::DeliveryTime)),
        Some(other) => Err(s3_error!(
            InvalidArgument,
            "Invalid PartitionDateSource: {other}"
        )),
    }
}

/// The `TargetObjectKeyFormat` GetBucketLogging answers for `l`: the
/// partitioned prefix when it has one; none for the simple prefix (its
/// default).
fn key_format(l: &BucketLogging) -> Option<TargetObjectKeyFormat> {
    let source = match l.partitioned? {
        PartitionDate::EventTime => PartitionDateSource::EVENT_TIME,
        PartitionDate::DeliveryTime => PartitionDateSource::DELIVERY_TIME,
    };
    Some(TargetObjectKeyFormat {
        partitioned_prefix: Some(PartitionedPrefix {
            partition_date_source: Some(PartitionDateSource::from_static(source)),
        }),
        simple_prefix: None,
    })
}
