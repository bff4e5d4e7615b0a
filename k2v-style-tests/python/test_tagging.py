"""Object and bucket tagging on one node, through boto3, aws-cli and raw
signed requests: Put/Get/DeleteObjectTagging, Put/Get/DeleteBucketTagging,
`x-amz-tagging` on PUT and CreateMultipartUpload, `x-amz-tagging-count` on
GET and HEAD, CopyObject's tagging directive, `versionId`, S3's limits and
its exact errors."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from clients import AwsCli
from hangar_testlib import MiB, error_code, http_status, random_bytes, s3_client, signed_request


def tagset(**kv) -> dict:
    return {"TagSet": [{"Key": k, "Value": v} for k, v in kv.items()]}


def tags_of(s3, bucket, key, **kw) -> dict[str, str]:
    got = s3.get_object_tagging(Bucket=bucket, Key=key, **kw)
    return {t["Key"]: t["Value"] for t in got["TagSet"]}


def fails(call, status: int, code: str, message: str | None = None):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == status, e.value.response
    assert error_code(e.value) == code, e.value.response
    if message is not None:
        assert e.value.response["Error"]["Message"] == message, e.value.response


def test_tags_given_at_put_are_read_back_and_counted(s3, bucket, node, admin_key):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="team=web&note=two%20words&empty")
    assert tags_of(s3, bucket, "t") == {"team": "web", "note": "two words", "empty": ""}
    assert s3.get_object(Bucket=bucket, Key="t")["TagCount"] == 3
    # HeadObject's model lacks TagCount; S3 sends the header all the same.
    head = s3.head_object(Bucket=bucket, Key="t")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "3"
    s3.put_object(Bucket=bucket, Key="plain", Body=b"x")
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="plain")
    r = signed_request(node, admin_key, "HEAD", bucket, "plain")
    assert r.status == 200 and r.header("x-amz-tagging-count") is None
    assert tags_of(s3, bucket, "plain") == {}


def test_put_and_delete_object_tagging_change_only_the_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"body", Tagging="a=1")
    before = s3.head_object(Bucket=bucket, Key="o")
    r = s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset(b="2", c="3"))
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert tags_of(s3, bucket, "o") == {"b": "2", "c": "3"}
    after = s3.head_object(Bucket=bucket, Key="o")
    assert after["LastModified"] == before["LastModified"]
    assert after["ETag"] == before["ETag"]
    r = s3.delete_object_tagging(Bucket=bucket, Key="o")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert tags_of(s3, bucket, "o") == {}
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="o")
    assert s3.get_object(Bucket=bucket, Key="o")["Body"].read() == b"body"
    # A new version starts with its own tags (none here).
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset(old="1"))
    s3.put_object(Bucket=bucket, Key="o", Body=b"new")
    assert tags_of(s3, bucket, "o") == {}


def test_object_tag_limits_and_errors(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", Tagging="keep=me")
    put = lambda t: lambda: s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=t)  # noqa: E731
    eleven = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}
    fails(put(eleven), 400, "BadRequest", "Object tags cannot be greater than 10")
    fails(put(tagset(**{"k" * 129: "v"})), 400, "InvalidTag", "The TagKey you have provided is invalid")
    fails(put(tagset(k="v" * 257)), 400, "InvalidTag", "The TagValue you have provided is invalid")
    fails(put({"TagSet": [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}]}), 400, "InvalidTag",
          "Cannot provide multiple Tags with the same key")
    for bad_key in ("a*b", "a?b", "a#b", "a,b", "a(b)"):
        fails(put(tagset(**{bad_key: "v"})), 400, "InvalidTag", "The TagKey you have provided is invalid")
    fails(put(tagset(k="semi;colon")), 400, "InvalidTag", "The TagValue you have provided is invalid")
    fails(put(tagset(**{"aws:reserved": "v"})), 400, "InvalidTag")
    # Nothing changed.
    assert tags_of(s3, bucket, "o") == {"keep": "me"}
    # The limits themselves are allowed; lengths count characters, not bytes.
    ten = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(10)]}
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=ten)
    assert len(tags_of(s3, bucket, "o")) == 10
    edge = {"é" * 128: "ü" * 256, "Space and +-=._:/@ 123": "日本語"}
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset(**edge))
    assert tags_of(s3, bucket, "o") == edge


def test_x_amz_tagging_errors_refuse_the_upload(s3, bucket):
    cases = [
        ("k=v&k=w", "InvalidArgument"),
        ("=v", "InvalidArgument"),
        ("k=%zz", "InvalidArgument"),
        ("k*=v", "InvalidTag"),
        ("&".join(f"k{i}=v" for i in range(11)), "BadRequest"),
    ]
    for i, (header, code) in enumerate(cases):
        fails(lambda: s3.put_object(Bucket=bucket, Key=f"bad{i}", Body=b"x", Tagging=header), 400, code)
        fails(lambda: s3.head_object(Bucket=bucket, Key=f"bad{i}"), 404, "404")
    fails(lambda: s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="a=1&a=2"), 400,
          "InvalidArgument")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_missing_objects_buckets_and_versions(s3, bucket):
    fails(lambda: s3.get_object_tagging(Bucket=bucket, Key="none"), 404, "NoSuchKey")
    fails(lambda: s3.put_object_tagging(Bucket=bucket, Key="none", Tagging=tagset(a="1")), 404, "NoSuchKey")
    fails(lambda: s3.delete_object_tagging(Bucket=bucket, Key="none"), 404, "NoSuchKey")
    fails(lambda: s3.get_object_tagging(Bucket="no-such-bucket-here", Key="k"), 404, "NoSuchBucket")
    fails(lambda: s3.get_bucket_tagging(Bucket="no-such-bucket-here"), 404, "NoSuchBucket")
    s3.put_object(Bucket=bucket, Key="v", Body=b"x", Tagging="a=1")
    # An unversioned bucket's objects are their "null" version.
    got = s3.get_object_tagging(Bucket=bucket, Key="v", VersionId="null")
    assert got["VersionId"] == "null" and got["TagSet"] == [{"Key": "a", "Value": "1"}]
    s3.put_object_tagging(Bucket=bucket, Key="v", VersionId="null", Tagging=tagset(b="2"))
    assert tags_of(s3, bucket, "v") == {"b": "2"}
    # An id Hangar could not have given is S3's InvalidArgument; a
    # well-formed one naming no version, NoSuchVersion.
    for call in (
        lambda: s3.get_object_tagging(Bucket=bucket, Key="v", VersionId="3HL4kqtJlcpXroDTDmjVBH40Nrjfkd"),
        lambda: s3.put_object_tagging(Bucket=bucket, Key="v", VersionId="abc", Tagging=tagset(c="3")),
        lambda: s3.delete_object_tagging(Bucket=bucket, Key="v", VersionId="abc"),
    ):
        fails(call, 400, "InvalidArgument", "Invalid version id specified")
    absent = "0" * 48
    for call in (
        lambda: s3.get_object_tagging(Bucket=bucket, Key="v", VersionId=absent),
        lambda: s3.put_object_tagging(Bucket=bucket, Key="v", VersionId=absent, Tagging=tagset(c="3")),
        lambda: s3.delete_object_tagging(Bucket=bucket, Key="v", VersionId=absent),
    ):
        fails(call, 404, "NoSuchVersion", "The specified version does not exist.")
    assert tags_of(s3, bucket, "v") == {"b": "2"}


def test_multipart_uploads_carry_their_tags(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="project=x&stage=2")
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=1,
                          Body=random_bytes(MiB + 5, 3))
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert tags_of(s3, bucket, "mp") == {"project": "x", "stage": "2"}
    assert s3.get_object(Bucket=bucket, Key="mp")["TagCount"] == 2


def test_copy_tagging_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"data", Tagging="from=src")
    src = {"Bucket": bucket, "Key": "src"}
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=src)
    assert tags_of(s3, bucket, "copied") == {"from": "src"}
    s3.copy_object(Bucket=bucket, Key="copied2", CopySource=src, TaggingDirective="COPY", Tagging="ignored=1")
    assert tags_of(s3, bucket, "copied2") == {"from": "src"}
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource=src, TaggingDirective="REPLACE", Tagging="new=1")
    assert tags_of(s3, bucket, "replaced") == {"new": "1"}
    s3.copy_object(Bucket=bucket, Key="cleared", CopySource=src, TaggingDirective="REPLACE")
    assert tags_of(s3, bucket, "cleared") == {}
    fails(lambda: s3.copy_object(Bucket=bucket, Key="bad", CopySource=src, TaggingDirective="MOVE"), 400,
          "InvalidArgument")
    fails(lambda: s3.copy_object(Bucket=bucket, Key="bad", CopySource=src, TaggingDirective="REPLACE",
                                 Tagging="a*=1"), 400, "InvalidTag")
    assert tags_of(s3, bucket, "src") == {"from": "src"}


def test_bucket_tagging(s3, bucket):
    fails(lambda: s3.get_bucket_tagging(Bucket=bucket), 404, "NoSuchTagSet", "The TagSet does not exist")
    r = s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(cost="web", owner="me"))
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    got = s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    assert {t["Key"]: t["Value"] for t in got} == {"cost": "web", "owner": "me"}
    fifty = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(50)]}
    s3.put_bucket_tagging(Bucket=bucket, Tagging=fifty)
    assert len(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == 50
    fifty_one = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]}
    fails(lambda: s3.put_bucket_tagging(Bucket=bucket, Tagging=fifty_one), 400, "BadRequest",
          "Bucket tag count cannot be greater than 50")
    fails(lambda: s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(**{"k" * 129: "v"})), 400, "InvalidTag")
    assert len(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == 50
    r = s3.delete_bucket_tagging(Bucket=bucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    fails(lambda: s3.get_bucket_tagging(Bucket=bucket), 404, "NoSuchTagSet")
    # Objects keep their own tags; a bucket's tags are not its objects'.
    s3.put_object(Bucket=bucket, Key="o", Body=b"x")
    assert tags_of(s3, bucket, "o") == {}


def test_malformed_tagging_xml(node, admin_key, s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", Tagging="a=1")
    for body in (b"<Tagging><TagSet><Tag><Key>k</Key>", b"not xml",
                 b"<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>"):
        r = signed_request(node, admin_key, "PUT", bucket, "o", query=[("tagging", "")], body=body)
        assert (r.status, r.code) == (400, "MalformedXML"), r.body
        r = signed_request(node, admin_key, "PUT", bucket, query=[("tagging", "")], body=body)
        assert (r.status, r.code) == (400, "MalformedXML"), r.body
    assert tags_of(s3, bucket, "o") == {"a": "1"}


def test_tagging_permissions(node, s3, bucket, request):
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", Tagging="a=1")
    s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(b="2"))
    reader = node.create_key(f"tag-reader-{request.node.name}"[:40])
    node.cli("bucket", "allow", bucket, "--read", "--key", reader.id)
    r = s3_client(node, reader)
    assert tags_of(r, bucket, "o") == {"a": "1"}
    fails(lambda: r.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset(x="1")), 403, "AccessDenied")
    fails(lambda: r.delete_object_tagging(Bucket=bucket, Key="o"), 403, "AccessDenied")
    fails(lambda: r.get_bucket_tagging(Bucket=bucket), 403, "AccessDenied")
    writer = node.create_key(f"tag-writer-{request.node.name}"[:40])
    node.cli("bucket", "allow", bucket, "--read", "--write", "--key", writer.id)
    w = s3_client(node, writer)
    w.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset(x="1"))
    fails(lambda: w.put_bucket_tagging(Bucket=bucket, Tagging=tagset(y="1")), 403, "AccessDenied")
    assert tags_of(s3, bucket, "o") == {"x": "1"}


def test_awscli_tagging(node, admin_key, bucket, tmp_path):
    aws = AwsCli(node, admin_key, tmp_path)
    src = tmp_path / "f"
    src.write_bytes(b"cli")
    aws.run("s3api", "put-object", "--bucket", bucket, "--key", "c", "--body", str(src), "--tagging", "a=1&b=2")
    got = json.loads(aws.run("s3api", "get-object-tagging", "--bucket", bucket, "--key", "c").stdout)
    assert {t["Key"]: t["Value"] for t in got["TagSet"]} == {"a": "1", "b": "2"}
    aws.run("s3api", "put-object-tagging", "--bucket", bucket, "--key", "c",
            "--tagging", json.dumps(tagset(z="9")))
    got = json.loads(aws.run("s3api", "get-object-tagging", "--bucket", bucket, "--key", "c").stdout)
    assert got["TagSet"] == [{"Key": "z", "Value": "9"}]
    aws.run("s3api", "put-bucket-tagging", "--bucket", bucket, "--tagging", json.dumps(tagset(env="test")))
    got = json.loads(aws.run("s3api", "get-bucket-tagging", "--bucket", bucket).stdout)
    assert got["TagSet"] == [{"Key": "env", "Value": "test"}]
    aws.run("s3api", "delete-bucket-tagging", "--bucket", bucket)
    res = aws.run("s3api", "get-bucket-tagging", "--bucket", bucket, check=False)
    assert res.returncode != 0 and "NoSuchTagSet" in res.stderr
    bad = json.dumps({"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]})
    res = aws.run("s3api", "put-object-tagging", "--bucket", bucket, "--key", "c", "--tagging", bad, check=False)
    assert res.returncode != 0 and "BadRequest" in res.stderr and "cannot be greater than 10" in res.stderr
