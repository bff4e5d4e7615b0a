//! Put/Get/DeleteBucketLifecycleConfiguration: the rules are a register of
//! the bucket row (`hangar_model::Buckets::set_bucket_lifecycle`), checked by
//! [`crate::lifecycle_rules`] and applied by the model's lifecycle worker.

use s3s::dto::{
    DeleteBucketLifecycleInput, DeleteBucketLifecycleOutput, GetBucketLifecycleConfigurationInput,
    GetBucketLifecycleConfigurationOutput, PutBucketLifecycleConfigurationInput,
    PutBucketLifecycleConfigurationOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::lifecycle_rules;

impl S3Api {
    pub(crate) async fn do_put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let rules = lifecycle_rules::from_xml(input.lifecycle_configuration)?;
        self.model
            .buckets()
            .set_bucket_lifecycle(&b.name, rules)
            .await
            .or_s3()?;
        Ok(S3Response::new(
            PutBucketLifecycleConfigurationOutput::default(),
        ))
    }

    pub(crate) async fn do_get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        if b.lifecycle_rules().is_empty() {
            return Err(s3_error!(
                NoSuchLifecycleConfiguration,
                "The lifecycle configuration does not exist"
            ));
        }
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
            rules: Some(lifecycle_rules::to_xml(b.lifecycle_rules())),
            ..Default::default()
        }))
    }

    pub(crate) async fn do_delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_lifecycle(&b.name, Vec::new())
            .await
            .or_s3()?;
        Ok(S3Response::new(DeleteBucketLifecycleOutput {}))
    }
}
