//! The one place where internal errors become S3 errors.

use hangar_block::BlockError;
use hangar_model::ModelError;
use hangar_table::TableError;
use s3s::{S3Error, S3ErrorCode, s3_error};

/// Maps a model error to the S3 error a client should see.
pub fn model_error(e: ModelError) -> S3Error {
    match e {
        ModelError::NoSuchBucket(b) => {
            s3_error!(NoSuchBucket, "The specified bucket does not exist: {b}")
        }
        ModelError::BucketAlreadyExists(b) => s3_error!(
            BucketAlreadyExists,
            "The requested bucket name is not available: {b}"
        ),
        ModelError::BucketAlreadyOwnedByYou(b) => s3_error!(
            BucketAlreadyOwnedByYou,
            "Your previous request to create the named bucket succeeded and you already own it: {b}"
        ),
        e @ ModelError::BucketCoordinator { .. } => {
            tracing::warn!("{e}");
            if matches!(
                e,
                ModelError::BucketCoordinator {
                    overloaded: true,
                    ..
                }
            ) {
                crate::admission::slow_down_because(&e.to_string())
            } else {
                service_unavailable(&e.to_string())
            }
        }
        // Aliases are changed by the operator only; S3 never removes one.
        e @ ModelError::NoSuchAlias { .. } => s3_error!(InvalidRequest, "{e}"),
        ModelError::BucketNotEmpty(b) => s3_error!(
            BucketNotEmpty,
            "The bucket you tried to delete is not empty: {b}"
        ),
        ModelError::InvalidBucketName { name, reason } => {
            s3_error!(
                InvalidBucketName,
                "The specified bucket is not valid: {name:?} {reason}"
            )
        }
        ModelError::NoSuchKey(k) => s3_error!(InvalidAccessKeyId, "No such access key: {k}"),
        // A long-term key past its expiry, like an AWS access key made
        // inactive: 403 InvalidAccessKeyId. (S3's ExpiredToken is for an
        // expired session token, x-amz-security-token, and is a 400.)
        ModelError::KeyExpired { id, expired_msec } => s3_error!(
            InvalidAccessKeyId,
            "The access key {id} expired at {}; ask the operator for a new key or a later expiry",
            hangar_util::time::rfc3339(expired_msec)
        ),
        ModelError::KeyAlreadyExists(k) => s3_error!(InvalidRequest, "Key {k} exists"),
        ModelError::Invalid(m) => s3_error!(InvalidRequest, "{m}"),
        ModelError::InvalidBucketState(m) => s3_error!(InvalidBucketState, "{m}"),
        ModelError::ObjectLocked => s3_error!(
            AccessDenied,
            "Access Denied because object protected by object lock."
        ),
        ModelError::NoSuchUpload => s3_error!(
            NoSuchUpload,
            "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
        ),
        ModelError::PreconditionFailed => s3_error!(
            PreconditionFailed,
            "At least one of the pre-conditions you specified did not hold"
        ),
        ModelError::ConditionalWrite {
            ref reason,
            contended,
            ..
        } => {
            tracing::warn!("{reason}");
            if contended {
                crate::admission::slow_down_because(reason)
            } else {
                service_unavailable(reason)
            }
        }
        // Garage's answer to a write past a bucket quota: 403 AccessDenied
        // with the quota in the message (doc/s3-compatibility.md).
        ModelError::QuotaExceeded(m) => s3_error!(AccessDenied, "{m}"),
        ModelError::AclWithOwnershipEnforced(m) => {
            s3_error!(InvalidBucketAclWithObjectOwnership, "{m}")
        }
        // S3 passes the key service's errors on, as 400s.
        ModelError::NoSuchKmsKey(k) => {
            kms_error("KMS.NotFoundException", format!("Invalid keyId {k}"))
        }
        ModelError::KmsKeyDisabled(k) => kms_error(
            "KMS.DisabledException",
            format!("The KMS key {k} is disabled"),
        ),
        ModelError::SourceChanged => s3_error!(
            OperationAborted,
            "The source object was overwritten or deleted while it was being copied; try again."
        ),
        ModelError::Block(b) => block_error(b),
        // A DeleteBucket closed the bucket to new objects while this write
        // was on its way (hangar_table::fence): the bucket is gone, or will
        // be unless the deletion finds it not empty.
        ModelError::Table(TableError::Fenced { .. } | TableError::TooManyFences { .. }) => {
            s3_error!(
                OperationAborted,
                "A DeleteBucket of this bucket was in progress or done: the write was refused. Retry if the bucket still exists."
            )
        }
        ModelError::Table(e @ (TableError::Replication(_) | TableError::Net(_))) => {
            // Too few nodes reachable: the client may retry elsewhere or later.
            tracing::warn!("replication: {e}");
            S3Error::with_message(S3ErrorCode::ServiceUnavailable, e.to_string())
        }
        e @ (ModelError::Table(_) | ModelError::Db(_) | ModelError::Corrupt(_)) => internal(e),
    }
}

