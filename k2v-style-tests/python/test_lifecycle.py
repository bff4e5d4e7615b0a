"""Bucket lifecycle: Put/Get/DeleteBucketLifecycleConfiguration with S3's
errors, and the lifecycle worker applying the rules, with a day shortened
to 2 s (`lifecycle_day_secs`) and a pass every second, on one node and on
three (where the first live node of the bucket's partition acts)."""

from __future__ import annotations

import datetime
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, bucket_name, error_code, http_status, s3_client
from cluster_testlib import key_of, laid_out_cluster

DAY = 2
SHORT = f"lifecycle_day_secs = {DAY}\nlifecycle_interval_secs = 1\n"


def shorten(n: Node) -> Node:
    n.config.write_text(SHORT + n.config.read_text())
    return n


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    n = shorten(Node(tmp_path_factory.mktemp("lc1")))
    n.start()
    key = n.create_key("lc", create_bucket=True)
    yield [n], key
    n.stop()


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "lc3", configure=shorten)
    first = nodes[0]
    key = key_of(first.cli_json("key", "create", "lc"), "lc")
    first.cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


@pytest.fixture(params=["one", "three"])
def cluster(request):
    return request.getfixturevalue(request.param)


def rule(rid="r", **kw):
    r = {"ID": rid, "Status": "Enabled", "Filter": {"Prefix": ""}}
    r.update(kw)
    return r


def put(s3, b, *rules):
    return s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": list(rules)})


def s3_error(call) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as e:
        call()
    return http_status(e.value), error_code(e.value), e.value.response["Error"].get("Message", "")


def eventually(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.3)


def keys(s3, b) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", []))


