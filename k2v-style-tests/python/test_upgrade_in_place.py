"""A node directory written by an older binary (row format 1: hashes and ids
as arrays of integers, block entries without offsets) is served by this
one after an in-place upgrade. Opt-in: set HANGAR_OLD_BIN to a hangar binary
built from a commit before row format 2 (e.g. e8c0299)."""

import os
from pathlib import Path

import pytest

import hangar_testlib
from hangar_testlib import MiB, Node, random_bytes, s3_client

OLD_BIN = os.environ.get("HANGAR_OLD_BIN")
pytestmark = pytest.mark.skipif(not OLD_BIN, reason="HANGAR_OLD_BIN not set")

BIG = random_bytes(3 * MiB + 500, 11)  # four blocks
PART1 = random_bytes(5 * MiB + 123, 12)
PART2 = random_bytes(MiB + 7, 13)
PENDING1 = random_bytes(5 * MiB + 9, 14)
PENDING2 = random_bytes(2 * MiB + 1, 15)


def ranges(size):
    return [
        (0, 0),
        (size - 1, size - 1),
        (MiB - 1, MiB),
        (MiB, 2 * MiB - 1),
        (MiB + 10, size - 1),
        (size // 2, size // 2 + 3 * MiB // 2),
    ]


def check_ranges(s3, bucket, key, data):
    for start, end in ranges(len(data)):
        end = min(end, len(data) - 1)
        r = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")
        assert r["Body"].read() == data[start : end + 1], (key, start, end)


def multipart(s3, bucket, key, chunks, upload=None, first=1):
    up = upload or s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for n, c in enumerate(chunks, first):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=c)
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    return up, parts


def test_a_node_written_by_the_old_binary_is_served_after_upgrade(tmp_path, monkeypatch):
    node = Node(tmp_path / "node", fsync=True)
    monkeypatch.setattr(hangar_testlib, "HANGAR_BIN", Path(OLD_BIN))
    node.start()
    try:
        key = node.create_key("upgrade", create_bucket=True)
        s3 = s3_client(node, key)
        s3.create_bucket(Bucket="old")
        s3.put_object(Bucket="old", Key="small", Body=b"tiny")
        s3.put_object(Bucket="old", Key="big", Body=BIG)
        up, parts = multipart(s3, "old", "mp", [PART1, PART2])
        s3.complete_multipart_upload(
            Bucket="old", Key="mp", UploadId=up, MultipartUpload={"Parts": parts}
        )
        pending, pending_parts = multipart(s3, "old", "pending", [PENDING1])
    finally:
        node.stop()

    monkeypatch.setattr(hangar_testlib, "HANGAR_BIN", Path(os.environ["HANGAR_BIN"]))
    node.start()
    try:
        s3 = s3_client(node, key)  # the key row is of format 1
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="old")["Contents"])
        assert keys == ["big", "mp", "small"]
        assert s3.get_object(Bucket="old", Key="small")["Body"].read() == b"tiny"
        assert s3.get_object(Bucket="old", Key="big")["Body"].read() == BIG
        check_ranges(s3, "old", "big", BIG)  # block entries without offsets
        mp = PART1 + PART2
        assert s3.get_object(Bucket="old", Key="mp")["Body"].read() == mp
        check_ranges(s3, "old", "mp", mp)

        # The upload begun before the upgrade completes, with a new part.
        _, more = multipart(s3, "old", "pending", [PENDING2], upload=pending, first=2)
        s3.complete_multipart_upload(
            Bucket="old",
            Key="pending",
            UploadId=pending,
            MultipartUpload={"Parts": pending_parts + more},
        )
        done = PENDING1 + PENDING2
        check_ranges(s3, "old", "pending", done)
        assert s3.get_object(Bucket="old", Key="pending")["Body"].read() == done

        # A copy of an old object shares its blocks with offsets.
        s3.copy_object(Bucket="old", Key="big2", CopySource={"Bucket": "old", "Key": "big"})
        check_ranges(s3, "old", "big2", BIG)
        s3.delete_object(Bucket="old", Key="big")
        assert s3.get_object(Bucket="old", Key="big2")["Body"].read() == BIG
    finally:
        node.stop()
