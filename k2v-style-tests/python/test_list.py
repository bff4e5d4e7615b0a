"""ListObjects (v1) and ListObjectsV2: prefix, delimiter, pagination, URL
encoding, and unusual keys (unicode, spaces, `../`, 1024 bytes)."""

import xml.etree.ElementTree as ET
from urllib.parse import unquote_plus

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import bucket_name, error_code, http_status, signed_request, strip_ns

KEYS = sorted(
    [
        "a/1",
        "a/2",
        "a/b/3",
        "a/b/4",
        "b/1",
        "c",
        "d e/f g",
        "plus+sign",
        "percent%41",
        "amp&lt<gt>'\"",
        "../up",
        "x/../y",
        "./dot",
        "ü/ß",
        "日本/語",
        "emoji-😀",
        "z",
    ]
)


@pytest.fixture(scope="module")
def listed(s3):
    b = bucket_name("listing")
    s3.create_bucket(Bucket=b)
    for k in KEYS:
        s3.put_object(Bucket=b, Key=k, Body=k.encode())
    return b


def test_unusual_keys_round_trip(s3, listed):
    for k in KEYS:
        assert s3.get_object(Bucket=listed, Key=k)["Body"].read() == k.encode(), k
        assert s3.head_object(Bucket=listed, Key=k)["ContentLength"] == len(k.encode())


def test_v2_full(s3, listed):
    r = s3.list_objects_v2(Bucket=listed)
    assert [o["Key"] for o in r["Contents"]] == KEYS
    assert r["KeyCount"] == len(KEYS)
    assert r["IsTruncated"] is False
    assert all(o["Size"] == len(o["Key"].encode()) for o in r["Contents"])
    assert all(o["ETag"].startswith('"') for o in r["Contents"])


def test_v1_full(s3, listed):
    r = s3.list_objects(Bucket=listed)
    assert [o["Key"] for o in r["Contents"]] == KEYS
    assert r["IsTruncated"] is False


def test_prefix(s3, listed):
    r = s3.list_objects_v2(Bucket=listed, Prefix="a/")
    assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2", "a/b/3", "a/b/4"]
    r = s3.list_objects(Bucket=listed, Prefix="ü/")
    assert [o["Key"] for o in r["Contents"]] == ["ü/ß"]
    r = s3.list_objects_v2(Bucket=listed, Prefix="nothing-here")
    assert r["KeyCount"] == 0 and "Contents" not in r


def test_delimiter(s3, listed):
    for fn in (s3.list_objects_v2, s3.list_objects):
        r = fn(Bucket=listed, Delimiter="/")
        prefixes = [p["Prefix"] for p in r["CommonPrefixes"]]
        assert prefixes == ["../", "./", "a/", "b/", "d e/", "x/", "ü/", "日本/"]
        assert [o["Key"] for o in r["Contents"]] == [
            k for k in KEYS if "/" not in k
        ]
        r = fn(Bucket=listed, Delimiter="/", Prefix="a/")
        assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"]
        assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2"]


def test_v2_pagination(s3, listed):
    for delim in (None, "/"):
        full = s3.list_objects_v2(Bucket=listed, **({"Delimiter": delim} if delim else {}))
        want_keys = [o["Key"] for o in full.get("Contents", [])]
        want_prefixes = [p["Prefix"] for p in full.get("CommonPrefixes", [])]
        keys, prefixes, token, pages = [], [], None, 0
        while True:
            args = {"Bucket": listed, "MaxKeys": 2}
            if delim:
                args["Delimiter"] = delim
            if token:
                args["ContinuationToken"] = token
            r = s3.list_objects_v2(**args)
            pages += 1
            assert pages < 50
            n = len(r.get("Contents", [])) + len(r.get("CommonPrefixes", []))
            assert n <= 2 and r["KeyCount"] == n and r["MaxKeys"] == 2
            keys += [o["Key"] for o in r.get("Contents", [])]
            prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
            if not r["IsTruncated"]:
                assert "NextContinuationToken" not in r
                break
            token = r["NextContinuationToken"]
        assert keys == want_keys
        assert prefixes == want_prefixes
        assert pages >= (len(want_keys) + len(want_prefixes)) // 2


def test_v2_start_after(s3, listed):
    r = s3.list_objects_v2(Bucket=listed, StartAfter="b/1")
    assert [o["Key"] for o in r["Contents"]] == [k for k in KEYS if k > "b/1"]
    assert r["StartAfter"] == "b/1"
    r = s3.list_objects_v2(Bucket=listed, StartAfter="b")
    assert [o["Key"] for o in r["Contents"]] == [k for k in KEYS if k > "b"]


