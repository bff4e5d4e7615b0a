//! Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
//! GetBucketLocation.

use hangar_model::bucket::BucketRow;
use s3s::dto::{
    Bucket, CreateBucketInput, CreateBucketOutput, DeleteBucketInput, DeleteBucketOutput,
    GetBucketLocationInput, GetBucketLocationOutput, HeadBucketInput, HeadBucketOutput,
    ListBucketsInput, ListBucketsOutput, Owner,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::time::timestamp;

/// Most buckets one ListBuckets page may ask for.
const MAX_BUCKETS: i32 = 10_000;
/// The region whose CreateBucket answers an owner's re-creation 200.
const US_EAST_1: &str = "us-east-1";

fn access_key<T>(req: &S3Request<T>) -> S3Result<&str> {
    req.credentials
        .as_ref()
        .map(|c| c.access_key.as_str())
        .ok_or_else(|| s3_error!(AccessDenied, "Anonymous access is not allowed"))
}

impl S3Api {
    pub(crate) async fn do_list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let key = self
            .model
            .keys()
            .signing_key(access_key(&req)?)
            .await
            .or_s3()?
            .ok_or_else(|| s3_error!(InvalidAccessKeyId))?;
        let prefix = req.input.prefix.as_deref().unwrap_or("");
        // Pages (AWS API reference, ListBuckets: max-buckets 1–10 000, and
        // a ContinuationToken answered while buckets remain); without
        // max-buckets, every bucket at once.
        let max = match req.input.max_buckets {
            None => usize::MAX,
            Some(n @ 1..=MAX_BUCKETS) => n as usize,
            Some(n) => {
                return Err(s3_error!(
                    InvalidArgument,
                    "max-buckets must be between 1 and {MAX_BUCKETS}, not {n}"
                ));
            }
        };
        let after = match &req.input.continuation_token {
            None => None,
            Some(t) => Some(
                hex::decode(t)
                    .ok()
                    .and_then(|n| String::from_utf8(n).ok())
                    .ok_or_else(|| {
                        s3_error!(
                            InvalidArgument,
                            "The continuation token provided is incorrect"
                        )
                    })?,
            ),
        };
        // A bucket's aliases, and the key's own local aliases, are listed
        // as buckets too (as Garage lists them): each is a name the key
        // addresses it by.
        // In name order; a local alias hides a bucket or global alias of
        // its name from its key, as on every request.
        let names: std::collections::BTreeMap<String, BucketRow> = self
            .model
            .buckets()
            .list_buckets()
            .await
            .or_s3()?
            .into_iter()
            .map(|b| (b.name.clone(), b))
            .chain(self.model.buckets().list_aliases().await.or_s3()?)
            .chain(
                self.model
                    .buckets()
                    .list_local_aliases(&key.access_key_id)
                    .await
                    .or_s3()?,
            )
            .collect();
        let mut names: Vec<(String, BucketRow)> = names
            .into_iter()
            .filter(|(n, b)| key.permission(&b.name).any() && n.starts_with(prefix))
            .filter(|(n, _)| after.as_ref().is_none_or(|a| n > a))
            .take(max.saturating_add(1))
            .collect();
        let next = if names.len() > max {
            names.truncate(max);
            names.last().map(|(n, _)| hex::encode(n))
        } else {
            None
        };
        let buckets = names
            .into_iter()
            .map(|(name, b)| Bucket {
                name: Some(name),
                creation_date: Some(timestamp(b.created_msec)),
                bucket_region: Some(self.settings.region.clone()),
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            // Who the signing key is: the owner of the buckets it creates.
            owner: Some(Owner {
                id: Some(key.canonical_id()),
                display_name: key.display_name.value.clone(),
            }),
            prefix: req.input.prefix,
            continuation_token: next,
        }))
    }

    pub(crate) async fn do_create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let key_id = access_key(&req)?.to_owned();
        let name = &req.input.bucket;
        let ownership = req
            .input
            .object_ownership
            .as_ref()
            .map(|o| crate::ops_ownership::ownership(o.as_str()))
            .transpose()
            // A header, not a document: S3 answers InvalidArgument.
            .map_err(|_| s3_error!(InvalidArgument, "Invalid x-amz-object-ownership header"))?;
        let enforced =
            ownership == Some(hangar_model::access::ObjectOwnership::BucketOwnerEnforced);
        // The ACL asked for (`x-amz-acl`, `x-amz-grant-*`), with the
        // creating key as the owner; any grant at all is refused on a
        // bucket created with ACLs disabled.
        let who = self.model.keys().identity(&key_id).await.or_s3()?;
        let creator = Owner {
            id: Some(who.canonical_id),
            display_name: who.display_name,
        };
        if enforced && crate::ops_acl::AclHeaders::has_grants(&req.input) {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"
            ));
        }
        let acl = self.asked_acl(&creator, &req.input, None).await?;
        if enforced
            && acl
                .as_ref()
                .is_some_and(|a| a.is_public() || !a.grants.is_empty())
        {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"
            ));
        }
        if let Some(c) = req
            .input
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
            && c.as_str() != self.settings.region
        {
            return Err(s3_error!(
                InvalidLocationConstraint,
                "The specified location-constraint is not valid: this is region {}",
                self.settings.region
            ));
        }
        // The name's coordinator decides, creation by creation: an existing
        // bucket is BucketAlreadyOwnedByYou for its creator or owner, else
        // BucketAlreadyExists (hangar_model::bucket_create).
        match self
            .model
            .buckets()
            .create_bucket(name, Some(&key_id))
            .await
        {
            Ok(_) => {}
            // Except in us-east-1, where S3 answers its owner's re-creation
            // 200 and resets the bucket's ACL (to the one this request
            // gives, private by default), the rest of the bucket unchanged
            // (AWS API reference, BucketAlreadyOwnedByYou); tools written
            // against that region expect it.
            Err(hangar_model::ModelError::BucketAlreadyOwnedByYou(_))
                if self.settings.region == US_EAST_1 =>
            {
                let acl = acl.unwrap_or_default();
                self.model
                    .buckets()
                    .set_bucket_acl(name, acl.canned, acl.grants)
                    .await
                    .or_s3()?;
                return Ok(S3Response::new(CreateBucketOutput {
                    location: Some(format!("/{name}")),
                }));
            }
            Err(e) => return Err(crate::error::model_error(e)),
        }
        // x-amz-bucket-object-lock-enabled: Object Lock and versioning,
        // enabled right after the creation (a second change of the row).
        if req.input.object_lock_enabled_for_bucket == Some(true) {
            self.model
                .buckets()
                .set_bucket_object_lock(name, Default::default(), true)
                .await
                .or_s3()?;
        }
        // x-amz-object-ownership: right after the creation too.
        if let Some(o) = ownership {
            self.model
                .buckets()
                .set_bucket_ownership(name, Some(o))
                .await
                .or_s3()?;
        }
        // x-amz-acl and x-amz-grant-*: right after the creation too;
        // `private` without grants is the default.
        if let Some(acl) = acl.filter(|a| *a != crate::ops_acl::AskedAcl::default()) {
            self.model
                .buckets()
                .set_bucket_acl(name, acl.canned, acl.grants)
                .await
                .or_s3()?;
        }
        Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{name}")),
        }))
    }

    pub(crate) async fn do_head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        Ok(S3Response::new(HeadBucketOutput {
            bucket_region: Some(self.settings.region.clone()),
            ..Default::default()
        }))
    }

    pub(crate) async fn do_delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        // Through an alias (a key's own too), the bucket it names.
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model.delete_bucket(&b.name).await.or_s3()?;
        let mut resp = S3Response::new(DeleteBucketOutput {});
        resp.status = Some(http::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub(crate) async fn do_get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(s3s::dto::BucketLocationConstraint::from(
                self.settings.region.clone(),
            )),
        }))
    }
}
