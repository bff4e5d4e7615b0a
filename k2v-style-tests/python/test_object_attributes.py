"""GetObjectAttributes (ETag, Checksum, ObjectParts, StorageClass,
ObjectSize, versionId), GET/HEAD with partNumber, and ListMultipartUploads
with a delimiter, through boto3, on one node and on three."""

from __future__ import annotations

import hashlib

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, bucket_name, checksum_b64, error_code, http_status, random_bytes, s3_client
from cluster_testlib import key_of, laid_out_cluster

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]


def multipart(s3, bucket, key, parts: list[bytes]) -> str:
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=i, Body=p)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                        MultipartUpload={"Parts": done})["ETag"]


def fails(call, status: int, code: str):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == status, e.value.response
    assert error_code(e.value) == code, e.value.response


def test_attributes_of_a_simple_object(s3, bucket):
    data = b"attributes" * 100
    s3.put_object(Bucket=bucket, Key="a", Body=data, ChecksumAlgorithm="SHA256")
    r = s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=ALL)
    assert r["ETag"].strip('"') == hashlib.md5(data).hexdigest()
    assert r["ObjectSize"] == len(data)
    assert r["StorageClass"] == "STANDARD"
    assert r["Checksum"]["ChecksumSHA256"] == checksum_b64("SHA256", data)
    assert "ObjectParts" not in r
    assert "LastModified" in r
    # Only what is asked.
    r = s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == len(data)
    assert "ETag" not in r and "StorageClass" not in r and "Checksum" not in r
    fails(lambda: s3.get_object_attributes(Bucket=bucket, Key="missing", ObjectAttributes=ALL), 404, "NoSuchKey")
    fails(lambda: s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=["Bogus"]),
          400, "InvalidArgument")


def test_attributes_of_a_multipart_object_and_part_number(s3, bucket):
    parts = [random_bytes(5 * MiB, 1), random_bytes(5 * MiB, 2), b"tail"]
    etag = multipart(s3, bucket, "mp", parts)
    r = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    assert r["ETag"].strip('"') == etag.strip('"') and etag.strip('"').endswith("-3")
    assert r["ObjectSize"] == sum(len(p) for p in parts)
    assert r["ObjectParts"]["TotalPartsCount"] == 3
    # partNumber: a plain object is its own part 1; nothing past it.
    s3.put_object(Bucket=bucket, Key="plain", Body=b"one part")
    assert s3.get_object(Bucket=bucket, Key="plain", PartNumber=1)["Body"].read() == b"one part"
    fails(lambda: s3.get_object(Bucket=bucket, Key="plain", PartNumber=2), 416, "InvalidPartNumber")
    fails(lambda: s3.head_object(Bucket=bucket, Key="plain", PartNumber=2), 416, "416")
    # A multipart object's parts (test_part_number.py tests them all).
    assert s3.get_object(Bucket=bucket, Key="mp", PartNumber=2)["Body"].read() == parts[1]


def test_attributes_by_version_id(s3, new_bucket):
    b = new_bucket("attr-versions")
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=b, Key="v", Body=b"first")["VersionId"]
    v2 = s3.put_object(Bucket=b, Key="v", Body=b"second!")["VersionId"]
    r = s3.get_object_attributes(Bucket=b, Key="v", VersionId=v1, ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == 5 and r["VersionId"] == v1
    r = s3.get_object_attributes(Bucket=b, Key="v", ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == 7 and r["VersionId"] == v2


def test_list_multipart_uploads_with_a_delimiter(s3, bucket):
    ids = {}
    for k in ["a/1", "a/2", "b/x/1", "c", "d/1"]:
        ids[k] = s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
    r = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
    assert [u["Key"] for u in r.get("Uploads", [])] == ["c"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/", "d/"]
    assert r["IsTruncated"] is False
    r = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/", Prefix="b/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["b/x/"]
    assert r.get("Uploads", []) == []
    # Pages of two: prefixes count as entries; the marker skips a prefix.
    seen, marker, pages = [], None, 0
    while True:
        kw = {"KeyMarker": marker} if marker else {}
        r = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/", MaxUploads=2, **kw)
        seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])] + [u["Key"] for u in r.get("Uploads", [])]
        pages += 1
        if not r["IsTruncated"]:
            break
        marker = r["NextKeyMarker"]
        assert "NextUploadIdMarker" not in r or r["NextUploadIdMarker"]
    assert sorted(seen) == ["a/", "b/", "c", "d/"] and pages == 2
    # Without a delimiter, every upload as before.
    r = s3.list_multipart_uploads(Bucket=bucket)
    assert [u["Key"] for u in r["Uploads"]] == sorted(ids)
    for k, u in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=k, UploadId=u)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "oa")
    key = key_of(nodes[0].cli_json("key", "create", "attrs"), "attrs")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_cluster_attributes_and_delimited_uploads_through_other_nodes(three):
    nodes, key = three
    c = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-attrs")
    c[0].create_bucket(Bucket=b)
    parts = [random_bytes(5 * MiB, 3), b"end"]
    multipart(c[1], b, "mp", parts)
    for s in (c[2], c[0]):
        r = s.get_object_attributes(Bucket=b, Key="mp", ObjectAttributes=ALL)
        assert r["ObjectParts"]["TotalPartsCount"] == 2 and r["ObjectSize"] == len(parts[0]) + 3
    c[1].create_multipart_upload(Bucket=b, Key="dir/one")
    c[0].create_multipart_upload(Bucket=b, Key="top")
    r = c[2].list_multipart_uploads(Bucket=b, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir/"]
    assert [u["Key"] for u in r["Uploads"]] == ["top"]
