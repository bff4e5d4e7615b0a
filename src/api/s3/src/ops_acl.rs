//! Put/GetBucketAcl and Put/GetObjectAcl, and the ACLs of uploads and
//! creations (`x-amz-acl`, `x-amz-grant-*`): what a request asks for is
//! read into a canned ACL, for what it says of the groups
//! (`hangar_model::access::CannedAcl`), and the other grants, to users by
//! canonical user id and to groups by URI (`hangar_model::access::
//! AclGrant`), both registers of the bucket row and of each object
//! version, applied by [`crate::access`]. The owner
//! shown is who the bucket's creating key (`created_by`) is
//! ([`bucket_owner`]), for the bucket and its objects alike; it always has
//! full control.

use std::collections::BTreeSet;

use hangar_model::Model;
use hangar_model::access::{
    ALL_USERS, AUTHENTICATED_USERS, AclGrant, AclPermission, CannedAcl, LOG_DELIVERY, MAX_GRANTS,
};
use hangar_model::bucket::BucketRow;
use hangar_table::Lww;
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

/// The canned ACL of an `x-amz-acl` value; `aws-exec-read` (a grant to
/// Amazon EC2) is not supported, and `log-delivery-write` is read as its
/// grants by [`requested_grants`].
pub(crate) fn canned(name: &str) -> S3Result<CannedAcl> {
    CannedAcl::parse(name).ok_or_else(|| match name {
        "aws-exec-read" | LOG_DELIVERY_WRITE => s3_error!(
            NotImplemented,
            "The canned ACL {name} is not supported by this server"
        ),
        _ => s3_error!(InvalidArgument, "Invalid canned ACL: {name}"),
    })
}

/// The canned ACL that grants the LogDelivery group WRITE and READ_ACP on
/// a bucket (S3 user guide, "Canned ACL"): kept as those grants.
const LOG_DELIVERY_WRITE: &str = "log-delivery-write";

/// The ACL headers of a request that may set an ACL: `x-amz-acl` and the
/// `x-amz-grant-*` headers its operation takes.
pub(crate) trait AclHeaders {
    /// `x-amz-acl`.
    fn canned_acl(&self) -> Option<&str>;
    /// The `x-amz-grant-*` headers present, with the permission each gives.
    fn grant_headers(&self) -> Vec<(AclPermission, &str)>;
    /// Whether any `x-amz-grant-*` header is present.
    fn has_grants(&self) -> bool {
        !self.grant_headers().is_empty()
    }
}

macro_rules! acl_headers {
    ($t:ty: $($grant:ident => $perm:ident),+) => {
        impl AclHeaders for $t {
            fn canned_acl(&self) -> Option<&str> {
                self.acl.as_ref().map(|a| a.as_str())
            }
            fn grant_headers(&self) -> Vec<(AclPermission, &str)> {
                let mut out = Vec::new();
                $(if let Some(v) = &self.$grant {
                    out.push((AclPermission::$perm, v.as_str()));
                })+
                out
            }
        }
    };
}

acl_headers!(PutObjectInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write_acp => WriteAcp);
acl_headers!(CopyObjectInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write_acp => WriteAcp);
acl_headers!(CreateMultipartUploadInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write_acp => WriteAcp);
acl_headers!(CreateBucketInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write => Write, grant_write_acp => WriteAcp);
acl_headers!(PutBucketAclInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write => Write, grant_write_acp => WriteAcp);
acl_headers!(PutObjectAclInput: grant_full_control => FullControl, grant_read => Read,
    grant_read_acp => ReadAcp, grant_write => Write, grant_write_acp => WriteAcp);

/// Who a grant is to, as a request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GranteeRef {
    /// A canonical user id.
    User(String),
    /// A group, by URI.
    Group(String),
    /// An e-mail address: Hangar's users have none.
    Email,
}

/// The grants of `x-amz-grant-*` headers: each a comma-separated list of
/// `id="…"`, `uri="…"` or `emailAddress="…"` (AWS API reference,
/// PutBucketAcl, "x-amz-grant-read").
fn header_grants(h: &impl AclHeaders) -> S3Result<Vec<(GranteeRef, AclPermission)>> {
    let mut out = Vec::new();
    for (permission, value) in h.grant_headers() {
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (kind, v) = item
                .split_once('=')
                .ok_or_else(|| s3_error!(InvalidArgument, "Invalid grant: {item}"))?;
            let v = v.trim().trim_matches('"').to_owned();
            let grantee = match kind.trim() {
                "id" => GranteeRef::User(v),
                "uri" => GranteeRef::Group(v),
                "emailAddress" => GranteeRef::Email,
                other => return Err(s3_error!(InvalidArgument, "Invalid grantee type: {other}")),
            };
            out.push((grantee, permission));
        }
    }
    Ok(out)
}

