//! Access-control configuration, as bucket and object rows store it (row
//! formats 10 and 19): a bucket's policy document and public access block,
//! the canned ACLs of buckets and object versions and their grants to
//! users. What they mean for a request is decided by the S3 layer, which
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

/// An S3 canned ACL, the only ACLs Hangar keeps (doc/s3-compatibility.md,
/// "ACLs"). The owner always has full control; the others get:
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum CannedAcl {
    /// Nobody else (the default).
    #[default]
    Private,
    /// Everyone, anonymous requests included, may read.
    PublicRead,
    /// Everyone may read and write (on a bucket: list, and write objects).
    PublicReadWrite,
    /// Any signed request may read.
    AuthenticatedRead,
    /// On an object: the bucket's owner may read (Hangar's bucket owners
    /// always may).
    BucketOwnerRead,
    /// On an object: the bucket's owner has full control (always, in
    /// Hangar).
    BucketOwnerFullControl,
}

impl CannedAcl {
    /// The ACL named by S3's `x-amz-acl` value.
    pub fn parse(name: &str) -> Option<CannedAcl> {
        Some(match name {
            "private" => CannedAcl::Private,
            "public-read" => CannedAcl::PublicRead,
            "public-read-write" => CannedAcl::PublicReadWrite,
            "authenticated-read" => CannedAcl::AuthenticatedRead,
            "bucket-owner-read" => CannedAcl::BucketOwnerRead,
            "bucket-owner-full-control" => CannedAcl::BucketOwnerFullControl,
            _ => return None,
        })
    }

    /// S3's name of the ACL.
    pub fn as_str(self) -> &'static str {
        match self {
            CannedAcl::Private => "private",
            CannedAcl::PublicRead => "public-read",
            CannedAcl::PublicReadWrite => "public-read-write",
            CannedAcl::AuthenticatedRead => "authenticated-read",
            CannedAcl::BucketOwnerRead => "bucket-owner-read",
            CannedAcl::BucketOwnerFullControl => "bucket-owner-full-control",
        }
    }

    /// Whether it grants anything to someone who is not an owner (S3's
    /// "public ACL", what `BlockPublicAcls` refuses and `IgnorePublicAcls`
    /// ignores).
    pub fn is_public(self) -> bool {
        matches!(
            self,
            CannedAcl::PublicRead | CannedAcl::PublicReadWrite | CannedAcl::AuthenticatedRead
        )
    }

    /// Whether it lets a caller read (`signed`: the request is signed).
    pub fn grants_read(self, signed: bool) -> bool {
        match self {
            CannedAcl::PublicRead | CannedAcl::PublicReadWrite => true,
            CannedAcl::AuthenticatedRead => signed,
            _ => false,
        }
    }

    /// Whether it lets anyone write.
    pub fn grants_write(self) -> bool {
        self == CannedAcl::PublicReadWrite
    }
}

/// What an ACL grant gives its grantee (S3's `Permission`). On a bucket:
/// `Read` lists it, `Write` writes and deletes its objects; on an object,
/// `Read` reads it (and `Write` gives nothing, as on S3); on both,
/// `ReadAcp` / `WriteAcp` read and replace the ACL, `FullControl` is all
/// four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AclPermission {
    Read,
    Write,
    ReadAcp,
    WriteAcp,
    FullControl,
}

impl AclPermission {
    /// The permission S3 names `name`.
    pub fn parse(name: &str) -> Option<AclPermission> {
        Some(match name {
            "READ" => AclPermission::Read,
            "WRITE" => AclPermission::Write,
            "READ_ACP" => AclPermission::ReadAcp,
            "WRITE_ACP" => AclPermission::WriteAcp,
            "FULL_CONTROL" => AclPermission::FullControl,
            _ => return None,
        })
    }

    /// S3's name of the permission.
    pub fn as_str(self) -> &'static str {
        match self {
            AclPermission::Read => "READ",
            AclPermission::Write => "WRITE",
            AclPermission::ReadAcp => "READ_ACP",
            AclPermission::WriteAcp => "WRITE_ACP",
            AclPermission::FullControl => "FULL_CONTROL",
        }
    }

    /// Whether a grant of this permission gives `wanted`.
    pub fn gives(self, wanted: AclPermission) -> bool {
        self == wanted || self == AclPermission::FullControl
    }
}

/// S3's group of everyone, anonymous requests included.
pub const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
/// S3's group of every signed request.
pub const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
/// S3's log delivery group: Hangar's nodes write access logs without a
/// grant, so grants to it are kept and shown, and give no one anything.
pub const LOG_DELIVERY: &str = "http://acs.amazonaws.com/groups/s3/LogDelivery";

/// A grant of an ACL beyond what its canned ACL gives (`PutBucketAcl` /
/// `PutObjectAcl` bodies, `x-amz-grant-*` headers): to a user, named by
/// canonical user id, or to a group, named by its URI ([`ALL_USERS`],
/// [`AUTHENTICATED_USERS`], [`LOG_DELIVERY`]; canonical user ids hold no
/// `/`, `KeyRow::canonical_id`). Row format 19.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclGrant {
    /// The grantee: a canonical user id, or a group's URI.
    pub id: String,
    pub permission: AclPermission,
}

