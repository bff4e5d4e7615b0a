"""minio-go v7, the S3 client of MinIO's `warp` benchmark, in the client
matrix. warp itself cannot be built here (no Go module proxy), but its
client library can: k2v-style-tests/go/minio-warp is a small program on
Debian's minio-go (golang-github-minio-minio-go-v7-dev, installed with
golang-go by script/install-test-deps) that does what warp does — create a
bucket, PUT 4 KiB objects and 10 MiB multipart ones (minio-go's parallel
uploader, its sequential uploader with CRC32C part checksums, and CRC32C
trailers), GET/STAT them with content checks, list by prefix and delimiter
(paged, V1 and V2, with minio-go's metadata listing extension), `warp
mixed`'s 45/30/15/10 GET/STAT/PUT/DELETE mix for a few seconds, and
RemoveObjects in batches — and fails on any mismatch or error.

It is built once per session, offline, in GOPATH mode, and run against the
session's node and against a 3-node cluster (requests spread over the
three endpoints, as warp's --host a,b,c does)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster_testlib import key_of, laid_out_cluster
from hangar_testlib import REGION, REPO, bucket_name, session_dir

SRC = REPO / "k2v-style-tests" / "go" / "minio-warp"
GOCODE = Path("/usr/share/gocode/src")
MINIO_GO = GOCODE / "github.com" / "minio" / "minio-go" / "v7"


def _minio_go_version() -> str:
    m = re.search(r'libraryVersion\s*=\s*"([^"]+)"', (MINIO_GO / "api.go").read_text())
    return m.group(1) if m else "unknown"


@pytest.fixture(scope="session")
def minio_warp(tmp_path_factory) -> Path:
    """The program, built offline against Debian's Go sources."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("`go` is not installed (script/install-test-deps installs golang-go)")
    if not MINIO_GO.is_dir():
        pytest.skip(f"{MINIO_GO} is missing (script/install-test-deps installs golang-github-minio-minio-go-v7-dev)")
    tmp = session_dir(tmp_path_factory, "minio-warp")
    out = tmp / "minio-warp"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GO", "CGO"))}
    env.update(
        GO111MODULE="off",
        GOPATH=f"{tmp / 'gopath'}:{GOCODE.parent}",
        GOFLAGS="",
        GOPROXY="off",
        GOCACHE=str(tmp / "gocache"),
        CGO_ENABLED="0",
    )
    res = subprocess.run(
        [go, "build", "-ldflags", f"-X main.minioGoVersion={_minio_go_version()}", "-o", str(out), "."],
        cwd=SRC,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, f"go build of {SRC} failed:\n{res.stdout}\n{res.stderr}"
    return out


def run_warp(prog: Path, endpoints: list[str], key, bucket: str, *extra: str) -> str:
    res = subprocess.run(
        [
            str(prog),
            "-endpoint", ",".join(endpoints),
            "-access-key", key.id,
            "-secret-key", key.secret,
            "-region", REGION,
            "-bucket", bucket,
            "-duration", "3s",
            "-concurrent", "8",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=150,
    )
    print(res.stdout)
    assert res.returncode == 0, f"minio-warp exited {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "minio-warp: OK" in res.stdout
    return res.stdout


def test_minio_go_warp_single_node(minio_warp, node, admin_key, s3):
    name = bucket_name("minio-go")
    run_warp(minio_warp, [f"127.0.0.1:{node.s3_port}"], admin_key, name)
    # It removed its bucket at the end.
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "mgo")
    yield nodes
    for n in nodes:
        n.stop()


def test_minio_go_warp_three_nodes(minio_warp, cluster):
    n1 = cluster[0]
    key = key_of(n1.cli_json("key", "create", "minio-go"), "minio-go")
    n1.cli("key", "allow", key.id, "--create-bucket")
    run_warp(minio_warp, [f"127.0.0.1:{n.s3_port}" for n in cluster], key, bucket_name("minio-go-cluster"))
