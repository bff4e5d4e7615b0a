//! Who may do what on a bucket: a key's own permissions (Hangar's
//! per-key bucket rights), the bucket policy and the public access block,
//! combined the way S3 combines an account's permissions with a bucket
//! policy (doc/security.md):
//!
//! 1. an explicit Deny of the policy refuses (but a key with the owner
//!    right may always read, change and delete the policy, so that no
//!    policy locks the bucket's owners out);
//! 2. otherwise the key's own permission for the operation grants, and so
//!    do the ACLs of the bucket and the object: their canned ACLs' grants
//!    to groups (unless the bucket's `IgnorePublicAcls`) and their grants
//!    to the key's canonical user id (unless the bucket's ACLs are
//!    disabled, as are the groups');
//! 3. otherwise an Allow of the policy grants — to anonymous requests only
//!    while `RestrictPublicBuckets` does not hold or the policy is not
//!    public;
//! 4. otherwise the request is refused.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use hangar_model::access::{AclGrant, AclPermission, CannedAcl, acl_granted_to};
use hangar_model::bucket::BucketRow;
use hangar_model::key::KeyRow;

use crate::policy::Policy;
use crate::policy_eval::{Decision, Request};

/// The address of the client of a request (set by the S3 endpoint for
/// `aws:SourceIp`; absent for requests that came another way, such as the
/// console's proxy).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

/// What an operation needs on its bucket in Hangar's own permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Any authenticated key (ListBuckets).
    Authenticated,
    /// The key's create-bucket right.
    CreateBucket,
    Read,
    Write,
    Owner,
}

pub(crate) fn need_of(op: &str) -> Need {
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
        | "ListObjectVersions"
        | "GetObjectTagging"
        | "GetObjectRetention"
        | "GetObjectLegalHold"
        | "GetObjectAcl" => Need::Read,
        "PutObject"
        | "PostObject"
        | "CopyObject"
        | "DeleteObject"
        | "DeleteObjects"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "AbortMultipartUpload"
        | "PutObjectTagging"
        | "DeleteObjectTagging"
        | "PutObjectRetention"
        | "PutObjectLegalHold"
        | "PutObjectAcl" => Need::Write,
        // Bucket configuration and everything else is the owner's business.
        _ => Need::Owner,
    }
}

/// The policy action of an S3 operation (`by_version`: the request names a
/// version, which S3 authorises as the `…Version` action).
pub(crate) fn iam_action(op: &str, by_version: bool) -> String {
    let name = match op {
        "GetObject" | "HeadObject" | "GetObjectAttributes" if by_version => "GetObjectVersion",
        "GetObject" | "HeadObject" | "GetObjectAttributes" => "GetObject",
        "DeleteObject" | "DeleteObjects" if by_version => "DeleteObjectVersion",
        "DeleteObject" | "DeleteObjects" => "DeleteObject",
        "GetObjectTagging" if by_version => "GetObjectVersionTagging",
        "GetObjectAcl" if by_version => "GetObjectVersionAcl",
        "PutObjectAcl" if by_version => "PutObjectVersionAcl",
        "PutObjectTagging" if by_version => "PutObjectVersionTagging",
        "DeleteObjectTagging" if by_version => "DeleteObjectVersionTagging",
        "PutObject"
        | "PostObject"
        | "CopyObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload" => "PutObject",
        "HeadBucket" | "ListObjects" | "ListObjectsV2" => "ListBucket",
        "ListObjectVersions" => "ListBucketVersions",
        "ListMultipartUploads" => "ListBucketMultipartUploads",
        "ListParts" => "ListMultipartUploadParts",
        "AbortMultipartUpload" => "AbortMultipartUpload",
        "DeleteBucketTagging" => "PutBucketTagging",
        "GetBucketCors" => "GetBucketCORS",
        "PutBucketCors" | "DeleteBucketCors" => "PutBucketCORS",
        "GetBucketLifecycleConfiguration" => "GetLifecycleConfiguration",
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => "PutLifecycleConfiguration",
        "GetObjectLockConfiguration" => "GetBucketObjectLockConfiguration",
        "PutObjectLockConfiguration" => "PutBucketObjectLockConfiguration",
        "GetPublicAccessBlock" => "GetBucketPublicAccessBlock",
        "PutPublicAccessBlock" | "DeletePublicAccessBlock" => "PutBucketPublicAccessBlock",
        "DeleteBucketOwnershipControls" => "PutBucketOwnershipControls",
        "GetBucketEncryption" => "GetEncryptionConfiguration",
        "PutBucketEncryption" | "DeleteBucketEncryption" => "PutEncryptionConfiguration",
        "GetBucketNotificationConfiguration" => "GetBucketNotification",
        "PutBucketNotificationConfiguration" => "PutBucketNotification",
        other => other,
    };
    format!("s3:{name}")
}

