//! How the model's errors reach an operator: the admin error code of each
//! and what the operator can do about it.

use hangar_api_admin::proto::{AdminError, ErrorCode};
use hangar_block::BlockError;
use hangar_model::ModelError;
use hangar_table::ReplicationError;
use hangar_table::TableError;

/// The one place where model errors become admin errors.
pub(crate) fn model_error(e: ModelError) -> AdminError {
    let code = match &e {
        ModelError::NoSuchBucket(_)
        | ModelError::NoSuchKey(_)
        | ModelError::NoSuchUpload
        | ModelError::NoSuchKmsKey(_)
        | ModelError::NoSuchAlias { .. } => ErrorCode::NotFound,
        ModelError::BucketAlreadyExists(_)
        | ModelError::BucketAlreadyOwnedByYou(_)
        | ModelError::KeyAlreadyExists(_)
        | ModelError::BucketNotEmpty(_)
        | ModelError::PreconditionFailed
        | ModelError::InvalidBucketState(_)
        | ModelError::ObjectLocked
        | ModelError::SourceChanged
        | ModelError::QuotaExceeded(_)
        | ModelError::AclWithOwnershipEnforced(_)
        | ModelError::KmsKeyDisabled(_) => ErrorCode::Conflict,
        ModelError::InvalidBucketName { .. }
        | ModelError::Invalid(_)
        | ModelError::KeyExpired { .. } => ErrorCode::BadRequest,
        ModelError::Table(TableError::Replication(_) | TableError::Net(_))
        | ModelError::BucketCoordinator { .. }
        | ModelError::ConditionalWrite { .. }
        | ModelError::Block(
            BlockError::Quorum { .. }
            | BlockError::Unavailable { .. }
            | BlockError::Overloaded { .. },
        ) => ErrorCode::Unavailable,
        ModelError::Table(_)
        | ModelError::Db(_)
        | ModelError::Corrupt(_)
        | ModelError::Block(_) => {
            return AdminError::internal(e);
        }
    };
    AdminError::new(code, format!("{e}{}", next_step(&e)))
}

/// What the operator can do about `e`, appended to its message.
fn next_step(e: &ModelError) -> &'static str {
    match e {
        ModelError::NoSuchBucket(_) => ": `hangar bucket list` lists the buckets",
        ModelError::NoSuchAlias { .. } => ": `hangar bucket info` lists the bucket's aliases",
        ModelError::NoSuchKey(_) => ": `hangar key list` lists the keys",
        ModelError::NoSuchKmsKey(_) => ": `hangar kms list` lists the KMS keys",
        ModelError::BucketAlreadyExists(_) => ": pick another name, or `hangar bucket info` it",
        ModelError::BucketNotEmpty(_) => ": delete its objects first",
        ModelError::KeyAlreadyExists(_) => ": `hangar key info` shows it",
        ModelError::Table(TableError::Replication(ReplicationError::NoLayoutYet { .. })) => {
            ": `hangar layout show` shows whether the cluster has a layout; apply one, or retry once this node has received it"
        }
        ModelError::Table(TableError::Replication(_) | TableError::Net(_))
        | ModelError::BucketCoordinator { .. }
        | ModelError::ConditionalWrite { .. }
        | ModelError::Block(_) => {
            ": retry when more nodes are up (`hangar status` shows which are down)"
        }
        _ => "",
    }
}