/// The grants of an `AccessControlPolicy` body.
fn body_grants(p: &AccessControlPolicy) -> S3Result<Vec<(GranteeRef, AclPermission)>> {
    let malformed = || {
        s3_error!(
            MalformedACLError,
            "The XML you provided was not well-formed or did not validate against our published schema"
        )
    };
    let mut out = Vec::new();
    for g in p.grants.iter().flatten() {
        let grantee = g.grantee.as_ref().and_then(grantee_ref);
        let permission = g
            .permission
            .as_ref()
            .and_then(|p| AclPermission::parse(p.as_str()));
        out.push((
            grantee.ok_or_else(malformed)?,
            permission.ok_or_else(malformed)?,
        ));
    }
    Ok(out)
}

/// Who `g` names; `None` when it names no one it could.
pub(crate) fn grantee_ref(g: &Grantee) -> Option<GranteeRef> {
    Some(match g.type_.as_str() {
        Type::CANONICAL_USER => GranteeRef::User(g.id.clone()?),
        Type::GROUP => GranteeRef::Group(g.uri.clone()?),
        Type::AMAZON_CUSTOMER_BY_EMAIL => GranteeRef::Email,
        _ => return None,
    })
}

/// An ACL as a request asks for it: the canned ACL its group grants
/// express, and its other grants, none to the owner (who always has
/// full control).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AskedAcl {
    pub canned: CannedAcl,
    pub grants: Vec<AclGrant>,
}

impl AskedAcl {
    /// Whether it grants anything to the AllUsers or AuthenticatedUsers
    /// group (S3's "public" ACL).
    pub(crate) fn is_public(&self) -> bool {
        self.canned.is_public() || self.grants.iter().any(AclGrant::is_public)
    }

    /// The registers of an object an upload with `acl` makes, stamped 0 as
    /// an upload's are: the canned ACL when public (`private` and
    /// `bucket-owner-*` are what no register says), the other grants
    /// when there are any.
    pub(crate) fn upload_registers(
        acl: Option<&AskedAcl>,
    ) -> (Lww<Option<CannedAcl>>, Lww<Vec<AclGrant>>) {
        let canned = acl
            .map(|a| a.canned)
            .filter(|c| c.is_public())
            .map_or_else(Lww::default, |c| Lww::new(0, Some(c)));
        let users = acl
            .filter(|a| !a.grants.is_empty())
            .map_or_else(Lww::default, |a| Lww::new(0, a.grants.clone()));
        (canned, users)
    }
}

/// The ACL `grants` express for something owned by `owner`: the canned
/// ACL that says the most of its grants to the AllUsers and
/// AuthenticatedUsers groups (READ and WRITE, READ, or READ to
/// AuthenticatedUsers), and the rest as grants: to users, and to groups
/// where no canned ACL says it. The owner's own grants are left out: it
/// always has full control. Grantees are checked by
/// [`S3Api::check_grantees`] first.
fn asked_acl(owner: &Owner, grants: Vec<(GranteeRef, AclPermission)>) -> S3Result<AskedAcl> {
    let mut rest = BTreeSet::new();
    for (grantee, permission) in grants {
        let id = match grantee {
            GranteeRef::User(id) if Some(id.as_str()) == owner.id.as_deref() => continue,
            GranteeRef::User(id) => id,
            GranteeRef::Group(uri)
                if [ALL_USERS, AUTHENTICATED_USERS, LOG_DELIVERY].contains(&uri.as_str()) =>
            {
                uri
            }
            GranteeRef::Group(uri) => {
                return Err(s3_error!(InvalidArgument, "Invalid group uri: {uri}"));
            }
            // Refused by `check_grantees`.
            GranteeRef::Email => continue,
        };
        rest.insert(AclGrant { id, permission });
    }
    let grant = |id: &str, permission| AclGrant {
        id: id.to_owned(),
        permission,
    };
    let all_read = grant(ALL_USERS, AclPermission::Read);
    let all_write = grant(ALL_USERS, AclPermission::Write);
    let auth_read = grant(AUTHENTICATED_USERS, AclPermission::Read);
    let canned = if rest.contains(&all_read) && rest.contains(&all_write) {
        rest.remove(&all_read);
        rest.remove(&all_write);
        CannedAcl::PublicReadWrite
    } else if rest.remove(&all_read) {
        CannedAcl::PublicRead
    } else if rest.remove(&auth_read) {
        CannedAcl::AuthenticatedRead
    } else {
        CannedAcl::Private
    };
    if rest.len() > MAX_GRANTS {
        return Err(s3_error!(
            MalformedACLError,
            "An ACL may hold at most {MAX_GRANTS} grants"
        ));
    }
    Ok(AskedAcl {
        canned,
        grants: rest.into_iter().collect(),
    })
}

