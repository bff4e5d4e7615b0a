"""Browser-form uploads (S3 PostObject) for the tests: a SigV4-signed POST
policy and a multipart/form-data body built by hand as a browser sends
them (`post`), and the usual fields and conditions of one (`basic`). Used
by test_post_object.py and test_sse_c.py; it holds no tests itself."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json

import requests

from hangar_testlib import REGION, signing_key


def iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def post(node, key, bucket: str, fields: dict[str, str], conditions: list, body: bytes,
         expires_in: float = 600, secret: str | None = None, filename: str = "f.txt",
         extra_fields: dict[str, str] | None = None) -> requests.Response:
    """POSTs a form to `bucket`: `fields` (each also put in the policy as an
    exact match unless `conditions` covers it), the SigV4 fields, then
    `extra_fields` (not in the policy), then the file."""
    now = dt.datetime.now(dt.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    credential = f"{key.id}/{now.strftime('%Y%m%d')}/{REGION}/s3/aws4_request"
    sig_fields = {
        "x-amz-algorithm": "AWS4-HMAC-SHA256",
        "x-amz-credential": credential,
        "x-amz-date": amz_date,
    }
    conds = list(conditions) + [{k: v} for k, v in sig_fields.items()]
    policy = {"expiration": iso(now + dt.timedelta(seconds=expires_in)), "conditions": conds}
    policy_b64 = base64.b64encode(json.dumps(policy).encode()).decode()
    skey = signing_key(secret or key.secret, now.strftime("%Y%m%d"))
    signature = hmac.new(skey, policy_b64.encode(), hashlib.sha256).hexdigest()
    form = dict(fields)
    form.update(sig_fields)
    form["policy"] = policy_b64
    form["x-amz-signature"] = signature
    form.update(extra_fields or {})
    files = {"file": (filename, body, "application/octet-stream")}
    return requests.post(f"{node.endpoint}/{bucket}", data=form, files=files,
                         allow_redirects=False, timeout=60)


def basic(bucket: str, key: str, **more) -> tuple[dict, list]:
    """The fields of a form storing `key` in `bucket` (and `more`), and a
    policy whose conditions match them exactly."""
    fields = {"key": key, **more}
    conditions = [{"bucket": bucket}] + [["eq", f"${k}", v] for k, v in fields.items()]
    return fields, conditions