/// Maps a block store error: overload, here or at a replica, is `503
/// SlowDown` (retry later), too few nodes `503 ServiceUnavailable`, anything
/// else a 500.
pub fn block_error(e: BlockError) -> S3Error {
    match e {
        BlockError::Overloaded { .. } => {
            tracing::warn!("block store: {e}");
            crate::admission::slow_down()
        }
        // A replica refused as overloaded: the cluster is busy, not broken,
        // so the client gets the same answer (and retry hints) as for this
        // node's own overload.
        BlockError::Quorum { ref source, .. } if source.overloaded() => {
            tracing::warn!("block store: {e}");
            crate::admission::slow_down_because(&e.to_string())
        }
        BlockError::Quorum { .. } | BlockError::Unavailable { .. } => {
            tracing::warn!("block store: {e}");
            S3Error::with_message(S3ErrorCode::ServiceUnavailable, e.to_string())
        }
        e => {
            tracing::error!("block store: {e}");
            S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
        }
    }
}

/// S3's `503 ServiceUnavailable` with the same retry hints as `SlowDown`
/// (`Retry-After: 1`, `x-amz-retry-after: 1000`): the cluster may answer
/// in a moment (a node coming back, the failure detector catching up).
pub fn service_unavailable(message: &str) -> S3Error {
    crate::admission::with_retry_hints(S3ErrorCode::ServiceUnavailable, message)
}

/// S3's `400 BadRequest`, a code s3s does not name (tag counts, CORS
/// preflights without an Origin).
pub fn bad_request(message: &'static str) -> S3Error {
    let code = S3ErrorCode::from_bytes(b"BadRequest").expect("any code parses");
    let mut e = S3Error::with_message(code, message);
    e.set_status_code(http::StatusCode::BAD_REQUEST);
    e
}

/// S3's `404 NoSuchPublicAccessBlockConfiguration`, a code s3s does not
/// name.
pub fn no_such_public_access_block() -> S3Error {
    let code =
        S3ErrorCode::from_bytes(b"NoSuchPublicAccessBlockConfiguration").expect("any code parses");
    let mut e = S3Error::with_message(code, "The public access block configuration was not found");
    e.set_status_code(http::StatusCode::NOT_FOUND);
    e
}

/// A `versionId` that is not one Hangar gives (`null` or 48 hex digits).
pub fn invalid_version_id() -> S3Error {
    s3_error!(InvalidArgument, "Invalid version id specified")
}

/// A well-formed `versionId` naming no version of the key.
pub fn no_such_version() -> S3Error {
    s3_error!(NoSuchVersion, "The specified version does not exist.")
}

/// A read of a delete marker: `404 NoSuchKey` when it is the key's latest
/// version (no version id asked), `405 MethodNotAllowed` when it was asked
/// for by id; both with `x-amz-delete-marker: true` and the marker's id.
pub fn delete_marker(asked_by_id: bool, version_id: Option<String>) -> S3Error {
    let mut e = if asked_by_id {
        s3_error!(
            MethodNotAllowed,
            "The specified method is not allowed against this resource."
        )
    } else {
        s3_error!(NoSuchKey, "The specified key does not exist.")
    };
    let mut h = http::HeaderMap::new();
    h.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("true"),
    );
    if let Some(v) = version_id.and_then(|v| http::HeaderValue::from_str(&v).ok()) {
        h.insert("x-amz-version-id", v);
    }
    e.set_headers(h);
    e
}