/// What a request asks for to set an ACL.
#[derive(Debug)]
enum Requested {
    /// `x-amz-acl`: a canned ACL, no other grant.
    Canned(CannedAcl),
    /// `x-amz-grant-*` headers or an `AccessControlPolicy` body.
    Grants(Vec<(GranteeRef, AclPermission)>),
}

/// The ACL a request asks for; `None` for none.
fn requested_grants(
    h: &impl AclHeaders,
    body: Option<&AccessControlPolicy>,
) -> S3Result<Option<Requested>> {
    let headers = h.has_grants();
    if h.canned_acl().is_some() && headers {
        return Err(s3_error!(
            InvalidRequest,
            "Specifying both Canned ACLs and Header Grants is not allowed"
        ));
    }
    if body.is_some() && (headers || h.canned_acl().is_some()) {
        return Err(s3_error!(
            UnexpectedContent,
            "This request does not support content with both x-amz-acl and a body"
        ));
    }
    Ok(match (h.canned_acl(), body) {
        (Some(LOG_DELIVERY_WRITE), _) => Some(Requested::Grants(vec![
            (
                GranteeRef::Group(LOG_DELIVERY.to_owned()),
                AclPermission::Write,
            ),
            (
                GranteeRef::Group(LOG_DELIVERY.to_owned()),
                AclPermission::ReadAcp,
            ),
        ])),
        (Some(a), _) => Some(Requested::Canned(canned(a)?)),
        (None, Some(p)) => Some(Requested::Grants(body_grants(p)?)),
        (None, None) if headers => Some(Requested::Grants(header_grants(h)?)),
        (None, None) => None,
    })
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

/// `BlockPublicAcls`: a request setting a public ACL (a canned one, or a
/// grant to the AllUsers or AuthenticatedUsers group) is refused.
fn check_not_blocked(bucket: &BucketRow, acl: &AskedAcl) -> S3Result<()> {
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

impl crate::S3Api {
    /// Refuses grantees S3 could not resolve, as S3 does: a grantee by
    /// e-mail is `400 UnresolvableGrantByEmailAddress` (Hangar's users
    /// have no e-mail addresses), a canonical user id no key has is `400
    /// InvalidArgument`.
    async fn check_grantees(
        &self,
        owner: &Owner,
        grants: &[(GranteeRef, AclPermission)],
    ) -> S3Result<()> {
        if grants.iter().any(|(g, _)| *g == GranteeRef::Email) {
            return Err(s3_error!(
                UnresolvableGrantByEmailAddress,
                "The e-mail address you provided does not match any account on record."
            ));
        }
        let mut known: Option<BTreeSet<String>> = None;
        for (g, _) in grants {
            let GranteeRef::User(id) = g else { continue };
            if Some(id.as_str()) == owner.id.as_deref() {
                continue;
            }
            if known.is_none() {
                let keys = self.model.keys().list().await.or_s3()?;
                known = Some(keys.iter().map(|k| k.canonical_id()).collect());
            }
            if !known.as_ref().is_some_and(|k| k.contains(id)) {
                return Err(s3_error!(InvalidArgument, "Invalid id"));
            }
        }
        Ok(())
    }

    /// The ACL `grants` express on something owned by `owner`, its
    /// grantees checked.
    pub(crate) async fn resolved_acl(
        &self,
        owner: &Owner,
        grants: Vec<(GranteeRef, AclPermission)>,
    ) -> S3Result<AskedAcl> {
        self.check_grantees(owner, &grants).await?;
        asked_acl(owner, grants)
    }

    /// The ACL a request asks for on a bucket owned by `owner` (`None`:
    /// it asks for none), its grantees checked.
    pub(crate) async fn asked_acl(
        &self,
        owner: &Owner,
        h: &impl AclHeaders,
        body: Option<&AccessControlPolicy>,
    ) -> S3Result<Option<AskedAcl>> {
        Ok(match requested_grants(h, body)? {
            None => None,
            Some(Requested::Canned(canned)) => Some(AskedAcl {
                canned,
                grants: Vec::new(),
            }),
            Some(Requested::Grants(grants)) => Some(self.resolved_acl(owner, grants).await?),
        })
    }

    /// The ACL an upload stores: `None` for none, or `private` or
    /// `bucket-owner-*` without other grants (the same grants in
    /// Hangar, whose bucket owners own every object: not stored, so such
    /// uploads, which rclone and s3cmd make, keep their row format);
    /// refused when public and the bucket blocks public ACLs, and any but
    /// the owner's full control when the bucket's ACLs are disabled.
    pub(crate) async fn upload_acl(
        &self,
        bucket: &BucketRow,
        h: &impl AclHeaders,
    ) -> S3Result<Option<AskedAcl>> {
        if !bucket.acls_enabled() {
            return match h.canned_acl() {
                _ if h.has_grants() => Err(acls_disabled()),
                None => Ok(None),
                Some(a) if canned(a)? == CannedAcl::BucketOwnerFullControl => Ok(None),
                Some(_) => Err(acls_disabled()),
            };
        }
        let acl = if h.has_grants() {
            // Grants name users: the owner's are its own (a read of its
            // creating key's row, only for such uploads).
            let owner = bucket_owner(&self.model, bucket).await?;
            self.asked_acl(&owner, h, None).await?
        } else {
            h.canned_acl()
                .map(canned)
                .transpose()?
                .map(|canned| AskedAcl {
                    canned,
                    grants: Vec::new(),
                })
        };
        let Some(acl) = acl else {
            return Ok(None);
        };
        check_not_blocked(bucket, &acl)?;
        Ok((acl.canned.is_public() || !acl.grants.is_empty()).then_some(acl))
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

fn group(uri: &str, permission: &str) -> Grant {
    Grant {
        grantee: Some(Grantee {
            display_name: None,
            email_address: None,
            id: None,
            type_: Type::from_static(Type::GROUP),
            uri: Some(uri.to_owned()),
        }),
        permission: Some(Permission::from(permission.to_owned())),
    }
}

/// The grants an ACL shows: the owner's FULL_CONTROL, then its other
/// grants, then the groups' of the canned ACL.
pub(crate) fn grants(acl: CannedAcl, users: &[AclGrant], owner: &Owner) -> Vec<Grant> {
    let user = |id: Option<String>, display_name: Option<String>, permission: &str| Grant {
        grantee: Some(Grantee {
            display_name,
            email_address: None,
            id,
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from(permission.to_owned())),
    };
    let mut out = vec![user(
        owner.id.clone(),
        owner.display_name.clone(),
        Permission::FULL_CONTROL,
    )];
    for g in users {
        out.push(if g.is_group() {
            group(&g.id, g.permission.as_str())
        } else {
            user(Some(g.id.clone()), None, g.permission.as_str())
        });
    }
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

/// A Put*Acl request with neither `x-amz-acl`, `x-amz-grant-*` nor a body.
fn no_acl_given() -> S3Error {
    s3_error!(
        MalformedACLError,
        "The XML you provided was not well-formed or did not validate against our published schema"
    )
}

impl S3Api {
    /// The ACL a Put*Acl request sets on bucket `b` (`None`: the bucket's
    /// ACLs are disabled, and the request asks for no more than the
    /// owner's full control, so nothing changes).
    async fn acl_to_set(
        &self,
        b: &BucketRow,
        h: &impl AclHeaders,
        body: Option<&AccessControlPolicy>,
    ) -> S3Result<Option<AskedAcl>> {
        let owner = bucket_owner(&self.model, b).await?;
        if !b.acls_enabled() {
            if let Some(Requested::Grants(g)) = requested_grants(h, body)? {
                self.check_grantees(&owner, &g).await?;
            }
            check_owner_only(h, body)?;
            return Ok(None);
        }
        let acl = self
            .asked_acl(&owner, h, body)
            .await?
            .ok_or_else(no_acl_given)?;
        check_not_blocked(b, &acl)?;
        Ok(Some(acl))
    }

    pub(crate) async fn do_put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let body = input.access_control_policy.as_ref();
        if let Some(acl) = self.acl_to_set(&b, &input, body).await? {
            self.model
                .buckets()
                .set_bucket_acl(&b.name, acl.canned, acl.grants)
                .await
                .or_s3()?;
        }
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
        let grants = if b.acls_enabled() {
            grants(b.acl(), &b.grants.value, &owner)
        } else {
            grants(CannedAcl::Private, &[], &owner)
        };
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(grants),
            owner: Some(owner),
        }))
    }

    pub(crate) async fn do_put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let input = req.input;
        let b = self.bucket(signer(&req.credentials), &input.bucket).await?;
        let body = input.access_control_policy.as_ref();
        let acl = self.acl_to_set(&b, &input, body).await?;
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
        if let Some(acl) = acl {
            self.model
                .objects()
                .set_version_acl(&b, &found, acl.canned, acl.grants)
                .await
                .or_s3()?;
        }
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
        let grants = if b.acls_enabled() {
            grants(found.row.acl(), &found.row.grants.value, &owner)
        } else {
            grants(CannedAcl::Private, &[], &owner)
        };
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(grants),
            owner: Some(owner),
            request_charged: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's ACL headers, as the tests give them.
    struct Headers(Option<&'static str>, Vec<(AclPermission, &'static str)>);

    impl AclHeaders for Headers {
        fn canned_acl(&self) -> Option<&str> {
            self.0
        }
        fn grant_headers(&self) -> Vec<(AclPermission, &str)> {
            self.1.clone()
        }
    }

    fn policy(grants: Vec<Grant>) -> AccessControlPolicy {
        AccessControlPolicy {
            grants: Some(grants),
            owner: None,
        }
    }

    fn owner() -> Owner {
        Owner {
            display_name: None,
            id: Some("owner-id".into()),
        }
    }

    fn code(e: S3Error) -> String {
        e.code().as_str().to_owned()
    }

    #[test]
    fn acl_bodies_read_back_as_they_were_answered() {
        let users = vec![
            AclGrant {
                id: "u1".into(),
                permission: AclPermission::ReadAcp,
            },
            AclGrant {
                id: "u2".into(),
                permission: AclPermission::FullControl,
            },
        ];
        for acl in [
            CannedAcl::Private,
            CannedAcl::PublicRead,
            CannedAcl::PublicReadWrite,
            CannedAcl::AuthenticatedRead,
        ] {
            for users in [Vec::new(), users.clone()] {
                let body = policy(grants(acl, &users, &owner()));
                let got = asked_acl(&owner(), body_grants(&body).unwrap()).unwrap();
                assert_eq!(
                    got,
                    AskedAcl {
                        canned: acl,
                        grants: users.clone()
                    }
                );
            }
        }
        // Group grants no canned ACL says: kept as grants, beside the
        // canned ACL that says the rest.
        let body = policy(vec![
            group(ALL_USERS, Permission::READ),
            group(ALL_USERS, Permission::READ_ACP),
            group(AUTHENTICATED_USERS, Permission::READ),
            group(LOG_DELIVERY, Permission::WRITE),
        ]);
        let got = asked_acl(&owner(), body_grants(&body).unwrap()).unwrap();
        assert_eq!(got.canned, CannedAcl::PublicRead);
        let kept: Vec<(&str, AclPermission)> = got
            .grants
            .iter()
            .map(|g| (g.id.as_str(), g.permission))
            .collect();
        assert_eq!(
            kept,
            [
                (ALL_USERS, AclPermission::ReadAcp),
                (AUTHENTICATED_USERS, AclPermission::Read),
                (LOG_DELIVERY, AclPermission::Write),
            ]
        );
        assert!(got.is_public());
        // Shown back as they were given.
        let shown = grants(got.canned, &got.grants, &owner());
        let again = asked_acl(&owner(), body_grants(&policy(shown)).unwrap()).unwrap();
        assert_eq!(again, got);
        let write_only = asked_acl(
            &owner(),
            body_grants(&policy(vec![group(ALL_USERS, Permission::WRITE)])).unwrap(),
        )
        .unwrap();
        assert_eq!(write_only.canned, CannedAcl::Private);
        let unknown = policy(vec![group("http://example.com/groups/x", Permission::READ)]);
        assert_eq!(
            code(asked_acl(&owner(), body_grants(&unknown).unwrap()).unwrap_err()),
            "InvalidArgument"
        );
        // A permission S3 does not have: malformed.
        let mut g = group(ALL_USERS, Permission::READ);
        g.permission = Some(Permission::from("LIST".to_owned()));
        assert_eq!(
            code(body_grants(&policy(vec![g])).unwrap_err()),
            "MalformedACLError"
        );
    }

    #[test]
    fn grant_headers_name_users_groups_and_e_mail_addresses() {
        let h = Headers(
            None,
            vec![
                (
                    AclPermission::Read,
                    r#"id="u1", uri="http://acs.amazonaws.com/groups/global/AllUsers""#,
                ),
                (AclPermission::WriteAcp, r#"id="u2",id="u1""#),
            ],
        );
        let grants = header_grants(&h).unwrap();
        assert_eq!(grants.len(), 4);
        let acl = asked_acl(&owner(), grants).unwrap();
        assert_eq!(acl.canned, CannedAcl::PublicRead);
        assert_eq!(
            acl.grants,
            vec![
                AclGrant {
                    id: "u1".into(),
                    permission: AclPermission::Read
                },
                AclGrant {
                    id: "u1".into(),
                    permission: AclPermission::WriteAcp
                },
                AclGrant {
                    id: "u2".into(),
                    permission: AclPermission::WriteAcp
                },
            ]
        );
        // The owner's own grants change nothing: it has full control.
        let h = Headers(None, vec![(AclPermission::Read, r#"id="owner-id""#)]);
        assert_eq!(
            asked_acl(&owner(), header_grants(&h).unwrap()).unwrap(),
            AskedAcl::default()
        );
        let h = Headers(None, vec![(AclPermission::Read, r#"emailAddress="a@b.c""#)]);
        assert_eq!(
            header_grants(&h).unwrap(),
            vec![(GranteeRef::Email, AclPermission::Read)]
        );
        for bad in ["u1", r#"name="u1""#] {
            let h = Headers(None, vec![(AclPermission::Read, bad)]);
            assert_eq!(
                code(header_grants(&h).unwrap_err()),
                "InvalidArgument",
                "{bad}"
            );
        }
        let h = Headers(Some("private"), vec![(AclPermission::Read, r#"id="u1""#)]);
        assert_eq!(
            code(requested_grants(&h, None).unwrap_err()),
            "InvalidRequest"
        );
        assert!(
            requested_grants(&Headers(None, vec![]), None)
                .unwrap()
                .is_none()
        );
        assert_eq!(code(canned("aws-exec-read").unwrap_err()), "NotImplemented");
        // log-delivery-write: its two grants.
        match requested_grants(&Headers(Some("log-delivery-write"), vec![]), None) {
            Ok(Some(Requested::Grants(g))) => assert_eq!(
                asked_acl(&owner(), g).unwrap().grants,
                [
                    AclGrant {
                        id: LOG_DELIVERY.into(),
                        permission: AclPermission::Write
                    },
                    AclGrant {
                        id: LOG_DELIVERY.into(),
                        permission: AclPermission::ReadAcp
                    },
                ]
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(code(canned("bogus").unwrap_err()), "InvalidArgument");
    }

    #[test]
    fn an_acl_holds_at_most_a_hundred_grants() {
        let grants = |n: usize| {
            (0..n)
                .map(|i| (GranteeRef::User(format!("u{i}")), AclPermission::Read))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            asked_acl(&owner(), grants(MAX_GRANTS))
                .unwrap()
                .grants
                .len(),
            MAX_GRANTS
        );
        assert_eq!(
            code(asked_acl(&owner(), grants(MAX_GRANTS + 1)).unwrap_err()),
            "MalformedACLError"
        );
    }

    #[test]
    fn public_acls_are_refused_where_blocked() {
        let canned = |canned| AskedAcl {
            canned,
            grants: Vec::new(),
        };
        let mut b = BucketRow::new("b", "ab".repeat(32), 1, 1);
        assert!(check_not_blocked(&b, &canned(CannedAcl::PublicRead)).is_ok());
        b.public_access_block.update(
            2,
            Some(hangar_model::access::PublicAccessBlock {
                block_public_acls: true,
                ..Default::default()
            }),
        );
        assert_eq!(
            code(check_not_blocked(&b, &canned(CannedAcl::PublicRead)).unwrap_err()),
            "AccessDenied"
        );
        assert!(check_not_blocked(&b, &canned(CannedAcl::BucketOwnerFullControl)).is_ok());
        let to_everyone = AskedAcl {
            canned: CannedAcl::Private,
            grants: vec![AclGrant {
                id: ALL_USERS.into(),
                permission: AclPermission::ReadAcp,
            }],
        };
        assert_eq!(
            code(check_not_blocked(&b, &to_everyone).unwrap_err()),
            "AccessDenied"
        );
    }
}
