//! Put/GetBucketAcl and Put/GetObjectAcl, and the `x-amz-acl` of uploads:
//! canned ACLs only (`hangar_model::access::CannedAcl`, a register of the
//! bucket row and of each object version), applied by [`crate::access`].
//! An ACL body is accepted when a canned ACL says the same; other grants
//! (`x-amz-grant-*` headers, grants to other accounts or e-mail addresses)
//! answer `501 NotImplemented`. The owner shown is who the bucket's
//! creating key (`created_by`) is ([`bucket_owner`]), for the bucket and
//! its objects alike.

use hangar_model::Model;
use hangar_model::access::CannedAcl;
use hangar_model::bucket::BucketRow;
use s3s::dto::{
    AccessControlPolicy, CopyObjectInput, CreateBucketInput, CreateMultipartUploadInput,
    GetBucketAclInput, GetBucketAclOutput, GetObjectAclInput, GetObjectAclOutput, Grant, Grantee,
    Owner, Permission, PutBucketAclInput, PutBucketAclOutput, PutObjectAclInput,
    PutObjectAclOutput, PutObjectInput, Type,
};
use s3s::{S3Error, S3Request, S3Response, S3Result, s3_error};

use crate::S3Api;
use crate::access::signer;
use crate::error::OrS3;

const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";

/// The canned ACL of an `x-amz-acl` value; `aws-exec-read` and
/// `log-delivery-write` (grants to AWS services) are not supported.
pub(crate) fn canned(name: &str) -> S3Result<CannedAcl> {
    CannedAcl::parse(name).ok_or_else(|| match name {
        "aws-exec-read" | "log-delivery-write" => s3_error!(
            NotImplemented,
            "The canned ACL {name} is not supported by this server"
        ),
        _ => s3_error!(InvalidArgument, "Invalid canned ACL: {name}"),
    })
}

/// The ACL headers of a request that may set an ACL: `x-amz-acl` and the
/// `x-amz-grant-*` headers its operation takes.
pub(crate) trait AclHeaders {
    /// `x-amz-acl`.
    fn canned_acl(&self) -> Option<&str>;
    /// Whether any `x-amz-grant-*` header is present.
    fn has_grants(&self) -> bool;
}

macro_rules! acl_headers {
    ($t:ty: $($grant:ident),+) => {
        impl AclHeaders for $t {
            fn canned_acl(&self) -> Option<&str> {
                self.acl.as_ref().map(|a| a.as_str())
            }
            fn has_grants(&self) -> bool {
                false $(|| self.$grant.is_some())+
            }
        }
    };
}

acl_headers!(PutObjectInput: grant_full_control, grant_read, grant_read_acp, grant_write_acp);
acl_headers!(CopyObjectInput: grant_full_control, grant_read, grant_read_acp, grant_write_acp);
acl_headers!(CreateMultipartUploadInput: grant_full_control, grant_read, grant_read_acp, grant_write_acp);
acl_headers!(CreateBucketInput: grant_full_control, grant_read, grant_read_acp, grant_write, grant_write_acp);
acl_headers!(PutBucketAclInput: grant_full_control, grant_read, grant_read_acp, grant_write, grant_write_acp);
acl_headers!(PutObjectAclInput: grant_full_control, grant_read, grant_read_acp, grant_write, grant_write_acp);

/// The ACL an upload stores: `None` for none, `private` or
/// `bucket-owner-*` (the same grants in Hangar, whose bucket owners own
/// every object: not stored, so such uploads, which rclone and s3cmd make,
/// keep their row format); refused when public and the bucket blocks
/// public ACLs.
pub(crate) fn upload_acl(bucket: &BucketRow, h: &impl AclHeaders) -> S3Result<Option<CannedAcl>> {
    // `x-amz-grant-*` headers: grants no canned ACL expresses, refused
    // rather than ignored (an upload would be stored without the access
    // its writer asked for).
    if h.has_grants() {
        return Err(if bucket.acls_enabled() {
            not_expressible()
        } else {
            acls_disabled()
        });
    }
    let Some(acl) = h.canned_acl().map(canned).transpose()? else {
        return Ok(None);
    };
    if !bucket.acls_enabled() {
        return if acl == CannedAcl::BucketOwnerFullControl {
            Ok(None)
        } else {
            Err(acls_disabled())
        };
    }
    check_not_blocked(bucket, acl)?;
    Ok(acl.is_public().then_some(acl))
}

