"""S3 Object Lock, on one node and on three: bucket configuration, a
version's retention and legal hold, and the deletes they refuse."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import bucket_name, error_code, http_status, s3_client
from cluster_testlib import key_of, laid_out_cluster


def utc_in(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)


def err(fn, *a, **kw) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as e:
        fn(*a, **kw)
    return http_status(e.value), error_code(e.value), e.value.response["Error"].get("Message", "")


def locked_bucket(s3, hint: str) -> str:
    b = bucket_name(hint)
    s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    return b


def test_a_bucket_created_with_object_lock_is_versioned_and_cannot_be_suspended(s3):
    b = locked_bucket(s3, "ol-create")
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    c = s3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]
    assert c == {"ObjectLockEnabled": "Enabled"}
    st, code, _ = err(s3.put_bucket_versioning, Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    assert (st, code) == (409, "InvalidBucketState")
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"


def test_configuration_errors_and_enabling_on_an_existing_bucket(s3, bucket):
    st, code, _ = err(s3.get_object_lock_configuration, Bucket=bucket)
    assert (st, code) == (404, "ObjectLockConfigurationNotFoundError")
    cfg = {"ObjectLockEnabled": "Enabled"}
    # Not versioned yet: refused.
    st, code, _ = err(s3.put_object_lock_configuration, Bucket=bucket, ObjectLockConfiguration=cfg)
    assert (st, code) == (409, "InvalidBucketState")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 2}}
    s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={**cfg, "Rule": rule})
    got = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
    assert got == {**cfg, "Rule": rule}
    rule = {"DefaultRetention": {"Mode": "COMPLIANCE", "Years": 1}}
    s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={**cfg, "Rule": rule})
    assert s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]["Rule"] == rule
    # Days and Years together, neither, or not positive.
    for bad in ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, {"Mode": "GOVERNANCE"}):
        st, code, _ = err(s3.put_object_lock_configuration, Bucket=bucket,
                          ObjectLockConfiguration={**cfg, "Rule": {"DefaultRetention": bad}})
        assert (st, code) == (400, "MalformedXML"), bad
    st, code, _ = err(s3.put_object_lock_configuration, Bucket=bucket,
                      ObjectLockConfiguration={**cfg, "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 0}}})
    assert (st, code) == (400, "InvalidArgument")
    st, code, _ = err(s3.put_bucket_versioning, Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    assert (st, code) == (409, "InvalidBucketState")


def test_lock_headers_on_a_bucket_without_object_lock_are_invalid_requests(s3, bucket):
    for kw in ({"ObjectLockLegalHoldStatus": "ON"},
               {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": utc_in(3600)}):
        st, code, _ = err(s3.put_object, Bucket=bucket, Key="o", Body=b"x", **kw)
        assert (st, code) == (400, "InvalidRequest"), kw
    s3.put_object(Bucket=bucket, Key="o", Body=b"x")
    st, code, _ = err(s3.get_object_retention, Bucket=bucket, Key="o")
    assert (st, code) == (400, "InvalidRequest")
    st, code, _ = err(s3.put_object_legal_hold, Bucket=bucket, Key="o", LegalHold={"Status": "ON"})
    assert (st, code) == (400, "InvalidRequest")


def test_retention_dates_in_the_past_and_half_given_are_invalid_arguments(s3):
    b = locked_bucket(s3, "ol-past")
    st, code, _ = err(s3.put_object, Bucket=b, Key="o", Body=b"x",
                      ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=utc_in(-60))
    assert (st, code) == (400, "InvalidArgument")
    st, code, _ = err(s3.put_object, Bucket=b, Key="o", Body=b"x", ObjectLockMode="GOVERNANCE")
    assert (st, code) == (400, "InvalidArgument")
    v = s3.put_object(Bucket=b, Key="o", Body=b"x")["VersionId"]
    st, code, _ = err(s3.put_object_retention, Bucket=b, Key="o", VersionId=v,
                      Retention={"Mode": "COMPLIANCE", "RetainUntilDate": utc_in(-60)})
    assert (st, code) == (400, "InvalidArgument")
    st, code, _ = err(s3.get_object_retention, Bucket=b, Key="o", VersionId=v)
    assert (st, code) == (404, "NoSuchObjectLockConfiguration")
    st, code, _ = err(s3.get_object_legal_hold, Bucket=b, Key="o", VersionId=v)
    assert (st, code) == (404, "NoSuchObjectLockConfiguration")


def test_a_retention_period_refuses_deletes_until_it_ends(s3):
    b = locked_bucket(s3, "ol-story")
    until = utc_in(4)
    v = s3.put_object(Bucket=b, Key="o", Body=b"kept", ObjectLockMode="COMPLIANCE",
                      ObjectLockRetainUntilDate=until)["VersionId"]
    head = s3.head_object(Bucket=b, Key="o", VersionId=v)
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert abs((head["ObjectLockRetainUntilDate"] - until).total_seconds()) < 1
    r = s3.get_object_retention(Bucket=b, Key="o", VersionId=v)["Retention"]
    assert r["Mode"] == "COMPLIANCE"
    st, code, msg = err(s3.delete_object, Bucket=b, Key="o", VersionId=v)
    assert (st, code) == (403, "AccessDenied") and "object lock" in msg
    # Even with the bypass: COMPLIANCE is for everyone.
    st, code, _ = err(s3.delete_object, Bucket=b, Key="o", VersionId=v, BypassGovernanceRetention=True)
    assert (st, code) == (403, "AccessDenied")
    # COMPLIANCE cannot be shortened nor removed, only extended.
    st, code, _ = err(s3.put_object_retention, Bucket=b, Key="o", VersionId=v,
                      Retention={"Mode": "COMPLIANCE", "RetainUntilDate": utc_in(2)},
                      BypassGovernanceRetention=True)
    assert (st, code) == (403, "AccessDenied")
    st, code, _ = err(s3.put_object_retention, Bucket=b, Key="o", VersionId=v, Retention={},
                      BypassGovernanceRetention=True)
    assert (st, code) == (403, "AccessDenied")
    # DeleteObjects: the per-key error.
    out = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "o", "VersionId": v}]})
    assert [(e["Key"], e["Code"], e["VersionId"]) for e in out["Errors"]] == [("o", "AccessDenied", v)]
    # A delete without version id only adds a delete marker.
    m = s3.delete_object(Bucket=b, Key="o")
    assert m["DeleteMarker"] is True
    assert s3.get_object(Bucket=b, Key="o", VersionId=v)["Body"].read() == b"kept"
    while dt.datetime.now(dt.timezone.utc) <= until + dt.timedelta(milliseconds=200):
        time.sleep(0.2)
    s3.delete_object(Bucket=b, Key="o", VersionId=v)
    st, code, _ = err(s3.head_object, Bucket=b, Key="o", VersionId=v)
    assert st == 404


def test_governance_needs_the_bypass_and_the_owner_right(node, s3):
    b = locked_bucket(s3, "ol-gov")
    v = s3.put_object(Bucket=b, Key="g", Body=b"g", ObjectLockMode="GOVERNANCE",
                      ObjectLockRetainUntilDate=utc_in(3600))["VersionId"]
    writer = node.create_key("ol-writer")
    node.cli("bucket", "allow", b, "--key", writer.id, "--read", "--write")
    w = s3_client(node, writer)
    assert w.get_object_retention(Bucket=b, Key="g", VersionId=v)["Retention"]["Mode"] == "GOVERNANCE"
    st, code, _ = err(s3.delete_object, Bucket=b, Key="g", VersionId=v)
    assert (st, code) == (403, "AccessDenied")
    # A key without the owner right may not bypass.
    st, code, _ = err(w.delete_object, Bucket=b, Key="g", VersionId=v, BypassGovernanceRetention=True)
    assert (st, code) == (403, "AccessDenied")
    st, code, _ = err(w.put_object_retention, Bucket=b, Key="g", VersionId=v,
                      Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(60)},
                      BypassGovernanceRetention=True)
    assert (st, code) == (403, "AccessDenied")
    # Shortening without the header is refused, extending is not.
    st, code, _ = err(s3.put_object_retention, Bucket=b, Key="g", VersionId=v,
                      Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(60)})
    assert (st, code) == (403, "AccessDenied")
    w.put_object_retention(Bucket=b, Key="g", VersionId=v,
                           Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(7200)})
    s3.put_object_retention(Bucket=b, Key="g", VersionId=v,
                            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": utc_in(60)},
                            BypassGovernanceRetention=True)
    left = s3.get_object_retention(Bucket=b, Key="g", VersionId=v)["Retention"]["RetainUntilDate"]
    assert (left - dt.datetime.now(dt.timezone.utc)).total_seconds() < 120
    # The owner with the header deletes it.
    s3.delete_object(Bucket=b, Key="g", VersionId=v, BypassGovernanceRetention=True)
    assert s3.list_object_versions(Bucket=b).get("Versions") is None
    # DeleteObjects with the bypass, too.
    v2 = s3.put_object(Bucket=b, Key="g2", Body=b"g", ObjectLockMode="GOVERNANCE",
                       ObjectLockRetainUntilDate=utc_in(3600))["VersionId"]
    out = s3.delete_objects(Bucket=b, BypassGovernanceRetention=True,
                            Delete={"Objects": [{"Key": "g2", "VersionId": v2}]})
    assert "Errors" not in out and out["Deleted"][0]["VersionId"] == v2


def test_a_legal_hold_refuses_deletes_until_it_is_lifted(s3):
    b = locked_bucket(s3, "ol-hold")
    v = s3.put_object(Bucket=b, Key="h", Body=b"h", ObjectLockLegalHoldStatus="ON")["VersionId"]
    assert s3.head_object(Bucket=b, Key="h")["ObjectLockLegalHoldStatus"] == "ON"
    assert s3.get_object_legal_hold(Bucket=b, Key="h", VersionId=v)["LegalHold"] == {"Status": "ON"}
    for kw in ({}, {"BypassGovernanceRetention": True}):
        st, code, _ = err(s3.delete_object, Bucket=b, Key="h", VersionId=v, **kw)
        assert (st, code) == (403, "AccessDenied")
    s3.put_object_legal_hold(Bucket=b, Key="h", VersionId=v, LegalHold={"Status": "OFF"})
    assert s3.get_object(Bucket=b, Key="h")["ObjectLockLegalHoldStatus"] == "OFF"
    s3.delete_object(Bucket=b, Key="h", VersionId=v)
    # Set later on an existing version (the latest, without version id).
    v = s3.put_object(Bucket=b, Key="h2", Body=b"h")["VersionId"]
    s3.put_object_legal_hold(Bucket=b, Key="h2", LegalHold={"Status": "ON"})
    st, code, _ = err(s3.delete_object, Bucket=b, Key="h2", VersionId=v)
    assert (st, code) == (403, "AccessDenied")
    st, code, _ = err(s3.put_object_legal_hold, Bucket=b, Key="h2", LegalHold={"Status": "MAYBE"})
    assert st == 400
    s3.put_object_legal_hold(Bucket=b, Key="h2", VersionId=v, LegalHold={"Status": "OFF"})
    s3.delete_object(Bucket=b, Key="h2", VersionId=v)


def test_the_default_retention_applies_to_new_versions(s3):
    b = locked_bucket(s3, "ol-default")
    before = s3.put_object(Bucket=b, Key="d", Body=b"0")["VersionId"]
    s3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
    v = s3.put_object(Bucket=b, Key="d", Body=b"1")["VersionId"]
    r = s3.get_object_retention(Bucket=b, Key="d", VersionId=v)["Retention"]
    assert r["Mode"] == "GOVERNANCE"
    assert abs((r["RetainUntilDate"] - utc_in(86400)).total_seconds()) < 30
    # A version's own headers win over the default.
    own = s3.put_object(Bucket=b, Key="d", Body=b"2", ObjectLockMode="COMPLIANCE",
                        ObjectLockRetainUntilDate=utc_in(3))["VersionId"]
    assert s3.get_object_retention(Bucket=b, Key="d", VersionId=own)["Retention"]["Mode"] == "COMPLIANCE"
    # Copies and multipart uploads get it too.
    c = s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "d", "VersionId": before})
    assert s3.head_object(Bucket=b, Key="copy", VersionId=c["VersionId"])["ObjectLockMode"] == "GOVERNANCE"
    up = s3.create_multipart_upload(Bucket=b, Key="mp", ObjectLockLegalHoldStatus="ON")
    p = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 100)
    done = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p["ETag"]}]})
    h = s3.head_object(Bucket=b, Key="mp", VersionId=done["VersionId"])
    assert h["ObjectLockLegalHoldStatus"] == "ON" and h["ObjectLockMode"] == "GOVERNANCE"
    assert not any(k.startswith("x-hangar") for k in h["ResponseMetadata"]["HTTPHeaders"])
    # The version from before the default has none, and is deletable.
    st, code, _ = err(s3.get_object_retention, Bucket=b, Key="d", VersionId=before)
    assert code == "NoSuchObjectLockConfiguration"
    s3.delete_object(Bucket=b, Key="d", VersionId=before)
    st, code, _ = err(s3.delete_object, Bucket=b, Key="d", VersionId=v)
    assert (st, code) == (403, "AccessDenied")


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "ol")
    key = key_of(nodes[0].cli_json("key", "create", "lock"), "lock")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_in_a_cluster_a_lock_set_through_one_node_refuses_deletes_through_another(three):
    nodes, key = three
    c1, c2, c3 = (s3_client(n, key) for n in nodes)
    b = locked_bucket(c1, "ol-cluster")
    assert c3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"
    st, code, _ = err(c2.put_bucket_versioning, Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    assert code == "InvalidBucketState"
    v = c2.put_object(Bucket=b, Key="o", Body=b"x" * 5000)["VersionId"]
    c1.put_object_retention(Bucket=b, Key="o", VersionId=v,
                            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": utc_in(3)})
    st, code, _ = err(c3.delete_object, Bucket=b, Key="o", VersionId=v)
    assert (st, code) == (403, "AccessDenied")
    c2.put_object_legal_hold(Bucket=b, Key="o", VersionId=v, LegalHold={"Status": "ON"})
    assert c3.head_object(Bucket=b, Key="o", VersionId=v)["ObjectLockLegalHoldStatus"] == "ON"
    time.sleep(3.5)
    # Retention over, the hold still refuses.
    st, code, _ = err(c3.delete_object, Bucket=b, Key="o", VersionId=v)
    assert (st, code) == (403, "AccessDenied")
    c1.put_object_legal_hold(Bucket=b, Key="o", VersionId=v, LegalHold={"Status": "OFF"})
    c3.delete_object(Bucket=b, Key="o", VersionId=v)
    assert c2.list_object_versions(Bucket=b).get("Versions") is None
