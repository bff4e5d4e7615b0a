"""Bucket versioning on one node, through boto3 and raw signed requests:
Put/GetBucketVersioning, versions kept on overwrite, `versionId` on GET,
HEAD, DELETE, tagging and copy sources, delete markers, the `null` version
(before versioning and while suspended), ListObjectVersions with its
markers, delimiter and encoding, S3's errors, blocks collected when a
version is removed, and concurrent PUTs of one key each kept."""

from __future__ import annotations

import concurrent.futures
import hashlib
import random

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    MiB,
    Node,
    block_files,
    enable,
    error_code,
    eventually,
    http_status,
    random_bytes,
    s3_client,
    signed_request,
    versions_of,
)


def fails(call, status: int, code: str | None):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == status, e.value.response
    if code is not None:
        assert error_code(e.value) == code, e.value.response
    return e.value.response


def test_get_and_put_bucket_versioning(s3, bucket, node, admin_key):
    got = s3.get_bucket_versioning(Bucket=bucket)
    assert "Status" not in got and "MFADelete" not in got
    r = signed_request(node, admin_key, "GET", bucket, query=[("versioning", "")])
    assert r.status == 200 and b"<VersioningConfiguration" in r.body and b"<Status>" not in r.body
    enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    fails(
        lambda: s3.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Enabled"}
        ),
        501,
        "NotImplemented",
    )
    fails(lambda: s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={}), 400, "MalformedXML")
    fails(lambda: s3.get_bucket_versioning(Bucket="no-such-bucket-v"), 404, "NoSuchBucket")


