//! Put/Get/DeleteBucketCors: the rules are a register of the bucket row
//! (`hangar_model::Buckets::set_bucket_cors`), checked by [`crate::cors_rules`]
//! and applied to requests by [`crate::cors`].

use s3s::dto::{
    DeleteBucketCorsInput, DeleteBucketCorsOutput, GetBucketCorsInput, GetBucketCorsOutput,
    PutBucketCorsInput, PutBucketCorsOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::cors_rules;
use crate::error::OrS3;

impl S3Api {
    pub(crate) async fn do_put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let rules = cors_rules::from_xml(input.cors_configuration)?;
        self.model
            .buckets()
            .set_bucket_cors(&b.name, rules)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketCorsOutput {}))
    }

    pub(crate) async fn do_get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        if b.cors_rules().is_empty() {
            return Err(s3_error!(
                NoSuchCORSConfiguration,
                "The CORS configuration does not exist"
            ));
        }
        Ok(S3Response::new(GetBucketCorsOutput {
            cors_rules: Some(cors_rules::to_xml(b.cors_rules())),
        }))
    }

    pub(crate) async fn do_delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_cors(&b.name, Vec::new())
            .await
            .or_s3()?;
        Ok(S3Response::new(DeleteBucketCorsOutput {}))
    }
}
