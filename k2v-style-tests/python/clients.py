"""Running the real command-line clients (aws-cli, rclone, s3cmd) against a
node, each with a private configuration, and the directory trees they copy."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hangar_testlib import REGION, KiB, MiB, Key, Node, compressible_bytes, random_bytes

# Files of the tree: relative path -> content. Covers empty files, block
# boundaries, nesting, spaces and unicode in names.
TREE = {
    "empty.txt": b"",
    "one.bin": b"\x00",
    "small.txt": compressible_bytes(3 * KiB, 1),
    "dir/block.bin": random_bytes(MiB, 2),
    "dir/block-1.bin": random_bytes(MiB - 1, 3),
    "dir/block+1.bin": random_bytes(MiB + 1, 4),
    "dir/sub/empty too": b"",
    "dir/sub/text ü.txt": compressible_bytes(200 * KiB, 5),
    "deep/a/b/c/d/leaf.bin": random_bytes(5 * MiB + 3, 6),
    "deep/a/b/c/d/empty": b"",
}


def write_tree(root: Path, tree: dict[str, bytes] = TREE) -> Path:
    for rel, data in tree.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


def assert_same_tree(a: Path, b: Path) -> None:
    """Same relative file paths and byte-identical contents."""
    fa = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    fb = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    assert fa == fb
    for rel in fa:
        assert filecmp.cmp(a / rel, b / rel, shallow=False), rel


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed (.ci/run installs it)")
    return path


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
    env.update(extra)
    return env


class AwsCli:
    """`aws` with its own config and credentials files."""

    def __init__(self, node: Node, key: Key, tmp: Path):
        need("aws")
        self.node = node
        cfg = tmp / "aws-config"
        cfg.write_text(
            f"""[default]
region = {REGION}
s3 =
    multipart_threshold = 5GB
    addressing_style = path
"""
        )
        creds = tmp / "aws-credentials"
        creds.write_text(
            f"[default]\naws_access_key_id = {key.id}\naws_secret_access_key = {key.secret}\n"
        )
        self.env = clean_env(
            {
                "AWS_CONFIG_FILE": str(cfg),
                "AWS_SHARED_CREDENTIALS_FILE": str(creds),
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_MAX_ATTEMPTS": "1",
                "AWS_PAGER": "",
            }
        )

    def run(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(
            ["aws", "--endpoint-url", self.node.endpoint, *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"aws {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res


class Rclone:
    """rclone with a remote `hg:` defined through environment variables only."""

    def __init__(self, node: Node, key: Key):
        need("rclone")
        self.env = clean_env(
            {
                "RCLONE_CONFIG": "/dev/null",
                "RCLONE_CONFIG_HG_TYPE": "s3",
                "RCLONE_CONFIG_HG_PROVIDER": "Other",
                "RCLONE_CONFIG_HG_ACCESS_KEY_ID": key.id,
                "RCLONE_CONFIG_HG_SECRET_ACCESS_KEY": key.secret,
                "RCLONE_CONFIG_HG_ENDPOINT": node.endpoint,
                "RCLONE_CONFIG_HG_REGION": REGION,
                "RCLONE_CONFIG_HG_FORCE_PATH_STYLE": "true",
                "RCLONE_CONFIG_HG_UPLOAD_CUTOFF": "5G",
                "RCLONE_CONFIG_HG_CHUNK_SIZE": "64M",
            }
        )

    def run(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(
            ["rclone", "--retries", "1", "--low-level-retries", "1", *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"rclone {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res


class S3cmd:
    """s3cmd with a generated .s3cfg (path style, SigV4)."""

    def __init__(self, node: Node, key: Key, tmp: Path):
        need("s3cmd")
        host = f"127.0.0.1:{node.s3_port}"
        self.cfg = tmp / "s3cfg"
        self.cfg.write_text(
            f"""[default]
access_key = {key.id}
secret_key = {key.secret}
host_base = {host}
host_bucket = {host}
bucket_location = {REGION}
use_https = False
signature_v2 = False
check_ssl_certificate = False
enable_multipart = False
"""
        )
        self.env = clean_env({"HOME": str(tmp)})

    def run(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run(
            ["s3cmd", "-c", str(self.cfg), "--no-progress", *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"s3cmd {' '.join(args)} -> {res.returncode}\n{res.stdout}\n{res.stderr}")
        return res