def test_the_whole_story(s3, bucket):
    # Written before versioning: the null version.
    s3.put_object(Bucket=bucket, Key="doc", Body=b"v0")
    enable(s3, bucket)
    ids = []
    for body in (b"v1", b"v2", b"v3"):
        r = s3.put_object(Bucket=bucket, Key="doc", Body=body)
        ids.append(r["VersionId"])
    assert len(set(ids)) == 3 and "null" not in ids
    assert s3.get_object(Bucket=bucket, Key="doc")["Body"].read() == b"v3"
    vs = versions_of(s3, bucket)
    assert [(v["VersionId"], v["IsLatest"]) for _, v in vs] == [
        (ids[2], True),
        (ids[1], False),
        (ids[0], False),
        ("null", False),
    ]
    # An old version, read by id, HEAD too.
    got = s3.get_object(Bucket=bucket, Key="doc", VersionId=ids[0])
    assert got["Body"].read() == b"v1" and got["VersionId"] == ids[0]
    assert s3.head_object(Bucket=bucket, Key="doc", VersionId="null")["ContentLength"] == 2
    assert s3.get_object(Bucket=bucket, Key="doc", VersionId="null")["Body"].read() == b"v0"
    # Delete: a marker; the key reads as absent, with the marker's headers.
    d = s3.delete_object(Bucket=bucket, Key="doc")
    assert d["DeleteMarker"] is True and d["VersionId"] not in ids
    marker = d["VersionId"]
    r = fails(lambda: s3.get_object(Bucket=bucket, Key="doc"), 404, "NoSuchKey")
    assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == marker
    r = fails(lambda: s3.head_object(Bucket=bucket, Key="doc"), 404, None)
    assert r["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    fails(lambda: s3.get_object(Bucket=bucket, Key="doc", VersionId=marker), 405, "MethodNotAllowed")
    fails(lambda: s3.head_object(Bucket=bucket, Key="doc", VersionId=marker), 405, None)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    assert "Contents" not in s3.list_objects(Bucket=bucket)
    vs = versions_of(s3, bucket)
    assert [(k, v["VersionId"], v["IsLatest"]) for k, v in vs] == [
        ("v", ids[2], False),
        ("v", ids[1], False),
        ("v", ids[0], False),
        ("v", "null", False),
        ("d", marker, True),
    ]
    # Restore v1 by copying it onto the key.
    c = s3.copy_object(Bucket=bucket, Key="doc", CopySource={"Bucket": bucket, "Key": "doc", "VersionId": ids[0]})
    assert c["CopySourceVersionId"] == ids[0]
    restored = c["VersionId"]
    assert s3.get_object(Bucket=bucket, Key="doc")["Body"].read() == b"v1"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["doc"]
    # Permanently delete v3: gone for good; deleting the marker is by id too.
    r = s3.delete_object(Bucket=bucket, Key="doc", VersionId=ids[2])
    assert r["VersionId"] == ids[2] and "DeleteMarker" not in r
    fails(lambda: s3.get_object(Bucket=bucket, Key="doc", VersionId=ids[2]), 404, "NoSuchVersion")
    r = s3.delete_object(Bucket=bucket, Key="doc", VersionId=marker)
    assert r["DeleteMarker"] is True and r["VersionId"] == marker
    # Deleting the latest makes the previous one current.
    s3.delete_object(Bucket=bucket, Key="doc", VersionId=restored)
    assert s3.get_object(Bucket=bucket, Key="doc")["Body"].read() == b"v2"
    assert [v["VersionId"] for _, v in versions_of(s3, bucket)] == [ids[1], ids[0], "null"]


def test_suspended_buckets_write_the_null_version(s3, bucket):
    enable(s3, bucket)
    kept = s3.put_object(Bucket=bucket, Key="k", Body=b"kept")["VersionId"]
    enable(s3, bucket, "Suspended")
    r = s3.put_object(Bucket=bucket, Key="k", Body=b"n1")
    assert r["VersionId"] == "null"
    s3.put_object(Bucket=bucket, Key="k", Body=b"n2")
    vs = versions_of(s3, bucket)
    assert [(v["VersionId"], v["IsLatest"]) for _, v in vs] == [("null", True), (kept, False)]
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"n2"
    d = s3.delete_object(Bucket=bucket, Key="k")
    assert d["DeleteMarker"] is True and d["VersionId"] == "null"
    vs = versions_of(s3, bucket)
    assert [(t, v["VersionId"]) for t, v in vs] == [("v", kept), ("d", "null")]
    s3.delete_object(Bucket=bucket, Key="k", VersionId="null")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"kept"


def test_errors(s3, bucket):
    enable(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    absent = "0" * 48
    for call in (
        lambda: s3.get_object(Bucket=bucket, Key="k", VersionId="not-a-version"),
        lambda: s3.delete_object(Bucket=bucket, Key="k", VersionId="not-a-version"),
        lambda: s3.list_object_versions(Bucket=bucket, KeyMarker="k", VersionIdMarker="zz"),
    ):
        fails(call, 400, "InvalidArgument")
    fails(lambda: s3.get_object(Bucket=bucket, Key="k", VersionId=absent), 404, "NoSuchVersion")
    fails(lambda: s3.head_object(Bucket=bucket, Key="k", VersionId=absent), 404, None)
    fails(
        lambda: s3.copy_object(Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "k", "VersionId": absent}),
        404,
        "NoSuchVersion",
    )
    fails(lambda: s3.list_object_versions(Bucket=bucket, VersionIdMarker="null"), 400, "InvalidArgument")
    fails(lambda: s3.put_object(Bucket=bucket, Key="a\x00b", Body=b"x"), 400, "InvalidArgument")
    fails(lambda: s3.delete_bucket(Bucket=bucket), 409, "BucketNotEmpty")
    marker = s3.delete_object(Bucket=bucket, Key="k")["VersionId"]
    fails(lambda: s3.get_object_tagging(Bucket=bucket, Key="k", VersionId=marker), 405, "MethodNotAllowed")
    # A delete of a version that does not exist succeeds (as in S3).
    assert s3.delete_object(Bucket=bucket, Key="k", VersionId=absent)["VersionId"] == absent


def test_tagging_and_multipart_by_version(s3, bucket):
    enable(s3, bucket)
    a = s3.put_object(Bucket=bucket, Key="t", Body=b"a", Tagging="v=a")["VersionId"]
    b = s3.put_object(Bucket=bucket, Key="t", Body=b"b", Tagging="v=b")["VersionId"]
    assert s3.get_object_tagging(Bucket=bucket, Key="t", VersionId=a)["TagSet"] == [{"Key": "v", "Value": "a"}]
    r = s3.put_object_tagging(Bucket=bucket, Key="t", VersionId=a, Tagging={"TagSet": [{"Key": "n", "Value": "1"}]})
    assert r["VersionId"] == a
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == [{"Key": "v", "Value": "b"}]
    s3.delete_object_tagging(Bucket=bucket, Key="t", VersionId=a)
    assert s3.get_object_tagging(Bucket=bucket, Key="t", VersionId=a)["TagSet"] == []
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["VersionId"] == b
    up = s3.create_multipart_upload(Bucket=bucket, Key="t")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="t", UploadId=up, PartNumber=1, Body=b"m" * 100)
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="t", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    )
    assert done["VersionId"] not in (a, b)
    assert [v["VersionId"] for _, v in versions_of(s3, bucket)] == [done["VersionId"], b, a]


