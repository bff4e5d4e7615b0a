"""PutObject / GetObject / HeadObject / DeleteObject through boto3: sizes
around the block boundary compared byte for byte, metadata round trip, ETag,
Content-MD5 and flexible checksums."""

import datetime as dt
import hashlib
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    KiB,
    MiB,
    checksum_b64,
    compressible_bytes,
    error_code,
    http_status,
    md5_b64,
    md5_hex,
    random_bytes,
    s3_client,
    sha256,
)

SIZES = {
    "0B": 0,
    "1B": 1,
    "3KiB": 3 * KiB,
    "1MiB-1": MiB - 1,
    "1MiB": MiB,
    "1MiB+1": MiB + 1,
    "50MiB": 50 * MiB,
}


@pytest.mark.parametrize("kind", ["random", "compressible"])
@pytest.mark.parametrize("size_name", list(SIZES))
def test_put_get_sizes(s3, bucket, size_name, kind):
    size = SIZES[size_name]
    gen = random_bytes if kind == "random" else compressible_bytes
    data = gen(size, seed=size)
    key = f"obj-{size_name}-{kind}"
    put = s3.put_object(Bucket=bucket, Key=key, Body=data)
    assert put["ETag"] == f'"{md5_hex(data)}"'
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == size
    assert head["ETag"] == put["ETag"]
    got = s3.get_object(Bucket=bucket, Key=key)
    body = got["Body"].read()
    assert got["ContentLength"] == size
    assert len(body) == size
    assert sha256(body) == sha256(data)
    assert got["ETag"] == put["ETag"]
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key)["Contents"]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in listed] == [(key, size, put["ETag"])]


def test_overwrite_replaces_content(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=random_bytes(2 * MiB + 7, 1))
    new = random_bytes(5 * KiB, 2)
    s3.put_object(Bucket=bucket, Key="k", Body=new)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == new
    big = random_bytes(3 * MiB, 3)
    s3.put_object(Bucket=bucket, Key="k", Body=big)
    assert sha256(s3.get_object(Bucket=bucket, Key="k")["Body"].read()) == sha256(big)


def test_identical_content_under_two_keys(s3, bucket):
    data = random_bytes(3 * MiB + 5, 77)
    s3.put_object(Bucket=bucket, Key="one", Body=data)
    s3.put_object(Bucket=bucket, Key="two", Body=data)
    s3.delete_object(Bucket=bucket, Key="one")
    # deduplicated blocks must survive the deletion of one referrer
    assert sha256(s3.get_object(Bucket=bucket, Key="two")["Body"].read()) == sha256(data)


def test_metadata_round_trip(s3, bucket):
    expires = dt.datetime(2031, 5, 17, 8, 30, 0, tzinfo=dt.timezone.utc)
    s3.put_object(
        Bucket=bucket,
        Key="meta",
        Body=b"hello",
        ContentType="text/x-hangar; charset=utf-8",
        ContentEncoding="identity",
        ContentDisposition='attachment; filename="h.txt"',
        ContentLanguage="fr-CH",
        CacheControl="max-age=60, private",
        Expires=expires,
        Metadata={"color": "blue", "Multi-Word-Name": "Value With Spaces"},
    )
    for r in (
        s3.head_object(Bucket=bucket, Key="meta"),
        s3.get_object(Bucket=bucket, Key="meta"),
    ):
        assert r["ContentType"] == "text/x-hangar; charset=utf-8"
        assert r["ContentEncoding"] == "identity"
        assert r["ContentDisposition"] == 'attachment; filename="h.txt"'
        assert r["ContentLanguage"] == "fr-CH"
        assert r["CacheControl"] == "max-age=60, private"
        assert r["Expires"] == expires
        assert r["Metadata"] == {"color": "blue", "multi-word-name": "Value With Spaces"}
        assert r["ContentLength"] == 5
        assert isinstance(r["LastModified"], dt.datetime)


def test_default_content_type(s3, bucket):
    s3.put_object(Bucket=bucket, Key="noct", Body=b"x")
    r = s3.head_object(Bucket=bucket, Key="noct")
    assert r["ContentType"] in ("binary/octet-stream", "application/octet-stream")
    assert r["Metadata"] == {}


def test_last_modified_is_recent(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x")
    lm = s3.head_object(Bucket=bucket, Key="t")["LastModified"]
    now = dt.datetime.now(dt.timezone.utc)
    assert abs((now - lm).total_seconds()) < 120


def test_unknown_key(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert error_code(e.value) == "NoSuchKey"
    assert http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="missing")
    assert http_status(e.value) == 404


def test_delete_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="d", Body=b"x" * 10)
    r = s3.delete_object(Bucket=bucket, Key="d")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="d")
    assert error_code(e.value) == "NoSuchKey"
    # deleting a missing key is not an error in S3
    r = s3.delete_object(Bucket=bucket, Key="d")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_content_md5_ok(s3, bucket):
    data = random_bytes(100 * KiB, 5)
    r = s3.put_object(Bucket=bucket, Key="m", Body=data, ContentMD5=md5_b64(data))
    assert r["ETag"] == f'"{md5_hex(data)}"'


