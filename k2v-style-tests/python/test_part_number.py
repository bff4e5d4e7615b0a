"""The parts of a completed multipart object, as the AWS S3 API reference
describes GetObject and HeadObject with `partNumber` and
GetObjectAttributes' `ObjectParts`:

- GET and HEAD with `partNumber=N` answer part N's bytes (206, its
  Content-Range, `x-amz-mp-parts-count`), where N is the part number the
  upload gave it (a completion may list 1, 3 and 7); a number the object
  lacks is 416 InvalidPartNumber, one outside 1–10000 400
  InvalidArgument, and a Range with it 400 InvalidRequest;
- with ChecksumMode=ENABLED a part read answers the part's own checksum;
- GetObjectAttributes' ObjectParts pages the parts (MaxParts,
  PartNumberMarker, NextPartNumberMarker, IsTruncated) and lists each
  `Part` (number, size, checksum) when the parts carry a checksum, only
  the counts otherwise (as S3 does for a general-purpose bucket);
- a copy of the object keeps its parts, an SSE-C object's parts open with
  its key, and an empty last part is a part too.

On one node and on three (written through the first node, read through
the last)."""

from __future__ import annotations

from hangar_testlib import REGION, KiB, MiB, bucket_name, checksum_b64, random_bytes, s3_client, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
SSE = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": bytes(range(32))}


def upload(s3, bucket: str, key: str, parts: dict[int, bytes], checksum: str | None = None, **extra) -> str:
    """Uploads `parts` (number → bytes) and completes them in order."""
    kw = {"ChecksumAlgorithm": checksum} if checksum else {}
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, **kw, **extra)["UploadId"]
    done = []
    for n, body in sorted(parts.items()):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=body, **kw, **extra)
        entry = {"PartNumber": n, "ETag": r["ETag"]}
        if checksum:
            entry[f"Checksum{checksum}"] = r[f"Checksum{checksum}"]
        done.append(entry)
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                        MultipartUpload={"Parts": done})["ETag"]


