//! Put/Get/DeleteBucketEncryption: a bucket's default encryption, a
//! register of the bucket row (`hangar_model::bucket::BucketEncryption`),
//! applied by [`crate::sse_managed::for_write`] to writes that ask for no
//! encryption of their own.

use s3s::dto::{
    DeleteBucketEncryptionInput, DeleteBucketEncryptionOutput, GetBucketEncryptionInput,
    GetBucketEncryptionOutput, PutBucketEncryptionInput, PutBucketEncryptionOutput,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use hangar_model::bucket::BucketEncryption;

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;

/// The default a configuration asks for: exactly one rule, with an
/// `ApplyServerSideEncryptionByDefault`.
fn the_default(c: &ServerSideEncryptionConfiguration) -> S3Result<BucketEncryption> {
    let [rule] = c.rules.as_slice() else {
        return Err(s3_error!(
            MalformedXML,
            "ServerSideEncryptionConfiguration must hold exactly one rule"
        ));
    };
    let Some(by_default) = &rule.apply_server_side_encryption_by_default else {
        return Err(s3_error!(
            MalformedXML,
            "The rule has no ApplyServerSideEncryptionByDefault"
        ));
    };
    crate::sse_managed::bucket_default(
        by_default.sse_algorithm.as_str(),
        by_default.kms_master_key_id.as_deref(),
        rule.bucket_key_enabled.unwrap_or(false),
    )
}

impl S3Api {
    pub(crate) async fn do_put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let e = the_default(&input.server_side_encryption_configuration)?;
        self.model
            .buckets()
            .set_bucket_encryption(&b.name, Some(e))
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketEncryptionOutput {}))
    }

    pub(crate) async fn do_get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let Some(e) = b.encryption() else {
            let mut e = s3_error!(
                ServerSideEncryptionConfigurationNotFoundError,
                "The server side encryption configuration was not found"
            );
            // s3s gives this code no status; S3 answers 404.
            e.set_status_code(http::StatusCode::NOT_FOUND);
            return Err(e);
        };
        Ok(S3Response::new(GetBucketEncryptionOutput {
            server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration {
                rules: vec![ServerSideEncryptionRule {
                    apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                        sse_algorithm: ServerSideEncryption::from(e.algorithm.clone()),
                        kms_master_key_id: e.kms_key.clone(),
                    }),
                    bucket_key_enabled: Some(e.bucket_key),
                }],
            }),
        }))
    }

    pub(crate) async fn do_delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_encryption(&b.name, None)
            .await
            .or_s3()?;
        Ok(S3Response::new(DeleteBucketEncryptionOutput {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(rules: Vec<ServerSideEncryptionRule>) -> ServerSideEncryptionConfiguration {
        ServerSideEncryptionConfiguration { rules }
    }

    fn rule(algorithm: &str, key: Option<&str>) -> ServerSideEncryptionRule {
        ServerSideEncryptionRule {
            apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                sse_algorithm: ServerSideEncryption::from(algorithm.to_owned()),
                kms_master_key_id: key.map(str::to_owned),
            }),
            bucket_key_enabled: Some(true),
        }
    }

    #[test]
    fn one_rule_with_a_default_is_taken() {
        let e = the_default(&config(vec![rule("AES256", None)])).unwrap();
        assert_eq!(e.algorithm, "AES256");
        assert!(e.bucket_key);
        let code = |c| the_default(&c).unwrap_err().code().as_str().to_owned();
        assert_eq!(code(config(vec![])), "MalformedXML");
        assert_eq!(
            code(config(vec![rule("AES256", None), rule("AES256", None)])),
            "MalformedXML"
        );
        assert_eq!(
            code(config(vec![ServerSideEncryptionRule::default()])),
            "MalformedXML"
        );
        assert_eq!(
            code(config(vec![rule("AES256", Some("k"))])),
            "InvalidArgument"
        );
        assert_eq!(code(config(vec![rule("DES", None)])), "InvalidArgument");
    }
}