/// The ARN of a bucket, or of an object in it.
pub(crate) fn resource(bucket: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("arn:aws:s3:::{bucket}/{k}"),
        None => format!("arn:aws:s3:::{bucket}"),
    }
}

/// The caller of a request, as the access check found it: kept in the
/// request's extensions for operations that check a second resource (a
/// copy's source, each key of DeleteObjects).
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// `None` for an anonymous request.
    pub key: Option<KeyRow>,
    /// The request's condition keys (`aws:SourceIp`, `s3:prefix`, …).
    pub keys: BTreeMap<&'static str, String>,
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| {
            urlencoding::decode(v)
                .map(|c| c.into_owned())
                .unwrap_or_else(|_| v.to_owned())
        })
    })
}

impl Caller {
    /// The caller of a request of operation `op`, with its condition keys.
    pub(crate) fn new(
        key: Option<KeyRow>,
        op: &str,
        headers: &http::HeaderMap,
        query: &str,
        peer: Option<IpAddr>,
    ) -> Caller {
        let mut keys = BTreeMap::new();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(ip) = peer {
            keys.insert("aws:sourceip", ip.to_canonical().to_string());
        }
        // Hangar's S3 endpoint serves plain HTTP (TLS, if any, ends in a
        // proxy it cannot vouch for).
        keys.insert("aws:securetransport", "false".to_owned());
        if let Some(ua) = header("user-agent") {
            keys.insert("aws:useragent", ua);
        }
        if let Some(r) = header("referer") {
            keys.insert("aws:referer", r);
        }
        keys.insert(
            "aws:epochtime",
            (hangar_util::time::now_msec() / 1000).to_string(),
        );
        match &key {
            Some(k) => {
                keys.insert("aws:principaltype", "User".to_owned());
                keys.insert("aws:userid", k.access_key_id.clone());
                keys.insert("aws:username", k.name.value.clone());
                // "AWS" for Signature Version 2 (when the node accepts it),
                // so a policy can deny it as on S3. A V2 POST form is signed
                // in its body, which this does not see: it counts as V4.
                let version = if crate::request_time::Scheme::of(headers, query).is_v2() {
                    "AWS"
                } else {
                    "AWS4-HMAC-SHA256"
                };
                keys.insert("s3:signatureversion", version.to_owned());
                let auth_type = if op == "PostObject" {
                    "POST"
                } else if headers.contains_key(http::header::AUTHORIZATION) {
                    "REST-HEADER"
                } else {
                    "REST-QUERY-STRING"
                };
                keys.insert("s3:authtype", auth_type.to_owned());
            }
            None => {
                keys.insert("aws:principaltype", "Anonymous".to_owned());
            }
        }
        if matches!(op, "ListObjects" | "ListObjectsV2" | "ListObjectVersions") {
            // A listing without a prefix is one of prefix "" (S3 lets
            // `"s3:prefix": ""` allow listing the bucket's root).
            keys.insert(
                "s3:prefix",
                query_param(query, "prefix").unwrap_or_default(),
            );
            if let Some(d) = query_param(query, "delimiter") {
                keys.insert("s3:delimiter", d);
            }
            if let Some(m) = query_param(query, "max-keys") {
                keys.insert("s3:max-keys", m);
            }
        }
        if let Some(v) = query_param(query, "versionId") {
            keys.insert("s3:versionid", v);
        }
        if let Some(acl) = header("x-amz-acl") {
            keys.insert("s3:x-amz-acl", acl);
        }
        // The encryption a write asks for, so that a policy can deny
        // writes without it, as on S3.
        for (name, key) in [
            (
                "x-amz-server-side-encryption",
                "s3:x-amz-server-side-encryption",
            ),
            (
                "x-amz-server-side-encryption-aws-kms-key-id",
                "s3:x-amz-server-side-encryption-aws-kms-key-id",
            ),
        ] {
            if let Some(v) = header(name) {
                keys.insert(key, v);
            }
        }
        Caller { key, keys }
    }