def unchecksummed(node, key):
    """A boto3 client that sends no checksum it is not required to."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=node.endpoint, region_name=REGION, aws_access_key_id=key.id,
        aws_secret_access_key=key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      request_checksum_calculation="when_required"),
    )


def clients(cluster):
    nodes, key, _ = cluster
    return s3_client(nodes[0], key), s3_client(nodes[-1], key)


def test_get_and_head_read_the_part_the_upload_numbered(cluster):
    first, last = clients(cluster)
    b = bucket_name("partnum")
    first.create_bucket(Bucket=b)
    parts = {1: random_bytes(5 * MiB, 1), 3: random_bytes(5 * MiB + 17, 3), 7: random_bytes(300 * KiB, 7)}
    etag = upload(first, b, "mp", parts)
    total = sum(len(p) for p in parts.values())
    offset = 0
    for n, body in sorted(parts.items()):
        r = last.get_object(Bucket=b, Key="mp", PartNumber=n)
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert r["Body"].read() == body, n
        assert r["ContentLength"] == len(body)
        assert r["ContentRange"] == f"bytes {offset}-{offset + len(body) - 1}/{total}"
        assert r["PartsCount"] == 3 and r["ETag"] == etag
        h = last.head_object(Bucket=b, Key="mp", PartNumber=n)
        assert h["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert (h["ContentLength"], h["PartsCount"]) == (len(body), 3)
        offset += len(body)
    # Numbers the upload did not give, and numbers S3 never accepts.
    for n in (2, 4, 8, 10000):
        assert status(lambda: last.get_object(Bucket=b, Key="mp", PartNumber=n)) == (416, "InvalidPartNumber"), n
    assert status(lambda: last.head_object(Bucket=b, Key="mp", PartNumber=2))[0] == 416
    assert status(lambda: last.get_object(Bucket=b, Key="mp", PartNumber=10001)) == (400, "InvalidArgument")
    assert status(lambda: last.get_object(Bucket=b, Key="mp", PartNumber=1, Range="bytes=0-9")) == \
        (400, "InvalidRequest")
    # The whole object is unchanged, and a plain object is its own part 1.
    assert last.get_object(Bucket=b, Key="mp")["Body"].read() == b"".join(parts[n] for n in sorted(parts))
    first.put_object(Bucket=b, Key="plain", Body=b"one part")
    r = last.get_object(Bucket=b, Key="plain", PartNumber=1)
    assert r["Body"].read() == b"one part" and "PartsCount" not in r
    assert status(lambda: last.get_object(Bucket=b, Key="plain", PartNumber=2)) == (416, "InvalidPartNumber")


def test_object_parts_are_paged_with_their_checksums(cluster):
    first, last = clients(cluster)
    b = bucket_name("partattr")
    first.create_bucket(Bucket=b)
    parts = {2: random_bytes(5 * MiB, 20), 5: random_bytes(5 * MiB, 50), 9: b"last part"}
    upload(first, b, "crc", parts, checksum="CRC32")
    r = last.get_object_attributes(Bucket=b, Key="crc", ObjectAttributes=ALL)
    op = r["ObjectParts"]
    assert (op["TotalPartsCount"], op["IsTruncated"], op["MaxParts"]) == (3, False, 1000)
    assert [(p["PartNumber"], p["Size"], p["ChecksumCRC32"]) for p in op["Parts"]] == \
        [(n, len(body), checksum_b64("CRC32", body)) for n, body in sorted(parts.items())]
    # One part a page, from each marker to the next.
    seen, marker = [], 0
    while True:
        op = last.get_object_attributes(Bucket=b, Key="crc", ObjectAttributes=["ObjectParts"], MaxParts=1,
                                        PartNumberMarker=marker)["ObjectParts"]
        assert op["MaxParts"] == 1 and op["PartNumberMarker"] == marker
        seen += [p["PartNumber"] for p in op.get("Parts", [])]
        if not op["IsTruncated"]:
            break
        marker = op["NextPartNumberMarker"]
    assert seen == [2, 5, 9]
    # A part read with checksums asked answers the part's own.
    g = last.get_object(Bucket=b, Key="crc", PartNumber=5, ChecksumMode="ENABLED")
    assert g["ChecksumCRC32"] == checksum_b64("CRC32", parts[5])
    assert g["Body"].read() == parts[5]
    # Parts uploaded without a checksum (boto3 adds a CRC32 to each unless
    # told not to): the counts, not the parts.
    nodes, key, _ = cluster
    upload(unchecksummed(nodes[0], key), b, "plain", {1: random_bytes(5 * MiB, 1), 2: b"x"})
    op = last.get_object_attributes(Bucket=b, Key="plain", ObjectAttributes=["ObjectParts"],
                                    MaxParts=1)["ObjectParts"]
    assert (op["TotalPartsCount"], op["IsTruncated"], op["NextPartNumberMarker"]) == (2, True, 1)
    assert "Parts" not in op


def test_copies_and_sse_c_objects_keep_their_parts(cluster):
    first, last = clients(cluster)
    b = bucket_name("partcopy")
    first.create_bucket(Bucket=b)
    parts = {1: random_bytes(5 * MiB, 11), 2: random_bytes(2 * MiB, 12)}
    upload(first, b, "src", parts)
    first.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "src"})
    first.delete_object(Bucket=b, Key="src")
    r = last.get_object(Bucket=b, Key="copy", PartNumber=2)
    assert r["Body"].read() == parts[2] and r["PartsCount"] == 2
    upload(first, b, "sealed", parts, **SSE)
    assert status(lambda: last.get_object(Bucket=b, Key="sealed", PartNumber=2))[0] == 400
    r = last.get_object(Bucket=b, Key="sealed", PartNumber=2, **SSE)
    assert r["Body"].read() == parts[2]
    assert r["ContentRange"] == f"bytes {len(parts[1])}-{len(parts[1]) + len(parts[2]) - 1}/{5 * MiB + 2 * MiB}"


def test_an_empty_last_part_is_a_part(cluster):
    first, last = clients(cluster)
    b = bucket_name("partempty")
    first.create_bucket(Bucket=b)
    head = random_bytes(5 * MiB, 1)
    upload(first, b, "tail", {1: head, 2: b""})
    r = last.get_object(Bucket=b, Key="tail", PartNumber=2)
    assert (r["ContentLength"], r["PartsCount"]) == (0, 2)
    assert r["Body"].read() == b""
    assert last.get_object(Bucket=b, Key="tail", PartNumber=1)["Body"].read() == head