/// S3's `MalformedXML`, for a body that parsed but misses what S3 requires.
pub fn malformed_xml() -> S3Error {
    s3_error!(
        MalformedXML,
        "The XML you provided was not well-formed or did not validate against our published schema"
    )
}

/// An internal error: logged, and reported without detail beyond its text.
pub fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!("internal error: {e}");
    S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
}

/// Extension to turn model results into S3 results.
pub trait OrS3<T> {
    fn or_s3(self) -> s3s::S3Result<T>;
}

impl<T> OrS3<T> for Result<T, ModelError> {
    fn or_s3(self) -> s3s::S3Result<T> {
        self.map_err(model_error)
    }
}

/// S3's `416 InvalidPartNumber`, a code s3s does not name: a `partNumber`
/// past the object's parts on GET or HEAD.
pub fn invalid_part_number() -> S3Error {
    let code = S3ErrorCode::from_bytes(b"InvalidPartNumber").expect("any code parses");
    let mut e = S3Error::with_message(code, "The requested partnumber is not satisfiable");
    e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
    e
}

/// An error of the key service, with its code (`KMS.…`) and `400`.
fn kms_error(code: &str, message: String) -> S3Error {
    let mut e = S3Error::with_message(s3s::S3ErrorCode::Custom(code.to_owned().into()), message);
    e.set_status_code(http::StatusCode::BAD_REQUEST);
    e
}

/// The SSE-C errors, as S3 answers them (doc/s3-compatibility.md,
/// "SSE-C").
pub mod sse_c {
    use s3s::{S3Error, s3_error};

    /// The algorithm header is missing or is not `AES256`.
    pub fn bad_algorithm() -> S3Error {
        s3_error!(
            InvalidArgument,
            "Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm."
        )
    }

    /// The key header is missing.
    pub fn missing_key() -> S3Error {
        s3_error!(
            InvalidArgument,
            "Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key."
        )
    }

    /// The key-MD5 header is missing.
    pub fn missing_key_md5() -> S3Error {
        s3_error!(
            InvalidArgument,
            "Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key."
        )
    }

    /// The key is not base64 of 32 bytes.
    pub fn bad_key() -> S3Error {
        s3_error!(
            InvalidArgument,
            "The secret key was invalid for the specified algorithm."
        )
    }

    /// The key-MD5 header is not the MD5 of the key.
    pub fn key_md5_mismatch() -> S3Error {
        s3_error!(
            InvalidArgument,
            "The calculated MD5 hash of the key did not match the hash that was provided."
        )
    }

    /// An SSE-C object read without its key.
    pub fn key_required() -> S3Error {
        s3_error!(
            InvalidRequest,
            "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."
        )
    }

    /// A key sent for an object (or upload) that is not encrypted.
    pub fn not_encrypted() -> S3Error {
        s3_error!(
            InvalidRequest,
            "The encryption parameters are not applicable to this object."
        )
    }

    /// A key other than the object's: S3 answers `403 AccessDenied`.
    pub fn wrong_key() -> S3Error {
        s3_error!(AccessDenied, "Access Denied")
    }

    /// An SSE-C request that did not come over HTTPS, when that is
    /// required (`[s3_api] sse_c_require_https`).
    pub fn insecure() -> S3Error {
        s3_error!(
            InvalidRequest,
            "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection."
        )
    }

    /// A part of an SSE-C multipart upload sent without the key.
    pub fn part_key_required() -> S3Error {
        s3_error!(
            InvalidRequest,
            "The multipart upload initiate requested encryption. Subsequent part requests must include the appropriate encryption parameters."
        )
    }

    /// A managed version (SSE-S3, SSE-KMS) that does not open with this
    /// node's master key: a configuration error of the node, not the
    /// client's.
    pub fn master_key_mismatch() -> S3Error {
        s3_error!(
            InternalError,
            "The object's encryption key is not available on this node."
        )
    }

