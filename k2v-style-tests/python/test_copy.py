"""CopyObject through boto3: COPY/REPLACE metadata directives, copy-source
conditions, cross-bucket copies, errors."""

import datetime as dt

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, error_code, http_status, md5_hex, random_bytes, sha256


def _src(s3, bucket, key="src", data=None):
    data = random_bytes(3 * MiB + 17, 31) if data is None else data
    put = s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=data,
        ContentType="text/plain",
        CacheControl="max-age=5",
        Metadata={"origin": "source"},
    )
    return data, put["ETag"]


def test_copy_keeps_metadata_by_default(s3, bucket):
    data, etag = _src(s3, bucket)
    r = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == etag
    assert isinstance(r["CopyObjectResult"]["LastModified"], dt.datetime)
    got = s3.get_object(Bucket=bucket, Key="dst")
    assert sha256(got["Body"].read()) == sha256(data)
    assert got["ContentType"] == "text/plain"
    assert got["CacheControl"] == "max-age=5"
    assert got["Metadata"] == {"origin": "source"}
    assert got["ETag"] == etag


def test_copy_directive_copy_ignores_new_metadata(s3, bucket):
    _src(s3, bucket, data=b"small")
    s3.copy_object(
        Bucket=bucket,
        Key="dst",
        CopySource={"Bucket": bucket, "Key": "src"},
        MetadataDirective="COPY",
        Metadata={"ignored": "yes"},
    )
    assert s3.head_object(Bucket=bucket, Key="dst")["Metadata"] == {"origin": "source"}


def test_copy_directive_replace(s3, bucket):
    data, etag = _src(s3, bucket)
    s3.copy_object(
        Bucket=bucket,
        Key="dst",
        CopySource={"Bucket": bucket, "Key": "src"},
        MetadataDirective="REPLACE",
        ContentType="application/json",
        Metadata={"new": "meta"},
    )
    h = s3.head_object(Bucket=bucket, Key="dst")
    assert h["ContentType"] == "application/json"
    assert h["Metadata"] == {"new": "meta"}
    assert "CacheControl" not in h
    assert h["ETag"] == etag
    # the source is untouched
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"origin": "source"}


def test_copy_onto_itself_with_replace(s3, bucket):
    data, _ = _src(s3, bucket, data=b"self")
    s3.copy_object(
        Bucket=bucket,
        Key="src",
        CopySource={"Bucket": bucket, "Key": "src"},
        MetadataDirective="REPLACE",
        Metadata={"v": "2"},
    )
    got = s3.get_object(Bucket=bucket, Key="src")
    assert got["Metadata"] == {"v": "2"}
    assert got["Body"].read() == b"self"


def test_copy_onto_itself_without_change_is_invalid(s3, bucket):
    _src(s3, bucket, data=b"self")
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"})
    assert error_code(e.value) == "InvalidRequest"
    assert http_status(e.value) == 400


def test_copy_across_buckets_and_special_keys(s3, bucket, new_bucket):
    other = new_bucket("copy-dest")
    key = "dir/ü nicode+plus%percent?.bin"
    data = random_bytes(1000, 8)
    s3.put_object(Bucket=bucket, Key=key, Body=data)
    s3.copy_object(Bucket=other, Key=key + "-copy", CopySource={"Bucket": bucket, "Key": key})
    assert s3.get_object(Bucket=other, Key=key + "-copy")["Body"].read() == data


def test_copy_empty_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    r = s3.copy_object(Bucket=bucket, Key="e2", CopySource={"Bucket": bucket, "Key": "empty"})
    assert r["CopyObjectResult"]["ETag"] == f'"{md5_hex(b"")}"'
    assert s3.get_object(Bucket=bucket, Key="e2")["Body"].read() == b""


def test_copy_source_missing(s3, bucket, new_bucket):
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "nope"})
    assert error_code(e.value) == "NoSuchKey"
    assert http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": "no-such-bucket-xyz", "Key": "x"})
    assert error_code(e.value) == "NoSuchBucket"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_copy_overwrites_destination(s3, bucket):
    data, etag = _src(s3, bucket)
    s3.put_object(Bucket=bucket, Key="dst", Body=b"old destination")
    s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert sha256(s3.get_object(Bucket=bucket, Key="dst")["Body"].read()) == sha256(data)
    # deleting the source keeps the copy readable (shared blocks are refcounted)
    s3.delete_object(Bucket=bucket, Key="src")
    assert sha256(s3.get_object(Bucket=bucket, Key="dst")["Body"].read()) == sha256(data)


def _copy(s3, bucket, **cond):
    return s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"}, **cond)


def _copy_fails(s3, bucket, **cond):
    with pytest.raises(ClientError) as e:
        _copy(s3, bucket, **cond)
    assert error_code(e.value) == "PreconditionFailed", (cond, e.value.response)
    assert http_status(e.value) == 412
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="dst")


def test_copy_source_conditions(s3, bucket):
    _, etag = _src(s3, bucket, data=b"conditional")
    lm = s3.head_object(Bucket=bucket, Key="src")["LastModified"]
    day = dt.timedelta(days=1)
    _copy_fails(s3, bucket, CopySourceIfMatch='"00000000000000000000000000000000"')
    _copy_fails(s3, bucket, CopySourceIfNoneMatch=etag)
    _copy_fails(s3, bucket, CopySourceIfModifiedSince=lm + day)
    _copy_fails(s3, bucket, CopySourceIfUnmodifiedSince=lm - day)
    for ok in (
        {"CopySourceIfMatch": etag},
        {"CopySourceIfNoneMatch": '"00000000000000000000000000000000"'},
        {"CopySourceIfModifiedSince": lm - day},
        {"CopySourceIfUnmodifiedSince": lm + day},
        # S3: If-Match true and If-Unmodified-Since false -> copy happens
        {"CopySourceIfMatch": etag, "CopySourceIfUnmodifiedSince": lm - day},
    ):
        _copy(s3, bucket, **ok)
        assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"conditional"
        s3.delete_object(Bucket=bucket, Key="dst")
