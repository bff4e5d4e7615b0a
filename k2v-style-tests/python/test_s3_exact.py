"""S3, exactly: answers read back field for field as AWS gives them, each
test citing the AWS S3 API reference (docs.aws.amazon.com/AmazonS3/latest/API/)
for the field it checks. Through boto3, and raw where boto3 hides the field."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    Key,
    Node,
    anonymous,
    bucket_name,
    error_code,
    http_status,
    s3_client,
    signed_request,
    strip_ns,
)


def _texts(body: bytes, tag: str) -> list[str]:
    root = ET.fromstring(body)
    return [e.text or "" for e in root.iter() if strip_ns(e.tag) == tag]


def _fails(call, status: int, code: str):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == status, e.value.response
    assert error_code(e.value) == code, e.value.response
    return e.value


# ------------------------------------------------------------------ listings


@pytest.fixture(scope="module")
def folders(s3):
    b = bucket_name("exact-list")
    s3.create_bucket(Bucket=b)
    for k in ["foo/a b", "foo/bar/x", "foo/plus+1", "nl\nkey", "top"]:
        s3.put_object(Bucket=b, Key=k, Body=b"x")
    return b


def test_url_encoding_leaves_slashes_alone(node, admin_key, folders):
    # API_ListObjectsV2 / API_ListObjects, "EncodingType": key names are
    # URL-encoded; AWS leaves `/` as it is (`quux%20ab/`, `foo%2B1/`).
    for q in ([("list-type", "2")], []):
        r = signed_request(
            node, admin_key, "GET", folders,
            query=q + [("encoding-type", "url"), ("prefix", "foo/"), ("delimiter", "/")],
        )
        assert r.status == 200, r.body
        assert _texts(r.body, "Key") == ["foo/a%20b", "foo/plus%2B1"]
        assert "foo/bar/" in _texts(r.body, "Prefix")
        assert _texts(r.body, "Delimiter") == ["/"]


def test_boto3_reads_every_listed_field_back_as_sent(s3, folders):
    # ListObjects (v1) echoes its Prefix as sent (botocore does not decode
    # it); every other field is decoded by botocore. A newline survives.
    for prefix in ["foo/", "nl\n", "foo/a b"]:
        r = s3.list_objects(Bucket=folders, Prefix=prefix, Delimiter="/")
        assert r["Prefix"] == prefix
        r2 = s3.list_objects_v2(Bucket=folders, Prefix=prefix, Delimiter="/")
        assert r2["Prefix"] == prefix
    r = s3.list_objects(Bucket=folders, Prefix="foo/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["foo/a b", "foo/plus+1"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["foo/bar/"]
    assert [o["Key"] for o in s3.list_objects(Bucket=folders, Prefix="nl")["Contents"]] == ["nl\nkey"]


def test_max_keys_zero_is_not_truncated(s3, folders):
    # API_ListObjectsV2, "IsTruncated": set to false if all of the results
    # were returned; with max-keys 0, none were asked for.
    r = s3.list_objects_v2(Bucket=folders, MaxKeys=0)
    assert r["KeyCount"] == 0 and r["IsTruncated"] is False and "Contents" not in r
    r = s3.list_objects(Bucket=folders, MaxKeys=0)
    assert r["IsTruncated"] is False and "Contents" not in r


def test_an_empty_delimiter_is_not_echoed(node, admin_key, folders):
    # API_ListObjectsV2, "Delimiter": returned only when one was given.
    for q in ([("list-type", "2")], []):
        r = signed_request(node, admin_key, "GET", folders, query=q + [("delimiter", "")])
        assert r.status == 200, r.body
        assert _texts(r.body, "Delimiter") == []
        assert len(_texts(r.body, "Key")) == 5


def test_list_owners(s3, folders, admin_key):
    # API_ListObjects: each Contents has its Owner; API_ListObjectsV2: only
    # with FetchOwner=true. API_Owner: "Beginning November 21, 2025,
    # Amazon S3 will stop returning DisplayName": an Owner is its ID.
    v1 = s3.list_objects(Bucket=folders)["Contents"]
    assert all(o["Owner"] == {"ID": admin_key.canonical_id} for o in v1), v1
    assert s3.list_buckets()["Owner"] == {"ID": admin_key.canonical_id}
    assert s3.get_bucket_acl(Bucket=folders)["Owner"] == {"ID": admin_key.canonical_id}
    versions = s3.list_object_versions(Bucket=folders)["Versions"]
    assert all(v["Owner"] == {"ID": admin_key.canonical_id} for v in versions), versions
    v2 = s3.list_objects_v2(Bucket=folders)["Contents"]
    assert all("Owner" not in o for o in v2)
    v2 = s3.list_objects_v2(Bucket=folders, FetchOwner=True)["Contents"]
    assert all(o["Owner"]["ID"] == admin_key.canonical_id for o in v2), v2


def test_list_multipart_uploads_shows_initiator_and_owner(s3, bucket, admin_key):
    # API_ListMultipartUploads, "MultipartUpload": Initiator and Owner.
    up = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    [u] = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert u["UploadId"] == up
    assert u["Initiator"]["ID"] == admin_key.canonical_id and u["Owner"]["ID"] == admin_key.canonical_id
    s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=up)


def test_list_parts_and_versions_show_owners(s3, bucket, admin_key):
    # API_ListParts: Initiator, Owner, StorageClass; API_ListObjectVersions:
    # Owner in each Version and DeleteMarker.
    up = s3.create_multipart_upload(Bucket=bucket, Key="p")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="p", UploadId=up, PartNumber=1, Body=b"x")
    r = s3.list_parts(Bucket=bucket, Key="p", UploadId=up)
    assert r["Initiator"]["ID"] == admin_key.canonical_id and r["Owner"]["ID"] == admin_key.canonical_id
    assert r["StorageClass"] == "STANDARD"
    s3.abort_multipart_upload(Bucket=bucket, Key="p", UploadId=up)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="v", Body=b"1")
    s3.delete_object(Bucket=bucket, Key="v")
    r = s3.list_object_versions(Bucket=bucket)
    assert len(r["Versions"]) == 1 and len(r["DeleteMarkers"]) == 1
    for e in r["Versions"] + r["DeleteMarkers"]:
        assert e["Owner"]["ID"] == admin_key.canonical_id, e


# ---------------------------------------------------------------- multipart


def _upload(s3, bucket, key, body=b"hello"):
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=1, Body=body)["ETag"]
    return up, {"Parts": [{"PartNumber": 1, "ETag": etag}]}


def test_completing_twice_answers_the_same(s3, bucket):
    # API_CompleteMultipartUpload: a retried completion of a completed
    # upload answers 200 with the same result.
    up, parts = _upload(s3, bucket, "twice")
    first = s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=up, MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=up, MultipartUpload=parts)
    assert again["ETag"] == first["ETag"] and again["Key"] == "twice"
    # Another part list than the one completed, or an upload that never
    # existed, is still NoSuchUpload.
    other = {"Parts": [{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}]}
    _fails(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=up, MultipartUpload=other),
           404, "NoSuchUpload")
    _fails(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId="0" * 32,
                                                MultipartUpload=parts), 404, "NoSuchUpload")
    # Once the key changed, the upload's object is gone.
    s3.put_object(Bucket=bucket, Key="twice", Body=b"newer")
    _fails(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=up, MultipartUpload=parts),
           404, "NoSuchUpload")


def test_complete_honours_if_none_match_and_if_match(s3, bucket):
    # API_CompleteMultipartUpload, "If-None-Match" / "If-Match": 412
    # PreconditionFailed, the upload left in progress to complete again.
    s3.put_object(Bucket=bucket, Key="exists", Body=b"old")
    up, parts = _upload(s3, bucket, "exists")
    _fails(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="exists", UploadId=up,
                                                MultipartUpload=parts, IfNoneMatch="*"),
           412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"old"
    _fails(lambda: s3.complete_multipart_upload(Bucket=bucket, Key="exists", UploadId=up, MultipartUpload=parts,
                                                IfMatch='"0123456789abcdef0123456789abcdef"'),
           412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"old"
    # The right ETag lets it through.
    old = s3.head_object(Bucket=bucket, Key="exists")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="exists", UploadId=up, MultipartUpload=parts, IfMatch=old)
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"hello"
    # If-None-Match on an absent key completes.
    up, parts = _upload(s3, bucket, "fresh")
    s3.complete_multipart_upload(Bucket=bucket, Key="fresh", UploadId=up, MultipartUpload=parts, IfNoneMatch="*")
    assert s3.get_object(Bucket=bucket, Key="fresh")["Body"].read() == b"hello"


def test_upload_part_copy_past_the_source_is_invalid_range(s3, bucket):
    # API_UploadPartCopy, "x-amz-copy-source-range" past the source's end:
    # InvalidRange; a malformed one: InvalidArgument.
    s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789")
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    copy = dict(Bucket=bucket, Key="dst", UploadId=up, PartNumber=1, CopySource={"Bucket": bucket, "Key": "src"})
    e = _fails(lambda: s3.upload_part_copy(**copy, CopySourceRange="bytes=0-100"), 416, "InvalidRange")
    assert "10 bytes" in e.response["Error"]["Message"]
    _fails(lambda: s3.upload_part_copy(**copy, CopySourceRange="bytes=5-2"), 400, "InvalidArgument")
    _fails(lambda: s3.upload_part_copy(**copy, CopySourceRange="bytes=abc"), 400, "InvalidArgument")
    r = s3.upload_part_copy(**copy, CopySourceRange="bytes=2-4")
    assert r["CopyPartResult"]["ETag"]
    s3.abort_multipart_upload(Bucket=bucket, Key="dst", UploadId=up)


# --------------------------------------------------------- object attributes


def test_object_attributes_etag_unquoted_and_parts_paging(node, admin_key, s3, bucket):
    # API_GetObjectAttributes, "ETag": unquoted; "ObjectParts": PartsCount,
    # PartNumberMarker, MaxParts, IsTruncated.
    s3.put_object(Bucket=bucket, Key="simple", Body=b"abc")
    r = signed_request(node, admin_key, "GET", bucket, "simple", query=[("attributes", "")],
                       headers={"x-amz-object-attributes": "ETag,ObjectSize"})
    assert r.status == 200, r.body
    assert _texts(r.body, "ETag") == ["900150983cd24fb0d6963f7d28e17f72"]
    assert _texts(r.body, "ObjectSize") == ["3"]
    assert r.header("last-modified")
    up, parts = _upload(s3, bucket, "mp")
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload=parts)
    a = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ETag", "ObjectParts"], MaxParts=5)
    assert not a["ETag"].startswith('"') and a["ETag"].endswith("-1")
    p = a["ObjectParts"]
    assert p["TotalPartsCount"] == 1 and p["MaxParts"] == 5 and p["IsTruncated"] is False
    assert p["PartNumberMarker"] == 0


# ------------------------------------------------------------------ headers


def test_content_encoding_comes_back_as_sent(s3, bucket):
    # API_PutObject / API_GetObject, "Content-Encoding": stored as sent.
    s3.put_object(Bucket=bucket, Key="enc", Body=b"x", ContentEncoding="deflate, gzip")
    assert s3.head_object(Bucket=bucket, Key="enc")["ContentEncoding"] == "deflate, gzip"
    assert s3.get_object(Bucket=bucket, Key="enc")["ContentEncoding"] == "deflate, gzip"


def test_every_answer_has_a_request_id_and_errors_repeat_it(node, admin_key, s3, bucket):
    # Common response headers: x-amz-request-id; error responses
    # (ErrorResponses): <RequestId>, the same value.
    ok = signed_request(node, admin_key, "GET", bucket, query=[("list-type", "2")])
    ids = [ok.header("x-amz-request-id")]
    for r in (
        signed_request(node, admin_key, "GET", bucket, "no-such-key"),
        signed_request(node, Key(admin_key.id, "0" * 64), "GET", bucket, "k"),
        signed_request(node, admin_key, "GET", bucket, query=[("list-type", "2"), ("max-keys", "-1")]),
    ):
        assert r.status >= 400
        rid = r.header("x-amz-request-id")
        assert rid and _texts(r.body, "RequestId") == [rid], (r.status, r.body)
        ids.append(rid)
    assert all(re.fullmatch(r"[0-9A-F]{16}", i or "") for i in ids), ids
    assert len(set(ids)) == len(ids)
    # boto3 reads it.
    e = _fails(lambda: s3.get_object(Bucket=bucket, Key="no-such-key"), 404, "NoSuchKey")
    assert re.fullmatch(r"[0-9A-F]{16}", e.response["ResponseMetadata"]["RequestId"])
    # A HEAD's error has no body, the header still.
    r = signed_request(node, admin_key, "HEAD", bucket, "no-such-key")
    assert r.status == 404 and re.fullmatch(r"[0-9A-F]{16}", r.header("x-amz-request-id") or "")


# ------------------------------------------------------------------ buckets


def test_list_buckets_pages(node):
    # API_ListBuckets, "max-buckets" (1–10 000) and "ContinuationToken":
    # answered while buckets remain, sent back for the next page.
    pager = node.create_key("pager", create_bucket=True)
    s3 = s3_client(node, pager)
    names = sorted(bucket_name(f"page-{i}") for i in range(3))
    for n in names:
        s3.create_bucket(Bucket=n)
    seen, token = [], None
    for _ in range(5):
        kw = {"ContinuationToken": token} if token else {}
        r = s3.list_buckets(MaxBuckets=1, **kw)
        seen += [b["Name"] for b in r["Buckets"]]
        token = r.get("ContinuationToken")
        if not token:
            break
    assert seen == names
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == names
    r = s3.list_buckets(MaxBuckets=2)
    assert len(r["Buckets"]) == 2 and r["ContinuationToken"]
    # (boto3 checks the range itself: sent raw.)
    for bad in ("0", "10001"):
        r = signed_request(node, pager, "GET", None, query=[("max-buckets", bad)])
        assert (r.status, r.code) == (400, "InvalidArgument"), r.body
    _fails(lambda: s3.list_buckets(ContinuationToken="not-hex"), 400, "InvalidArgument")


def test_a_missing_object_is_404_to_whoever_may_list(node, s3):
    # API_GetObject, "Permissions": with s3:ListBucket a missing object is
    # 404 NoSuchKey, without it 403 AccessDenied. A public-read bucket
    # lets anyone list.
    anon = anonymous(node)
    public = bucket_name("exact-public")
    s3.create_bucket(Bucket=public, ACL="public-read")
    s3.put_bucket_versioning(Bucket=public, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=public, Key="gone", Body=b"x", ACL="public-read")
    assert anon.get_object(Bucket=public, Key="gone")["Body"].read() == b"x"
    s3.delete_object(Bucket=public, Key="gone")
    e = _fails(lambda: anon.get_object(Bucket=public, Key="gone"), 404, "NoSuchKey")
    assert e.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker") == "true"
    _fails(lambda: anon.get_object(Bucket=public, Key="never"), 404, "NoSuchKey")
    _fails(lambda: anon.head_object(Bucket=public, Key="never"), 404, "404")
    # An object that exists and is not public stays refused.
    s3.put_object(Bucket=public, Key="private", Body=b"x")
    _fails(lambda: anon.get_object(Bucket=public, Key="private"), 403, "AccessDenied")
    # A private bucket tells an anonymous caller nothing.
    private = bucket_name("exact-private")
    s3.create_bucket(Bucket=private)
    _fails(lambda: anon.get_object(Bucket=private, Key="never"), 403, "AccessDenied")


def test_expected_bucket_owner(s3, bucket, admin_key):
    # Common request header x-amz-expected-bucket-owner: "If the account
    # ID that you provide does not match the actual owner of the bucket,
    # the request fails with the HTTP status code 403 Forbidden".
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", ExpectedBucketOwner=admin_key.canonical_id)
    assert s3.get_object(Bucket=bucket, Key="k", ExpectedBucketOwner=admin_key.canonical_id)["Body"].read() == b"x"
    s3.list_objects_v2(Bucket=bucket, ExpectedBucketOwner=admin_key.canonical_id)
    _fails(lambda: s3.get_object(Bucket=bucket, Key="k", ExpectedBucketOwner="GK000000000000000000000000"),
           403, "AccessDenied")
    # The access key id is not the owner's id: the canonical user id is.
    _fails(lambda: s3.get_object(Bucket=bucket, Key="k", ExpectedBucketOwner=admin_key.id), 403, "AccessDenied")
    _fails(lambda: s3.put_object(Bucket=bucket, Key="k2", Body=b"y", ExpectedBucketOwner="someone-else"),
           403, "AccessDenied")
    _fails(lambda: s3.head_object(Bucket=bucket, Key="k2"), 404, "404")


def test_expected_source_bucket_owner(s3, bucket, admin_key):
    # API_CopyObject / API_UploadPartCopy, x-amz-source-expected-bucket-owner:
    # 403 when the source bucket has another owner.
    s3.put_object(Bucket=bucket, Key="src", Body=b"x")
    src = {"Bucket": bucket, "Key": "src"}
    s3.copy_object(Bucket=bucket, Key="dst", CopySource=src, ExpectedSourceBucketOwner=admin_key.canonical_id)
    _fails(lambda: s3.copy_object(Bucket=bucket, Key="dst2", CopySource=src,
                                  ExpectedSourceBucketOwner="someone-else"), 403, "AccessDenied")
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    _fails(lambda: s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, CopySource=src,
                                       ExpectedSourceBucketOwner="someone-else"), 403, "AccessDenied")
    s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, CopySource=src,
                        ExpectedSourceBucketOwner=admin_key.canonical_id)
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=up)
    _fails(lambda: s3.head_object(Bucket=bucket, Key="dst2"), 404, "404")


def test_recreating_an_own_bucket_in_us_east_1(tmp_path):
    # API_CreateBucket, "BucketAlreadyOwnedByYou": in us-east-1, "Amazon S3
    # returns 200 OK and resets the bucket access control lists (ACLs)";
    # elsewhere (test_buckets.py) 409. The objects stay.
    n = Node(tmp_path / "use1", region="us-east-1")
    n.start()
    try:
        k = n.create_key("owner", create_bucket=True)
        s3 = s3_client(n, k)
        s3.create_bucket(Bucket="mine")
        s3.put_object(Bucket="mine", Key="kept", Body=b"1")
        s3.put_bucket_acl(Bucket="mine", ACL="public-read")
        assert len(s3.get_bucket_acl(Bucket="mine")["Grants"]) == 2
        r = s3.create_bucket(Bucket="mine")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert s3.get_object(Bucket="mine", Key="kept")["Body"].read() == b"1"
        [grant] = s3.get_bucket_acl(Bucket="mine")["Grants"]
        assert grant["Permission"] == "FULL_CONTROL"
        s3.create_bucket(Bucket="mine", ACL="public-read")
        assert len(s3.get_bucket_acl(Bucket="mine")["Grants"]) == 2
        other = s3_client(n, n.create_key("other", create_bucket=True))
        _fails(lambda: other.create_bucket(Bucket="mine"), 409, "BucketAlreadyExists")
    finally:
        n.stop()
        shutil.rmtree(tmp_path / "use1", ignore_errors=True)