def test_content_md5_wrong_is_bad_digest(s3, bucket):
    old = b"old content"
    s3.put_object(Bucket=bucket, Key="m", Body=old)
    data = random_bytes(100 * KiB, 6)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="m", Body=data, ContentMD5=md5_b64(b"other"))
    assert error_code(e.value) == "BadDigest"
    assert http_status(e.value) == 400
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="new", Body=data, ContentMD5=md5_b64(b"other"))
    assert error_code(e.value) == "BadDigest"
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == old
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["m"]


def test_content_md5_malformed_is_invalid_digest(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="m", Body=b"abc", ContentMD5="not-base64-md5")
    assert error_code(e.value) == "InvalidDigest"
    assert http_status(e.value) == 400
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


CHECKSUM_ALGOS = ["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"]
PARAM = {
    "CRC32": "ChecksumCRC32",
    "CRC32C": "ChecksumCRC32C",
    "SHA1": "ChecksumSHA1",
    "SHA256": "ChecksumSHA256",
    "CRC64NVME": "ChecksumCRC64NVME",
}


@pytest.mark.parametrize("algo", CHECKSUM_ALGOS)
@pytest.mark.parametrize("size", [0, 3 * KiB, MiB + 1])
def test_flexible_checksum_stored_and_returned(s3, bucket, algo, size):
    data = random_bytes(size, size + 11)
    expected = checksum_b64(algo, data)
    # CRC32C and CRC64NVME need awscrt in botocore; give the value ourselves
    # (botocore then sends it as x-amz-checksum-<algo> unchanged).
    if algo in ("CRC32", "SHA1", "SHA256"):
        put = s3.put_object(Bucket=bucket, Key="c", Body=data, ChecksumAlgorithm=algo)
    else:
        put = s3.put_object(Bucket=bucket, Key="c", Body=data, **{PARAM[algo]: expected})
    assert put.get(PARAM[algo]) == expected, put
    got = s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert got.get(PARAM[algo]) == expected
    assert got["Body"].read() == data
    head = s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert head.get(PARAM[algo]) == expected
    # without checksum mode the checksum is not returned
    plain = s3.head_object(Bucket=bucket, Key="c")
    assert PARAM[algo] not in plain


@pytest.mark.parametrize("algo", CHECKSUM_ALGOS)
def test_wrong_flexible_checksum_rejected(s3, bucket, algo):
    old = b"previous version"
    s3.put_object(Bucket=bucket, Key="c", Body=old)
    data = random_bytes(64 * KiB, 99)
    wrong = checksum_b64(algo, data + b"!")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="c", Body=data, **{PARAM[algo]: wrong})
    assert error_code(e.value) == "BadDigest", e.value.response
    assert http_status(e.value) == 400
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="fresh", Body=data, **{PARAM[algo]: wrong})
    assert error_code(e.value) == "BadDigest"
    assert s3.get_object(Bucket=bucket, Key="c")["Body"].read() == old
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["c"]


def test_default_sdk_checksum_is_returned(s3, bucket):
    # botocore >= 1.36 sends a CRC32 by default; the server must keep it.
    data = random_bytes(10 * KiB, 3)
    s3.put_object(Bucket=bucket, Key="d", Body=data)
    got = s3.get_object(Bucket=bucket, Key="d", ChecksumMode="ENABLED")
    assert got.get("ChecksumCRC32") == checksum_b64("crc32", data)
    assert got["Body"].read() == data


def test_sha256_etag_independence(s3, bucket):
    # The ETag of a single PUT is the MD5, whatever checksum was asked for.
    data = b"etag check"
    r = s3.put_object(Bucket=bucket, Key="e", Body=data, ChecksumAlgorithm="SHA256")
    assert r["ETag"] == '"' + hashlib.md5(data).hexdigest() + '"'


def test_expect_continue_empty_then_nonempty_on_one_connection(node, admin_key, bucket, tmp_path):
    """botocore sends `Expect: 100-continue` for file bodies. When the server
    answers an empty-body request with its final status and no `100 Continue`,
    botocore (1.4x) keeps that status for the next request on the same
    connection and then misreads the real response: the next upload stalls
    until the read timeout. `aws s3 sync` of a tree with empty files hits this.
    Every upload here must finish quickly."""
    c = s3_client(node, admin_key, read_timeout=8)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    full = tmp_path / "full"
    full.write_bytes(b"x" * 1000)
    for i, path in enumerate([empty, full, empty, full, full]):
        t0 = time.monotonic()
        with open(path, "rb") as f:
            c.put_object(Bucket=bucket, Key=f"k{i}", Body=f)
        assert time.monotonic() - t0 < 5, f"upload {i} ({path.name}) stalled"
    sizes = [o["Size"] for o in c.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sizes == [0, 1000, 0, 1000, 1000]
