"""Authentication: SigV4 header and presigned URLs, and every way of getting
them wrong. Failed writes must store nothing."""

import datetime as dt
import hashlib
import http.client
import secrets
import time
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    Key,
    Response,
    error_code,
    http_status,
    object_path,
    s3_client,
    send,
    sign_v4,
    signed_request,
)


def _url_request(method: str, url: str, body: bytes = b"", headers=None) -> Response:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=headers or {})
        resp = conn.getresponse()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def _keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_wrong_secret(node, admin_key, s3, bucket):
    bad = s3_client(node, Key(admin_key.id, secrets.token_hex(32)))
    for call in (
        lambda: bad.list_buckets(),
        lambda: bad.put_object(Bucket=bucket, Key="k", Body=b"x"),
        lambda: bad.get_object(Bucket=bucket, Key="k"),
        lambda: bad.delete_bucket(Bucket=bucket),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e.value) == "SignatureDoesNotMatch", e.value.response
        assert http_status(e.value) == 403
    assert _keys(s3, bucket) == []
    s3.head_bucket(Bucket=bucket)


def test_unknown_access_key(node, s3, bucket):
    ghost = s3_client(node, Key("GK" + secrets.token_hex(12), secrets.token_hex(32)))
    for call in (
        lambda: ghost.list_buckets(),
        lambda: ghost.put_object(Bucket=bucket, Key="k", Body=b"x"),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e.value) == "InvalidAccessKeyId", e.value.response
        assert http_status(e.value) == 403
    assert _keys(s3, bucket) == []


def test_tampered_signature(node, admin_key, s3, bucket):
    path = object_path(bucket, "k")
    body = b"payload"
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], {}, hashlib.sha256(body).hexdigest(), admin_key)
    sig = s.signature
    s.headers["authorization"] = s.headers["authorization"].replace(
        sig, sig[:-1] + ("0" if sig[-1] != "0" else "1")
    )
    r = send(node, "PUT", path, [], s.headers, body)
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", r.body
    assert _keys(s3, bucket) == []


def test_tampered_signed_header(node, admin_key, s3, bucket):
    path = object_path(bucket, "k")
    body = b"payload"
    s = sign_v4(
        "PUT",
        f"127.0.0.1:{node.s3_port}",
        path,
        [],
        {"x-amz-meta-owner": "alice"},
        hashlib.sha256(body).hexdigest(),
        admin_key,
    )
    s.headers["x-amz-meta-owner"] = "mallory"
    r = send(node, "PUT", path, [], s.headers, body)
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", r.body
    assert _keys(s3, bucket) == []


def test_tampered_query(node, admin_key, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"1")
    s3.put_object(Bucket=bucket, Key="b", Body=b"2")
    path = object_path(bucket, None)
    s = sign_v4("GET", f"127.0.0.1:{node.s3_port}", path, [("prefix", "a")], {}, hashlib.sha256(b"").hexdigest(), admin_key)
    r = send(node, "GET", path, [("prefix", "b")], s.headers)
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", r.body


def test_payload_hash_mismatch(node, admin_key, s3, bucket):
    r = signed_request(
        node,
        admin_key,
        "PUT",
        bucket,
        "k",
        body=b"the real body",
        payload_hash=hashlib.sha256(b"another body").hexdigest(),
    )
    assert r.status == 400 and r.code == "XAmzContentSHA256Mismatch", (r.status, r.body)
    assert _keys(s3, bucket) == []


def test_request_time_too_skewed(node, admin_key, s3, bucket):
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=20)
    r = signed_request(node, admin_key, "PUT", bucket, "k", body=b"x", now=old)
    assert r.status == 403 and r.code == "RequestTimeTooSkewed", (r.status, r.body)
    assert _keys(s3, bucket) == []


def test_wrong_region_in_scope(node, admin_key, s3, bucket):
    path = object_path(bucket, "k")
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], {}, hashlib.sha256(b"x").hexdigest(), admin_key, region="us-east-1")
    r = send(node, "PUT", path, [], s.headers, b"x")
    assert r.status == 400 and r.code == "AuthorizationHeaderMalformed", (r.status, r.body)
    assert _keys(s3, bucket) == []


def test_anonymous_is_denied(node, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"secret")
    for method, path in (("GET", "/"), ("GET", f"/{bucket}"), ("GET", f"/{bucket}/k")):
        r = send(node, method, path, headers={"host": f"127.0.0.1:{node.s3_port}"})
        assert r.status == 403 and r.code == "AccessDenied", (path, r.status, r.body)
        assert b"secret" not in r.body
    r = send(node, "PUT", f"/{bucket}/anon", headers={"host": f"127.0.0.1:{node.s3_port}"}, body=b"x")
    assert r.status == 403 and r.code == "AccessDenied"
    assert _keys(s3, bucket) == ["k"]


def test_presigned_get_and_put(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"presigned content")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=300)
    r = _url_request("GET", url)
    assert r.status == 200 and r.body == b"presigned content"
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "up ü"}, ExpiresIn=300
    )
    r = _url_request("PUT", url, body=b"uploaded via presigned url")
    assert r.status == 200, r.body
    assert s3.get_object(Bucket=bucket, Key="up ü")["Body"].read() == b"uploaded via presigned url"


def test_presigned_list_objects(s3, bucket):
    s3.put_object(Bucket=bucket, Key="x", Body=b"")
    url = s3.generate_presigned_url("list_objects_v2", Params={"Bucket": bucket}, ExpiresIn=60)
    r = _url_request("GET", url)
    assert r.status == 200 and b"<Key>x</Key>" in r.body


def test_presigned_expired(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"old")
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=1)
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=1)
    time.sleep(2.5)
    r = _url_request("GET", get_url)
    assert r.status == 403 and r.code == "AccessDenied", (r.status, r.body)
    assert r.message == "Request has expired", r.body
    r = _url_request("PUT", put_url, body=b"new")
    assert r.status == 403 and r.code == "AccessDenied", (r.status, r.body)
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"old"


def test_presigned_tampered(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"x")
    s3.put_object(Bucket=bucket, Key="q", Body=b"y")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60)
    r = _url_request("GET", url.replace(f"/{bucket}/p?", f"/{bucket}/q?"))
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", r.body
    r = _url_request("GET", url.replace("X-Amz-Expires=60", "X-Amz-Expires=6000"))
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", r.body


def test_presigned_expiry_over_a_week(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"x")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=604801
    )
    r = _url_request("GET", url)
    assert r.status == 400 and r.code == "AuthorizationQueryParametersError", (r.status, r.body)
