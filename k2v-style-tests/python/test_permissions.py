"""Per-bucket read/write/owner rights and the create-bucket right, set with
the `hangar bucket allow|deny` and `hangar key allow` CLI against the running node."""

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import bucket_name, error_code, http_status, s3_client


def _denied(call):
    with pytest.raises(ClientError) as e:
        call()
    assert http_status(e.value) == 403, e.value.response
    # HEAD answers have no body, hence no code
    if e.value.response["Error"]["Code"] not in ("403", "Forbidden"):
        assert error_code(e.value) == "AccessDenied", e.value.response


@pytest.fixture
def setup(node, s3, bucket, request):
    s3.put_object(Bucket=bucket, Key="k", Body=b"owned")
    key = node.create_key(bucket_name("perm-" + request.node.name)[:40])
    return bucket, key, s3_client(node, key)


def _reads(c, b):
    return [
        lambda: c.get_object(Bucket=b, Key="k"),
        lambda: c.head_object(Bucket=b, Key="k"),
        lambda: c.list_objects_v2(Bucket=b),
        lambda: c.list_objects(Bucket=b),
        lambda: c.head_bucket(Bucket=b),
        lambda: c.get_bucket_location(Bucket=b),
    ]


def _delete_objects_denied(c, b):
    """DeleteObjects without write: S3 may refuse the whole request (403) or
    answer 200 with an AccessDenied error for every key; both delete nothing."""
    try:
        r = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k"}]})
    except ClientError as e:
        assert http_status(e) == 403 and error_code(e) == "AccessDenied", e.response
        return
    assert not r.get("Deleted"), r
    assert [(x["Key"], x["Code"]) for x in r["Errors"]] == [("k", "AccessDenied")]


def _writes(c, b):
    return [
        lambda: c.put_object(Bucket=b, Key="k", Body=b"overwritten"),
        lambda: c.put_object(Bucket=b, Key="new", Body=b"new"),
        lambda: c.delete_object(Bucket=b, Key="k"),
        lambda: c.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k"}),
    ]


def _unchanged(s3, b):
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == ["k"]
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"owned"


def test_no_rights(s3, setup):
    b, key, c = setup
    assert b not in [x["Name"] for x in c.list_buckets()["Buckets"]]
    for call in _reads(c, b) + _writes(c, b) + [lambda: c.delete_bucket(Bucket=b)]:
        _denied(call)
    _delete_objects_denied(c, b)
    _denied(lambda: c.create_bucket(Bucket=bucket_name("not-allowed")))
    _unchanged(s3, b)
    s3.head_bucket(Bucket=b)


def test_read_only(node, s3, setup):
    b, key, c = setup
    node.cli("bucket", "allow", b, "--key", key.id, "--read")
    assert b in [x["Name"] for x in c.list_buckets()["Buckets"]]
    for call in _reads(c, b):
        call()
    assert c.get_object(Bucket=b, Key="k")["Body"].read() == b"owned"
    for call in _writes(c, b) + [lambda: c.delete_bucket(Bucket=b)]:
        _denied(call)
    _delete_objects_denied(c, b)
    _unchanged(s3, b)
    # deny takes the right away again
    node.cli("bucket", "deny", b, "--key", key.id, "--read")
    _denied(lambda: c.get_object(Bucket=b, Key="k"))


def test_write_only(node, s3, setup):
    b, key, c = setup
    node.cli("bucket", "allow", b, "--key", key.id, "--write")
    c.put_object(Bucket=b, Key="w", Body=b"written")
    _denied(lambda: c.get_object(Bucket=b, Key="w"))
    _denied(lambda: c.list_objects_v2(Bucket=b))
    # copy needs read on the source
    _denied(lambda: c.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k"}))
    _denied(lambda: c.delete_bucket(Bucket=b))
    assert s3.get_object(Bucket=b, Key="w")["Body"].read() == b"written"
    c.delete_object(Bucket=b, Key="w")
    _unchanged(s3, b)


def test_read_write_not_owner(node, s3, setup):
    b, key, c = setup
    node.cli("bucket", "allow", b, "--key", key.id, "--read", "--write")
    c.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k"})
    c.delete_object(Bucket=b, Key="copy")
    _denied(lambda: c.delete_bucket(Bucket=b))
    s3.head_bucket(Bucket=b)
    info = node.cli_json("bucket", "info", b)
    mine = [k for k in info["keys"] if k["access_key_id"] == key.id]
    assert mine and mine[0]["read"] and mine[0]["write"] and not mine[0]["owner"]


def test_owner_can_delete_bucket(node, s3, setup):
    b, key, c = setup
    node.cli("bucket", "allow", b, "--key", key.id, "--read", "--write", "--owner")
    c.delete_object(Bucket=b, Key="k")
    c.delete_bucket(Bucket=b)
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=b)


def test_copy_needs_read_on_source_bucket(node, s3, setup, new_bucket):
    b, key, c = setup
    dest = new_bucket("copy-dest")
    node.cli("bucket", "allow", dest, "--key", key.id, "--read", "--write")
    _denied(lambda: c.copy_object(Bucket=dest, Key="stolen", CopySource={"Bucket": b, "Key": "k"}))
    assert s3.list_objects_v2(Bucket=dest)["KeyCount"] == 0


def test_create_bucket_right(node, s3, setup):
    b, key, c = setup
    name = bucket_name("created-by-second")
    _denied(lambda: c.create_bucket(Bucket=name))
    node.cli("key", "allow", key.id, "--create-bucket")
    c.create_bucket(Bucket=name)
    c.put_object(Bucket=name, Key="x", Body=b"y")
    # the creator is owner/read/write; the admin key got nothing on it
    _denied(lambda: s3.list_objects_v2(Bucket=name))
    info = node.cli_json("key", "info", key.id)
    assert info["allow_create_bucket"] is True
    perms = {p["bucket"]: p for p in info["buckets"]}
    assert perms[name]["owner"] and perms[name]["read"] and perms[name]["write"]
    node.cli("key", "deny", key.id, "--create-bucket")
    _denied(lambda: c.create_bucket(Bucket=bucket_name("second-try")))


def test_deleted_key_is_unknown(node, s3, setup):
    b, key, c = setup
    node.cli("bucket", "allow", b, "--key", key.id, "--read")
    c.get_object(Bucket=b, Key="k")
    node.cli("key", "delete", key.id, "--yes")
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket=b, Key="k")
    assert error_code(e.value) == "InvalidAccessKeyId"
    assert http_status(e.value) == 403
