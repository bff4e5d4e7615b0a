"""PostObject: uploads from an HTML form (multipart/form-data) with a POST
policy signed with SigV4, built by hand as a browser sends them and through
boto3's generate_presigned_post; every refusal by the policy with S3's code
and words; success_action_status and success_action_redirect; on one node
and on three (POST through one node, GET through another)."""

from __future__ import annotations

import base64
import hashlib
import urllib.parse
import xml.etree.ElementTree as ET

import pytest
import requests

from hangar_testlib import bucket_name, s3_client, strip_ns
from cluster_testlib import key_of, laid_out_cluster
from post_form_testlib import basic, post


def error(r: requests.Response) -> tuple[str, str]:
    root = ET.fromstring(r.content)
    got = {strip_ns(c.tag): c.text for c in root}
    return got.get("Code"), got.get("Message")


def test_browser_post_stores_the_file_with_its_type_and_metadata(node, admin_key, s3, bucket):
    fields = {"key": "up/photo.jpg", "Content-Type": "image/jpeg", "x-amz-meta-owner": "alice"}
    conditions = [{"bucket": bucket}, ["starts-with", "$key", "up/"],
                  ["starts-with", "$Content-Type", "image/"], ["eq", "$x-amz-meta-owner", "alice"],
                  ["content-length-range", 1, 1 << 20]]
    data = b"\xff\xd8" + b"j" * 3000
    r = post(node, admin_key, bucket, fields, conditions, data)
    assert r.status_code == 204, r.content
    assert r.headers["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    got = s3.get_object(Bucket=bucket, Key="up/photo.jpg")
    assert got["Body"].read() == data
    assert got["ContentType"] == "image/jpeg"
    assert got["Metadata"] == {"owner": "alice"}


def test_success_action_status_200_201_and_redirect(node, admin_key, s3, bucket):
    fields, conds = basic(bucket, "s200", success_action_status="200")
    r = post(node, admin_key, bucket, fields, conds, b"two hundred")
    assert r.status_code == 200 and r.content == b""
    fields, conds = basic(bucket, "s201", success_action_status="201")
    r = post(node, admin_key, bucket, fields, conds, b"created")
    assert r.status_code == 201, r.content
    root = ET.fromstring(r.content)
    assert strip_ns(root.tag) == "PostResponse"
    got = {strip_ns(c.tag): c.text for c in root}
    assert got["Bucket"] == bucket and got["Key"] == "s201"
    assert got["ETag"].strip('"') == hashlib.md5(b"created").hexdigest()
    fields, conds = basic(bucket, "redir", success_action_redirect="https://app.test/done?x=1")
    r = post(node, admin_key, bucket, fields, conds, b"redirected")
    assert r.status_code == 303, r.content
    loc = urllib.parse.urlparse(r.headers["Location"])
    assert (loc.scheme, loc.netloc, loc.path) == ("https", "app.test", "/done")
    q = dict(urllib.parse.parse_qsl(loc.query))
    assert q["x"] == "1" and q["bucket"] == bucket and q["key"] == "redir"
    assert q["etag"].strip('"') == hashlib.md5(b"redirected").hexdigest()
    for k, body in (("s200", b"two hundred"), ("s201", b"created"), ("redir", b"redirected")):
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == body


def refused(r: requests.Response, status: int, code: str, message: str | None = None,
            starts: str | None = None):
    assert r.status_code == status, r.content
    got_code, got_msg = error(r)
    assert got_code == code, r.content
    if message is not None:
        assert got_msg == message, r.content
    if starts is not None:
        assert got_msg.startswith(starts), r.content


def test_every_broken_condition_is_refused_and_nothing_is_stored(node, admin_key, s3, bucket, new_bucket):
    other = new_bucket("post-other")
    ok_fields, ok_conds = basic(bucket, "x/ok")
    # Expired policy.
    r = post(node, admin_key, bucket, ok_fields, ok_conds, b"late", expires_in=-60)
    refused(r, 403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    # Wrong signature (another secret).
    r = post(node, admin_key, bucket, ok_fields, ok_conds, b"forged", secret="not-the-secret")
    refused(r, 403, "SignatureDoesNotMatch")
    # Key outside starts-with.
    conds = [{"bucket": bucket}, ["starts-with", "$key", "x/"]]
    r = post(node, admin_key, bucket, {"key": "y/outside"}, conds, b"out")
    refused(r, 403, "AccessDenied", starts="Invalid according to Policy: Policy Condition failed")
    # starts-with on another field.
    conds = [{"bucket": bucket}, ["eq", "$key", "x/t"], ["starts-with", "$Content-Type", "image/"]]
    r = post(node, admin_key, bucket, {"key": "x/t", "Content-Type": "text/html"}, conds, b"t")
    refused(r, 403, "AccessDenied", starts="Invalid according to Policy: Policy Condition failed")
    # Too large and too small.
    conds = ok_conds + [["content-length-range", 10, 20]]
    r = post(node, admin_key, bucket, ok_fields, conds, b"z" * 21)
    refused(r, 400, "EntityTooLarge")
    r = post(node, admin_key, bucket, ok_fields, conds, b"z" * 9)
    refused(r, 400, "EntityTooSmall")
    # A field the policy does not cover.
    r = post(node, admin_key, bucket, ok_fields, ok_conds, b"extra",
             extra_fields={"x-amz-meta-sneaky": "1"})
    refused(r, 403, "AccessDenied", "Invalid according to Policy: Extra input fields: x-amz-meta-sneaky")
    # A policy for another bucket.
    conds = [{"bucket": other}, ["eq", "$key", "x/ok"]]
    r = post(node, admin_key, bucket, {"key": "x/ok"}, conds, b"elsewhere")
    refused(r, 403, "AccessDenied", starts="Invalid according to Policy: Policy Condition failed")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    # ${filename} in the key is the file's name (API reference, POST
    # Object, `key`); the policy sees the field as sent.
    fields, conds = basic(bucket, "x/${filename}")
    r = post(node, admin_key, bucket, fields, conds, b"named", filename="named file.txt")
    assert r.status_code == 204, r.content
    assert r.headers["Location"].endswith("/x/named%20file.txt"), r.headers
    assert s3.get_object(Bucket=bucket, Key="x/named file.txt")["Body"].read() == b"named"
    s3.delete_object(Bucket=bucket, Key="x/named file.txt")
    # The same form, within its policy, is accepted.
    r = post(node, admin_key, bucket, ok_fields, ok_conds + [["content-length-range", 10, 20]], b"z" * 15)
    assert r.status_code == 204, r.content
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["x/ok"]


def test_the_key_needs_write_permission(node, s3, bucket):
    out = node.cli_json("key", "create", "post-reader")
    reader = key_of(out, "post-reader")
    node.cli("bucket", "allow", bucket, "--key", reader.id, "--read")
    fields, conds = basic(bucket, "ro")
    r = post(node, reader, bucket, fields, conds, b"no")
    refused(r, 403, "AccessDenied")
    node.cli("bucket", "allow", bucket, "--key", reader.id, "--write")
    r = post(node, reader, bucket, fields, conds, b"yes")
    assert r.status_code == 204, r.content
    assert s3.get_object(Bucket=bucket, Key="ro")["Body"].read() == b"yes"


def test_boto3_generate_presigned_post(node, s3, bucket):
    p = s3.generate_presigned_post(bucket, "boto/one.txt", Fields={"Content-Type": "text/plain"},
                                   Conditions=[["starts-with", "$key", "boto/"], {"Content-Type": "text/plain"},
                                               ["content-length-range", 0, 100]], ExpiresIn=300)
    r = requests.post(p["url"], data=p["fields"], files={"file": ("one.txt", b"hello form")},
                      allow_redirects=False, timeout=60)
    assert r.status_code == 204, r.content
    got = s3.get_object(Bucket=bucket, Key="boto/one.txt")
    assert got["Body"].read() == b"hello form" and got["ContentType"] == "text/plain"
    r = requests.post(p["url"], data=p["fields"], files={"file": ("big.txt", b"b" * 101)},
                      allow_redirects=False, timeout=60)
    refused(r, 400, "EntityTooLarge")
    # The usual form of a browser upload: the key is the file's name.
    p = s3.generate_presigned_post(bucket, "boto/${filename}", Conditions=[["starts-with", "$key", "boto/"]],
                                   ExpiresIn=300)
    r = requests.post(p["url"], data=p["fields"], files={"file": ("two.txt", b"second")},
                      allow_redirects=False, timeout=60)
    assert r.status_code == 204, r.content
    assert s3.get_object(Bucket=bucket, Key="boto/two.txt")["Body"].read() == b"second"


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "po")
    key = key_of(nodes[0].cli_json("key", "create", "poster"), "poster")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_cluster_post_through_one_node_read_through_another(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-post")
    clients[0].create_bucket(Bucket=b)
    data = bytes(range(256)) * 40
    fields, conds = basic(b, "form/obj", **{"Content-Type": "application/x-test", "x-amz-meta-via": "two"})
    r = post(nodes[1], key, b, fields, conds, data)
    assert r.status_code == 204, r.content
    for c in (clients[2], clients[0]):
        got = c.get_object(Bucket=b, Key="form/obj")
        assert got["Body"].read() == data
        assert got["ContentType"] == "application/x-test" and got["Metadata"] == {"via": "two"}
    r = post(nodes[2], key, b, fields, conds, data, expires_in=-5)
    refused(r, 403, "AccessDenied", "Invalid according to Policy: Policy expired.")


def test_form_checksum_and_content_md5_are_verified(node, admin_key, s3, bucket):
    import hashlib as h
    data = b"checked body"
    good_md5 = base64.b64encode(h.md5(data).digest()).decode()
    bad_md5 = base64.b64encode(h.md5(b"other").digest()).decode()
    sha = base64.b64encode(h.sha256(data).digest()).decode()
    fields, conds = basic(bucket, "sum", **{"Content-MD5": good_md5, "x-amz-checksum-sha256": sha})
    r = post(node, admin_key, bucket, fields, conds, data)
    assert r.status_code == 204, r.content
    got = s3.head_object(Bucket=bucket, Key="sum", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == sha
    fields, conds = basic(bucket, "badsum", **{"Content-MD5": bad_md5})
    r = post(node, admin_key, bucket, fields, conds, data)
    refused(r, 400, "BadDigest")
    # The legacy `redirect` field works as success_action_redirect.
    fields, conds = basic(bucket, "legacy", redirect="http://app.test/ok")
    r = post(node, admin_key, bucket, fields, conds, data)
    assert r.status_code == 303 and r.headers["Location"].startswith("http://app.test/ok?bucket=")



def test_an_x_amz_tagging_field_tags_the_object(node, admin_key, s3, bucket):
    # The header's form, as a form field (S3's own `tagging` field, an XML
    # document, is the next test's).
    fields, conditions = basic(bucket, "tagged.txt", **{"x-amz-tagging": "team=blue%20sky&a%2Bb=x"})
    r = post(node, admin_key, bucket, fields, conditions, b"tagged")
    assert r.status_code == 204, r.content
    tags = s3.get_object_tagging(Bucket=bucket, Key="tagged.txt")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"team": "blue sky", "a+b": "x"}
    fields, conditions = basic(bucket, "bad-tags.txt", **{"x-amz-tagging": "k=1&k=2"})
    r = post(node, admin_key, bucket, fields, conditions, b"never stored")
    assert r.status_code == 400, r.content
    assert s3.list_objects_v2(Bucket=bucket, Prefix="bad-tags").get("KeyCount") == 0


def test_s3s_tagging_and_acl_fields_tag_and_share_the_object(node, admin_key, s3, bucket):
    # AWS S3 API reference, POST Object: `tagging` is "the specified set of
    # tags ... in XML" (PutObjectTagging's document), `acl` a canned ACL.
    tagging = ("<Tagging><TagSet><Tag><Key>team</Key><Value>blue sky</Value></Tag>"
               "<Tag><Key>a+b</Key><Value>x</Value></Tag></TagSet></Tagging>")
    fields, conditions = basic(bucket, "form-tagged.txt", tagging=tagging, acl="public-read")
    r = post(node, admin_key, bucket, fields, conditions, b"shared")
    assert r.status_code == 204, r.content
    tags = s3.get_object_tagging(Bucket=bucket, Key="form-tagged.txt")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"team": "blue sky", "a+b": "x"}
    grants = s3.get_object_acl(Bucket=bucket, Key="form-tagged.txt")["Grants"]
    assert {"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
            "Permission": "READ"} in grants
    anon = requests.get(f"{node.endpoint}/{bucket}/form-tagged.txt", timeout=30)
    assert anon.status_code == 200 and anon.content == b"shared"
    # A document that is not XML, and a tag S3 refuses, store nothing.
    for name, doc, code in [("bad-xml.txt", "<Tagging><TagSet>", "MalformedXML"),
                            ("bad-tag.txt", "<Tagging><TagSet><Tag><Key>aws:x</Key><Value>1</Value>"
                                            "</Tag></TagSet></Tagging>", "InvalidTag")]:
        fields, conditions = basic(bucket, name, tagging=doc)
        r = post(node, admin_key, bucket, fields, conditions, b"never stored")
        assert r.status_code == 400, r.content
        assert error(r)[0] == code
        assert s3.list_objects_v2(Bucket=bucket, Prefix=name).get("KeyCount") == 0
    # The field and the header's form together are refused.
    fields, conditions = basic(bucket, "twice.txt", acl="private", **{"x-amz-acl": "private"})
    r = post(node, admin_key, bucket, fields, conditions, b"never stored")
    assert r.status_code == 400 and error(r)[0] == "InvalidArgument", r.content
