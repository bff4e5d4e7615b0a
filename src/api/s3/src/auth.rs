//! Who is calling, and may they do this.
//!
//! [`KeyAuth`] gives s3s the secret of an access key so it can check the
//! signature; [`KeyAccess`] then decides from the key's permissions whether
//! the operation is allowed, before the request body is read.

use std::sync::Arc;

use hangar_model::Model;
use hangar_model::key::KeyRow;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Result, s3_error};

use crate::error::OrS3;

/// Looks secrets up in the key table.
pub struct KeyAuth(pub Arc<Model>);

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.0.get_key(access_key).await.or_s3()? {
            Some(k) => Ok(SecretKey::from(k.secret)),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records."
            )),
        }
    }
}

/// What an operation needs on its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Any authenticated key (ListBuckets).
    Authenticated,
    /// The key's create-bucket right.
    CreateBucket,
    Read,
    Write,
    Owner,
}

fn need_of(op: &str) -> Need {
    match op {
        "ListBuckets" => Need::Authenticated,
        "CreateBucket" => Need::CreateBucket,
        "HeadBucket"
        | "GetBucketLocation"
        | "ListObjects"
        | "ListObjectsV2"
        | "GetObject"
        | "HeadObject"
        | "GetObjectAttributes"
        | "ListMultipartUploads"
        | "ListParts"
        | "ListObjectVersions" => Need::Read,
        "PutObject"
        | "CopyObject"
        | "DeleteObject"
        | "DeleteObjects"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "AbortMultipartUpload" => Need::Write,
        // Bucket configuration and everything else is the owner's business.
        _ => Need::Owner,
    }
}

/// Checks a key's permissions against the operation's needs.
pub struct KeyAccess(pub Arc<Model>);

impl KeyAccess {
    async fn key(&self, cx: &S3AccessContext<'_>) -> S3Result<KeyRow> {
        let creds = cx
            .credentials()
            .ok_or_else(|| s3_error!(AccessDenied, "Anonymous access is not allowed"))?;
        self.0
            .get_key(&creds.access_key)
            .await
            .or_s3()?
            .ok_or_else(|| s3_error!(InvalidAccessKeyId))
    }
}

#[async_trait::async_trait]
impl S3Access for KeyAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let key = self.key(cx).await?;
        let need = need_of(cx.s3_op().name());
        let bucket = cx.s3_path().get_bucket_name().map(str::to_owned);
        let allowed = match (need, bucket) {
            (Need::Authenticated, _) => true,
            (Need::CreateBucket, _) => key.allow_create_bucket,
            (_, None) => false,
            (need, Some(bucket)) => {
                let p = key.permission(&bucket);
                let ok = match need {
                    Need::Read => p.read,
                    Need::Write => p.write,
                    _ => p.owner,
                };
                // A missing bucket is reported as such by the operation, as S3 does.
                ok || self.0.get_bucket(&bucket).await.or_s3()?.is_none()
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(s3_error!(AccessDenied, "Access Denied"))
        }
    }
}
