"""GetObject / HeadObject options through boto3: Range, conditional
headers (RFC 7232 as S3 applies them), response-* overrides."""

import datetime as dt

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, error_code, http_status, random_bytes

SIZE = 2 * MiB + 333  # spans three 1 MiB blocks
DATA = random_bytes(SIZE, 4242)


@pytest.fixture(scope="module")
def obj(s3):
    from hangar_testlib import bucket_name

    b = bucket_name("get-options")
    s3.create_bucket(Bucket=b)
    put = s3.put_object(Bucket=b, Key="o", Body=DATA)
    head = s3.head_object(Bucket=b, Key="o")
    return b, put["ETag"], head["LastModified"]


@pytest.mark.parametrize(
    "rng,start,end",
    [
        ("bytes=0-0", 0, 0),
        ("bytes=0-99", 0, 99),
        ("bytes=100-199", 100, 199),
        ("bytes=1048570-1048580", 1048570, 1048580),  # crosses a block boundary
        (f"bytes=0-{MiB - 1}", 0, MiB - 1),
        (f"bytes=1000-{2 * MiB + 10}", 1000, 2 * MiB + 10),  # crosses two boundaries
        (f"bytes={SIZE - 1}-{SIZE - 1}", SIZE - 1, SIZE - 1),
        (f"bytes=100-{SIZE + 1000}", 100, SIZE - 1),  # end past the object: clamped
        ("bytes=-500", SIZE - 500, SIZE - 1),  # suffix
        (f"bytes=-{SIZE + 10}", 0, SIZE - 1),  # suffix longer than the object
        (f"bytes={SIZE - 700}-", SIZE - 700, SIZE - 1),  # open
        ("bytes=0-", 0, SIZE - 1),
    ],
)
def test_range(s3, obj, rng, start, end):
    b, etag, _ = obj
    r = s3.get_object(Bucket=b, Key="o", Range=rng)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    body = r["Body"].read()
    assert body == DATA[start : end + 1]
    assert r["ContentLength"] == end - start + 1
    assert r["ContentRange"] == f"bytes {start}-{end}/{SIZE}"
    assert r["ETag"] == etag


PART1 = 5 * MiB + 123  # five full blocks and a 123-byte one
PART2 = MiB + 7
MP_DATA = random_bytes(PART1 + PART2, 4343)


@pytest.fixture(scope="module")
def multipart_obj(s3):
    from hangar_testlib import bucket_name

    b = bucket_name("get-options-mp")
    s3.create_bucket(Bucket=b)
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    parts = []
    for n, chunk in [(1, MP_DATA[:PART1]), (2, MP_DATA[PART1:])]:
        r = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=n, Body=chunk)
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    s3.complete_multipart_upload(
        Bucket=b, Key="mp", UploadId=up, MultipartUpload={"Parts": parts}
    )
    return b


@pytest.mark.parametrize(
    "start,end",
    [
        (PART1 - 1, PART1 - 1),  # last byte of part 1 (in its short block)
        (PART1, PART1),  # first byte of part 2
        (PART1 - 200, PART1 + 200),  # across the parts
        (5 * MiB - 1, 5 * MiB),  # into part 1's short block
        (PART1 + MiB, PART1 + PART2 - 1),  # the last block of part 2
        (3 * MiB + 5, PART1 + MiB + 3),  # several blocks of both parts
    ],
)
def test_range_of_a_multipart_object(s3, multipart_obj, start, end):
    # Each range is found from the block offsets that completion renumbers.
    r = s3.get_object(Bucket=multipart_obj, Key="mp", Range=f"bytes={start}-{end}")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["Body"].read() == MP_DATA[start : end + 1]
    assert r["ContentRange"] == f"bytes {start}-{end}/{PART1 + PART2}"


def test_head_range(s3, obj):
    # S3 reference (HeadObject, Range): "If the Range is satisfiable, only the
    # ContentLength is affected in the response. If the Range is not
    # satisfiable, S3 returns a 416 - Requested Range Not Satisfiable error."
    b, _, _ = obj
    r = s3.head_object(Bucket=b, Key="o", Range="bytes=10-19")
    assert r["ContentLength"] == 10
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key="o", Range=f"bytes={SIZE}-")
    assert http_status(e.value) == 416