def test_configuration_round_trip(cluster):
    nodes, key = cluster
    clients = [s3_client(n, key) for n in nodes]
    s3 = clients[0]
    b = bucket_name("lc-conf")
    s3.create_bucket(Bucket=b)
    assert s3_error(lambda: s3.get_bucket_lifecycle_configuration(Bucket=b))[:2] == (404, "NoSuchLifecycleConfiguration")
    rules = [
        rule("logs", Filter={"Prefix": "logs/"}, Expiration={"Days": 3}),
        rule("tagged", Filter={"Tag": {"Key": "tmp", "Value": "1"}}, Expiration={"Days": 1}),
        rule("and", Filter={"And": {"Prefix": "a/", "Tags": [{"Key": "k", "Value": "v"}],
                                    "ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 1000}},
             NoncurrentVersionExpiration={"NoncurrentDays": 2, "NewerNoncurrentVersions": 3}),
        rule("size", Filter={"ObjectSizeGreaterThan": 5}, Expiration={"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)}),
        {"ID": "legacy", "Status": "Disabled", "Prefix": "old/", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
        rule("markers", Expiration={"ExpiredObjectDeleteMarker": True}),
    ]
    put(s3, b, *rules)
    for c in clients:
        got = c.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
        assert [r["ID"] for r in got] == [r["ID"] for r in rules]
        by = {r["ID"]: r for r in got}
        assert by["logs"]["Filter"] == {"Prefix": "logs/"} and by["logs"]["Expiration"] == {"Days": 3}
        assert by["tagged"]["Filter"] == {"Tag": {"Key": "tmp", "Value": "1"}}
        assert by["and"]["Filter"]["And"]["Tags"] == [{"Key": "k", "Value": "v"}]
        assert by["and"]["Filter"]["And"]["ObjectSizeLessThan"] == 1000
        assert by["and"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 2, "NewerNoncurrentVersions": 3}
        assert by["size"]["Expiration"]["Date"].year == 2030
        assert by["legacy"]["Prefix"] == "old/" and by["legacy"]["Status"] == "Disabled"
        assert "Filter" not in by["legacy"]
        assert by["legacy"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
        assert by["markers"]["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    # A rule without ID is given one.
    put(s3, b, {"Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}})
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert len(got) == 1 and got[0]["ID"]
    r = s3.delete_bucket_lifecycle(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    for c in clients:
        assert s3_error(lambda: c.get_bucket_lifecycle_configuration(Bucket=b))[:2] == (404, "NoSuchLifecycleConfiguration")
    assert s3_error(lambda: s3.get_bucket_lifecycle_configuration(Bucket=b + "-none"))[:2] == (404, "NoSuchBucket")


BAD = [
    ("MalformedXML", 400, None, [rule(Filter={"Prefix": "a", "Tag": {"Key": "k", "Value": "v"}}, Expiration={"Days": 1})]),
    ("MalformedXML", 400, None, [rule(Prefix="a", Expiration={"Days": 1})]),
    ("MalformedXML", 400, None, [{"ID": "x", "Status": "Enabled", "Expiration": {"Days": 1}}]),
    ("MalformedXML", 400, None, [rule(Expiration={"Days": 1, "ExpiredObjectDeleteMarker": True})]),
    ("MalformedXML", 400, None, [rule(Status="Maybe", Expiration={"Days": 1})]),
    ("InvalidArgument", 400, "'Days' in the Expiration action must be a positive integer", [rule(Expiration={"Days": 0})]),
    ("InvalidArgument", 400, "'NoncurrentDays' in the NoncurrentVersionExpiration action must be a positive integer",
     [rule(NoncurrentVersionExpiration={"NoncurrentDays": -1})]),
    ("InvalidArgument", 400, "'DaysAfterInitiation' in the AbortIncompleteMultipartUpload action must be a positive integer",
     [rule(AbortIncompleteMultipartUpload={"DaysAfterInitiation": 0})]),
    ("InvalidArgument", 400, "'Date' must be at midnight GMT",
     [rule(Expiration={"Date": datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.timezone.utc)})]),
    ("InvalidArgument", 400, "Rule ID must be unique. Found same ID for more than one rule",
     [rule("same", Expiration={"Days": 1}), rule("same", Expiration={"Days": 2})]),
    ("InvalidArgument", 400, "ID length should not exceed allowed limit of 255", [rule("i" * 256, Expiration={"Days": 1})]),
    ("InvalidArgument", 400, "ObjectSizeGreaterThan must be less than ObjectSizeLessThan",
     [rule(Filter={"And": {"ObjectSizeGreaterThan": 10, "ObjectSizeLessThan": 10}}, Expiration={"Days": 1})]),
    ("InvalidArgument", 400, "'NewerNoncurrentVersions' in the NoncurrentVersionExpiration action must be between 1 and 100",
     [rule(NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 101})]),
    ("InvalidRequest", 400, "At least one action needs to be specified in a rule", [rule()]),
    ("InvalidRequest", 400, "AbortIncompleteMultipartUpload cannot be specified with Tags.",
     [rule(Filter={"Tag": {"Key": "k", "Value": "v"}}, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1})]),
    ("InvalidRequest", 400, "ExpiredObjectDeleteMarker cannot be specified with Tags.",
     [rule(Filter={"Tag": {"Key": "k", "Value": "v"}}, Expiration={"ExpiredObjectDeleteMarker": True})]),
    ("InvalidRequest", 400, "The number of lifecycle rules must not exceed the allowed limit of 1000 rules",
     [rule(f"r{i}", Expiration={"Days": 1}) for i in range(1001)]),
    ("NotImplemented", 501, None, [rule(Transitions=[{"Days": 30, "StorageClass": "GLACIER"}])]),
    ("NotImplemented", 501, None, [rule(NoncurrentVersionTransitions=[{"NoncurrentDays": 30, "StorageClass": "GLACIER"}])]),
]


@pytest.mark.parametrize("code,status,message,rules", BAD, ids=[f"{i}-{b[0]}" for i, b in enumerate(BAD)])
def test_invalid_configurations_are_refused(one, code, status, message, rules):
    nodes, key = one
    s3 = s3_client(nodes[0], key)
    b = bucket_name("lc-bad")
    s3.create_bucket(Bucket=b)
    put(s3, b, rule("kept", Expiration={"Days": 9}))
    got = s3_error(lambda: put(s3, b, *rules))
    assert got[:2] == (status, code), got
    if message:
        assert got[2] == message
    # The configuration in place is unchanged.
    assert [r["ID"] for r in s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]] == ["kept"]


def test_empty_configuration_is_malformed_and_others_are_denied(one):
    nodes, key = one
    s3 = s3_client(nodes[0], key)
    b = bucket_name("lc-perm")
    s3.create_bucket(Bucket=b)
    assert s3_error(lambda: s3.put_bucket_lifecycle_configuration(
        Bucket=b, LifecycleConfiguration={"Rules": []}))[:2] == (400, "MalformedXML")
    other = nodes[0].create_key("lc-rw")
    nodes[0].cli("bucket", "allow", b, "--key", other.id, "--read", "--write")
    o = s3_client(nodes[0], other)
    assert s3_error(lambda: put(o, b, rule(Expiration={"Days": 1})))[:2] == (403, "AccessDenied")
    assert s3_error(lambda: o.get_bucket_lifecycle_configuration(Bucket=b))[:2] == (403, "AccessDenied")
    assert s3_error(lambda: o.delete_bucket_lifecycle(Bucket=b))[:2] == (403, "AccessDenied")


def workers(nodes) -> list[dict]:
    return [w for n in nodes for w in n.cli_json("worker", "list") if w["name"] == "lifecycle"]


def test_the_worker_applies_the_rules(cluster):
    nodes, key = cluster
    clients = [s3_client(n, key) for n in nodes]
    s3 = clients[-1]
    before = sum(w["processed"] for w in workers(nodes))
    # Unversioned: a prefix rule and a tag rule.
    b = bucket_name("lc-run")
    s3.create_bucket(Bucket=b)
    for k in ["logs/1", "logs/2", "keep/1", "tmp-tagged", "tmp-untagged"]:
        s3.put_object(Bucket=b, Key=k, Body=b"x" * 10, **({"Tagging": "tmp=1"} if k == "tmp-tagged" else {}))
    up = s3.create_multipart_upload(Bucket=b, Key="mp/1")["UploadId"]
    s3.upload_part(Bucket=b, Key="mp/1", UploadId=up, PartNumber=1, Body=b"p" * 100)
    kept_up = s3.create_multipart_upload(Bucket=b, Key="other/1")["UploadId"]
    put(s3, b,
        rule("logs", Filter={"Prefix": "logs/"}, Expiration={"Days": 1}),
        rule("tag", Filter={"Tag": {"Key": "tmp", "Value": "1"}}, Expiration={"Days": 1}),
        rule("mpu", Filter={"Prefix": "mp/"}, AbortIncompleteMultipartUpload={"DaysAfterInitiation": 1}),
        rule("off", Status="Disabled", Filter={"Prefix": "keep/"}, Expiration={"Days": 1}))
    eventually(lambda: keys(s3, b) == ["keep/1", "tmp-untagged"], 20, "logs/ and the tagged object expire")
    uploads = lambda: sorted(u["Key"] for u in s3.list_multipart_uploads(Bucket=b).get("Uploads", []))
    eventually(lambda: uploads() == ["other/1"], 20, "the stale upload under mp/ is aborted")
    assert s3_error(lambda: s3.list_parts(Bucket=b, Key="mp/1", UploadId=up))[:2] == (404, "NoSuchUpload")
    # Two more days: the others stay.
    time.sleep(2 * DAY + 1)
    for c in clients:
        assert keys(c, b) == ["keep/1", "tmp-untagged"]
    assert uploads() == ["other/1"]
    s3.abort_multipart_upload(Bucket=b, Key="other/1", UploadId=kept_up)

    # Versioned: noncurrent versions, expiry as a delete marker, and the
    # expired delete marker once it is alone.
    v = bucket_name("lc-ver")
    s3.create_bucket(Bucket=v)
    s3.put_bucket_versioning(Bucket=v, VersioningConfiguration={"Status": "Enabled"})
    ids = [s3.put_object(Bucket=v, Key="doc", Body=f"v{i}".encode())["VersionId"] for i in range(3)]
    s3.put_object(Bucket=v, Key="gone", Body=b"g")
    s3.delete_object(Bucket=v, Key="gone")  # a marker over one version
    put(s3, v, rule("nc", Filter={"Prefix": "doc"}, NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}),
        rule("gone", Filter={"Prefix": "gone"}, NoncurrentVersionExpiration={"NoncurrentDays": 1},
             Expiration={"ExpiredObjectDeleteMarker": True}))

    def versions(key):
        r = s3.list_object_versions(Bucket=v, Prefix=key)
        return [x["VersionId"] for x in r.get("Versions", [])], [x["VersionId"] for x in r.get("DeleteMarkers", [])]

    # One noncurrent version is kept (NewerNoncurrentVersions 1): the oldest goes.
    eventually(lambda: versions("doc") == ([ids[2], ids[1]], []), 20, "the oldest noncurrent version is removed")
    # The version under the marker goes, then the marker, alone, goes too.
    eventually(lambda: versions("gone") == ([], []), 30, "the noncurrent version and then the lone marker are removed")
    for c in clients:
        assert c.get_object(Bucket=v, Key="doc")["Body"].read() == b"v2"
    # Expiration by age in a versioned bucket writes a delete marker.
    put(s3, v, rule("exp", Filter={"Prefix": "doc"}, Expiration={"Days": 1}))
    eventually(lambda: len(versions("doc")[1]) == 1, 20, "a delete marker expires the current version")
    assert versions("doc")[0] == [ids[2], ids[1]]
    assert s3_error(lambda: s3.get_object(Bucket=v, Key="doc"))[:2] == (404, "NoSuchKey")
    time.sleep(DAY + 1)
    assert len(versions("doc")[1]) == 1, "a current marker is not expired again"

    # The worker reports its progress.
    ws = workers(nodes)
    assert len(ws) == len(nodes)
    assert sum(w["processed"] for w in ws) - before == 8, "each action taken once, by one node"
    acting = [w for w in ws if "objects expired" in w["progress"]]
    assert acting, ws
    assert any("uploads aborted" in w["progress"] and w["errors"] == 0 for w in acting)
    info = nodes[0].cli("worker", "info", "lifecycle").stdout
    assert "lifecycle" in info


def test_metrics_count_lifecycle_actions(one):
    nodes, key = one
    import urllib.request

    body = urllib.request.urlopen(f"http://127.0.0.1:{nodes[0].admin_port}/metrics").read().decode()
    assert "hangar_lifecycle_buckets_scanned_total" in body
    assert 'hangar_lifecycle_actions_total{action="expire"}' in body
    assert "hangar_lifecycle_last_pass_timestamp_seconds" in body


def test_a_locked_version_outlives_its_rule_and_the_pass_goes_on(one):
    """A noncurrent version under legal hold is not removed by a rule that
    has made it due, and the pass still removes the unlocked versions that
    come after it in the bucket."""
    nodes, key = one
    s3 = s3_client(nodes[0], key)
    b = bucket_name("lc-lock")
    s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    held = s3.put_object(Bucket=b, Key="held", Body=b"h0", ObjectLockLegalHoldStatus="ON")["VersionId"]
    s3.put_object(Bucket=b, Key="held", Body=b"h1")
    free = s3.put_object(Bucket=b, Key="z-free", Body=b"f0")["VersionId"]
    s3.put_object(Bucket=b, Key="z-free", Body=b"f1")
    errors_before = sum(w["errors"] for w in workers(nodes))
    put(s3, b, rule("nc", NoncurrentVersionExpiration={"NoncurrentDays": 1}))

    def versions(k):
        return [x["VersionId"] for x in s3.list_object_versions(Bucket=b, Prefix=k).get("Versions", [])]

    eventually(lambda: free not in versions("z-free"), 20, "the unlocked noncurrent version is removed")
    time.sleep(DAY + 1)
    assert held in versions("held"), "a version under legal hold is kept"
    assert s3.get_object(Bucket=b, Key="held", VersionId=held)["Body"].read() == b"h0"
    assert sum(w["errors"] for w in workers(nodes)) == errors_before
    s3.put_object_legal_hold(Bucket=b, Key="held", VersionId=held, LegalHold={"Status": "OFF"})
    eventually(lambda: held not in versions("held"), 20, "released, the version is removed by the rule")
