"""aws-chunked request bodies, written by hand: signed chunks
(STREAMING-AWS4-HMAC-SHA256-PAYLOAD) and unsigned chunks with a checksum
trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER, what current SDKs send by
default over TLS), both with Content-Length and with HTTP chunked transfer."""

import pytest

from hangar_testlib import (
    KiB,
    MiB,
    checksum_b64,
    chunk_pieces,
    compressible_bytes,
    object_path,
    random_bytes,
    send,
    sha256,
    sign_v4,
    signed_chunked_body,
    unsigned_trailer_body,
)

SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"


def _keys(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def put_signed_chunked(node, key, bucket, obj, data, chunk_size=64 * KiB, corrupt_chunk=None, extra=None):
    path = object_path(bucket, obj)
    encoded_len = len(signed_chunked_body(data, chunk_size, _dummy_seed(), None))
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "content-length": str(encoded_len),
    }
    headers.update(extra or {})
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], headers, SIGNED, key)
    body = signed_chunked_body(data, chunk_size, s, corrupt_chunk)
    assert len(body) == encoded_len
    return send(node, "PUT", path, [], s.headers, body)


def _dummy_seed():
    from hangar_testlib import Signed

    return Signed({}, "0" * 64, "20000101T000000Z", "20000101/x/s3/aws4_request", b"k")


@pytest.mark.parametrize(
    "size,chunk",
    [(0, 64 * KiB), (1, 64 * KiB), (3 * KiB, 1 * KiB), (MiB + 1, 64 * KiB), (5 * MiB + 3, 1 * MiB)],
)
def test_signed_chunked_put(node, admin_key, s3, bucket, size, chunk):
    data = random_bytes(size, size)
    r = put_signed_chunked(node, admin_key, bucket, "obj", data, chunk)
    assert r.status == 200, (r.status, r.body)
    got = s3.get_object(Bucket=bucket, Key="obj")
    assert got["ContentLength"] == size
    assert sha256(got["Body"].read()) == sha256(data)


def test_signed_chunked_with_checksum_header(node, admin_key, s3, bucket):
    data = compressible_bytes(300 * KiB, 1)
    r = put_signed_chunked(
        node, admin_key, bucket, "obj", data, extra={"x-amz-checksum-sha256": checksum_b64("sha256", data)}
    )
    assert r.status == 200, r.body
    got = s3.get_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == checksum_b64("sha256", data)
    assert got["Body"].read() == data


@pytest.mark.parametrize("which", ["first", "middle", "final-empty"])
def test_signed_chunked_bad_chunk_signature(node, admin_key, s3, bucket, which):
    old = b"the old object"
    s3.put_object(Bucket=bucket, Key="obj", Body=old)
    data = random_bytes(3 * MiB + 100, 7)
    n = len(chunk_pieces(data, 256 * KiB))
    idx = {"first": 0, "middle": n // 2, "final-empty": n}[which]
    r = put_signed_chunked(node, admin_key, bucket, "obj", data, 256 * KiB, corrupt_chunk=idx)
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", (r.status, r.body)
    r = put_signed_chunked(node, admin_key, bucket, "other", data, 256 * KiB, corrupt_chunk=idx)
    assert r.status == 403 and r.code == "SignatureDoesNotMatch", (r.status, r.body)
    assert s3.get_object(Bucket=bucket, Key="obj")["Body"].read() == old
    assert _keys(s3, bucket) == ["obj"]


def test_signed_chunked_decoded_length_mismatch(node, admin_key, s3, bucket):
    data = random_bytes(10 * KiB, 8)
    path = object_path(bucket, "obj")
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data) + 1),
    }
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], headers, SIGNED, admin_key)
    body = signed_chunked_body(data, 4 * KiB, s)
    r = send(node, "PUT", path, [], s.headers, body)
    assert 400 <= r.status < 500, (r.status, r.body)
    assert _keys(s3, bucket) == []


def put_unsigned_trailer(node, key, bucket, obj, data, algo="crc32", value=None, chunk_size=64 * KiB, http_chunked=False):
    path = object_path(bucket, obj)
    trailer = f"x-amz-checksum-{algo}"
    value = value or checksum_b64(algo, data)
    body = unsigned_trailer_body(data, chunk_size, trailer, value)
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": trailer,
        "x-amz-sdk-checksum-algorithm": algo.upper(),
    }
    if not http_chunked:
        headers["content-length"] = str(len(body))
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], headers, UNSIGNED_TRAILER, key)
    if http_chunked:
        # like botocore over https: the aws-chunked body inside HTTP chunked transfer
        return send(node, "PUT", path, [], s.headers, chunk_pieces(body, 100 * KiB), encode_chunked=True)
    return send(node, "PUT", path, [], s.headers, body)


