"""Bucket operations through boto3: create/head/list/delete/location and their errors."""

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import REGION, bucket_name, error_code, http_status, s3_client


def test_create_head_list_delete(s3):
    name = bucket_name("lifecycle")
    r = s3.create_bucket(Bucket=name)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    listed = s3.list_buckets()["Buckets"]
    mine = [b for b in listed if b["Name"] == name]
    assert len(mine) == 1 and mine[0]["CreationDate"] is not None
    names = [b["Name"] for b in listed]
    assert names == sorted(names), "ListBuckets is sorted by name"
    r = s3.delete_bucket(Bucket=name)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert http_status(e.value) == 404


def test_create_with_matching_location_constraint(s3):
    name = bucket_name("located")
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.head_bucket(Bucket=name)


def test_get_bucket_location(s3, bucket):
    r = s3.get_bucket_location(Bucket=bucket)
    assert r["LocationConstraint"] == REGION


def test_delete_non_empty_bucket(s3, bucket):
    s3.put_object(Bucket=bucket, Key="x", Body=b"1")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert error_code(e.value) == "BucketNotEmpty"
    assert http_status(e.value) == 409
    # nothing changed
    assert s3.get_object(Bucket=bucket, Key="x")["Body"].read() == b"1"
    s3.delete_object(Bucket=bucket, Key="x")
    s3.delete_bucket(Bucket=bucket)


def test_unknown_bucket(s3):
    name = bucket_name("never-created")
    for call in (
        lambda: s3.list_objects_v2(Bucket=name),
        lambda: s3.list_objects(Bucket=name),
        lambda: s3.get_object(Bucket=name, Key="k"),
        lambda: s3.put_object(Bucket=name, Key="k", Body=b"x"),
        lambda: s3.delete_bucket(Bucket=name),
        lambda: s3.get_bucket_location(Bucket=name),
        lambda: s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "k"}]}),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e.value) == "NoSuchBucket", e.value.response
        assert http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert http_status(e.value) == 404
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


INVALID_NAMES = [
    "ab",  # too short
    "a" * 64,  # too long
    "UpperCase",
    "under_score",
    "-leading-hyphen",
    "trailing-hyphen-",
    ".leading-dot",
    "trailing-dot.",
    "double..dot",
    "192.168.5.4",  # IP address
    "xn--punycode",
    "sthree-prefix",
    "name-s3alias",
    "name--ol-s3",
]


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_invalid_bucket_names(s3, name):
    before = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=name)
    assert error_code(e.value) == "InvalidBucketName", e.value.response
    assert http_status(e.value) == 400
    assert {b["Name"] for b in s3.list_buckets()["Buckets"]} == before


@pytest.mark.parametrize("name", ["abc", "a" * 63, "with.dots.ok", "0digits-1st"])
def test_valid_edge_bucket_names(s3, name):
    s3.create_bucket(Bucket=name)
    s3.head_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)


def test_duplicate_bucket_same_owner(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=bucket)
    assert error_code(e.value) == "BucketAlreadyOwnedByYou"
    assert http_status(e.value) == 409


def test_duplicate_bucket_other_key(node, s3, bucket):
    other = node.create_key("dup-other", create_bucket=True)
    c = s3_client(node, other)
    with pytest.raises(ClientError) as e:
        c.create_bucket(Bucket=bucket)
    assert error_code(e.value) == "BucketAlreadyExists"
    assert http_status(e.value) == 409
    # the other key gained nothing on the existing bucket
    with pytest.raises(ClientError) as e:
        c.list_objects_v2(Bucket=bucket)
    assert error_code(e.value) == "AccessDenied"


def test_cli_sees_bucket(node, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"12345")
    info = node.cli_json("bucket", "info", bucket)
    assert info["name"] == bucket
    assert info["objects"] == 1
    assert info["bytes"] == 5
    assert bucket in [b["name"] if isinstance(b, dict) else b for b in node.cli_json("bucket", "list")]
