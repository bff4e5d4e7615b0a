//! Put/Get/DeleteBucketWebsite: the configuration is a register of the
//! bucket row (`hangar_model::Buckets::set_bucket_website`), checked by
//! [`crate::website_rules`] and served by [`crate::web`].

use s3s::dto::{
    DeleteBucketWebsiteInput, DeleteBucketWebsiteOutput, GetBucketWebsiteInput,
    GetBucketWebsiteOutput, PutBucketWebsiteInput, PutBucketWebsiteOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::website_rules;

impl S3Api {
    pub(crate) async fn do_put_bucket_website(
        &self,
        req: S3Request<PutBucketWebsiteInput>,
    ) -> S3Result<S3Response<PutBucketWebsiteOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let website = website_rules::from_xml(input.website_configuration)?;
        self.model
            .buckets()
            .set_bucket_website(&b.name, Some(website))
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketWebsiteOutput {}))
    }

    pub(crate) async fn do_get_bucket_website(
        &self,
        req: S3Request<GetBucketWebsiteInput>,
    ) -> S3Result<S3Response<GetBucketWebsiteOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let Some(w) = b.website() else {
            return Err(s3_error!(
                NoSuchWebsiteConfiguration,
                "The specified bucket does not have a website configuration"
            ));
        };
        Ok(S3Response::new(website_rules::to_xml(w)))
    }

    pub(crate) async fn do_delete_bucket_website(
        &self,
        req: S3Request<DeleteBucketWebsiteInput>,
    ) -> S3Result<S3Response<DeleteBucketWebsiteOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        if b.website().is_some() {
            self.model
                .buckets()
                .set_bucket_website(&b.name, None)
                .await
                .or_s3()?;
        }
        Ok(S3Response::new(DeleteBucketWebsiteOutput {}))
    }
}