/// `BucketOwnerEnforced`: a request setting an ACL other than the bucket
/// owner's full control (AWS: "All S3 PUT requests must either specify the
/// bucket-owner-full-control canned ACL or not specify an ACL").
fn acls_disabled() -> S3Error {
    s3_error!(
        AccessControlListNotSupported,
        "The bucket does not allow ACLs"
    )
}

/// Refuses an ACL request that asks for more than the bucket owner's full
/// control: `bucket-owner-full-control`, or a body granting only
/// FULL_CONTROL to a canonical user, is the only ACL a bucket whose ACLs
/// are disabled accepts.
fn check_owner_only(h: &impl AclHeaders, body: Option<&AccessControlPolicy>) -> S3Result<()> {
    if h.has_grants() || !owner_full_control_only(h.canned_acl(), body) {
        return Err(acls_disabled());
    }
    Ok(())
}

fn owner_full_control_only(acl: Option<&str>, body: Option<&AccessControlPolicy>) -> bool {
    match (acl, body) {
        (Some(a), None) => a == CannedAcl::BucketOwnerFullControl.as_str(),
        (None, Some(p)) => {
            let grants: Vec<&Grant> = p.grants.iter().flatten().collect();
            !grants.is_empty()
                && grants.iter().all(|g| {
                    g.grantee
                        .as_ref()
                        .is_some_and(|e| e.type_.as_str() == Type::CANONICAL_USER)
                        && g.permission.as_ref().map(|p| p.as_str())
                            == Some(Permission::FULL_CONTROL)
                })
        }
        _ => false,
    }
}

/// `BlockPublicAcls`: a request setting a public ACL is refused.
fn check_not_blocked(bucket: &BucketRow, acl: CannedAcl) -> S3Result<()> {
    if acl.is_public()
        && bucket
            .public_access_block()
            .is_some_and(|p| p.block_public_acls)
    {
        return Err(s3_error!(
            AccessDenied,
            "Access Denied: the bucket's public access block forbids public ACLs"
        ));
    }
    Ok(())
}

fn not_expressible() -> S3Error {
    s3_error!(
        NotImplemented,
        "Only ACLs that a canned ACL expresses (private, public-read, public-read-write, authenticated-read) are supported"
    )
}

/// The canned ACL a request asks for: `x-amz-acl`, or an
/// `AccessControlPolicy` body that one expresses; `x-amz-grant-*` → 501.
fn requested(h: &impl AclHeaders, body: Option<&AccessControlPolicy>) -> S3Result<CannedAcl> {
    if h.has_grants() {
        return Err(not_expressible());
    }
    match (h.canned_acl(), body) {
        (Some(a), None) => canned(a),
        (None, Some(p)) => from_policy(p),
        (Some(_), Some(_)) => Err(s3_error!(
            UnexpectedContent,
            "This request does not support content with both x-amz-acl and a body"
        )),
        (None, None) => Err(s3_error!(
            MalformedACLError,
            "The XML you provided was not well-formed or did not validate against our published schema"
        )),
    }
}

/// The canned ACL an `AccessControlPolicy` expresses: the owner's
/// FULL_CONTROL (the grantee checked by `check_grantees`), and READ /
/// WRITE of the AllUsers or AuthenticatedUsers group.
fn from_policy(p: &AccessControlPolicy) -> S3Result<CannedAcl> {
    let (mut all_read, mut all_write, mut auth_read) = (false, false, false);
    for g in p.grants.iter().flatten() {
        let grantee = g.grantee.as_ref().ok_or_else(not_expressible)?;
        let perm = g.permission.as_ref().map(|p| p.as_str()).unwrap_or("");
        match (grantee.type_.as_str(), grantee.uri.as_deref(), perm) {
            (Type::CANONICAL_USER, _, Permission::FULL_CONTROL) => {}
            (Type::GROUP, Some(ALL_USERS), Permission::READ) => all_read = true,
            (Type::GROUP, Some(ALL_USERS), Permission::WRITE) => all_write = true,
            (Type::GROUP, Some(AUTHENTICATED_USERS), Permission::READ) => auth_read = true,
            _ => return Err(not_expressible()),
        }
    }
    match (all_read, all_write, auth_read) {
        (false, false, false) => Ok(CannedAcl::Private),
        (true, false, false) => Ok(CannedAcl::PublicRead),
        (true, true, false) => Ok(CannedAcl::PublicReadWrite),
        (false, false, true) => Ok(CannedAcl::AuthenticatedRead),
        _ => Err(not_expressible()),
    }
}

