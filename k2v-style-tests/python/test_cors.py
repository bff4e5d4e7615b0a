"""Bucket CORS on one node: Put/Get/DeleteBucketCors through boto3 and
aws-cli with S3's limits and errors, preflight `OPTIONS` answered from the
rules over raw HTTP (no credentials, as a browser sends it), and the CORS
headers of actual GET/PUT/error responses."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from clients import AwsCli
from hangar_testlib import ROOT_DOMAIN, error_code, http_status, send, signed_request

VARY = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"

RULES = [
    {
        "ID": "uploads",
        "AllowedOrigins": ["https://*.example.com"],
        "AllowedMethods": ["PUT", "POST"],
        "AllowedHeaders": ["Content-*", "x-amz-meta-note"],
        "ExposeHeaders": ["ETag", "x-amz-request-id"],
        "MaxAgeSeconds": 600,
    },
    {"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "HEAD"], "AllowedHeaders": ["*"]},
]


def fails(call, status: int, code: str, message: str | None = None):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == status, e.value.response
    assert error_code(e.value) == code, e.value.response
    if message is not None:
        assert e.value.response["Error"]["Message"] == message, e.value.response


def preflight(node, bucket, key="k", origin="https://app.example.com", method="PUT", headers=None, host=None):
    h = {"Host": host or f"127.0.0.1:{node.s3_port}"}
    if origin is not None:
        h["Origin"] = origin
    if method is not None:
        h["Access-Control-Request-Method"] = method
    if headers is not None:
        h["Access-Control-Request-Headers"] = headers
    path = f"/{bucket}/{key}" if host is None else f"/{key}"
    return send(node, "OPTIONS", path, headers=h)


@pytest.fixture
def cors_bucket(s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    return bucket


def test_cors_configuration_round_trip(s3, bucket):
    fails(lambda: s3.get_bucket_cors(Bucket=bucket), 404, "NoSuchCORSConfiguration",
          "The CORS configuration does not exist")
    r = s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == RULES
    r = s3.delete_bucket_cors(Bucket=bucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    fails(lambda: s3.get_bucket_cors(Bucket=bucket), 404, "NoSuchCORSConfiguration")
    fails(lambda: s3.get_bucket_cors(Bucket="no-such-bucket-cors"), 404, "NoSuchBucket")
    fails(lambda: s3.put_bucket_cors(Bucket="no-such-bucket-cors", CORSConfiguration={"CORSRules": RULES}),
          404, "NoSuchBucket")


def test_cors_configuration_limits_and_errors(s3, bucket):
    put = lambda rules: lambda: s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})  # noqa: E731
    one = {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [one] * 100})
    assert len(s3.get_bucket_cors(Bucket=bucket)["CORSRules"]) == 100
    fails(put([one] * 101), 400, "InvalidRequest",
          "The number of CORS rules should not exceed allowed limit of 100 rules.")
    fails(put([]), 400, "MalformedXML")
    fails(put([{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]), 400, "InvalidRequest",
          "Found unsupported HTTP method in CORS config. Unsupported method is PATCH")
    fails(put([{"AllowedOrigins": ["*"], "AllowedMethods": ["get"]}]), 400, "InvalidRequest")
    fails(put([{"AllowedOrigins": ["http://*.*.example.com"], "AllowedMethods": ["GET"]}]), 400, "InvalidRequest",
          'AllowedOrigin "http://*.*.example.com" can not have more than one wildcard.')
    fails(put([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["x-*-*"]}]), 400,
          "InvalidRequest", 'AllowedHeader "x-*-*" can not have more than one wildcard.')
    fails(put([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "ExposeHeaders": ["bad header"]}]), 400,
          "InvalidRequest", 'AllowedHeader "bad header" contains invalid character.')
    fails(put([{"AllowedOrigins": ["o" * 70_000], "AllowedMethods": ["GET"]}]), 400, "MaxMessageLengthExceeded")
    # The valid configuration stayed.
    assert len(s3.get_bucket_cors(Bucket=bucket)["CORSRules"]) == 100


def test_malformed_cors_xml(node, admin_key, bucket):
    for body in (b"<CORSConfiguration></CORSConfiguration>", b"<CORSConfiguration><CORSRule>",
                 b"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>"):
        r = signed_request(node, admin_key, "PUT", bucket, query=[("cors", "")], body=body)
        assert (r.status, r.code) == (400, "MalformedXML"), r.body


def test_preflight_answered_from_the_rules_without_credentials(node, cors_bucket):
    r = preflight(node, cors_bucket, headers="Content-Type, X-Amz-Meta-Note")
    assert r.status == 200, r.body
    assert r.header("access-control-allow-origin") == "https://app.example.com"
    assert r.header("access-control-allow-credentials") == "true"
    assert r.header("access-control-allow-methods") == "PUT, POST"
    assert r.header("access-control-allow-headers") == "content-type, x-amz-meta-note"
    assert r.header("access-control-expose-headers") == "ETag, x-amz-request-id"
    assert r.header("access-control-max-age") == "600"
    assert r.header("vary") == VARY
    assert r.body == b""
    # The second rule: any origin may GET, with any header.
    r = preflight(node, cors_bucket, origin="http://anywhere.test", method="GET", headers="X-Custom")
    assert r.status == 200
    assert r.header("access-control-allow-origin") == "*"
    assert r.header("access-control-allow-credentials") is None
    assert r.header("access-control-allow-methods") == "GET, HEAD"
    assert r.header("access-control-allow-headers") == "x-custom"
    assert r.header("access-control-max-age") is None
    # Of the bucket itself, and virtual-host style.
    assert preflight(node, cors_bucket, key="", method="GET", origin="http://x").status == 200
    r = preflight(node, cors_bucket, method="GET", origin="http://x", host=f"{cors_bucket}{ROOT_DOMAIN}:{node.s3_port}")
    assert r.status == 200 and r.header("access-control-allow-origin") == "*"


def test_preflight_refusals(node, s3, cors_bucket, bucket):
    cases = [
        # No rule allows PUT from this origin, DELETE at all, or this header.
        (dict(origin="https://example.com"), 403, "AccessForbidden"),
        (dict(origin="http://app.example.com"), 403, "AccessForbidden"),
        (dict(method="DELETE"), 403, "AccessForbidden"),
        (dict(headers="content-type, x-amz-date"), 403, "AccessForbidden"),
        (dict(origin=None), 400, "BadRequest"),
        (dict(method=None), 400, "BadRequest"),
        (dict(method="PATCH"), 400, "BadRequest"),
    ]
    for kw, status, code in cases:
        r = preflight(node, cors_bucket, **kw)
        assert (r.status, r.code) == (status, code), (kw, r.body)
        assert r.header("access-control-allow-origin") is None
    r = preflight(node, cors_bucket, method="DELETE")
    assert "This CORS request is not allowed" in r.message
    assert b"<Method>DELETE</Method><ResourceType>OBJECT</ResourceType>" in r.body
    assert preflight(node, cors_bucket, origin=None).message == "Insufficient information. Origin request header needed."
    assert preflight(node, cors_bucket, method=None).message == "Invalid Access-Control-Request-Method: null"
    # A bucket without CORS, and a bucket that does not exist.
    r = preflight(node, bucket + "-other")
    assert (r.status, r.code) == (404, "NoSuchBucket")
    s3.create_bucket(Bucket=bucket + "-plain")
    r = preflight(node, bucket + "-plain")
    assert (r.status, r.code) == (403, "AccessForbidden")
    assert r.message == "CORSResponse: CORS is not enabled for this bucket."


def test_actual_responses_carry_the_cors_headers(node, admin_key, cors_bucket):
    origin = {"Origin": "http://page.test"}
    r = signed_request(node, admin_key, "GET", cors_bucket, "k", headers=origin)
    assert r.status == 200 and r.body == b"hello"
    assert r.header("access-control-allow-origin") == "*"
    assert r.header("access-control-allow-methods") == "GET, HEAD"
    assert r.header("vary") == VARY
    r = signed_request(node, admin_key, "PUT", cors_bucket, "up", headers={"Origin": "https://a.example.com"},
                       body=b"data")
    assert r.status == 200
    assert r.header("access-control-allow-origin") == "https://a.example.com"
    assert r.header("access-control-allow-credentials") == "true"
    assert r.header("access-control-expose-headers") == "ETag, x-amz-request-id"
    assert r.header("access-control-max-age") == "600"
    # Error responses too.
    r = signed_request(node, admin_key, "GET", cors_bucket, "missing", headers=origin)
    assert (r.status, r.code) == (404, "NoSuchKey")
    assert r.header("access-control-allow-origin") == "*"
    r = send(node, "GET", f"/{cors_bucket}/k", headers={"Host": f"127.0.0.1:{node.s3_port}", **origin})
    assert r.status == 403 and r.header("access-control-allow-origin") == "*"
    # No Origin, an origin or a method no rule allows: no CORS headers.
    r = signed_request(node, admin_key, "GET", cors_bucket, "k")
    assert r.status == 200 and r.header("access-control-allow-origin") is None and r.header("vary") is None
    r = signed_request(node, admin_key, "PUT", cors_bucket, "up2", headers={"Origin": "http://page.test"}, body=b"x")
    assert r.status == 200 and r.header("access-control-allow-origin") is None
    r = signed_request(node, admin_key, "DELETE", cors_bucket, "up2", headers=origin)
    assert r.status == 204 and r.header("access-control-allow-origin") is None


def test_deleted_cors_stops_answering(node, s3, cors_bucket):
    assert preflight(node, cors_bucket).status == 200
    s3.delete_bucket_cors(Bucket=cors_bucket)
    r = preflight(node, cors_bucket)
    assert (r.status, r.code) == (403, "AccessForbidden")


def test_cors_permissions(node, s3, cors_bucket, request):
    reader = node.create_key(f"cors-reader-{request.node.name}"[:40])
    node.cli("bucket", "allow", cors_bucket, "--read", "--write", "--key", reader.id)
    from hangar_testlib import s3_client

    c = s3_client(node, reader)
    fails(lambda: c.get_bucket_cors(Bucket=cors_bucket), 403, "AccessDenied")
    fails(lambda: c.delete_bucket_cors(Bucket=cors_bucket), 403, "AccessDenied")
    fails(lambda: c.put_bucket_cors(Bucket=cors_bucket, CORSConfiguration={"CORSRules": RULES[:1]}), 403,
          "AccessDenied")
    assert s3.get_bucket_cors(Bucket=cors_bucket)["CORSRules"] == RULES


def test_awscli_cors(node, admin_key, bucket, tmp_path):
    aws = AwsCli(node, admin_key, tmp_path)
    cfg = {"CORSRules": [{"AllowedOrigins": ["https://ui.test"], "AllowedMethods": ["GET"], "MaxAgeSeconds": 5}]}
    aws.run("s3api", "put-bucket-cors", "--bucket", bucket, "--cors-configuration", json.dumps(cfg))
    got = json.loads(aws.run("s3api", "get-bucket-cors", "--bucket", bucket).stdout)
    assert got == cfg
    r = preflight(node, bucket, origin="https://ui.test", method="GET")
    assert r.status == 200 and r.header("access-control-max-age") == "5"
    aws.run("s3api", "delete-bucket-cors", "--bucket", bucket)
    res = aws.run("s3api", "get-bucket-cors", "--bucket", bucket, check=False)
    assert res.returncode != 0 and "NoSuchCORSConfiguration" in res.stderr
