"""DeleteObjects: per-key results, quiet mode, malformed XML (raw signed requests)."""

import xml.etree.ElementTree as ET

import pytest

from hangar_testlib import md5_b64, signed_request, strip_ns


def _keys(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_delete_objects_verbose(s3, bucket):
    for k in ("a", "b", "c/d", "ü"):
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": "a"}, {"Key": "c/d"}, {"Key": "ü"}, {"Key": "missing"}]},
    )
    # S3 reports a missing key as deleted too
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(["a", "c/d", "ü", "missing"])
    assert not r.get("Errors")
    assert _keys(s3, bucket) == ["b"]


def test_delete_objects_quiet(s3, bucket):
    for k in ("a", "b", "c"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"x")
    r = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "a"}, {"Key": "b"}], "Quiet": True}
    )
    assert not r.get("Deleted")
    assert not r.get("Errors")
    assert _keys(s3, bucket) == ["c"]


def test_delete_objects_many(s3, bucket):
    keys = [f"k{i:04d}" for i in range(300)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=b"")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    assert len(r["Deleted"]) == 300
    assert _keys(s3, bucket) == []


MALFORMED = [
    b"<Delete><Object><Key>a</Key></Object>",  # unterminated
    b"this is not xml",
    b"<Delete><Object><Key>a</Key></Object></Delete><extra/>",
    b"<Remove><Object><Key>a</Key></Object></Remove>",  # wrong root element
]


@pytest.mark.parametrize("body", MALFORMED)
def test_delete_objects_malformed_xml(node, admin_key, s3, bucket, body):
    s3.put_object(Bucket=bucket, Key="a", Body=b"keep me")
    r = signed_request(
        node,
        admin_key,
        "POST",
        bucket,
        query=[("delete", "")],
        headers={"content-md5": md5_b64(body), "content-type": "application/xml"},
        body=body,
    )
    assert r.status == 400, (r.status, r.body)
    assert r.code == "MalformedXML", r.body
    assert _keys(s3, bucket) == ["a"]


def test_delete_objects_too_many_keys(node, admin_key, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k0", Body=b"keep me")
    body = (
        "<Delete>"
        + "".join(f"<Object><Key>k{i}</Key></Object>" for i in range(1001))
        + "</Delete>"
    ).encode()
    r = signed_request(
        node,
        admin_key,
        "POST",
        bucket,
        query=[("delete", "")],
        headers={"content-md5": md5_b64(body)},
        body=body,
    )
    assert r.status == 400, (r.status, r.body)
    assert r.code == "MalformedXML", r.body
    assert _keys(s3, bucket) == ["k0"]


def test_delete_objects_raw_xml_response(node, admin_key, s3, bucket):
    s3.put_object(Bucket=bucket, Key="x y", Body=b"1")
    body = b'<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>x y</Key></Object></Delete>'
    r = signed_request(
        node,
        admin_key,
        "POST",
        bucket,
        query=[("delete", "")],
        headers={"content-md5": md5_b64(body)},
        body=body,
    )
    assert r.status == 200, r.body
    root = ET.fromstring(r.body)
    assert strip_ns(root.tag) == "DeleteResult"
    deleted = [c for c in root if strip_ns(c.tag) == "Deleted"]
    assert [[k.text for k in d if strip_ns(k.tag) == "Key"] for d in deleted] == [["x y"]]
    assert _keys(s3, bucket) == []