    /// Whether the caller may do `action` (needing `need` of the key's own
    /// permissions) on `bucket` or on object `object` of it.
    pub(crate) fn may(
        &self,
        bucket: &BucketRow,
        need: Need,
        action: &str,
        object: Option<&str>,
    ) -> bool {
        self.may_with_acl(bucket, need, action, object, None)
    }

    /// Whether a DeleteObjects on `bucket`, which has a policy, may delete
    /// any key, so that its body (the keys, each then decided by the
    /// operation) is worth reading: always for a key; for an anonymous
    /// request only when the bucket's ACL or an Allow of the policy could
    /// grant it.
    pub(crate) fn may_delete_some(&self, bucket: &BucketRow) -> bool {
        if self.key.is_some() {
            return true;
        }
        let block = bucket.public_access_block().unwrap_or_default();
        let acl_allows = bucket.acls_enabled()
            && acl_grants(
                bucket,
                None,
                "s3:DeleteObject",
                None,
                block.ignore_public_acls,
            );
        let Some(policy) = bucket
            .policy()
            .and_then(|t| Policy::parse(t, &bucket.name).ok())
        else {
            return true;
        };
        acl_allows
            || (policy.may_allow_anonymous()
                && !(block.restrict_public_buckets && policy.is_public()))
    }

    /// [`Caller::may`], the object's ACL known (`object_acl`: the ACL of
    /// the object version the request is about).
    pub(crate) fn may_with_acl(
        &self,
        bucket: &BucketRow,
        need: Need,
        action: &str,
        object: Option<&str>,
        object_acl: Option<ObjectAcl<'_>>,
    ) -> bool {
        let block = bucket.public_access_block().unwrap_or_default();
        // BucketOwnerEnforced: ACLs grant nothing.
        let acl_allows = bucket.acls_enabled()
            && acl_grants(
                bucket,
                object_acl,
                action,
                self.key.as_ref(),
                block.ignore_public_acls,
            );
        let perm = self.key.as_ref().map(|k| k.permission(&bucket.name));
        let key_allows = perm.is_some_and(|p| match need {
            Need::Read => p.read,
            Need::Write => p.write,
            _ => p.owner,
        });
        let Some(text) = bucket.policy() else {
            return key_allows || acl_allows;
        };
        let policy = match Policy::parse(text, &bucket.name) {
            Ok(p) => p,
            Err(e) => {
                // Checked when it was put: only a policy stored by another
                // version of Hangar can fail here.
                tracing::warn!(bucket = %bucket.name, "stored bucket policy not understood: {e}");
                return key_allows || acl_allows;
            }
        };
        let request = Request {
            principal: self.key.as_ref().map(|k| k.access_key_id.clone()),
            canonical_id: self.key.as_ref().map(KeyRow::canonical_id),
            action: action.to_owned(),
            resource: resource(&bucket.name, object),
            keys: self.keys.clone(),
        };
        combine(
            policy.evaluate(&request),
            key_allows || acl_allows,
            perm.is_some_and(|p| p.owner),
            action,
            self.key.is_none() && block.restrict_public_buckets && policy.is_public(),
        )
    }
}

/// The ACL of an object version: its canned ACL (`None`: never set, so
/// `private`) and its other grants.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObjectAcl<'a> {
    pub canned: Option<CannedAcl>,
    pub grants: &'a [AclGrant],
}

/// What an ACL must grant for `action`, and whether the bucket's ACL
/// (`true`) or the object's grants it: on a bucket, READ lists it, WRITE
/// writes and deletes its objects; on an object, READ reads it; on both,
/// READ_ACP and WRITE_ACP read and replace the ACL (AWS S3 user guide,
/// "Access control list (ACL) overview", "Permissions that you can
/// grant").
fn acl_permission(action: &str) -> Option<(bool, AclPermission)> {
    Some(match action {
        "s3:ListBucket" | "s3:ListBucketVersions" | "s3:ListBucketMultipartUploads" => {
            (true, AclPermission::Read)
        }
        "s3:PutObject" | "s3:DeleteObject" | "s3:AbortMultipartUpload" => {
            (true, AclPermission::Write)
        }
        "s3:GetBucketAcl" => (true, AclPermission::ReadAcp),
        "s3:PutBucketAcl" => (true, AclPermission::WriteAcp),
        "s3:GetObject" | "s3:GetObjectVersion" => (false, AclPermission::Read),
        "s3:GetObjectAcl" | "s3:GetObjectVersionAcl" => (false, AclPermission::ReadAcp),
        "s3:PutObjectAcl" | "s3:PutObjectVersionAcl" => (false, AclPermission::WriteAcp),
        _ => return None,
    })
}

