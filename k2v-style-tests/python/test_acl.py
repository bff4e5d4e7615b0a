"""Canned ACLs on buckets and objects: CreateBucket / PutObject / CopyObject /
CreateMultipartUpload / PostObject with x-amz-acl, Put/GetBucketAcl,
Put/GetObjectAcl; anonymous reads of a public-read object, anonymous writes
into a public-read-write bucket; BlockPublicAcls and IgnorePublicAcls; group
grants no canned ACL expresses (kept beside it), on Put*Acl and on uploads
and creations alike (x-amz-grant-* headers), and log-delivery-write; grants
to users are test_acl_grants.py's. On one node and on three (an ACL set
through the first node applies on the third)."""

from __future__ import annotations

import requests

from hangar_testlib import anonymous, bucket_name, eventually, s3_client, status
# The same set-ups as the policy tests: one node or three, an owner key
# that may create buckets and a key without permissions.
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
LOG_DELIVERY = "http://acs.amazonaws.com/groups/s3/LogDelivery"


def groups(acl: dict) -> set[tuple[str, str]]:
    return {(g["Grantee"]["URI"], g["Permission"]) for g in acl["Grants"] if g["Grantee"]["Type"] == "Group"}


def test_public_read_object_is_anonymously_readable(cluster):
    nodes, key, other = cluster
    first = s3_client(nodes[0], key)
    b = bucket_name("acl-obj")
    first.create_bucket(Bucket=b)
    first.put_object(Bucket=b, Key="pub", Body=b"for all", ACL="public-read")
    first.put_object(Bucket=b, Key="priv", Body=b"mine", ACL="private")
    anon = anonymous(nodes[-1])
    eventually(lambda: status(lambda: anon.get_object(Bucket=b, Key="pub")) == (200, ""), what="public read")
    assert anon.get_object(Bucket=b, Key="pub")["Body"].read() == b"for all"
    assert anon.head_object(Bucket=b, Key="pub")["ContentLength"] == 7
    assert status(lambda: anon.get_object(Bucket=b, Key="priv")) == (403, "AccessDenied")
    assert status(lambda: anon.get_object(Bucket=b, Key="missing")) == (403, "AccessDenied")
    assert status(lambda: anon.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    assert status(lambda: anon.put_object(Bucket=b, Key="x", Body=b"x")) == (403, "AccessDenied")

    last = s3_client(nodes[-1], key)
    acl = last.get_object_acl(Bucket=b, Key="pub")
    assert acl["Owner"]["ID"] == key.canonical_id
    assert groups(acl) == {(ALL_USERS, "READ")}
    assert [g["Permission"] for g in acl["Grants"] if g["Grantee"]["Type"] == "CanonicalUser"] == ["FULL_CONTROL"]
    assert groups(last.get_object_acl(Bucket=b, Key="priv")) == set()

    # PutObjectAcl makes it private again, and the other one public.
    first.put_object_acl(Bucket=b, Key="pub", ACL="private")
    first.put_object_acl(Bucket=b, Key="priv", ACL="authenticated-read")
    eventually(lambda: status(lambda: anon.get_object(Bucket=b, Key="pub")) == (403, "AccessDenied"),
               what="private again")
    assert status(lambda: anon.get_object(Bucket=b, Key="priv")) == (403, "AccessDenied")
    second = s3_client(nodes[-1], other)
    assert second.get_object(Bucket=b, Key="priv")["Body"].read() == b"mine"
    assert status(lambda: second.get_object(Bucket=b, Key="pub")) == (403, "AccessDenied")
    # A new version of the key starts private.
    first.put_object(Bucket=b, Key="priv", Body=b"new")
    assert status(lambda: second.get_object(Bucket=b, Key="priv")) == (403, "AccessDenied")


def test_copy_multipart_and_post_carry_their_acl(one):
    nodes, key, _ = one
    s3 = s3_client(nodes[0], key)
    anon = anonymous(nodes[0])
    b = bucket_name("acl-up")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="src", Body=b"source", ACL="public-read")
    s3.copy_object(Bucket=b, Key="copy-private", CopySource={"Bucket": b, "Key": "src"})
    s3.copy_object(Bucket=b, Key="copy-public", CopySource={"Bucket": b, "Key": "src"}, ACL="public-read")
    assert status(lambda: anon.get_object(Bucket=b, Key="copy-private")) == (403, "AccessDenied")
    assert anon.get_object(Bucket=b, Key="copy-public")["Body"].read() == b"source"

    up = s3.create_multipart_upload(Bucket=b, Key="mp", ACL="public-read")["UploadId"]
    etag = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"parts")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert anon.get_object(Bucket=b, Key="mp")["Body"].read() == b"parts"
    assert "x-hangar-acl" not in s3.head_object(Bucket=b, Key="mp")["ResponseMetadata"]["HTTPHeaders"]

    # s3s 0.14 reads a form's ACL from the field `x-amz-acl` (S3's name is
    # `acl`, which it does not see: such an upload stays private).
    post = s3.generate_presigned_post(b, "posted", Fields={"x-amz-acl": "public-read"},
                                      Conditions=[{"x-amz-acl": "public-read"}], ExpiresIn=300)
    r = requests.post(post["url"], data=post["fields"], files={"file": ("f", b"by form")}, timeout=30)
    assert r.status_code in (200, 204), r.text
    assert anon.get_object(Bucket=b, Key="posted")["Body"].read() == b"by form"


