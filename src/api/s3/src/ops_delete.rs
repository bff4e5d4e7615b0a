//! DeleteObject and DeleteObjects. A batch is applied in one metadata
//! transaction and reports a result per key.

use s3s::dto::{
    DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::error::OrS3;

/// Most keys in one DeleteObjects request, as in S3.
const MAX_KEYS: usize = 1000;

impl S3Api {
    pub(crate) async fn do_delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let bucket = self.bucket(&req.input.bucket).await?;
        self.model
            .delete_object(&bucket, &req.input.key)
            .await
            .or_s3()?;
        let mut resp = S3Response::new(DeleteObjectOutput::default());
        resp.status = Some(http::StatusCode::NO_CONTENT);
        Ok(resp)
    }

    pub(crate) async fn do_delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bucket = self.bucket(&req.input.bucket).await?;
        let objects = req.input.delete.objects;
        if objects.len() > MAX_KEYS {
            return Err(s3_error!(
                MalformedXML,
                "A DeleteObjects request may name at most {MAX_KEYS} keys"
            ));
        }
        let quiet = req.input.delete.quiet.unwrap_or(false);
        let keys: Vec<String> = objects.into_iter().map(|o| o.key).collect();
        self.model
            .delete_objects(&bucket, keys.clone())
            .await
            .or_s3()?;
        // S3 reports a key that did not exist as deleted too.
        let deleted = if quiet {
            Vec::new()
        } else {
            keys.into_iter()
                .map(|k| DeletedObject {
                    key: Some(k),
                    ..Default::default()
                })
                .collect()
        };
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: None,
            request_charged: None,
        }))
    }
}