@pytest.mark.parametrize("http_chunked", [False, True], ids=["content-length", "transfer-chunked"])
@pytest.mark.parametrize("algo", ["crc32", "crc32c", "sha1", "sha256", "crc64nvme"])
@pytest.mark.parametrize("size", [0, 3 * KiB, MiB + 1])
def test_unsigned_trailer_put(node, admin_key, s3, bucket, size, algo, http_chunked):
    data = random_bytes(size, size + 3)
    r = put_unsigned_trailer(node, admin_key, bucket, "obj", data, algo, http_chunked=http_chunked)
    assert r.status == 200, (r.status, r.body)
    assert r.header(f"x-amz-checksum-{algo}") == checksum_b64(algo, data)
    head = s3.head_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert head["ResponseMetadata"]["HTTPHeaders"].get(f"x-amz-checksum-{algo}") == checksum_b64(algo, data)
    assert sha256(s3.get_object(Bucket=bucket, Key="obj")["Body"].read()) == sha256(data)


def test_unsigned_trailer_large(node, admin_key, s3, bucket):
    data = random_bytes(20 * MiB + 5, 20)
    r = put_unsigned_trailer(node, admin_key, bucket, "big", data, "crc32", chunk_size=MiB, http_chunked=True)
    assert r.status == 200, r.body
    assert sha256(s3.get_object(Bucket=bucket, Key="big")["Body"].read()) == sha256(data)


@pytest.mark.parametrize("http_chunked", [False, True], ids=["content-length", "transfer-chunked"])
@pytest.mark.parametrize("algo", ["crc32", "crc32c", "sha256"])
def test_unsigned_trailer_wrong_checksum(node, admin_key, s3, bucket, algo, http_chunked):
    old = b"old"
    s3.put_object(Bucket=bucket, Key="obj", Body=old)
    data = random_bytes(2 * MiB, 5)
    wrong = checksum_b64(algo, data[:-1])
    r = put_unsigned_trailer(node, admin_key, bucket, "obj", data, algo, value=wrong, http_chunked=http_chunked)
    assert r.status == 400 and r.code == "BadDigest", (r.status, r.body)
    r = put_unsigned_trailer(node, admin_key, bucket, "fresh", data, algo, value=wrong, http_chunked=http_chunked)
    assert r.status == 400 and r.code == "BadDigest", (r.status, r.body)
    assert s3.get_object(Bucket=bucket, Key="obj")["Body"].read() == old
    assert _keys(s3, bucket) == ["obj"]


def test_botocore_aws_chunked_wrapper_body(node, admin_key, s3, bucket):
    # The exact body botocore builds for PutObject over TLS (its own encoder).
    import io

    from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

    data = random_bytes(3 * MiB + 9, 12)
    body = AwsChunkedWrapper(
        io.BytesIO(data), checksum_cls=Crc32Checksum, checksum_name="x-amz-checksum-crc32"
    ).read()
    path = object_path(bucket, "sdk")
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "x-amz-sdk-checksum-algorithm": "CRC32",
    }
    s = sign_v4("PUT", f"127.0.0.1:{node.s3_port}", path, [], headers, UNSIGNED_TRAILER, admin_key)
    r = send(node, "PUT", path, [], s.headers, chunk_pieces(body, 256 * KiB), encode_chunked=True)
    assert r.status == 200, (r.status, r.body)
    got = s3.get_object(Bucket=bucket, Key="sdk", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == checksum_b64("crc32", data)
    assert sha256(got["Body"].read()) == sha256(data)


def test_boto3_default_put_is_accepted(s3, bucket):
    # Over plain http botocore signs the payload and sends x-amz-checksum-crc32
    # as a header; this checks that path end to end with a multi-block body.
    data = random_bytes(4 * MiB + 1, 4)
    s3.put_object(Bucket=bucket, Key="obj", Body=data)
    got = s3.get_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == checksum_b64("crc32", data)
    assert sha256(got["Body"].read()) == sha256(data)
