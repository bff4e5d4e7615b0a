"""Multipart uploads as clients do them with their default settings: aws-cli
switches to multipart above 8 MiB (and to UploadPartCopy for large s3->s3
copies), rclone above 200 MiB unless told otherwise."""

from __future__ import annotations

import hashlib

import pytest

from clients import AwsCli, Rclone
from hangar_testlib import random_bytes


@pytest.fixture
def aws_default(node, admin_key, tmp_path):
    cli = AwsCli(node, admin_key, tmp_path)
    cfg = tmp_path / "aws-config"
    # Back to aws-cli's defaults: multipart above 8 MiB, in 8 MiB parts.
    cfg.write_text(cfg.read_text().replace("    multipart_threshold = 5GB\n", ""))
    return cli


def test_aws_cli_multipart_up_down_and_copy(aws_default, s3, bucket, tmp_path):
    data = random_bytes(20 * 1024 * 1024 + 5, 11)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    aws_default.run("s3", "cp", str(src), f"s3://{bucket}/big.bin")
    head = s3.head_object(Bucket=bucket, Key="big.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]
    dst = tmp_path / "back.bin"
    aws_default.run("s3", "cp", f"s3://{bucket}/big.bin", str(dst))
    assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(data).digest()
    aws_default.run("s3", "cp", f"s3://{bucket}/big.bin", f"s3://{bucket}/copy.bin")
    got = s3.get_object(Bucket=bucket, Key="copy.bin")["Body"].read()
    assert got == data
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_rclone_multipart(node, admin_key, bucket, s3, tmp_path):
    rc = Rclone(node, admin_key)
    rc.env["RCLONE_CONFIG_HG_UPLOAD_CUTOFF"] = "5M"
    rc.env["RCLONE_CONFIG_HG_CHUNK_SIZE"] = "5M"
    data = random_bytes(12 * 1024 * 1024 + 1, 12)
    src = tmp_path / "src"
    src.mkdir()
    (src / "f.bin").write_bytes(data)
    rc.run("copy", str(src), f"hg:{bucket}/r")
    assert s3.get_object(Bucket=bucket, Key="r/f.bin")["Body"].read() == data
    rc.run("check", str(src), f"hg:{bucket}/r")
