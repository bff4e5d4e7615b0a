use thiserror::Error;

/// Errors of the data model. The S3 layer maps each to its S3 error code.
#[derive(Debug, Error)]
pub enum ModelError {
    #[error("bucket {0} does not exist")]
    NoSuchBucket(String),
    #[error("bucket {0} already exists")]
    BucketAlreadyExists(String),
    /// A creation by the key that created the bucket, or owns it.
    #[error("bucket {0} already exists and is yours")]
    BucketAlreadyOwnedByYou(String),
    /// The node that serialises the creations and alias changes of this
    /// bucket name could not be reached, or could not reach its quorums
    /// (retry later).
    #[error("creating bucket or alias {bucket}: its coordinator {node} {reason}")]
    BucketCoordinator {
        bucket: String,
        node: String,
        reason: String,
        /// The coordinator refused the call as overloaded.
        overloaded: bool,
    },
    /// A removal of a name that is no alias of the bucket.
    #[error("{alias} is not an alias of bucket {bucket}")]
    NoSuchAlias { alias: String, bucket: String },
    #[error("bucket {0} is not empty")]
    BucketNotEmpty(String),
    #[error("invalid bucket name {name:?}: {reason}")]
    InvalidBucketName { name: String, reason: &'static str },
    #[error("access key {0} does not exist")]
    NoSuchKey(String),
    #[error("KMS key {0} does not exist")]
    NoSuchKmsKey(String),
    /// The KMS key is disabled: it neither seals nor opens data.
    #[error("KMS key {0} is disabled")]
    KmsKeyDisabled(String),
    #[error("access key {0} already exists")]
    KeyAlreadyExists(String),
    /// The key exists but its expiry time has passed.
    #[error("access key {id} expired at {} (ms {expired_msec} since the epoch)", hangar_util::time::rfc3339(*expired_msec))]
    KeyExpired { id: String, expired_msec: u64 },
    #[error("{0}")]
    Invalid(String),
    /// The bucket's state forbids the change (S3's InvalidBucketState).
    #[error("{0}")]
    InvalidBucketState(String),
    /// The version is protected by Object Lock (a retention in force or a
    /// legal hold): it may not be removed, or its retention not weakened.
    #[error("the object version is protected by Object Lock")]
    ObjectLocked,
    #[error("the multipart upload does not exist (aborted or completed)")]
    NoSuchUpload,
    #[error("the condition on the existing object does not hold")]
    PreconditionFailed,
    /// A conditional write could not be decided: too few of the key's
    /// nodes answered, or concurrent writers of the key kept refusing its
    /// rounds (`contended`). With `outcome_unknown`, a value of it may have
    /// been accepted and may still be published by a later round: its data
    /// must be kept (the upload is not aborted).
    #[error("{reason}")]
    ConditionalWrite {
        reason: String,
        contended: bool,
        outcome_unknown: bool,
    },
    #[error("the source object changed while it was being copied; try again")]
    SourceChanged,
    /// `BucketOwnerEnforced` asked of a bucket whose ACL grants to others
    /// (S3's InvalidBucketAclWithObjectOwnership).
    #[error("{0}")]
    AclWithOwnershipEnforced(String),
    /// The write would take the bucket past one of its quotas (S3: 403
    /// AccessDenied with this message, as Garage answers).
    #[error("{0}")]
    QuotaExceeded(String),
    /// Stored metadata contradicts itself (e.g. a missing block entry).
    #[error("inconsistent metadata: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Table(#[from] hangar_table::TableError),
    #[error(transparent)]
    Db(#[from] hangar_db::DbError),
    #[error(transparent)]
    Block(#[from] hangar_block::BlockError),
}

impl ModelError {
    /// Whether the write may still take effect later (its data must be
    /// kept): a conditional write whose value may have been accepted.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            ModelError::ConditionalWrite {
                outcome_unknown: true,
                ..
            }
        )
    }
}