/// Whether the ACLs of `bucket` and of the object (`object`) grant
/// `action` to the caller whose key is `key` (`None`: anonymous): their
/// canned ACLs' grants to the AllUsers / AuthenticatedUsers groups and
/// their other grants to those groups, unless `ignore_public`
/// (`IgnorePublicAcls`), and their grants to the key's canonical user id.
pub(crate) fn acl_grants(
    bucket: &BucketRow,
    object: Option<ObjectAcl<'_>>,
    action: &str,
    key: Option<&KeyRow>,
    ignore_public: bool,
) -> bool {
    let Some((on_bucket, wanted)) = acl_permission(action) else {
        return false;
    };
    let signed = key.is_some();
    let group = !ignore_public
        && match (on_bucket, wanted) {
            (true, AclPermission::Read) => bucket.acl().grants_read(signed),
            (true, AclPermission::Write) => bucket.acl().grants_write(),
            (false, AclPermission::Read) => object
                .and_then(|o| o.canned)
                .is_some_and(|a| a.grants_read(signed)),
            _ => false,
        };
    let grants = if on_bucket {
        &bucket.grants.value[..]
    } else {
        object.map_or(&[][..], |o| o.grants)
    };
    if group || grants.is_empty() {
        return group;
    }
    // The canonical id is derived by a hash: only for ACLs with grants.
    let id = key.map(KeyRow::canonical_id);
    acl_granted_to(grants, id.as_deref(), wanted, ignore_public)
}

/// Combines a policy's decision with the key's own permission and the
/// ACLs' grants (see the module's comment). `restricted`: the request is anonymous and
/// `RestrictPublicBuckets` discards the policy's public grants.
fn combine(
    decision: Decision,
    key_allows: bool,
    key_owns: bool,
    action: &str,
    restricted: bool,
) -> bool {
    let manages_policy = matches!(
        action,
        "s3:GetBucketPolicy" | "s3:PutBucketPolicy" | "s3:DeleteBucketPolicy"
    );
    match decision {
        Decision::Deny => key_owns && manages_policy,
        _ if key_allows => true,
        Decision::Allow => !restricted,
        Decision::NoOpinion => false,
    }
}

