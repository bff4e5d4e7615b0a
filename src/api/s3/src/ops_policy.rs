//! Put/Get/DeleteBucketPolicy, GetBucketPolicyStatus and
//! Put/Get/DeletePublicAccessBlock: registers of the bucket row
//! (`hangar_model::Buckets::set_bucket_policy`,
//! `set_bucket_public_access_block`); the policy is checked by
//! [`crate::policy`] and applied by [`crate::access`].

use hangar_model::access::PublicAccessBlock;
use s3s::dto::{
    DeleteBucketPolicyInput, DeleteBucketPolicyOutput, DeletePublicAccessBlockInput,
    DeletePublicAccessBlockOutput, GetBucketPolicyInput, GetBucketPolicyOutput,
    GetBucketPolicyStatusInput, GetBucketPolicyStatusOutput, GetPublicAccessBlockInput,
    GetPublicAccessBlockOutput, PolicyStatus, PublicAccessBlockConfiguration, PutBucketPolicyInput,
    PutBucketPolicyOutput, PutPublicAccessBlockInput, PutPublicAccessBlockOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::policy::Policy;

fn no_such_policy() -> s3s::S3Error {
    s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")
}

impl S3Api {
    pub(crate) async fn do_put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        // Its resources name the bucket by its own name (it is evaluated
        // so, whichever name a request uses), also when put through an alias.
        let policy = Policy::parse(&input.policy, &b.name)?;
        // BlockPublicPolicy: a public policy is refused, as S3 does.
        if b.public_access_block()
            .is_some_and(|p| p.block_public_policy)
            && policy.is_public()
        {
            return Err(s3_error!(
                AccessDenied,
                "Access Denied: the bucket's public access block forbids a public policy"
            ));
        }
        self.model
            .buckets()
            .set_bucket_policy(&b.name, Some(input.policy))
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketPolicyOutput {}))
    }

    pub(crate) async fn do_get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let policy = b.policy().ok_or_else(no_such_policy)?;
        Ok(S3Response::new(GetBucketPolicyOutput {
            policy: Some(policy.to_owned()),
        }))
    }

    pub(crate) async fn do_delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_policy(&b.name, None)
            .await
            .or_s3()?;
        Ok(S3Response::new(DeleteBucketPolicyOutput {}))
    }

    pub(crate) async fn do_get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let text = b.policy().ok_or_else(no_such_policy)?;
        let policy = Policy::parse(text, &b.name)?;
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(policy.is_public()),
            }),
        }))
    }

    pub(crate) async fn do_put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let c = input.public_access_block_configuration;
        let block = PublicAccessBlock {
            block_public_acls: c.block_public_acls.unwrap_or(false),
            ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
            block_public_policy: c.block_public_policy.unwrap_or(false),
            restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
        };
        self.model
            .buckets()
            .set_bucket_public_access_block(&b.name, Some(block))
            .await
            .or_s3()?;
        Ok(S3Response::new(PutPublicAccessBlockOutput {}))
    }

    pub(crate) async fn do_get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let p = b
            .public_access_block()
            .ok_or_else(crate::error::no_such_public_access_block)?;
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(PublicAccessBlockConfiguration {
                block_public_acls: Some(p.block_public_acls),
                ignore_public_acls: Some(p.ignore_public_acls),
                block_public_policy: Some(p.block_public_policy),
                restrict_public_buckets: Some(p.restrict_public_buckets),
            }),
        }))
    }

    pub(crate) async fn do_delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_public_access_block(&b.name, None)
            .await
            .or_s3()?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput {}))
    }
}