impl crate::S3Api {
    /// Refuses an `AccessControlPolicy` whose grantees S3 could not
    /// resolve, as S3 does: a grantee by e-mail is `400
    /// UnresolvableGrantByEmailAddress` (Hangar's users have no e-mail
    /// addresses), a canonical user id no key has is `400
    /// InvalidArgument`. A grant to another key's identity than the
    /// owner's stays `501` (Hangar's ACLs are canned ones), from
    /// [`from_policy`].
    async fn check_grantees(
        &self,
        owner: &Owner,
        body: Option<&AccessControlPolicy>,
    ) -> S3Result<()> {
        for g in body.iter().flat_map(|p| p.grants.iter().flatten()) {
            let Some(grantee) = &g.grantee else { continue };
            match grantee.type_.as_str() {
                Type::AMAZON_CUSTOMER_BY_EMAIL => {
                    return Err(s3_error!(
                        UnresolvableGrantByEmailAddress,
                        "The e-mail address you provided does not match any account on record."
                    ));
                }
                Type::CANONICAL_USER => {
                    let id = grantee.id.as_deref().unwrap_or("");
                    if Some(id) == owner.id.as_deref() {
                        continue;
                    }
                    if self
                        .model
                        .keys()
                        .with_canonical_id(id)
                        .await
                        .or_s3()?
                        .is_empty()
                    {
                        return Err(s3_error!(InvalidArgument, "Invalid id"));
                    }
                    return Err(not_expressible());
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The owner S3 shows for `bucket` and for its objects and uploads: who
/// the key that created the bucket is (its canonical user id, and its
/// display name when the operator gave one), as every object is the
/// bucket owner's (AWS's default object ownership, BucketOwnerEnforced).
/// The buckets the operator made show `hangar`. Read on this node: the
/// key table is on every node.
pub(crate) async fn bucket_owner(model: &Model, bucket: &BucketRow) -> S3Result<Owner> {
    Ok(match &bucket.created_by {
        Some(key) => {
            let who = model.keys().identity(key).await.or_s3()?;
            Owner {
                display_name: who.display_name,
                id: Some(who.canonical_id),
            }
        }
        None => Owner {
            display_name: None,
            id: Some(OPERATOR_OWNER.to_owned()),
        },
    })
}

/// The owner id of the buckets the operator made (`hangar bucket create`).
const OPERATOR_OWNER: &str = "hangar";

fn group(uri: &str, permission: &'static str) -> Grant {
    Grant {
        grantee: Some(Grantee {
            display_name: None,
            email_address: None,
            id: None,
            type_: Type::from_static(Type::GROUP),
            uri: Some(uri.to_owned()),
        }),
        permission: Some(Permission::from_static(permission)),
    }
}

/// The grants of a canned ACL: the owner's FULL_CONTROL, then the groups'.
fn grants(acl: CannedAcl, owner: &Owner) -> Vec<Grant> {
    let mut out = vec![Grant {
        grantee: Some(Grantee {
            display_name: owner.display_name.clone(),
            email_address: None,
            id: owner.id.clone(),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }];
    match acl {
        CannedAcl::PublicRead => out.push(group(ALL_USERS, Permission::READ)),
        CannedAcl::PublicReadWrite => {
            out.push(group(ALL_USERS, Permission::READ));
            out.push(group(ALL_USERS, Permission::WRITE));
        }
        CannedAcl::AuthenticatedRead => out.push(group(AUTHENTICATED_USERS, Permission::READ)),
        _ => {}
    }
    out
}

impl S3Api {
    pub(crate) async fn do_put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let owner = bucket_owner(&self.model, &b).await?;
        self.check_grantees(&owner, input.access_control_policy.as_ref())
            .await?;
        if !b.acls_enabled() {
            check_owner_only(&input, input.access_control_policy.as_ref())?;
            return Ok(S3Response::new(PutBucketAclOutput {}));
        }
        let acl = requested(&input, input.access_control_policy.as_ref())?;
        check_not_blocked(&b, acl)?;
        self.model
            .buckets()
            .set_bucket_acl(&b.name, acl)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutBucketAclOutput {}))
    }

    pub(crate) async fn do_get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        let b = self
            .bucket(signer(&req.credentials), &req.input.bucket)
            .await?;
        let owner = bucket_owner(&self.model, &b).await?;
        // ACLs disabled: reads show the owner's full control only.
        let acl = if b.acls_enabled() {
            b.acl()
        } else {
            CannedAcl::Private
        };
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(grants(acl, &owner)),
            owner: Some(owner),
        }))
    }