def test_delete_objects_with_versions(s3, bucket):
    enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="x", Body=b"1")["VersionId"]
    s3.put_object(Bucket=bucket, Key="y", Body=b"1")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "x", "VersionId": v1}, {"Key": "y"}]})
    got = {d["Key"]: d for d in r["Deleted"]}
    assert got["x"]["VersionId"] == v1 and "DeleteMarker" not in got["x"]
    assert got["y"]["DeleteMarker"] is True and got["y"]["DeleteMarkerVersionId"]
    marker = got["y"]["DeleteMarkerVersionId"]
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "y", "VersionId": marker}]})
    assert r["Deleted"][0]["DeleteMarker"] is True and r["Deleted"][0]["DeleteMarkerVersionId"] == marker
    assert s3.get_object(Bucket=bucket, Key="y")["Body"].read() == b"1"
    fails(lambda: s3.get_object(Bucket=bucket, Key="x"), 404, "NoSuchKey")


def test_list_object_versions_pages_prefixes_and_encoding(s3, bucket, node, admin_key):
    enable(s3, bucket)
    rng = random.Random(7)
    expected = {}
    for i in range(40):
        key = rng.choice(["a", "b/1", "b/2", "c d", "e/f/g", "z"])
        if rng.random() < 0.2:
            vid = s3.delete_object(Bucket=bucket, Key=key)["VersionId"]
        else:
            vid = s3.put_object(Bucket=bucket, Key=key, Body=str(i).encode())["VersionId"]
        expected.setdefault(key, []).insert(0, vid)
    want = [(k, v) for k in sorted(expected) for v in expected[k]]
    for page in (1, 2, 3, 7, 1000):
        got = [(v["Key"], v["VersionId"]) for _, v in versions_of(s3, bucket, MaxKeys=page)]
        # Versions and markers are interleaved in S3's order by the raw XML;
        # boto3 splits them, so compare as sets and the order per kind.
        assert sorted(got) == sorted(want), page
        assert len(got) == len(set(got)) == 40
    r = signed_request(node, admin_key, "GET", bucket, query=[("versions", "")])
    body = r.body.decode()
    import re

    order = re.findall(r"<(Version|DeleteMarker)><Key>([^<]*)</Key><VersionId>([^<]*)</VersionId>", body)
    assert [(k.replace("&amp;", "&"), v) for _, k, v in order] == want
    latest = re.findall(r"<Key>([^<]*)</Key><VersionId>[^<]*</VersionId><IsLatest>true", body)
    assert latest == sorted(expected)
    # Delimiter and prefix: common prefixes, once each.
    r = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == [p for p in ("b/", "e/") if any(k.startswith(p) for k in expected)]
    seen = []
    args = {"Delimiter": "/", "MaxKeys": 1}
    while True:
        r = s3.list_object_versions(Bucket=bucket, **args)
        seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        seen += [v["Key"] for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
        if not r["IsTruncated"]:
            break
        args["KeyMarker"] = r["NextKeyMarker"]
        args.pop("VersionIdMarker", None)
        if "NextVersionIdMarker" in r:
            args["VersionIdMarker"] = r["NextVersionIdMarker"]
    assert len([s for s in seen if s.endswith("/")]) == len({s for s in seen if s.endswith("/")})
    r = s3.list_object_versions(Bucket=bucket, Prefix="b/")
    assert {v["Key"] for v in r.get("Versions", []) + r.get("DeleteMarkers", [])} <= {"b/1", "b/2"}
    r = s3.list_object_versions(Bucket=bucket, Prefix="c", EncodingType="url")
    assert all(v["Key"] == "c%20d" for v in r.get("Versions", []) + r.get("DeleteMarkers", []))


def test_an_unversioned_bucket_lists_null_versions(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert "VersionId" not in s3.put_object(Bucket=bucket, Key="k", Body=b"y")
    r = s3.list_object_versions(Bucket=bucket)
    assert [(v["Key"], v["VersionId"], v["IsLatest"]) for v in r["Versions"]] == [("k", "null", True)]
    assert "VersionId" not in s3.get_object(Bucket=bucket, Key="k")
    assert "DeleteMarker" not in s3.delete_object(Bucket=bucket, Key="k")
    assert "Versions" not in s3.list_object_versions(Bucket=bucket)


def test_concurrent_puts_to_one_key_are_each_kept(s3, bucket):
    enable(s3, bucket)
    bodies = {i: random_bytes(3000 + i, seed=i) for i in range(48)}

    def put(i):
        return i, s3.put_object(Bucket=bucket, Key="hot", Body=bodies[i])["VersionId"]

    with concurrent.futures.ThreadPoolExecutor(12) as ex:
        acked = dict(ex.map(put, bodies))
    listed = [v["VersionId"] for _, v in versions_of(s3, bucket)]
    assert sorted(listed) == sorted(acked.values()) and len(set(listed)) == 48
    for i, vid in acked.items():
        got = s3.get_object(Bucket=bucket, Key="hot", VersionId=vid)["Body"].read()
        assert hashlib.md5(got).digest() == hashlib.md5(bodies[i]).digest(), i


@pytest.fixture(scope="module")
def gc_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("vgc"))
    n.config.write_text("block_gc_delay_secs = 1\n" + n.config.read_text())
    n.start()
    key = n.create_key("vgc", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="vgcbucket")
    yield n, s3
    n.stop()


def test_a_permanently_deleted_version_has_its_blocks_collected(gc_node):
    n, s3 = gc_node
    b = "vgcbucket"
    enable(s3, b)
    before = block_files(n.data)
    old = s3.put_object(Bucket=b, Key="big", Body=random_bytes(3 * MiB, seed=1))["VersionId"]
    old_blocks = block_files(n.data) - before
    s3.put_object(Bucket=b, Key="big", Body=random_bytes(3 * MiB, seed=2))
    new_blocks = block_files(n.data) - before - old_blocks
    s3.delete_object(Bucket=b, Key="big")
    assert old_blocks and new_blocks
    # Overwritten and marked deleted: every version's blocks stay.
    import time

    time.sleep(3)
    assert old_blocks | new_blocks <= block_files(n.data)
    s3.delete_object(Bucket=b, Key="big", VersionId=old)
    eventually(lambda: not (old_blocks & block_files(n.data)), 20, "the removed version's blocks to go")
    assert new_blocks <= block_files(n.data)
