"""S3 Object Ownership, as the AWS S3 API reference describes it
(PutBucketOwnershipControls, GetBucketOwnershipControls,
DeleteBucketOwnershipControls; CreateBucket's x-amz-object-ownership) and
the user guide's "Troubleshooting" page of Object Ownership
(AccessControlListNotSupported, InvalidBucketAclWithObjectOwnership):

- a bucket without a setting answers GetBucketOwnershipControls with
  404 OwnershipControlsNotFoundError; a setting put is read back, and
  deleted (204) it is gone; a document of two rules is MalformedXML; a key
  without the owner's permission is refused;
- BucketOwnerEnforced disables ACLs: an ACL granted before no longer
  grants (an anonymous GET of a public-read object is refused), a PUT,
  copy or multipart upload with an ACL other than
  bucket-owner-full-control answers 400 AccessControlListNotSupported, as
  do PutObjectAcl and PutBucketAcl; reads of ACLs show the owner's full
  control only; with the setting deleted, the ACLs kept grant again;
- BucketOwnerEnforced is refused (400 InvalidBucketAclWithObjectOwnership)
  on a bucket whose ACL is public, and with a public ACL at CreateBucket.

On one node and on three (set through the first node, seen on the last)."""

from __future__ import annotations

from hangar_testlib import anonymous, bucket_name, eventually, s3_client, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)

ENFORCED = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def ownership(s3, bucket: str) -> str:
    return s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"][0]["ObjectOwnership"]