/// The access key that signed a request (`None`: anonymous), whose local
/// bucket aliases its bucket names may be.
pub(crate) fn signer(credentials: &Option<s3s::auth::Credentials>) -> Option<&str> {
    credentials.as_ref().map(|c| c.access_key.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_model::access::PublicAccessBlock;
    use hangar_model::key::Permission;

    const KEY1: &str = "GK000000000000000000000001";
    const KEY2: &str = "GK000000000000000000000002";

    fn key(id: &str, bucket: &str, p: Permission) -> KeyRow {
        let mut k = KeyRow::new(id, "s", "n", 1);
        k.buckets.update(bucket.to_owned(), 1, p);
        k
    }

    fn bucket(policy: Option<&str>) -> BucketRow {
        let mut b = BucketRow::new("b", "ab".repeat(32), 1, 1);
        b.policy.update(2, policy.map(str::to_owned));
        b
    }

    fn caller(k: Option<KeyRow>, ip: &str) -> Caller {
        Caller {
            key: k,
            keys: BTreeMap::from([("aws:sourceip", ip.to_owned())]),
        }
    }

    const READ: Permission = Permission {
        read: true,
        write: false,
        owner: false,
    };
    const OWNER: Permission = Permission {
        read: true,
        write: true,
        owner: true,
    };

    #[test]
    fn without_a_policy_the_keys_permissions_decide() {
        let b = bucket(None);
        let reader = caller(Some(key(KEY1, "b", READ)), "127.0.0.1");
        assert!(reader.may(&b, Need::Read, "s3:GetObject", Some("x")));
        assert!(!reader.may(&b, Need::Write, "s3:PutObject", Some("x")));
        assert!(!caller(None, "127.0.0.1").may(&b, Need::Read, "s3:GetObject", Some("x")));
        let other = caller(Some(key(KEY1, "other", OWNER)), "127.0.0.1");
        assert!(!other.may(&b, Need::Read, "s3:GetObject", Some("x")));
    }

    #[test]
    fn a_policy_grants_denies_and_never_locks_the_owner_out() {
        let b = bucket(Some(&format!(
            r#"{{"Statement":[
              {{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/pub/*"}},
              {{"Effect":"Allow","Principal":{{"AWS":"{KEY2}"}},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}},
              {{"Effect":"Deny","Principal":"*","Action":"*","Resource":"*",
                "Condition":{{"IpAddress":{{"aws:SourceIp":"10.0.0.0/8"}}}}}}
            ]}}"#
        )));
        let anon = caller(None, "127.0.0.1");
        assert!(anon.may(&b, Need::Read, "s3:GetObject", Some("pub/a")));
        assert!(!anon.may(&b, Need::Read, "s3:GetObject", Some("priv/a")));
        let second = caller(Some(key(KEY2, "nothing", OWNER)), "127.0.0.1");
        assert!(second.may(&b, Need::Write, "s3:PutObject", Some("x")));
        assert!(!second.may(&b, Need::Read, "s3:GetObject", Some("x")));
        // The Deny wins over the key's own rights, but not over an owner
        // managing the policy.
        let owner_far = caller(Some(key(KEY1, "b", OWNER)), "10.1.2.3");
        assert!(!owner_far.may(&b, Need::Read, "s3:GetObject", Some("pub/a")));
        assert!(!owner_far.may(&b, Need::Owner, "s3:PutBucketTagging", None));
        assert!(owner_far.may(&b, Need::Owner, "s3:DeleteBucketPolicy", None));
        assert!(owner_far.may(&b, Need::Owner, "s3:PutBucketPolicy", None));
        assert!(!caller(Some(key(KEY2, "b", READ)), "10.0.0.1").may(
            &b,
            Need::Owner,
            "s3:DeleteBucketPolicy",
            None
        ));
        let owner_near = caller(Some(key(KEY1, "b", OWNER)), "127.0.0.1");
        assert!(owner_near.may(&b, Need::Owner, "s3:PutBucketTagging", None));
    }

    #[test]
    fn restrict_public_buckets_drops_public_grants_to_anonymous_requests() {
        let mut b = bucket(Some(&format!(
            r#"{{"Statement":[
              {{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}},
              {{"Effect":"Allow","Principal":{{"AWS":"{KEY2}"}},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}}
            ]}}"#
        )));
        b.public_access_block.update(
            3,
            Some(PublicAccessBlock {
                restrict_public_buckets: true,
                ..Default::default()
            }),
        );
        assert!(!caller(None, "127.0.0.1").may(&b, Need::Read, "s3:GetObject", Some("a")));
        let second = caller(Some(key(KEY2, "nothing", READ)), "127.0.0.1");
        assert!(second.may(&b, Need::Read, "s3:GetObject", Some("a")));
        assert!(second.may(&b, Need::Write, "s3:PutObject", Some("a")));
    }

    #[test]
    fn canned_acls_grant_reads_and_writes_unless_ignored_or_denied() {
        let mut b = bucket(None);
        let anon = caller(None, "127.0.0.1");
        let signed = caller(Some(key(KEY2, "nothing", READ)), "127.0.0.1");
        assert!(!anon.may(&b, Need::Read, "s3:ListBucket", None));
        b.acl.update(3, Some(CannedAcl::PublicRead));
        assert!(anon.may(&b, Need::Read, "s3:ListBucket", None));
        assert!(
            !anon.may(&b, Need::Read, "s3:GetObject", Some("a")),
            "a bucket's READ is listing"
        );
        assert!(!anon.may(&b, Need::Write, "s3:PutObject", Some("a")));
        b.acl.update(4, Some(CannedAcl::PublicReadWrite));
        assert!(anon.may(&b, Need::Write, "s3:PutObject", Some("a")));
        assert!(anon.may(&b, Need::Write, "s3:DeleteObject", Some("a")));
        assert!(!anon.may(&b, Need::Owner, "s3:PutBucketAcl", None));
        b.acl.update(5, Some(CannedAcl::AuthenticatedRead));
        assert!(!anon.may(&b, Need::Read, "s3:ListBucket", None));
        assert!(signed.may(&b, Need::Read, "s3:ListBucket", None));
        // An object's ACL.
        let b = bucket(None);
        let canned = |c| {
            Some(ObjectAcl {
                canned: Some(c),
                grants: &[],
            })
        };
        let public = canned(CannedAcl::PublicRead);
        assert!(anon.may_with_acl(&b, Need::Read, "s3:GetObject", Some("a"), public));
        assert!(!anon.may_with_acl(&b, Need::Write, "s3:PutObject", Some("a"), public));
        let auth = canned(CannedAcl::AuthenticatedRead);
        assert!(!anon.may_with_acl(&b, Need::Read, "s3:GetObject", Some("a"), auth));
        assert!(signed.may_with_acl(&b, Need::Read, "s3:GetObject", Some("a"), auth));
        // IgnorePublicAcls, and a Deny, win over the ACL.
        let mut ignored = bucket(None);
        ignored.public_access_block.update(
            3,
            Some(PublicAccessBlock {
                ignore_public_acls: true,
                ..Default::default()
            }),
        );
        assert!(!anon.may_with_acl(&ignored, Need::Read, "s3:GetObject", Some("a"), public));
        let denied = bucket(Some(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"*"}]}"#,
        ));
        assert!(!anon.may_with_acl(&denied, Need::Read, "s3:GetObject", Some("a"), public));
    }

    #[test]
    fn grants_to_users_give_their_key_what_they_name_and_nothing_more() {
        let mut b = bucket(None);
        let grantee = key(KEY2, "nothing", Permission::default());
        let id = grantee.canonical_id();
        let them = caller(Some(grantee), "127.0.0.1");
        let stranger = caller(
            Some(key(KEY1, "nothing", Permission::default())),
            "127.0.0.1",
        );
        let grant = |permission| AclGrant {
            id: id.clone(),
            permission,
        };
        b.grants.update(3, vec![grant(AclPermission::Read)]);
        assert!(them.may(&b, Need::Read, "s3:ListBucket", None));
        assert!(!stranger.may(&b, Need::Read, "s3:ListBucket", None));
        assert!(!them.may(&b, Need::Write, "s3:PutObject", Some("a")));
        assert!(!them.may(&b, Need::Owner, "s3:GetBucketAcl", None));
        b.grants.update(4, vec![grant(AclPermission::Write)]);
        assert!(them.may(&b, Need::Write, "s3:PutObject", Some("a")));
        assert!(them.may(&b, Need::Write, "s3:DeleteObject", Some("a")));
        assert!(!them.may(&b, Need::Read, "s3:ListBucket", None));
        b.grants.update(5, vec![grant(AclPermission::ReadAcp)]);
        assert!(them.may(&b, Need::Owner, "s3:GetBucketAcl", None));
        assert!(!them.may(&b, Need::Owner, "s3:PutBucketAcl", None));
        b.grants.update(6, vec![grant(AclPermission::FullControl)]);
        for (need, action) in [
            (Need::Read, "s3:ListBucket"),
            (Need::Write, "s3:PutObject"),
            (Need::Owner, "s3:GetBucketAcl"),
            (Need::Owner, "s3:PutBucketAcl"),
        ] {
            assert!(them.may(&b, need, action, Some("a")), "{action}");
        }
        // Full control of a bucket is not its ownership, nor its objects'.
        assert!(!them.may(&b, Need::Owner, "s3:PutBucketPolicy", None));
        assert!(!them.may(&b, Need::Read, "s3:GetObject", Some("a")));
        // An object's grants.
        let b = bucket(None);
        let users = [grant(AclPermission::ReadAcp)];
        let acl = Some(ObjectAcl {
            canned: None,
            grants: &users,
        });
        assert!(them.may_with_acl(&b, Need::Read, "s3:GetObjectAcl", Some("a"), acl));
        assert!(!them.may_with_acl(&b, Need::Read, "s3:GetObject", Some("a"), acl));
        assert!(!them.may_with_acl(&b, Need::Write, "s3:PutObjectAcl", Some("a"), acl));
        assert!(!stranger.may_with_acl(&b, Need::Read, "s3:GetObjectAcl", Some("a"), acl));
        // IgnorePublicAcls leaves grants to users alone; BucketOwnerEnforced
        // disables them too; a Deny wins.
        let mut ignored = bucket(None);
        ignored.grants.update(3, vec![grant(AclPermission::Read)]);
        ignored.public_access_block.update(
            3,
            Some(PublicAccessBlock {
                ignore_public_acls: true,
                ..Default::default()
            }),
        );
        assert!(them.may(&ignored, Need::Read, "s3:ListBucket", None));
        ignored.ownership.update(
            4,
            Some(hangar_model::access::ObjectOwnership::BucketOwnerEnforced),
        );
        assert!(!them.may(&ignored, Need::Read, "s3:ListBucket", None));
        let mut denied = bucket(Some(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:ListBucket","Resource":"*"}]}"#,
        ));
        denied.grants.update(3, vec![grant(AclPermission::Read)]);
        assert!(!them.may(&denied, Need::Read, "s3:ListBucket", None));
        // Grants to groups: AllUsers is everyone, AuthenticatedUsers every
        // signed request, unless IgnorePublicAcls; LogDelivery no one.
        let anon = caller(None, "127.0.0.1");
        let to = |id: &str, permission| AclGrant {
            id: id.to_owned(),
            permission,
        };
        let mut b = bucket(None);
        b.grants.update(
            3,
            vec![
                to(hangar_model::access::ALL_USERS, AclPermission::ReadAcp),
                to(
                    hangar_model::access::AUTHENTICATED_USERS,
                    AclPermission::Write,
                ),
                to(
                    hangar_model::access::LOG_DELIVERY,
                    AclPermission::FullControl,
                ),
            ],
        );
        assert!(anon.may(&b, Need::Owner, "s3:GetBucketAcl", None));
        assert!(!anon.may(&b, Need::Write, "s3:PutObject", Some("a")));
        assert!(stranger.may(&b, Need::Write, "s3:PutObject", Some("a")));
        assert!(!anon.may(&b, Need::Owner, "s3:PutBucketAcl", None));
        assert!(!anon.may(&b, Need::Read, "s3:ListBucket", None));
        b.public_access_block.update(
            4,
            Some(PublicAccessBlock {
                ignore_public_acls: true,
                ..Default::default()
            }),
        );
        assert!(!anon.may(&b, Need::Owner, "s3:GetBucketAcl", None));
        assert!(!stranger.may(&b, Need::Write, "s3:PutObject", Some("a")));
    }

    #[test]
    fn condition_keys_of_a_listing() {
        let headers = http::HeaderMap::new();
        let c = Caller::new(
            None,
            "ListObjectsV2",
            &headers,
            "list-type=2&prefix=home%2Fa%2F&max-keys=5",
            Some("::ffff:127.0.0.1".parse().unwrap()),
        );
        assert_eq!(c.keys["s3:prefix"], "home/a/");
        assert_eq!(c.keys["s3:max-keys"], "5");
        assert_eq!(c.keys["aws:sourceip"], "127.0.0.1");
        assert_eq!(c.keys["aws:principaltype"], "Anonymous");
        assert!(!c.keys.contains_key("s3:delimiter"));
        let c = Caller::new(None, "ListObjects", &headers, "", None);
        assert_eq!(c.keys["s3:prefix"], "");
        assert!(!c.keys.contains_key("aws:sourceip"));
        let c = Caller::new(None, "GetObject", &headers, "versionId=abc", None);
        assert!(!c.keys.contains_key("s3:prefix"));
        assert_eq!(c.keys["s3:versionid"], "abc");
    }

    #[test]
    fn actions_of_operations() {
        assert_eq!(iam_action("HeadObject", false), "s3:GetObject");
        assert_eq!(iam_action("GetObject", true), "s3:GetObjectVersion");
        assert_eq!(iam_action("ListObjectsV2", false), "s3:ListBucket");
        assert_eq!(iam_action("UploadPart", false), "s3:PutObject");
        assert_eq!(iam_action("DeleteObjects", false), "s3:DeleteObject");
        assert_eq!(iam_action("GetBucketPolicy", false), "s3:GetBucketPolicy");
        assert_eq!(
            iam_action("DeleteBucketLifecycle", false),
            "s3:PutLifecycleConfiguration"
        );
    }
}
