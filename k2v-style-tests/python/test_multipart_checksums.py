"""The checksum of an object completed from parts, as the S3 user guide's
"Checking object integrity" and the API reference describe it, through
boto3:

- an upload created with ChecksumAlgorithm gets a COMPOSITE checksum by
  default (CRC32, CRC32C, SHA-1, SHA-256): the algorithm over the parts'
  checksums end to end, written `<base64>-<parts>`; CRC64NVME, and CRC32 or
  CRC32C created with ChecksumType=FULL_OBJECT, get the CRC of the whole
  content; CompleteMultipartUpload, HEAD and GET (ChecksumMode=ENABLED),
  GetObjectAttributes and ListParts say which;
- a part listed with another checksum than it was uploaded with is
  InvalidPart, a COMPOSITE completion without the parts' checksums is
  InvalidRequest, an object checksum that the parts do not make is
  BadDigest, and each leaves the upload to complete again;
- CreateMultipartUpload refuses a type its algorithm cannot have.

On one node and on three (written through the first node, read through
the last)."""

from __future__ import annotations

import base64

import pytest

from hangar_testlib import MiB, bucket_name, checksum_b64, random_bytes, s3_client, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)

PARTS = [random_bytes(5 * MiB, 41), random_bytes(5 * MiB, 42), random_bytes(1234, 43)]


def composite(algo: str, parts: list[bytes]) -> str:
    joined = b"".join(base64.b64decode(checksum_b64(algo, p)) for p in parts)
    return f"{checksum_b64(algo, joined)}-{len(parts)}"


def start(s3, bucket: str, key: str, algo: str, kind: str | None = None) -> tuple[str, list[dict]]:
    """Creates the upload and uploads PARTS: its id and the parts to list."""
    kw = {"ChecksumType": kind} if kind else {}
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algo, **kw)["UploadId"]
    listed = []
    for n, body in enumerate(PARTS, 1):
        # The value given, not computed: botocore computes CRC32C and
        # CRC64NVME only with awscrt, which the suite does not install.
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=body,
                           **{f"Checksum{algo}": checksum_b64(algo, body)})
        listed.append({"PartNumber": n, "ETag": r["ETag"], f"Checksum{algo}": r[f"Checksum{algo}"]})
    return up, listed


def clients(cluster):
    nodes, key, _ = cluster
    return s3_client(nodes[0], key), s3_client(nodes[-1], key)


@pytest.mark.parametrize("algo,kind,want_kind", [
    ("CRC32", None, "COMPOSITE"),
    ("SHA256", None, "COMPOSITE"),
    ("CRC32C", None, "COMPOSITE"),
    ("CRC32", "FULL_OBJECT", "FULL_OBJECT"),
    ("CRC32C", "FULL_OBJECT", "FULL_OBJECT"),
    ("CRC64NVME", None, "FULL_OBJECT"),
])
def test_the_object_checksum_is_made_of_the_parts(cluster, algo, kind, want_kind):
    first, last = clients(cluster)
    b = bucket_name("mpsum")
    first.create_bucket(Bucket=b)
    up, listed = start(first, b, "o", algo, kind)
    lp = last.list_parts(Bucket=b, Key="o", UploadId=up)
    assert (lp["ChecksumAlgorithm"], lp["ChecksumType"]) == (algo, want_kind)
    want = composite(algo, PARTS) if want_kind == "COMPOSITE" else checksum_b64(algo, b"".join(PARTS))
    r = first.complete_multipart_upload(Bucket=b, Key="o", UploadId=up, MultipartUpload={"Parts": listed})
    assert (r[f"Checksum{algo}"], r["ChecksumType"]) == (want, want_kind)
    h = last.head_object(Bucket=b, Key="o", ChecksumMode="ENABLED")
    assert (h[f"Checksum{algo}"], h["ChecksumType"]) == (want, want_kind)
    a = last.get_object_attributes(Bucket=b, Key="o", ObjectAttributes=["Checksum"])["Checksum"]
    assert (a[f"Checksum{algo}"], a["ChecksumType"]) == (want, want_kind)
    # botocore checks a whole-object value against the body it reads (a
    # composite one it cannot), and CRC32C and CRC64NVME only with awscrt.
    if algo in ("CRC32", "SHA256"):
        g = last.get_object(Bucket=b, Key="o", ChecksumMode="ENABLED")
        assert (g[f"Checksum{algo}"], g["ChecksumType"]) == (want, want_kind)
        assert g["Body"].read() == b"".join(PARTS)
        # A part read answers the part's own checksum.
        p = last.get_object(Bucket=b, Key="o", PartNumber=2, ChecksumMode="ENABLED")
        assert p[f"Checksum{algo}"] == checksum_b64(algo, PARTS[1])
        assert p["Body"].read() == PARTS[1]