    pub(crate) async fn do_put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let owner = bucket_owner(&self.model, &b).await?;
        self.check_grantees(&owner, input.access_control_policy.as_ref())
            .await?;
        let enabled = b.acls_enabled();
        if !enabled {
            check_owner_only(&input, input.access_control_policy.as_ref())?;
        }
        let acl = requested(&input, input.access_control_policy.as_ref())?;
        check_not_blocked(&b, acl)?;
        let found = self
            .object_for_read(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        // ACLs disabled: the object's own ACL is kept as it was, for when
        // they are enabled again.
        if !enabled {
            return Ok(S3Response::new(PutObjectAclOutput {
                request_charged: None,
            }));
        }
        self.model
            .objects()
            .set_version_acl(&b, &found, acl)
            .await
            .or_s3()?;
        Ok(S3Response::new(PutObjectAclOutput {
            request_charged: None,
        }))
    }

    pub(crate) async fn do_get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let found = self
            .object_for_read(
                signer(&req.credentials),
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
            )
            .await?;
        let owner = bucket_owner(&self.model, &b).await?;
        let acl = if b.acls_enabled() {
            found.row.acl()
        } else {
            CannedAcl::Private
        };
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(grants(acl, &owner)),
            owner: Some(owner),
            request_charged: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's ACL headers, as the tests give them.
    struct Headers(Option<&'static str>, bool);

    impl AclHeaders for Headers {
        fn canned_acl(&self) -> Option<&str> {
            self.0
        }
        fn has_grants(&self) -> bool {
            self.1
        }
    }

    fn policy(grants: Vec<Grant>) -> AccessControlPolicy {
        AccessControlPolicy {
            grants: Some(grants),
            owner: None,
        }
    }

    #[test]
    fn acl_bodies_that_a_canned_acl_expresses() {
        let owner = Owner {
            display_name: None,
            id: Some("GK1".into()),
        };
        for acl in [
            CannedAcl::Private,
            CannedAcl::PublicRead,
            CannedAcl::PublicReadWrite,
            CannedAcl::AuthenticatedRead,
        ] {
            assert_eq!(from_policy(&policy(grants(acl, &owner))).unwrap(), acl);
        }
        let write_only = policy(vec![group(ALL_USERS, Permission::WRITE)]);
        assert_eq!(
            from_policy(&write_only).unwrap_err().code().as_str(),
            "NotImplemented"
        );
        let read_acp = policy(vec![group(ALL_USERS, Permission::READ_ACP)]);
        assert_eq!(
            from_policy(&read_acp).unwrap_err().code().as_str(),
            "NotImplemented"
        );
        assert_eq!(
            requested(&Headers(Some("private"), true), None)
                .unwrap_err()
                .code()
                .as_str(),
            "NotImplemented"
        );
        assert_eq!(
            requested(&Headers(None, false), None)
                .unwrap_err()
                .code()
                .as_str(),
            "MalformedACLError"
        );
        assert_eq!(
            canned("log-delivery-write").unwrap_err().code().as_str(),
            "NotImplemented"
        );
        assert_eq!(
            canned("bogus").unwrap_err().code().as_str(),
            "InvalidArgument"
        );
    }

    #[test]
    fn public_acls_are_refused_where_blocked_and_private_is_not_stored() {
        let mut b = BucketRow::new("b", "ab".repeat(32), 1, 1);
        assert_eq!(
            upload_acl(&b, &Headers(Some("private"), false)).unwrap(),
            None
        );
        assert_eq!(upload_acl(&b, &Headers(None, false)).unwrap(), None);
        assert_eq!(
            upload_acl(&b, &Headers(Some("public-read"), false)).unwrap(),
            Some(CannedAcl::PublicRead)
        );
        b.public_access_block.update(
            2,
            Some(hangar_model::access::PublicAccessBlock {
                block_public_acls: true,
                ..Default::default()
            }),
        );
        assert_eq!(
            upload_acl(&b, &Headers(Some("public-read"), false))
                .unwrap_err()
                .code()
                .as_str(),
            "AccessDenied"
        );
        assert_eq!(
            upload_acl(&b, &Headers(Some("bucket-owner-full-control"), false)).unwrap(),
            None
        );
    }
}