def test_the_setting_is_put_read_back_and_deleted(cluster):
    nodes, key, other = cluster
    first, last = s3_client(nodes[0], key), s3_client(nodes[-1], key)
    b = bucket_name("own")
    first.create_bucket(Bucket=b)
    assert status(lambda: first.get_bucket_ownership_controls(Bucket=b)) == (404, "OwnershipControlsNotFoundError")
    first.put_bucket_ownership_controls(
        Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]})
    eventually(lambda: status(lambda: ownership(last, b)) == (200, ""), what="the setting replicated")
    assert ownership(last, b) == "BucketOwnerPreferred"
    first.put_bucket_ownership_controls(Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "ObjectWriter"}]})
    assert ownership(first, b) == "ObjectWriter"
    two = {"Rules": [{"ObjectOwnership": "ObjectWriter"}, {"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert status(lambda: first.put_bucket_ownership_controls(Bucket=b, OwnershipControls=two)) == \
        (400, "MalformedXML")
    bad = {"Rules": [{"ObjectOwnership": "Everyone"}]}
    assert status(lambda: first.put_bucket_ownership_controls(Bucket=b, OwnershipControls=bad)) == \
        (400, "MalformedXML")
    stranger = s3_client(nodes[-1], other)
    assert status(lambda: stranger.put_bucket_ownership_controls(Bucket=b, OwnershipControls=ENFORCED)) == \
        (403, "AccessDenied")
    assert status(lambda: stranger.get_bucket_ownership_controls(Bucket=b))[0] == 403
    r = first.delete_bucket_ownership_controls(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    eventually(lambda: status(lambda: last.get_bucket_ownership_controls(Bucket=b)) ==
               (404, "OwnershipControlsNotFoundError"), what="the deletion replicated")


def owner_only(acl: dict, owner: str) -> bool:
    return [(g["Grantee"]["Type"], g["Grantee"].get("ID"), g["Permission"]) for g in acl["Grants"]] == \
        [("CanonicalUser", owner, "FULL_CONTROL")]


def test_bucket_owner_enforced_disables_acls(cluster):
    nodes, key, _ = cluster
    first, last = s3_client(nodes[0], key), s3_client(nodes[-1], key)
    anon = anonymous(nodes[-1])
    b = bucket_name("own-enf")
    first.create_bucket(Bucket=b)
    first.put_object(Bucket=b, Key="pub", Body=b"for all", ACL="public-read")
    eventually(lambda: status(lambda: anon.get_object(Bucket=b, Key="pub")) == (200, ""), what="public read")

    first.put_bucket_ownership_controls(Bucket=b, OwnershipControls=ENFORCED)
    eventually(lambda: status(lambda: anon.get_object(Bucket=b, Key="pub")) == (403, "AccessDenied"),
               what="the ACL no longer grants")
    denied = (400, "AccessControlListNotSupported")
    for acl in ["public-read", "private", "authenticated-read", "bucket-owner-read"]:
        assert status(lambda: last.put_object(Bucket=b, Key="x", Body=b"x", ACL=acl)) == denied, acl
    assert status(lambda: last.put_object(Bucket=b, Key="x", Body=b"x", ACL="bucket-owner-full-control")) == (200, "")
    assert status(lambda: last.put_object(Bucket=b, Key="y", Body=b"y")) == (200, "")
    assert status(lambda: last.copy_object(Bucket=b, Key="z", CopySource={"Bucket": b, "Key": "x"},
                                           ACL="public-read")) == denied
    assert status(lambda: last.create_multipart_upload(Bucket=b, Key="m", ACL="public-read")) == denied
    assert status(lambda: last.put_object_acl(Bucket=b, Key="x", ACL="public-read")) == denied
    assert status(lambda: last.put_object_acl(Bucket=b, Key="x", ACL="bucket-owner-full-control")) == (200, "")
    assert status(lambda: last.put_bucket_acl(Bucket=b, ACL="public-read")) == denied
    assert status(lambda: last.put_object(Bucket=b, Key="g", Body=b"g", GrantRead=f'id="{key.canonical_id}"')) == denied
    # Reads of ACLs: the owner's full control, whatever is stored.
    assert owner_only(last.get_object_acl(Bucket=b, Key="pub"), key.canonical_id)
    assert owner_only(last.get_bucket_acl(Bucket=b), key.canonical_id)

    # An owner-only ACL is accepted and changes nothing: the kept one stays.
    assert status(lambda: last.put_object_acl(Bucket=b, Key="pub", ACL="bucket-owner-full-control")) == (200, "")

    # Deleted, the ACLs kept apply again.
    first.delete_bucket_ownership_controls(Bucket=b)
    eventually(lambda: status(lambda: anon.get_object(Bucket=b, Key="pub")) == (200, ""),
               what="the ACL grants again")
    assert status(lambda: last.put_object(Bucket=b, Key="x", Body=b"x", ACL="private")) == (200, "")


def test_enforced_is_refused_while_the_bucket_acl_is_public(cluster):
    nodes, key, _ = cluster
    first = s3_client(nodes[0], key)
    b = bucket_name("own-acl")
    first.create_bucket(Bucket=b, ACL="public-read")
    assert status(lambda: first.put_bucket_ownership_controls(Bucket=b, OwnershipControls=ENFORCED)) == \
        (400, "InvalidBucketAclWithObjectOwnership")
    assert status(lambda: first.get_bucket_ownership_controls(Bucket=b)) == (404, "OwnershipControlsNotFoundError")
    first.put_bucket_acl(Bucket=b, ACL="private")
    first.put_bucket_ownership_controls(Bucket=b, OwnershipControls=ENFORCED)
    assert ownership(first, b) == "BucketOwnerEnforced"

    c = bucket_name("own-new")
    assert status(lambda: first.create_bucket(Bucket=c, ACL="public-read", ObjectOwnership="BucketOwnerEnforced")) \
        == (400, "InvalidBucketAclWithObjectOwnership")
    assert status(lambda: first.head_bucket(Bucket=c))[0] == 404
    assert status(lambda: first.create_bucket(Bucket=c, GrantRead=f'id="{key.canonical_id}"',
                                              ObjectOwnership="BucketOwnerEnforced")) == \
        (400, "InvalidBucketAclWithObjectOwnership")
    first.create_bucket(Bucket=c, ObjectOwnership="BucketOwnerEnforced")
    assert ownership(s3_client(nodes[-1], key), c) == "BucketOwnerEnforced"
    assert status(lambda: first.put_object(Bucket=c, Key="k", Body=b"k", ACL="public-read")) == \
        (400, "AccessControlListNotSupported")
