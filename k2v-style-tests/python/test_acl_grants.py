"""ACL grants to users: a bucket's or an object's ACL grants READ, WRITE,
READ_ACP, WRITE_ACP or FULL_CONTROL to another user, named by canonical
user id, in an AccessControlPolicy body or in x-amz-grant-* headers
(PutBucketAcl, PutObjectAcl, PutObject, CopyObject, CreateMultipartUpload,
CreateBucket), and the grantee's key may then do what the grant says and
nothing more (AWS S3 user guide, "Access control list (ACL) overview",
"Permissions that you can grant": on a bucket, READ lists it, WRITE
writes its objects, READ_ACP / WRITE_ACP read and write its ACL; on an
object, READ reads it). On one node and on three (granted through the
first node, used through the last)."""

from __future__ import annotations

from hangar_testlib import bucket_name, eventually, s3_client, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)


def users(acl: dict) -> set[tuple[str, str]]:
    """The grants to canonical users an ACL shows, the owner's left out."""
    owner = acl["Owner"]["ID"]
    return {(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]
            if g["Grantee"]["Type"] == "CanonicalUser" and g["Grantee"]["ID"] != owner}


def test_bucket_grants_give_their_user_what_they_say(cluster):
    nodes, key, other = cluster
    s3, them = s3_client(nodes[0], key), s3_client(nodes[-1], other)
    b = bucket_name("grants-bucket")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="o", Body=b"x")
    assert status(lambda: them.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    owner = s3.get_bucket_acl(Bucket=b)["Owner"]
    grantee = {"Type": "CanonicalUser", "ID": other.canonical_id}

    # READ, in a body: listing only.
    s3.put_bucket_acl(Bucket=b, AccessControlPolicy={"Owner": owner, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": owner["ID"]}, "Permission": "FULL_CONTROL"},
        {"Grantee": grantee, "Permission": "READ"}]})
    assert users(s3.get_bucket_acl(Bucket=b)) == {(other.canonical_id, "READ")}
    eventually(lambda: status(lambda: them.list_objects_v2(Bucket=b))[0] == 200, what="READ lists")
    assert [o["Key"] for o in them.list_objects_v2(Bucket=b)["Contents"]] == ["o"]
    assert status(lambda: them.get_object(Bucket=b, Key="o")) == (403, "AccessDenied"), "a bucket's READ is listing"
    assert status(lambda: them.put_object(Bucket=b, Key="n", Body=b"n")) == (403, "AccessDenied")
    assert status(lambda: them.get_bucket_acl(Bucket=b)) == (403, "AccessDenied")

    # WRITE and READ_ACP, in headers: writing, deleting, reading the ACL.
    s3.put_bucket_acl(Bucket=b, GrantWrite=f'id="{other.canonical_id}"',
                      GrantReadACP=f'id="{other.canonical_id}"')
    want = {(other.canonical_id, "WRITE"), (other.canonical_id, "READ_ACP")}
    eventually(lambda: status(lambda: them.get_bucket_acl(Bucket=b))[0] == 200, what="READ_ACP")
    assert users(them.get_bucket_acl(Bucket=b)) == want
    them.put_object(Bucket=b, Key="n", Body=b"n")
    assert s3.get_object(Bucket=b, Key="n")["Body"].read() == b"n"
    them.delete_object(Bucket=b, Key="n")
    assert status(lambda: them.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    assert status(lambda: them.put_bucket_acl(Bucket=b, ACL="public-read")) == (403, "AccessDenied")

    # FULL_CONTROL: the four, not the bucket's other configuration.
    s3.put_bucket_acl(Bucket=b, GrantFullControl=f'id="{other.canonical_id}"')
    eventually(lambda: status(lambda: them.list_objects_v2(Bucket=b))[0] == 200, what="FULL_CONTROL")
    them.put_bucket_acl(Bucket=b, GrantRead=f'id="{other.canonical_id}"')
    assert users(s3.get_bucket_acl(Bucket=b)) == {(other.canonical_id, "READ")}
    assert status(lambda: them.put_bucket_versioning(
        Bucket=b, VersioningConfiguration={"Status": "Enabled"})) == (403, "AccessDenied")

    # Revoked: a private ACL grants nothing more.
    s3.put_bucket_acl(Bucket=b, ACL="private")
    assert users(s3.get_bucket_acl(Bucket=b)) == set()
    eventually(lambda: status(lambda: them.list_objects_v2(Bucket=b)) == (403, "AccessDenied"), what="revoked")

    # A user's grant is not public: BucketOwnerEnforced is refused while
    # it stands (API_PutBucketOwnershipControls), then accepted, and it
    # disables the grants (the ACL shows the owner's full control only).
    s3.put_bucket_acl(Bucket=b, GrantRead=f'id="{other.canonical_id}"')
    enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert status(lambda: s3.put_bucket_ownership_controls(Bucket=b, OwnershipControls=enforced)) \
        == (400, "InvalidBucketAclWithObjectOwnership")
    # Both a canned ACL and grant headers: refused (API_PutBucketAcl).
    assert status(lambda: s3.put_bucket_acl(Bucket=b, ACL="private", GrantRead=f'id="{other.canonical_id}"')) \
        == (400, "InvalidRequest")
    assert status(lambda: s3.put_bucket_acl(Bucket=b, GrantRead='id="no-such-user"')) == (400, "InvalidArgument")
    assert status(lambda: s3.put_bucket_acl(Bucket=b, GrantRead='emailAddress="a@b.c"')) \
        == (400, "UnresolvableGrantByEmailAddress")
    assert users(s3.get_bucket_acl(Bucket=b)) == {(other.canonical_id, "READ")}


def test_object_grants_from_uploads_copies_and_put_object_acl(cluster):
    nodes, key, other = cluster
    s3, them = s3_client(nodes[0], key), s3_client(nodes[-1], other)
    b = bucket_name("grants-object")
    s3.create_bucket(Bucket=b)
    read = f'id="{other.canonical_id}"'
    s3.put_object(Bucket=b, Key="put", Body=b"put", GrantRead=read)
    s3.put_object(Bucket=b, Key="private", Body=b"no")
    s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "private"}, GrantRead=read)
    up = s3.create_multipart_upload(Bucket=b, Key="mpu", GrantRead=read)["UploadId"]
    part = s3.upload_part(Bucket=b, Key="mpu", UploadId=up, PartNumber=1, Body=b"mpu")
    s3.complete_multipart_upload(Bucket=b, Key="mpu", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    eventually(lambda: status(lambda: them.get_object(Bucket=b, Key="put"))[0] == 200, what="READ reads")
    for k, body in (("put", b"put"), ("copy", b"no"), ("mpu", b"mpu")):
        assert them.get_object(Bucket=b, Key=k)["Body"].read() == body, k
        assert users(s3.get_object_acl(Bucket=b, Key=k)) == {(other.canonical_id, "READ")}, k
        assert status(lambda: them.get_object_acl(Bucket=b, Key=k)) == (403, "AccessDenied"), k
    assert status(lambda: them.get_object(Bucket=b, Key="private")) == (403, "AccessDenied")
    assert status(lambda: them.list_objects_v2(Bucket=b)) == (403, "AccessDenied"), "an object's READ is not listing"

    # READ_ACP then FULL_CONTROL through PutObjectAcl; the grantee replaces
    # the ACL with its WRITE_ACP, and loses its own grant doing so.
    s3.put_object_acl(Bucket=b, Key="private", GrantReadACP=read)
    eventually(lambda: status(lambda: them.get_object_acl(Bucket=b, Key="private"))[0] == 200, what="READ_ACP")
    assert status(lambda: them.get_object(Bucket=b, Key="private")) == (403, "AccessDenied")
    assert status(lambda: them.put_object_acl(Bucket=b, Key="private", ACL="public-read")) == (403, "AccessDenied")
    s3.put_object_acl(Bucket=b, Key="private", GrantFullControl=read)
    eventually(lambda: status(lambda: them.get_object(Bucket=b, Key="private"))[0] == 200, what="FULL_CONTROL")
    them.put_object_acl(Bucket=b, Key="private", ACL="private")
    assert users(s3.get_object_acl(Bucket=b, Key="private")) == set()
    eventually(lambda: status(lambda: them.get_object(Bucket=b, Key="private")) == (403, "AccessDenied"),
               what="revoked")
    # A new version starts with its own upload's ACL.
    s3.put_object(Bucket=b, Key="put", Body=b"v2")
    eventually(lambda: status(lambda: them.get_object(Bucket=b, Key="put")) == (403, "AccessDenied"),
               what="a new version's own ACL")

    # CreateBucket's x-amz-grant-read: the grantee lists the new bucket.
    c = bucket_name("grants-created")
    s3.create_bucket(Bucket=c, GrantRead=read)
    assert users(s3.get_bucket_acl(Bucket=c)) == {(other.canonical_id, "READ")}
    eventually(lambda: status(lambda: them.list_objects_v2(Bucket=c))[0] == 200, what="CreateBucket's grant")