def test_completions_whose_checksums_do_not_hold_are_refused(cluster):
    first, last = clients(cluster)
    b = bucket_name("mpbad")
    first.create_bucket(Bucket=b)
    up, listed = start(first, b, "o", "CRC32")

    def complete(parts, **kw):
        return first.complete_multipart_upload(Bucket=b, Key="o", UploadId=up, MultipartUpload={"Parts": parts},
                                               **kw)

    wrong = [dict(p) for p in listed]
    wrong[1]["ChecksumCRC32"] = checksum_b64("CRC32", b"not this part")
    assert status(lambda: complete(wrong)) == (400, "InvalidPart")
    bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in listed]
    assert status(lambda: complete(bare)) == (400, "InvalidRequest")
    assert status(lambda: complete(listed, ChecksumCRC32=checksum_b64("CRC32", b"other"))) == (400, "BadDigest")
    assert status(lambda: complete(listed, ChecksumType="FULL_OBJECT")) == (400, "InvalidRequest")
    assert status(lambda: last.head_object(Bucket=b, Key="o"))[0] == 404
    # Still in progress: the right checksum (with its part count or
    # without) completes it.
    want = composite("CRC32", PARTS)
    r = complete(listed, ChecksumCRC32=want.split("-")[0])
    assert r["ChecksumCRC32"] == want
    assert last.head_object(Bucket=b, Key="o", ChecksumMode="ENABLED")["ChecksumCRC32"] == want


def test_a_full_object_upload_needs_no_part_checksums_listed(cluster):
    first, last = clients(cluster)
    b = bucket_name("mpfull")
    first.create_bucket(Bucket=b)
    up, listed = start(first, b, "o", "CRC32", "FULL_OBJECT")
    bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in listed]
    want = checksum_b64("CRC32", b"".join(PARTS))
    assert status(lambda: first.complete_multipart_upload(
        Bucket=b, Key="o", UploadId=up, MultipartUpload={"Parts": bare},
        ChecksumCRC32=checksum_b64("CRC32", b"other"))) == (400, "BadDigest")
    r = first.complete_multipart_upload(Bucket=b, Key="o", UploadId=up, MultipartUpload={"Parts": bare},
                                        ChecksumCRC32=want)
    assert (r["ChecksumCRC32"], r["ChecksumType"]) == (want, "FULL_OBJECT")
    assert last.head_object(Bucket=b, Key="o", ChecksumMode="ENABLED")["ChecksumCRC32"] == want


def test_a_type_the_algorithm_cannot_have_is_refused(cluster):
    first, _ = clients(cluster)
    b = bucket_name("mptype")
    first.create_bucket(Bucket=b)
    for algo, kind in [("SHA256", "FULL_OBJECT"), ("SHA1", "FULL_OBJECT"), ("CRC64NVME", "COMPOSITE")]:
        assert status(lambda: first.create_multipart_upload(
            Bucket=b, Key="o", ChecksumAlgorithm=algo, ChecksumType=kind)) == (400, "InvalidRequest"), (algo, kind)
    r = first.create_multipart_upload(Bucket=b, Key="o", ChecksumAlgorithm="CRC32C", ChecksumType="FULL_OBJECT")
    assert (r["ChecksumAlgorithm"], r["ChecksumType"]) == ("CRC32C", "FULL_OBJECT")
    assert first.list_multipart_uploads(Bucket=b)["Uploads"][0]["UploadId"] == r["UploadId"]


def test_the_announced_object_size_must_be_the_parts(cluster):
    # API_CompleteMultipartUpload, x-amz-mp-object-size: "a mismatch ...
    # results in an HTTP 400 InvalidRequest error".
    first, last = clients(cluster)
    b = bucket_name("mpsize")
    first.create_bucket(Bucket=b)
    up, listed = start(first, b, "o", "CRC32")
    size = sum(len(p) for p in PARTS)

    def complete(n):
        return first.complete_multipart_upload(Bucket=b, Key="o", UploadId=up, MultipartUpload={"Parts": listed},
                                               MpuObjectSize=n)

    assert status(lambda: complete(size - 1)) == (400, "InvalidRequest")
    assert status(lambda: complete(size + 1)) == (400, "InvalidRequest")
    assert status(lambda: last.head_object(Bucket=b, Key="o"))[0] == 404
    complete(size)
    assert last.head_object(Bucket=b, Key="o")["ContentLength"] == size
