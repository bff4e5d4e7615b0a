//! Who is calling, and may they do this.
//!
//! [`KeyAuth`] gives s3s the secret of an access key so it can check the
//! signature; [`KeyAccess`] then decides whether the operation is allowed
//! (the key's permissions, the bucket policy: `crate::access`), before the
//! request body is read (and refuses a body too large to be read whole,
//! `body_limits`). Anonymous (unsigned) requests reach the same decision,
//! with no key.

use std::sync::Arc;

use hangar_model::Model;
use hangar_model::key::KeyRow;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::Owner;
use s3s::{S3Result, s3_error};

use crate::access::{Caller, Need, PeerAddr, iam_action, need_of};
use crate::access_log::{Asked, LogSlot, Logged};
use crate::error::OrS3;
use crate::metrics::RequestOp;

/// Looks secrets up in the key table.
pub struct KeyAuth(pub Arc<Model>);

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        // An expired key is refused here, before its signature is checked:
        // the answer is the same whatever the request.
        match self.0.keys().signing_key(access_key).await.or_s3()? {
            Some(k) => Ok(SecretKey::from(k.secret.value)),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records."
            )),
        }
    }
}

/// Checks a key's permissions against the operation's needs, and the
/// part of a signature s3s leaves to the service: the credential scope's
/// region. (The times a signature claims are bounded before s3s sees the
/// request: [`crate::request_time`].)
pub struct KeyAccess {
    pub model: Arc<Model>,
    pub region: String,
}

/// Why a node of a replicated cluster that knows no layout yet refuses
/// operations on objects and buckets ([`Model::awaiting_layout`]).
pub(crate) const NO_LAYOUT_YET: &str = "This node has no cluster layout yet (it is joining the cluster, or the cluster is not laid out): it cannot tell where objects are stored. Retry in a moment, or through another node.";

/// The region of a credential `AK/date/region/service/aws4_request`.
fn scope_region(credential: &str) -> Option<&str> {
    credential.split('/').nth(2)
}

fn query_param<'a>(query: &'a str, name: &str) -> Option<std::borrow::Cow<'a, str>> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| urlencoding::decode(v).unwrap_or(std::borrow::Cow::Borrowed(v)))
    })
}

impl KeyAccess {
    fn check_signature_scope(&self, cx: &S3AccessContext<'_>) -> S3Result<()> {
        if let Some(auth) = cx
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            let cred = auth
                .split([' ', ','])
                .find_map(|p| p.trim().strip_prefix("Credential="));
            if let Some(region) = cred.and_then(scope_region)
                && region != self.region
            {
                return Err(s3_error!(
                    AuthorizationHeaderMalformed,
                    "The authorization header is malformed; the region '{region}' is wrong; expecting '{}'",
                    self.region
                ));
            }
        }
        let query = cx.uri().query().unwrap_or("");
        if let Some(cred) = query_param(query, "X-Amz-Credential")
            && let Some(region) = scope_region(&cred)
            && region != self.region
        {
            return Err(s3_error!(
                AuthorizationQueryParametersError,
                "Error parsing the X-Amz-Credential parameter; the region '{region}' is wrong; expecting '{}'",
                self.region
            ));
        }
        Ok(())
    }
}

impl KeyAccess {
    /// The signing key of the request; `None` when it is anonymous.
    async fn key(&self, cx: &S3AccessContext<'_>) -> S3Result<Option<KeyRow>> {
        let Some(creds) = cx.credentials() else {
            return Ok(None);
        };
        self.model
            .keys()
            .signing_key(&creds.access_key)
            .await
            .or_s3()?
            .map(Some)
            .ok_or_else(|| s3_error!(InvalidAccessKeyId))
    }

    /// Whether the ACL of the object version a request is about grants it
    /// (a read, or a read or change of its ACL; read only when nothing else
    /// granted: one more row read, for requests that would otherwise be
    /// refused). A read of an object that
    /// does not exist (or is a delete marker) is answered here with the
    /// operation's `404` when the caller may list the bucket, which would
    /// tell it as much: S3 answers `404` then, not `403` (AWS API
    /// reference, GetObject, "Permissions"). Answered here rather than let
    /// through, so that an object written meanwhile is not served to a
    /// caller who may not read it.
    async fn object_acl_grants(
        &self,
        caller: &Caller,
        bucket: &hangar_model::bucket::BucketRow,
        need: Need,
        action: &str,
        object: Option<&str>,
        query: &str,
    ) -> S3Result<bool> {
        let Some(key) = object else {
            return Ok(false);
        };
        if !matches!(
            action,
            "s3:GetObject"
                | "s3:GetObjectVersion"
                | "s3:GetObjectAcl"
                | "s3:GetObjectVersionAcl"
                | "s3:PutObjectAcl"
                | "s3:PutObjectVersionAcl"
        ) {
            return Ok(false);
        }
        let version = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("versionId="));
        let Ok(v) = crate::ops_versioning::parse_version_id(version) else {
            return Ok(false);
        };
        let found = self
            .model
            .objects()
            .find_version(bucket, key, v)
            .await
            .or_s3()?;
        let may_list = || caller.may(bucket, need_of("ListObjects"), "s3:ListBucket", None);
        let found = match found {
            None if may_list() => {
                return Err(match v {
                    Some(_) => crate::error::no_such_version(),
                    None => s3_error!(NoSuchKey, "The specified key does not exist."),
                });
            }
            Some(f) if f.row.is_delete_marker() && may_list() => {
                return Err(crate::error::delete_marker(
                    v.is_some(),
                    f.id.map(|i| i.to_string()),
                ));
            }
            Some(f) if !f.row.is_delete_marker() => f,
            _ => return Ok(false),
        };
        let acl = crate::access::ObjectAcl {
            canned: found.row.acl.value,
            grants: &found.row.grants.value,
        };
        if acl.canned.is_none() && acl.grants.is_empty() {
            return Ok(false);
        }
        Ok(caller.may_with_acl(bucket, need, action, object, Some(acl)))
    }
}