def test_public_read_write_bucket_takes_anonymous_writes(cluster):
    nodes, key, other = cluster
    first = s3_client(nodes[0], key)
    b = bucket_name("acl-rw")
    first.create_bucket(Bucket=b, ACL="public-read-write")
    anon = anonymous(nodes[-1])
    eventually(lambda: status(lambda: anon.put_object(Bucket=b, Key="drop", Body=b"anon")) == (200, ""),
               what="anonymous PUT")
    assert first.get_object(Bucket=b, Key="drop")["Body"].read() == b"anon"
    # The bucket's READ is listing, not the objects' contents.
    assert [o["Key"] for o in anon.list_objects_v2(Bucket=b)["Contents"]] == ["drop"]
    assert status(lambda: anon.get_object(Bucket=b, Key="drop")) == (403, "AccessDenied")
    assert groups(first.get_bucket_acl(Bucket=b)) == {(ALL_USERS, "READ"), (ALL_USERS, "WRITE")}
    # Bucket configuration stays the owners'.
    assert status(lambda: anon.put_bucket_acl(Bucket=b, ACL="private")) == (403, "AccessDenied")
    first.put_bucket_acl(Bucket=b, ACL="authenticated-read")
    last = s3_client(nodes[-1], key)
    eventually(lambda: groups(last.get_bucket_acl(Bucket=b)) == {(AUTH_USERS, "READ")}, what="the new bucket ACL")
    assert status(lambda: anon.put_object(Bucket=b, Key="drop2", Body=b"x")) == (403, "AccessDenied")
    assert status(lambda: anon.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    assert s3_client(nodes[-1], other).list_objects_v2(Bucket=b)["KeyCount"] == 1
    first.put_bucket_acl(Bucket=b, ACL="private")
    eventually(lambda: groups(last.get_bucket_acl(Bucket=b)) == set(), what="private bucket")


def test_acl_bodies_and_public_access_block(one):
    nodes, key, other = one
    s3 = s3_client(nodes[0], key)
    anon = anonymous(nodes[0])
    b = bucket_name("acl-body")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="o", Body=b"x")
    owner = s3.get_bucket_acl(Bucket=b)["Owner"]
    full = {"Grantee": {"Type": "CanonicalUser", "ID": owner["ID"]}, "Permission": "FULL_CONTROL"}
    read = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"}
    s3.put_object_acl(Bucket=b, Key="o", AccessControlPolicy={"Grants": [full, read], "Owner": owner})
    assert groups(s3.get_object_acl(Bucket=b, Key="o")) == {(ALL_USERS, "READ")}
    assert anon.get_object(Bucket=b, Key="o")["Body"].read() == b"x"
    # Grantees S3 cannot resolve (API_PutBucketAcl, "Grantee Values": an
    # e-mail address without an account is UnresolvableGrantByEmailAddress,
    # an unknown canonical ID InvalidArgument); nothing changed.
    email = {"Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": "a@b.c"}, "Permission": "READ"}
    acp = {"Grants": [full, email], "Owner": owner}
    assert status(lambda: s3.put_bucket_acl(Bucket=b, AccessControlPolicy=acp)) == (400, "UnresolvableGrantByEmailAddress")
    nobody = {"Grantee": {"Type": "CanonicalUser", "ID": "GK" + "0" * 24}, "Permission": "READ"}
    acp = {"Grants": [full, nobody], "Owner": owner}
    assert status(lambda: s3.put_object_acl(Bucket=b, Key="o", AccessControlPolicy=acp)) == (400, "InvalidArgument")
    unknown_group = {"Grantee": {"Type": "Group", "URI": "http://example.com/g"}, "Permission": "READ"}
    acp = {"Grants": [full, unknown_group], "Owner": owner}
    assert status(lambda: s3.put_bucket_acl(Bucket=b, AccessControlPolicy=acp)) == (400, "InvalidArgument")
    assert groups(s3.get_bucket_acl(Bucket=b)) == set()
    # Group grants no canned ACL says (API_Grant, "Permission"): kept and
    # shown; READ_ACP to AllUsers lets anyone read the ACL, and nothing more.
    acp_only = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ_ACP"}
    s3.put_bucket_acl(Bucket=b, AccessControlPolicy={"Grants": [full, acp_only], "Owner": owner})
    assert groups(s3.get_bucket_acl(Bucket=b)) == {(ALL_USERS, "READ_ACP")}
    assert groups(anon.get_bucket_acl(Bucket=b)) == {(ALL_USERS, "READ_ACP")}
    assert status(lambda: anon.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    s3.put_bucket_acl(Bucket=b, ACL="private")
    assert status(lambda: anon.get_bucket_acl(Bucket=b)) == (403, "AccessDenied")
    # The same as headers, on uploads and creations.
    grant = f'uri="{ALL_USERS}"'
    s3.put_object(Bucket=b, Key="g", Body=b"x", GrantReadACP=grant)
    assert groups(anon.get_object_acl(Bucket=b, Key="g")) == {(ALL_USERS, "READ_ACP")}
    assert status(lambda: anon.get_object(Bucket=b, Key="g")) == (403, "AccessDenied")
    s3.copy_object(Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "o"}, GrantReadACP=grant, GrantRead=grant)
    assert groups(s3.get_object_acl(Bucket=b, Key="c")) == {(ALL_USERS, "READ"), (ALL_USERS, "READ_ACP")}
    up = s3.create_multipart_upload(Bucket=b, Key="m", GrantWriteACP=grant)["UploadId"]
    part = s3.upload_part(Bucket=b, Key="m", UploadId=up, PartNumber=1, Body=b"m")
    s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert groups(s3.get_object_acl(Bucket=b, Key="m")) == {(ALL_USERS, "WRITE_ACP")}
    for k in ("g", "c", "m"):
        s3.delete_object(Bucket=b, Key=k)
    # A bucket anyone may write into and no one else list (WRITE alone).
    c = bucket_name("acl-grant")
    s3.create_bucket(Bucket=c, GrantWrite=grant)
    assert groups(s3.get_bucket_acl(Bucket=c)) == {(ALL_USERS, "WRITE")}
    eventually(lambda: status(lambda: anon.put_object(Bucket=c, Key="drop", Body=b"d")) == (200, ""),
               what="WRITE to AllUsers")
    assert status(lambda: anon.list_objects_v2(Bucket=c)) == (403, "AccessDenied")
    assert s3.get_object(Bucket=c, Key="drop")["Body"].read() == b"d"
    # log-delivery-write (S3 user guide, "Canned ACL"): the LogDelivery
    # group's WRITE and READ_ACP, which give no client anything.
    s3.put_bucket_acl(Bucket=c, ACL="log-delivery-write")
    assert groups(s3.get_bucket_acl(Bucket=c)) == {(LOG_DELIVERY, "WRITE"), (LOG_DELIVERY, "READ_ACP")}
    assert status(lambda: anon.put_object(Bucket=c, Key="drop2", Body=b"d")) == (403, "AccessDenied")
    assert status(lambda: s3.put_object(Bucket=b, Key="x", Body=b"x", ACL="aws-exec-read")) == (501, "NotImplemented")

    # IgnorePublicAcls: the public object is no longer readable anonymously.
    s3.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={"IgnorePublicAcls": True})
    assert status(lambda: anon.get_object(Bucket=b, Key="o")) == (403, "AccessDenied")
    # BlockPublicAcls: setting a public ACL is refused; private still works.
    s3.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={"BlockPublicAcls": True})
    assert anon.get_object(Bucket=b, Key="o")["Body"].read() == b"x"
    assert status(lambda: s3.put_object(Bucket=b, Key="p", Body=b"x", ACL="public-read")) == (403, "AccessDenied")
    assert status(lambda: s3.put_bucket_acl(Bucket=b, ACL="public-read")) == (403, "AccessDenied")
    assert status(lambda: s3.put_object_acl(Bucket=b, Key="o", ACL="public-read")) == (403, "AccessDenied")
    s3.put_object(Bucket=b, Key="p", Body=b"x", ACL="private")
    s3.put_object(Bucket=b, Key="q", Body=b"x", ACL="bucket-owner-full-control")
    s3.put_object_acl(Bucket=b, Key="o", ACL="private")
    assert status(lambda: anon.get_object(Bucket=b, Key="o")) == (403, "AccessDenied")
