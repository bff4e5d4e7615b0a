//! Access-control configuration of a bucket, as the bucket row stores it
//! (row format 10): the bucket policy document and the public access
//! block. What they mean for a request is decided by the S3 layer, which
//! parses the policy when it is put and again when it applies it.

use serde::{Deserialize, Serialize};

/// Largest bucket policy document, in bytes (S3's bound: 20 KB).
pub const MAX_POLICY_LEN: usize = 20 * 1024;

/// S3's `PublicAccessBlockConfiguration` of a bucket: each switch off when
/// not given.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct PublicAccessBlock {
    /// Refuse requests that set a public ACL.
    pub block_public_acls: bool,
    /// Ignore public ACLs when deciding access.
    pub ignore_public_acls: bool,
    /// Refuse a bucket policy that grants public access.
    pub block_public_policy: bool,
    /// While the bucket's policy is public, grant nothing to anonymous
    /// requests through it.
    pub restrict_public_buckets: bool,
}