/// Whether a bucket whose owner id is `owner` is owned by the owner that
/// header `name` names (true without the header):
/// `x-amz-expected-bucket-owner` for the bucket a request is about,
/// `x-amz-source-expected-bucket-owner` for a copy's source. The owner id
/// is the one S3 answers for the bucket ([`crate::ops_acl::bucket_owner`]:
/// its creating key's canonical user id).
pub(crate) fn owned_as_expected(headers: &http::HeaderMap, name: &str, owner: &Owner) -> bool {
    headers
        .get(name)
        .is_none_or(|v| owner.id.as_deref() == v.to_str().ok())
}

#[async_trait::async_trait]
impl S3Access for KeyAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        // s3s resolved the operation; the metrics count the request under it.
        let op = cx.s3_op().name().to_owned();
        if let Some(slot) = cx.extensions_mut().get::<RequestOp>() {
            slot.set(&op);
        }
        self.check_signature_scope(cx)?;
        crate::body_limits::check(&op, cx.headers())?;
        let key = self.key(cx).await?;
        let need = need_of(&op);
        let bucket = cx.s3_path().get_bucket_name().map(str::to_owned);
        let object = cx.s3_path().get_object_key().map(str::to_owned);
        let peer = cx.extensions_mut().get::<PeerAddr>().map(|p| p.0.ip());
        let log_slot = cx.extensions_mut().get::<LogSlot>().cloned();
        let query = cx.uri().query().unwrap_or("");
        let by_version = query.split('&').any(|kv| kv.starts_with("versionId="));
        let caller = Caller::new(key, &op, cx.headers(), query, peer);
        // A request to a bucket with logging on is logged, refused or not.
        let log = |row: &hangar_model::bucket::BucketRow, owner: &Owner| {
            if let (Some(slot), Some(target)) = (&log_slot, row.logging()) {
                slot.set(Logged {
                    bucket: row.name.clone(),
                    owner: owner.id.clone().unwrap_or_default(),
                    target: target.clone(),
                    // S3 logs the requester's canonical user id.
                    requester: caller.key.as_ref().map(KeyRow::canonical_id),
                    key: object.clone(),
                    asked: Asked::of(
                        cx.method(),
                        cx.uri(),
                        cx.headers(),
                        peer.map_or_else(|| "-".to_owned(), |p| p.to_canonical().to_string()),
                    ),
                });
            }
        };
        let names_a_bucket = bucket.is_some();
        let mut bucket_exists = false;
        let allowed = match (need, bucket) {
            (Need::Authenticated, _) => caller.key.is_some(),
            (Need::CreateBucket, _) => caller
                .key
                .as_ref()
                .is_some_and(|k| k.allow_create_bucket.value),
            (_, None) => false,
            (need, Some(bucket)) => match self
                .model
                .buckets()
                .get_bucket_as(
                    &bucket,
                    caller.key.as_ref().map(|k| k.access_key_id.as_str()),
                )
                .await
                .or_s3()?
            {
                // A missing bucket is reported as such by the operation, as S3 does.
                None => crate::body_limits::check_missing_bucket(cx.headers(), &bucket)
                    .map(|()| true)?,
                Some(row) => {
                    bucket_exists = true;
                    // The owner (a read of its creating key's row) only
                    // for the requests that show it.
                    let expected = cx.headers().contains_key("x-amz-expected-bucket-owner");
                    let owner = if expected || row.logging().is_some() {
                        Some(crate::ops_acl::bucket_owner(&self.model, &row).await?)
                    } else {
                        None
                    };
                    if let Some(owner) = &owner {
                        log(&row, owner);
                    }
                    // A caller that names the owner it expects is refused
                    // when the bucket has another (AWS API reference,
                    // common request header `x-amz-expected-bucket-owner`:
                    // 403).
                    if owner.as_ref().is_some_and(|o| {
                        !owned_as_expected(cx.headers(), "x-amz-expected-bucket-owner", o)
                    }) {
                        false
                    } else if op == "DeleteObjects" && row.policy().is_some() {
                        // The keys are in the body: with a policy, each is
                        // decided by the operation (`ops_delete`).
                        caller.may_delete_some(&row)
                    } else {
                        let action = iam_action(&op, by_version);
                        caller.may(&row, need, &action, object.as_deref())
                            || self
                                .object_acl_grants(
                                    &caller,
                                    &row,
                                    need,
                                    &action,
                                    object.as_deref(),
                                    query,
                                )
                                .await?
                    }
                }
            },
        };
        if !allowed {
            return Err(s3_error!(AccessDenied, "Access Denied"));
        }
        // Until this node knows the layout, a key or a bucket it lacks is
        // asked of its peers, so "no such bucket" is still answered; but
        // objects, new buckets and listings would be this node's alone.
        let no_such_bucket =
            names_a_bucket && !bucket_exists && !matches!(need, Need::CreateBucket);
        if !no_such_bucket && self.model.awaiting_layout() {
            return Err(crate::error::service_unavailable(NO_LAYOUT_YET));
        }
        let announced = crate::body_limits::announced(cx.headers());
        cx.extensions_mut().insert(caller);
        crate::body_limits::reserve(&op, announced, cx.extensions_mut())
    }
}