def test_v1_marker_pagination(s3, listed):
    keys, marker, pages = [], "", 0
    while True:
        r = s3.list_objects(Bucket=listed, MaxKeys=3, Marker=marker)
        pages += 1
        assert pages < 50
        page = [o["Key"] for o in r.get("Contents", [])]
        assert len(page) <= 3
        keys += page
        if not r["IsTruncated"]:
            break
        marker = r.get("NextMarker", page[-1])
    assert keys == KEYS


def test_v1_next_marker_with_delimiter(s3, listed):
    r = s3.list_objects(Bucket=listed, Delimiter="/", MaxKeys=3)
    assert r["IsTruncated"] is True
    # with a delimiter S3 returns NextMarker: the last key or prefix returned
    assert r["NextMarker"] == "a/"


def test_v1_pagination_with_delimiter(s3, listed):
    # paging with NextMarker yields every key and common prefix exactly once
    full = s3.list_objects(Bucket=listed, Delimiter="/")
    want = [o["Key"] for o in full["Contents"]] + [p["Prefix"] for p in full["CommonPrefixes"]]
    got, marker, pages = [], "", 0
    while True:
        r = s3.list_objects(Bucket=listed, Delimiter="/", MaxKeys=2, Marker=marker)
        pages += 1
        assert pages < 50
        page = [o["Key"] for o in r.get("Contents", [])] + [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        assert len(page) <= 2
        got += page
        if not r["IsTruncated"]:
            break
        marker = r["NextMarker"]
    assert sorted(got) == sorted(want)


def test_max_keys_zero(s3, listed):
    r = s3.list_objects_v2(Bucket=listed, MaxKeys=0)
    assert r["KeyCount"] == 0
    assert "Contents" not in r


def _raw_list(node, key, bucket, query):
    r = signed_request(node, key, "GET", bucket, query=query)
    assert r.status == 200, r.body
    return r


def _texts(body: bytes, tag: str) -> list[str]:
    root = ET.fromstring(body)
    return [e.text or "" for e in root.iter() if strip_ns(e.tag) == tag]


def test_encoding_type_url_raw(node, admin_key, listed):
    for q in ([("list-type", "2"), ("encoding-type", "url")], [("encoding-type", "url")]):
        r = _raw_list(node, admin_key, listed, q)
        raw_keys = _texts(r.body, "Key")
        assert [unquote_plus(k) for k in raw_keys] == KEYS
        for k in raw_keys:
            assert " " not in k and all(ord(c) < 128 for c in k), k
        assert _texts(r.body, "EncodingType") == ["url"]


def test_encoding_type_url_prefix_and_delimiter_raw(node, admin_key, listed):
    r = _raw_list(
        node,
        admin_key,
        listed,
        [("list-type", "2"), ("encoding-type", "url"), ("prefix", "d e/"), ("delimiter", " ")],
    )
    assert [unquote_plus(k) for k in _texts(r.body, "Key")] == []
    assert [unquote_plus(p) for p in _texts(r.body, "Prefix")] == ["d e/", "d e/f "]
    assert _texts(r.body, "Prefix")[0] != "d e/", "Prefix must be URL-encoded too"


def test_no_encoding_type_raw(node, admin_key, listed):
    r = _raw_list(node, admin_key, listed, [("list-type", "2")])
    assert _texts(r.body, "Key") == KEYS


def test_invalid_encoding_type(node, admin_key, listed):
    r = signed_request(node, admin_key, "GET", listed, query=[("encoding-type", "base64")])
    assert r.status == 400 and r.code == "InvalidArgument", r.body


def test_empty_bucket_listing(s3, bucket):
    r = s3.list_objects_v2(Bucket=bucket)
    assert r["KeyCount"] == 0 and "Contents" not in r and r["IsTruncated"] is False
    r = s3.list_objects(Bucket=bucket)
    assert "Contents" not in r and r["IsTruncated"] is False


@pytest.mark.parametrize("key", ["k" * 1024, "é" * 512, "a/" * 512])
def test_key_of_1024_bytes(s3, bucket, key):
    assert len(key.encode()) == 1024
    s3.put_object(Bucket=bucket, Key=key, Body=b"long")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"long"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [key]


@pytest.mark.parametrize("key", ["k" * 1025, "é" * 512 + "x"])
def test_key_of_1025_bytes(s3, bucket, key):
    assert len(key.encode()) == 1025
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key=key, Body=b"too long")
    assert error_code(e.value) == "KeyTooLongError"
    assert http_status(e.value) == 400
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_dot_segments_raw_path(node, admin_key, s3, bucket):
    # a raw request keeps `..` literally in the path: the key is `a/../b`, not `b`
    r = signed_request(node, admin_key, "PUT", bucket, "a/../b", body=b"dots")
    assert r.status == 200, r.body
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/../b"]
    r = signed_request(node, admin_key, "GET", bucket, "a/../b")
    assert r.status == 200 and r.body == b"dots"
    r = signed_request(node, admin_key, "GET", bucket, "b")
    assert r.status == 404 and r.code == "NoSuchKey"
