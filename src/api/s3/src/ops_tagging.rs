//! Put/Get/DeleteObjectTagging and Put/Get/DeleteBucketTagging. The tags
//! are registers of the object version's and the bucket's rows
//! (`hangar_model::Objects::set_object_tags`, `set_bucket_tags`): a change
//! made through one node is seen through every other.

use s3s::dto::{
    DeleteBucketTaggingInput, DeleteBucketTaggingOutput, DeleteObjectTaggingInput,
    DeleteObjectTaggingOutput, GetBucketTaggingInput, GetBucketTaggingOutput,
    GetObjectTaggingInput, GetObjectTaggingOutput, PutBucketTaggingInput, PutBucketTaggingOutput,
    PutObjectTaggingInput, PutObjectTaggingOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};

use hangar_model::object::TagSet;

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;
use crate::ops_versioning::parse_version_id;
use crate::tagging::{self, TagsOf};
use hangar_model::version_ops::FoundVersion;

fn no_such_key() -> s3s::S3Error {
    s3_error!(NoSuchKey, "The specified key does not exist.")
}

/// `204 No Content`, as S3 answers these calls.
fn no_content<T>(output: T) -> S3Response<T> {
    let mut resp = S3Response::new(output);
    resp.extensions
        .insert(crate::server::StatusOverride(http::StatusCode::NO_CONTENT));
    resp
}

impl S3Api {
    /// The version of `key` a tagging call names (its latest without a
    /// version id), which must be an object (a delete marker is `405`).
    async fn tagged_version(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> S3Result<(hangar_model::bucket::BucketRow, FoundVersion)> {
        // The bucket first: a missing bucket is NoSuchBucket, as in S3.
        let b = self.bucket(signer, bucket).await?;
        let v = parse_version_id(version_id)?;
        let found = self
            .model
            .objects()
            .find_version(&b, key, v)
            .await
            .or_s3()?;
        match found {
            None if v.is_some() => Err(crate::error::no_such_version()),
            None => Err(no_such_key()),
            Some(f) if f.row.is_delete_marker() => Err(crate::error::delete_marker(
                true,
                f.id.map(|i| i.to_string()),
            )),
            Some(f) => Ok((b, f)),
        }
    }

    /// Replaces the tags of object `key`; the version id to echo.
    async fn replace_object_tags(
        &self,
        signer: Option<&str>,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        tags: TagSet,
    ) -> S3Result<Option<String>> {
        let (b, found) = self.tagged_version(signer, bucket, key, version_id).await?;
        self.model
            .objects()
            .set_version_tags(&b, &found, tags)
            .await
            .or_s3()?;
        Ok(found.id.map(|i| i.to_string()))
    }

    pub(crate) async fn do_put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let input = req.input;
        let tags = tagging::from_xml(input.tagging, TagsOf::Object)?;
        let version_id = self
            .replace_object_tags(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
                tags,
            )
            .await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn do_get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let input = &req.input;
        let (_, found) = self
            .tagged_version(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tagging::to_xml(found.row.tag_set()),
            version_id: found.id.map(|i| i.to_string()),
        }))
    }

    pub(crate) async fn do_delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let input = &req.input;
        let version_id = self
            .replace_object_tags(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
                TagSet::new(),
            )
            .await?;
        Ok(no_content(DeleteObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn do_put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let tags = tagging::from_xml(input.tagging, TagsOf::Bucket)?;
        self.model
            .buckets()
            .set_bucket_tags(&b.name, tags)
            .await
            .or_s3()?;
        Ok(no_content(PutBucketTaggingOutput {}))
    }

    pub(crate) async fn do_get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        if b.tags.value.is_empty() {
            return Err(s3_error!(NoSuchTagSet, "The TagSet does not exist"));
        }
        Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: tagging::to_xml(&b.tags.value),
        }))
    }

    pub(crate) async fn do_delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        self.model
            .buckets()
            .set_bucket_tags(&b.name, TagSet::new())
            .await
            .or_s3()?;
        Ok(no_content(DeleteBucketTaggingOutput {}))
    }
}
