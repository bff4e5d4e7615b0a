//! Put/Get/DeleteBucketOwnershipControls and CreateBucket's
//! `x-amz-object-ownership`: S3 Object Ownership, a register of the bucket
//! row (`hangar_model::access::ObjectOwnership`). `BucketOwnerEnforced`
//! disables ACLs ([`crate::ops_acl`], [`crate::access`]); the two others
//! behave alike in Hangar, whose bucket owner owns every object.

use hangar_model::access::ObjectOwnership;
use s3s::dto::{
    DeleteBucketOwnershipControlsInput, DeleteBucketOwnershipControlsOutput,
    GetBucketOwnershipControlsInput, GetBucketOwnershipControlsOutput, OwnershipControls,
    OwnershipControlsRule, PutBucketOwnershipControlsInput, PutBucketOwnershipControlsOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;

/// The setting S3 names `name`; anything else is malformed.
pub(crate) fn ownership(name: &str) -> S3Result<ObjectOwnership> {
    ObjectOwnership::parse(name).ok_or_else(|| {
        s3_error!(
            MalformedXML,
            "Invalid ObjectOwnership {name:?}: BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter"
        )
    })
}

/// The one rule of an `OwnershipControls` document (S3 takes exactly one).
fn the_rule(c: &OwnershipControls) -> S3Result<ObjectOwnership> {
    match c.rules.as_slice() {
        [rule] => ownership(rule.object_ownership.as_str()),
        _ => Err(s3_error!(
            MalformedXML,
            "OwnershipControls must hold exactly one rule"
        )),
    }
}

impl S3Api {
    pub(crate) async fn do_put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let o = the_rule(&input.ownership_controls)?;
        self.model
            .buckets()
            .set_bucket_ownership(&b.name, Some(o))
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput {}))
    }

    pub(crate) async fn do_get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let Some(o) = b.ownership() else {
            return Err(s3_error!(
                OwnershipControlsNotFoundError,
                "The bucket ownership controls were not found"
            ));
        };
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(OwnershipControls {
                rules: vec![OwnershipControlsRule {
                    object_ownership: o.as_str().to_owned().into(),
                }],
            }),
        }))
    }

    pub(crate) async fn do_delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_ownership(&b.name, None)
            .await
            .or_s3()?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controls(names: &[&str]) -> OwnershipControls {
        OwnershipControls {
            rules: names
                .iter()
                .map(|n| OwnershipControlsRule {
                    object_ownership: (*n).to_owned().into(),
                })
                .collect(),
        }
    }

    #[test]
    fn exactly_one_known_rule_is_taken() {
        assert_eq!(
            the_rule(&controls(&["BucketOwnerEnforced"])).unwrap(),
            ObjectOwnership::BucketOwnerEnforced
        );
        assert_eq!(
            the_rule(&controls(&["ObjectWriter"])).unwrap(),
            ObjectOwnership::ObjectWriter
        );
        for bad in [
            controls(&[]),
            controls(&["ObjectWriter", "ObjectWriter"]),
            controls(&["BucketOwner"]),
        ] {
            let e = the_rule(&bad).unwrap_err();
            assert_eq!(e.code().as_str(), "MalformedXML", "{bad:?}");
        }
    }
}