impl AclGrant {
    /// Whether the grant is to a group.
    pub fn is_group(&self) -> bool {
        self.id.contains('/')
    }

    /// Whether it grants to someone who is not a user named (S3's
    /// "public" grant, what `BlockPublicAcls` refuses and
    /// `IgnorePublicAcls` ignores).
    pub fn is_public(&self) -> bool {
        self.id == ALL_USERS || self.id == AUTHENTICATED_USERS
    }
}

/// The most grants an ACL may hold (S3's bound: 100).
pub const MAX_GRANTS: usize = 100;

/// Whether `grants` give `wanted` to a caller whose canonical user id is
/// `id` (`None`: an anonymous request): a grant to that id, or to a group
/// it is in, unless the grant is public and `ignore_public`.
pub fn acl_granted_to(
    grants: &[AclGrant],
    id: Option<&str>,
    wanted: AclPermission,
    ignore_public: bool,
) -> bool {
    grants.iter().any(|g| {
        g.permission.gives(wanted)
            && match g.id.as_str() {
                ALL_USERS => !ignore_public,
                AUTHENTICATED_USERS => !ignore_public && id.is_some(),
                LOG_DELIVERY => false,
                user => id == Some(user),
            }
    })
}

/// S3 Object Ownership of a bucket (PutBucketOwnershipControls, or
/// CreateBucket's `x-amz-object-ownership`). Hangar's bucket owner owns
/// every object whatever the setting, so `BucketOwnerPreferred` and
/// `ObjectWriter` behave alike; `BucketOwnerEnforced` disables ACLs: they
/// grant nothing, reads of them show the owner's full control only, and a
/// request setting one other than the owner's full control is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectOwnership {
    BucketOwnerEnforced,
    BucketOwnerPreferred,
    ObjectWriter,
}

impl ObjectOwnership {
    /// The setting S3 names `name`.
    pub fn parse(name: &str) -> Option<ObjectOwnership> {
        Some(match name {
            "BucketOwnerEnforced" => ObjectOwnership::BucketOwnerEnforced,
            "BucketOwnerPreferred" => ObjectOwnership::BucketOwnerPreferred,
            "ObjectWriter" => ObjectOwnership::ObjectWriter,
            _ => return None,
        })
    }

    /// S3's name of the setting.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectOwnership::BucketOwnerEnforced => "BucketOwnerEnforced",
            ObjectOwnership::BucketOwnerPreferred => "BucketOwnerPreferred",
            ObjectOwnership::ObjectWriter => "ObjectWriter",
        }
    }
}

/// Where an upload in progress keeps the ACL of the object it will
/// complete: a header of its row only Hangar writes (like Object Lock's).
const MPU_ACL: &str = "x-hangar-acl";
/// Where it keeps the other grants: `PERMISSION=id` items separated by
/// spaces (canonical ids and group URIs hold no space nor `=`).
const MPU_GRANTS: &str = "x-hangar-grants";

/// Records `grants` (if any) in the headers of an upload in progress.
pub fn put_grants_in_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
    grants: &[AclGrant],
) {
    if !grants.is_empty() {
        let text: Vec<String> = grants
            .iter()
            .map(|g| format!("{}={}", g.permission.as_str(), g.id))
            .collect();
        headers.insert(MPU_GRANTS.into(), text.join(" "));
    }
}

/// Takes the grants recorded by [`put_grants_in_headers`] out of the
/// headers of a completed upload: the object's register, stamped 0 like
/// an upload's.
pub fn take_grants_from_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
) -> hangar_table::Lww<Vec<AclGrant>> {
    let Some(text) = headers.remove(MPU_GRANTS) else {
        return Default::default();
    };
    let grants: Vec<AclGrant> = text
        .split(' ')
        .filter_map(|item| {
            let (p, id) = item.split_once('=')?;
            Some(AclGrant {
                id: id.to_owned(),
                permission: AclPermission::parse(p)?,
            })
        })
        .collect();
    hangar_table::Lww::new(0, grants)
}

/// Records `acl` (if any) in the headers of an upload in progress.
pub fn put_acl_in_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
    acl: Option<CannedAcl>,
) {
    if let Some(a) = acl {
        headers.insert(MPU_ACL.into(), a.as_str().into());
    }
}

/// Takes the ACL recorded by [`put_acl_in_headers`] out of the headers of
/// a completed upload: the object's register, stamped 0 like an upload's.
pub fn take_acl_from_headers(
    headers: &mut std::collections::BTreeMap<String, String>,
) -> hangar_table::Lww<Option<CannedAcl>> {
    headers
        .remove(MPU_ACL)
        .and_then(|a| CannedAcl::parse(&a))
        .map_or_else(Default::default, |a| hangar_table::Lww::new(0, Some(a)))
}