@pytest.mark.parametrize("rng", [f"bytes={SIZE}-", f"bytes={SIZE + 5}-{SIZE + 10}"])
def test_unsatisfiable_range(s3, obj, rng):
    b, _, _ = obj
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="o", Range=rng)
    assert http_status(e.value) == 416
    assert error_code(e.value) == "InvalidRange"


def test_accept_ranges_header(s3, obj):
    b, _, _ = obj
    r = s3.get_object(Bucket=b, Key="o", Range="bytes=0-0")
    assert r["AcceptRanges"] == "bytes"


def _past(lm):
    return lm - dt.timedelta(days=1)


def _future(lm):
    return lm + dt.timedelta(days=1)


def _expect(s3, b, status, **cond):
    """GetObject and HeadObject with conditions: 200 with the body, or the error status."""
    for op in ("get", "head"):
        fn = s3.get_object if op == "get" else s3.head_object
        if status == 200:
            r = fn(Bucket=b, Key="o", **cond)
            assert r["ResponseMetadata"]["HTTPStatusCode"] == 200, (op, cond)
            if op == "get":
                assert r["Body"].read() == DATA
        else:
            with pytest.raises(ClientError) as e:
                fn(Bucket=b, Key="o", **cond)
            assert http_status(e.value) == status, (op, cond, e.value.response)
            if op == "get" and status == 412:
                assert error_code(e.value) == "PreconditionFailed"


def test_if_match(s3, obj):
    b, etag, _ = obj
    _expect(s3, b, 200, IfMatch=etag)
    _expect(s3, b, 200, IfMatch="*")
    _expect(s3, b, 412, IfMatch='"0123456789abcdef0123456789abcdef"')


def test_if_none_match(s3, obj):
    b, etag, _ = obj
    _expect(s3, b, 304, IfNoneMatch=etag)
    _expect(s3, b, 304, IfNoneMatch="*")
    _expect(s3, b, 200, IfNoneMatch='"0123456789abcdef0123456789abcdef"')


def test_if_modified_since(s3, obj):
    b, _, lm = obj
    _expect(s3, b, 200, IfModifiedSince=_past(lm))
    _expect(s3, b, 304, IfModifiedSince=_future(lm))
    _expect(s3, b, 304, IfModifiedSince=lm)


def test_if_unmodified_since(s3, obj):
    b, _, lm = obj
    _expect(s3, b, 200, IfUnmodifiedSince=_future(lm))
    _expect(s3, b, 200, IfUnmodifiedSince=lm)
    _expect(s3, b, 412, IfUnmodifiedSince=_past(lm))


def test_condition_precedence(s3, obj):
    b, etag, lm = obj
    # If-Match true wins over If-Unmodified-Since false (S3 GetObject docs)
    _expect(s3, b, 200, IfMatch=etag, IfUnmodifiedSince=_past(lm))
    # If-None-Match false -> 304 even if If-Modified-Since true
    _expect(s3, b, 304, IfNoneMatch=etag, IfModifiedSince=_past(lm))
    # If-None-Match true: If-Modified-Since is ignored
    _expect(s3, b, 200, IfNoneMatch='"ffffffffffffffffffffffffffffffff"', IfModifiedSince=_future(lm))
    # If-Match false -> 412 whatever the rest says
    _expect(s3, b, 412, IfMatch='"ffffffffffffffffffffffffffffffff"', IfNoneMatch='"aaaa"')


def test_not_modified_carries_etag(s3, obj):
    b, etag, _ = obj
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="o", IfNoneMatch=etag)
    assert http_status(e.value) == 304
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("etag") == etag


def test_response_overrides(s3, obj):
    b, _, _ = obj
    exp = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    r = s3.get_object(
        Bucket=b,
        Key="o",
        ResponseContentType="application/x-override",
        ResponseContentLanguage="de-DE",
        ResponseExpires=exp,
        ResponseCacheControl="no-cache",
        ResponseContentDisposition='inline; filename="x.bin"',
        ResponseContentEncoding="x-custom",
    )
    assert r["ContentType"] == "application/x-override"
    assert r["ContentLanguage"] == "de-DE"
    assert r["Expires"] == exp
    assert r["CacheControl"] == "no-cache"
    assert r["ContentDisposition"] == 'inline; filename="x.bin"'
    assert r["ContentEncoding"] == "x-custom"
    assert r["Body"].read() == DATA
    # overrides are per response: stored metadata is unchanged
    h = s3.head_object(Bucket=b, Key="o")
    assert h["ContentType"] != "application/x-override"
    assert "ContentLanguage" not in h
