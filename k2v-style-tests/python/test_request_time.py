"""Where a client's clock is trusted: Signature Version 2 (refused by
default; with `[s3_api] allow_signature_v2`, held to V4's 15 minutes and
7 days), SigV4's header date in both directions, the range of a presigned
URL's X-Amz-Expires, an aws-chunked upload's seed date, and a POST form's
dates. doc/security.md ("Time: where a client's clock is trusted") lists
every place with its test; the ones tested elsewhere are cited there."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import time
from email.utils import formatdate

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from hangar_testlib import (
    REGION,
    KiB,
    Node,
    bucket_name,
    error_code,
    http_status,
    object_path,
    random_bytes,
    s3_client,
    send,
    sign_v4,
    signed_chunked_body,
    signed_request,
    signing_key,
    xml_error,
)

error_of = xml_error

# The date of the replayed requests.
STALE = "Tue, 01 Jan 2019 00:00:00 GMT"
A_WEEK = 7 * 24 * 3600


def _keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def http_date(offset_secs: float = 0) -> str:
    return formatdate(time.time() + offset_secs, usegmt=True)


def sign_v2(key, method: str, path: str, headers: dict[str, str], expires: int | None = None) -> str:
    """AWS Signature Version 2 over a path-style request: base64 of the
    HMAC-SHA1 of verb, Content-MD5, Content-Type, Date (empty with
    x-amz-date; `Expires` for a presigned URL), the x-amz-* headers, the
    path."""
    h = {k.lower(): v.strip() for k, v in headers.items()}
    date = str(expires) if expires is not None else ("" if "x-amz-date" in h else h.get("date", ""))
    amz = "".join(f"{k}:{h[k]}\n" for k in sorted(h) if k.startswith("x-amz-"))
    sts = f"{method}\n{h.get('content-md5', '')}\n{h.get('content-type', '')}\n{date}\n{amz}{path}"
    return base64.b64encode(hmac.new(key.secret.encode(), sts.encode(), hashlib.sha1).digest()).decode()


def v2_request(node, key, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None):
    """A request signed with V2 in the Authorization header; `headers`
    (with their `date` or `x-amz-date`, none if absent) are sent as given."""
    h = dict(headers or {})
    h["authorization"] = f"AWS {key.id}:{sign_v2(key, method, path, h)}"
    h["host"] = f"127.0.0.1:{node.s3_port}"
    return send(node, method, path, [], h, body)


def v2_presigned(node, key, method: str, path: str, expires: int, body: bytes = b""):
    sig = sign_v2(key, method, path, {}, expires=expires)
    query = [("AWSAccessKeyId", key.id), ("Expires", str(expires)), ("Signature", sig)]
    return send(node, method, path, query, {"host": f"127.0.0.1:{node.s3_port}"}, body)


def post_form(node, key, bucket: str, obj: str, body: bytes, version: int, signed_at: dt.datetime,
              expires_in: float) -> requests.Response:
    """A browser form upload signed with V2 (`AWSAccessKeyId`, `signature`:
    base64 HMAC-SHA1 of the policy) or V4 (the `x-amz-*` fields, signed at
    `signed_at`), its policy expiring `expires_in` seconds from now."""
    expiration = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=expires_in)
    conds: list = [{"bucket": bucket}, {"key": obj}]
    if version == 4:
        day = signed_at.strftime("%Y%m%d")
        sig_fields = {
            "x-amz-algorithm": "AWS4-HMAC-SHA256",
            "x-amz-credential": f"{key.id}/{day}/{REGION}/s3/aws4_request",
            "x-amz-date": signed_at.strftime("%Y%m%dT%H%M%SZ"),
        }
        conds += [{k: v} for k, v in sig_fields.items()]
    policy = {"expiration": expiration.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "conditions": conds}
    policy_b64 = base64.b64encode(json.dumps(policy).encode()).decode()
    form = {"key": obj, "policy": policy_b64}
    if version == 4:
        skey = signing_key(key.secret, signed_at.strftime("%Y%m%d"))
        form.update(sig_fields)
        form["x-amz-signature"] = hmac.new(skey, policy_b64.encode(), hashlib.sha256).hexdigest()
    else:
        form["AWSAccessKeyId"] = key.id
        form["signature"] = base64.b64encode(
            hmac.new(key.secret.encode(), policy_b64.encode(), hashlib.sha1).digest()
        ).decode()
    files = {"file": ("f.txt", body, "application/octet-stream")}
    return requests.post(f"{node.endpoint}/{bucket}", data=form, files=files, allow_redirects=False, timeout=60)


def boto_v2(node, key):
    """boto3 signing with V2 (botocore's HmacV1: `signature_version="s3"`)."""
    return boto3.client(
        "s3",
        endpoint_url=node.endpoint,
        region_name=REGION,
        aws_access_key_id=key.id,
        aws_secret_access_key=key.secret,
        config=Config(signature_version="s3", s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def assert_v2_refused(r):
    assert (r.status, r.code) == (400, "InvalidRequest"), (r.status, r.body)
    assert "AWS4-HMAC-SHA256" in r.message and "allow_signature_v2" in r.message, r.message


# ---------------------------------------------------------------- Signature V2, default: refused


def test_signature_v2_is_refused_by_default(node, admin_key, s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"old")
    path = object_path(bucket, "k")
    # The replay: a GET and a PUT dated 2019, and fresh ones too.
    for date in (STALE, http_date()):
        assert_v2_refused(v2_request(node, admin_key, "GET", path, headers={"date": date}))
        assert_v2_refused(v2_request(node, admin_key, "PUT", path, b"replayed", headers={"date": date}))
    assert_v2_refused(v2_presigned(node, admin_key, "GET", path, int(time.time()) + 300))
    with pytest.raises(ClientError) as e:
        boto_v2(node, admin_key).get_object(Bucket=bucket, Key="k")
    assert (http_status(e.value), error_code(e.value)) == (400, "InvalidRequest"), e.value.response
    r = post_form(node, admin_key, bucket, "form", b"by a V2 form", 2, dt.datetime.now(dt.timezone.utc), 600)
    assert r.status_code == 400 and b"allow_signature_v2" in r.content, (r.status_code, r.content)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"old"
    assert _keys(s3, bucket) == ["k"]


# ---------------------------------------------------------------- Signature V2, allowed: V4's bounds


@pytest.fixture(scope="module")
def v2_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("v2node"))
    n.config.write_text(n.config.read_text().replace("[s3_api]\n", "[s3_api]\nallow_signature_v2 = true\n"))
    n.start()
    yield n
    n.stop()


@pytest.fixture(scope="module")
def v2_key(v2_node):
    return v2_node.create_key("v2", create_bucket=True)


@pytest.fixture
def v2_bucket(v2_node, v2_key, request):
    s3 = s3_client(v2_node, v2_key)
    name = bucket_name(request.node.name)
    s3.create_bucket(Bucket=name)
    return name


def test_allowed_v2_header_date_is_held_to_fifteen_minutes(v2_node, v2_key, v2_bucket):
    s3 = s3_client(v2_node, v2_key)
    path = object_path(v2_bucket, "k")
    r = v2_request(v2_node, v2_key, "PUT", path, b"fresh", headers={"date": http_date()})
    assert r.status == 200, r.body
    r = v2_request(v2_node, v2_key, "GET", path, headers={"date": http_date(-600)})
    assert (r.status, r.body) == (200, b"fresh")
    # The replay, 20 minutes either way, and a stale signed
    # x-amz-date beside a fresh (unsigned) Date: 403 RequestTimeTooSkewed.
    for h in ({"date": STALE}, {"date": http_date(-1200)}, {"date": http_date(1200)},
              {"date": http_date(), "x-amz-date": http_date(-1200)}):
        for method, body in (("GET", b""), ("PUT", b"replayed")):
            r = v2_request(v2_node, v2_key, method, path, body, headers=h)
            assert (r.status, r.code) == (403, "RequestTimeTooSkewed"), (h, method, r.status, r.body)
    # No date at all, or one that is not a date: 403 AccessDenied.
    for h in ({}, {"date": "yesterday"}):
        r = v2_request(v2_node, v2_key, "GET", path, headers=h)
        assert (r.status, r.code) == (403, "AccessDenied"), (h, r.body)
        assert "Date" in r.message
    assert s3.get_object(Bucket=v2_bucket, Key="k")["Body"].read() == b"fresh"
    # A real V2 client works.
    boto = boto_v2(v2_node, v2_key)
    boto.put_object(Bucket=v2_bucket, Key="boto", Body=b"by boto3 with V2")
    assert boto.get_object(Bucket=v2_bucket, Key="boto")["Body"].read() == b"by boto3 with V2"
    assert _keys(s3, v2_bucket) == ["boto", "k"]


def test_allowed_v2_presigned_expires_is_bounded(v2_node, v2_key, v2_bucket):
    s3 = s3_client(v2_node, v2_key)
    s3.put_object(Bucket=v2_bucket, Key="k", Body=b"x")
    path = object_path(v2_bucket, "k")
    now = int(time.time())
    url = boto_v2(v2_node, v2_key).generate_presigned_url(
        "get_object", Params={"Bucket": v2_bucket, "Key": "k"}, ExpiresIn=300
    )
    assert "Signature=" in url and "X-Amz-" not in url, url
    assert requests.get(url, timeout=30).content == b"x"
    r = v2_presigned(v2_node, v2_key, "GET", path, now - 60)
    assert (r.status, r.code, r.message) == (403, "AccessDenied", "Request has expired"), r.body
    r = v2_presigned(v2_node, v2_key, "PUT", path, now - 60, b"late")
    assert (r.status, r.code) == (403, "AccessDenied"), r.body
    # More than a week ahead: refused as V4 refuses X-Amz-Expires over a week.
    r = v2_presigned(v2_node, v2_key, "GET", path, now + A_WEEK + 3600)
    assert (r.status, r.code) == (400, "AuthorizationQueryParametersError"), r.body
    r = v2_presigned(v2_node, v2_key, "GET", path, now + A_WEEK - 3600)
    assert r.status == 200, r.body
    assert s3.get_object(Bucket=v2_bucket, Key="k")["Body"].read() == b"x"


def test_allowed_v2_post_form_is_held_to_its_policy(v2_node, v2_key, v2_bucket):
    s3 = s3_client(v2_node, v2_key)
    now = dt.datetime.now(dt.timezone.utc)
    r = post_form(v2_node, v2_key, v2_bucket, "form", b"by a V2 form", 2, now, 600)
    assert r.status_code == 204, (r.status_code, r.content)
    r = post_form(v2_node, v2_key, v2_bucket, "late", b"late", 2, now, -60)
    assert r.status_code == 403 and b"Policy expired" in r.content, (r.status_code, r.content)
    assert _keys(s3, v2_bucket) == ["form"]


def test_a_bucket_policy_can_deny_signature_v2(v2_node, v2_key, v2_bucket):
    # `s3:signatureversion` is "AWS" for V2, as on S3: the usual way to
    # turn V2 off for one bucket.
    s3 = s3_client(v2_node, v2_key)
    s3.put_object(Bucket=v2_bucket, Key="k", Body=b"x")
    path = object_path(v2_bucket, "k")
    assert v2_request(v2_node, v2_key, "GET", path, headers={"date": http_date()}).status == 200
    deny = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{v2_bucket}/*",
            "Condition": {"StringEquals": {"s3:signatureversion": "AWS"}},
        }],
    }
    s3.put_bucket_policy(Bucket=v2_bucket, Policy=json.dumps(deny))
    r = v2_request(v2_node, v2_key, "GET", path, headers={"date": http_date()})
    assert (r.status, r.code) == (403, "AccessDenied"), r.body
    r = v2_presigned(v2_node, v2_key, "GET", path, int(time.time()) + 60)
    assert (r.status, r.code) == (403, "AccessDenied"), r.body
    assert s3.get_object(Bucket=v2_bucket, Key="k")["Body"].read() == b"x"


# ---------------------------------------------------------------- SigV4


def test_v4_header_date_ahead_is_too_skewed(node, admin_key, s3, bucket):
    # 20 minutes behind is test_auth.py::test_request_time_too_skewed.
    ahead = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=20)
    r = signed_request(node, admin_key, "PUT", bucket, "k", body=b"x", now=ahead)
    assert (r.status, r.code) == (403, "RequestTimeTooSkewed"), (r.status, r.body)
    assert _keys(s3, bucket) == []


def test_v4_presigned_expires_out_of_range_gets_the_errors_aws_gives(s3, bucket):
    s3.put_object(Bucket=bucket, Key="p", Body=b"x")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60)
    assert "X-Amz-Expires=60&" in url
    for given, message in (
        ("604801", "X-Amz-Expires must be less than a week (in seconds); that is, the given "
                   "X-Amz-Expires must be less than 604800 seconds"),
        ("-1", "X-Amz-Expires must be non-negative"),
        ("soon", "X-Amz-Expires should be a number"),
    ):
        r = requests.get(url.replace("X-Amz-Expires=60&", f"X-Amz-Expires={given}&"), timeout=30)
        code = (r.status_code, error_of(r.content))
        assert code == (400, ("AuthorizationQueryParametersError", message)), (given, r.content)
    # A lifetime of 0 has expired (that is s3s's check, as AWS answers it).
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=0)
    assert "X-Amz-Expires=0&" in url
    time.sleep(1.1)
    r = requests.get(url, timeout=30)
    assert (r.status_code, error_of(r.content)) == (403, ("AccessDenied", "Request has expired")), r.content


def test_v4_presigned_dated_ahead_is_too_skewed(s3, bucket, monkeypatch):
    # A URL signed by a client whose clock runs ahead: up to 15 minutes is
    # clock skew, further is refused (s3s), so a URL cannot be made to
    # start its lifetime in the future.
    import botocore.auth

    s3.put_object(Bucket=bucket, Key="p", Body=b"x")
    real = botocore.auth.get_current_datetime
    for minutes, expected in ((10, 200), (20, 403)):
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: real() + dt.timedelta(minutes=minutes))
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p"}, ExpiresIn=60)
        r = requests.get(url, timeout=30)
        assert r.status_code == expected, (minutes, r.content)
    assert error_of(r.content)[0] == "RequestTimeTooSkewed", r.content


def test_aws_chunked_seed_date_is_held_to_fifteen_minutes(node, admin_key, s3, bucket):
    # The chunk signatures chain from the header's, under its date: the
    # date is checked once, when the upload starts.
    data = random_bytes(200 * KiB, 3)
    path = object_path(bucket, "chunked")
    for minutes in (-20, 20):
        at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=minutes)
        probe = sign_v4("PUT", "h", path, [], {}, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", admin_key, now=at)
        encoded_len = len(signed_chunked_body(data, 64 * KiB, probe))
        headers = {
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(data)),
            "content-length": str(encoded_len),
        }
        s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], headers,
                    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", admin_key, now=at)
        r = send(node, "PUT", path, [], s.headers, signed_chunked_body(data, 64 * KiB, s))
        assert (r.status, r.code) == (403, "RequestTimeTooSkewed"), (minutes, r.status, r.body)
    assert _keys(s3, bucket) == []


def test_v4_post_form_dates(node, admin_key, s3, bucket):
    now = dt.datetime.now(dt.timezone.utc)
    r = post_form(node, admin_key, bucket, "fresh", b"a", 4, now, 600)
    assert r.status_code == 204, r.content
    # The policy's expiration is the bound AWS applies
    # (test_post_object.py checks an expired one).
    r = post_form(node, admin_key, bucket, "expired", b"b", 4, now, -60)
    assert r.status_code == 403 and b"Policy expired" in r.content, r.content
    # s3s also holds the form's x-amz-date to 15 minutes, as a header's:
    # a form signed 20 minutes ago is refused though its policy runs an
    # hour (doc/s3-compatibility.md, "POST forms").
    r = post_form(node, admin_key, bucket, "signed-early", b"c", 4, now - dt.timedelta(minutes=20), 3600)
    assert (r.status_code, error_of(r.content)[0]) == (403, "RequestTimeTooSkewed"), r.content
    assert _keys(s3, bucket) == ["fresh"]