    /// A part of an SSE-C multipart upload sent with another key.
    pub fn part_key_mismatch() -> S3Error {
        s3_error!(
            InvalidRequest,
            "The provided encryption parameters did not match the ones used originally."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_cluster::QuorumError;
    use hangar_net::{NetError, NodeId};
    use hangar_util::Hash;

    fn quorum_failed(errors: Vec<NetError>) -> BlockError {
        BlockError::Quorum {
            hash: Hash::of(b"x"),
            source: QuorumError::Failed {
                needed: 2,
                ok: 1,
                down: 0,
                targets: 3,
                version: Some(1),
                errors: errors
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| (NodeId([i as u8; 32]), e))
                    .collect(),
            },
        }
    }

    #[test]
    fn a_write_refused_by_a_bucket_deletion_is_operation_aborted() {
        let e = model_error(ModelError::Table(TableError::Fenced { tree: "object" }));
        assert_eq!(*e.code(), S3ErrorCode::OperationAborted);
        assert_eq!(e.status_code(), Some(hyper::StatusCode::CONFLICT));
        assert!(e.message().unwrap().contains("DeleteBucket"), "{e:?}");
    }

    #[test]
    fn a_quorum_lost_to_a_busy_replica_is_slow_down_with_retry_hints() {
        let e = block_error(quorum_failed(vec![
            NetError::Overloaded("hangar/block/put".into()),
            NetError::NotConnected(NodeId([9; 32])),
        ]));
        assert_eq!(*e.code(), S3ErrorCode::SlowDown);
        let h = e.headers().expect("retry hints");
        assert_eq!(h.get(http::header::RETRY_AFTER).unwrap(), "1");
        assert_eq!(h.get("x-amz-retry-after").unwrap(), "1000");
        assert!(e.message().unwrap().contains("overloaded"), "{e:?}");
    }

    #[test]
    fn a_quorum_lost_to_unreachable_replicas_is_service_unavailable() {
        let e = block_error(quorum_failed(vec![
            NetError::NotConnected(NodeId([1; 32])),
            NetError::NotConnected(NodeId([2; 32])),
        ]));
        assert_eq!(*e.code(), S3ErrorCode::ServiceUnavailable);
    }

    fn coordinator(overloaded: bool) -> ModelError {
        ModelError::BucketCoordinator {
            bucket: "b".into(),
            node: "0123456789abcdef".into(),
            reason: "did not answer".into(),
            overloaded,
        }
    }

    #[test]
    fn an_unreachable_bucket_coordinator_is_503_with_retry_hints() {
        for (overloaded, code) in [
            (false, S3ErrorCode::ServiceUnavailable),
            (true, S3ErrorCode::SlowDown),
        ] {
            let e = model_error(coordinator(overloaded));
            assert_eq!(*e.code(), code);
            let h = e.headers().expect("retry hints");
            assert_eq!(h.get(http::header::RETRY_AFTER).unwrap(), "1");
            assert_eq!(h.get("x-amz-retry-after").unwrap(), "1000");
            assert!(e.message().unwrap().contains("coordinator"), "{e:?}");
        }
        let e = model_error(ModelError::BucketAlreadyOwnedByYou("b".into()));
        assert_eq!(*e.code(), S3ErrorCode::BucketAlreadyOwnedByYou);
    }

    #[test]
    fn an_undecided_conditional_write_is_503_with_retry_hints() {
        for (contended, code) in [
            (false, S3ErrorCode::ServiceUnavailable),
            (true, S3ErrorCode::SlowDown),
        ] {
            let e = model_error(ModelError::ConditionalWrite {
                reason: "conditional write of \"k\": no quorum".into(),
                contended,
                outcome_unknown: true,
            });
            assert_eq!(*e.code(), code);
            let h = e.headers().expect("retry hints");
            assert_eq!(h.get(http::header::RETRY_AFTER).unwrap(), "1");
            assert!(e.message().unwrap().contains("conditional write"), "{e:?}");
        }
    }
}
