"""Bucket quotas (doc/operations.md, "Quotas"), as Garage has them: `hangar
bucket set-quotas B --max-size 10G --max-objects 1000`, the admin API's
UpdateBucketQuotas, `bucket info`. A write that would pass a quota —
PutObject, CopyObject, CompleteMultipartUpload, PostObject — gets `403
AccessDenied` saying which quota; deleting makes room again. The usage
counters behind them (and behind `hangar stats`) stay exact through
overwrites, deletes, multipart uploads and versions (every stored version
counts), on one node and through every node of a 3-node cluster."""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

import botocore.exceptions
import pytest
import requests

from admin_api_lib import call, ok, with_tokens
import hangar_testlib
from hangar_testlib import HANGAR_BIN, Node, bucket_name, random_bytes, s3_client, sign_v4
from cluster_testlib import key_of, laid_out_cluster

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = with_tokens(Node(tmp_path_factory.mktemp("quotas")))
    n.start()
    key = n.create_key("quotas", create_bucket=True)
    yield n, key
    n.stop()


def usage(n: Node, bucket: str) -> tuple[int, int]:
    v = n.cli_json("bucket", "info", bucket)
    return v["objects"], v["bytes"]


def refused(fn, quota: str) -> str:
    with pytest.raises(botocore.exceptions.ClientError) as e:
        fn()
    err = e.value.response["Error"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403, e.value.response
    assert err["Code"] == "AccessDenied" and quota in err["Message"], err
    return err["Message"]


def refusals(n: Node) -> dict[str, int]:
    """hangar_quota_refusals_total by quota, from the node's /metrics."""
    _, _, body = call(n, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        m = re.match(r'hangar_quota_refusals_total\{quota="(\w+)"\} (\d+)', line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_set_quotas_cli_and_admin_api(node):
    n, key = node
    s3 = s3_client(n, key)
    b = bucket_name("quota-cli")
    s3.create_bucket(Bucket=b)
    assert n.cli_json("bucket", "info", b)["quotas"] == {"max_size": None, "max_objects": None}
    v = n.cli_json("bucket", "set-quotas", b, "--max-size", "10G", "--max-objects", "1000")
    assert v["quotas"] == {"max_size": 10_000_000_000, "max_objects": 1000}, v
    # A flag not given keeps its limit; `none` removes one.
    n.cli("bucket", "set-quotas", b, "--max-objects", "none")
    assert n.cli_json("bucket", "info", b)["quotas"] == {"max_size": 10_000_000_000, "max_objects": None}
    text = n.cli("bucket", "info", b).stdout
    assert "Quotas: max size 10000000000 bytes (10.0 GB), max objects none" in text, text
    res = n.cli("bucket", "set-quotas", b, check=False)
    assert res.returncode == 2 and "--max-size" in res.stderr, res
    res = n.cli("bucket", "set-quotas", "no-such-bucket", "--max-size", "1M", check=False)
    assert res.returncode == 3, res
    res = n.cli("bucket", "set-quotas", b, "--max-size", "lots", check=False)
    assert res.returncode == 2, res
    # The admin API sets both at once (absent: no limit).
    got = ok(n, "POST", "/v2/UpdateBucketQuotas", {"bucket": b, "max_objects": 5})
    assert got == {"name": b, "quotas": {"max_size": None, "max_objects": 5}}, got
    assert ok(n, "GET", "/v2/GetBucketInfo", query={"name": b})["quotas"]["max_objects"] == 5
    status, _, _ = call(n, "POST", "/v2/UpdateBucketQuotas", body={"bucket": b, "max_size": -1})
    assert status == 400


def test_a_full_bucket_refuses_writes_until_something_is_deleted(node):
    n, key = node
    s3 = s3_client(n, key)
    b = bucket_name("quota-full")
    s3.create_bucket(Bucket=b)
    n.cli("bucket", "set-quotas", b, "--max-objects", "3", "--max-size", "30000")
    for i in range(3):
        s3.put_object(Bucket=b, Key=f"o{i}", Body=random_bytes(5000, seed=i))
    assert usage(n, b) == (3, 15000)
    msg = refused(lambda: s3.put_object(Bucket=b, Key="o3", Body=b"x"), "maximum objects for this bucket: 3")
    assert "Object quota is reached" in msg
    # Refused writes of every kind: copy, multipart completion, browser form.
    refused(lambda: s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "o0"}),
            "maximum objects")
    up = s3.create_multipart_upload(Bucket=b, Key="mp")
    part = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 100)
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    refused(lambda: s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"],
                                                 MultipartUpload=parts), "maximum objects")
    post = s3.generate_presigned_post(Bucket=b, Key="form")
    r = requests.post(post["url"], data=post["fields"], files={"file": ("f", b"form body")}, timeout=30)
    assert r.status_code == 403 and b"AccessDenied" in r.content and b"maximum objects" in r.content, r.content
    # Each refusal is counted by its quota.
    assert refusals(n) == {"objects": 4, "size": 0}, refusals(n)
    # An overwrite adds no object: accepted while it fits the size quota.
    s3.put_object(Bucket=b, Key="o0", Body=random_bytes(8000, seed=10))
    assert usage(n, b) == (3, 18000)
    refused(lambda: s3.put_object(Bucket=b, Key="o0", Body=random_bytes(20_001, seed=11)),
            "maximum total size of objects for this bucket: 30000")
    # Delete one: a new object fits again, and the upload still in progress
    # completes.
    s3.delete_object(Bucket=b, Key="o1")
    assert usage(n, b) == (2, 13000)
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload=parts)
    assert usage(n, b) == (3, 13100)
    refused(lambda: s3.put_object(Bucket=b, Key="o4", Body=b"x"), "maximum objects")
    n.cli("bucket", "set-quotas", b, "--max-objects", "none")
    s3.put_object(Bucket=b, Key="o4", Body=b"x")
    r = requests.post(post["url"], data=post["fields"], files={"file": ("f", b"form body")}, timeout=30)
    assert r.status_code in (200, 204), r.content
    assert usage(n, b) == (5, 13110)
    assert s3.get_object(Bucket=b, Key="o4")["Body"].read() == b"x"


def test_a_body_that_cannot_fit_is_refused_before_it_is_sent(node):
    """With `Expect: 100-continue`, a PUT whose declared length passes the
    size quota gets its 403 at once: the body is never asked for."""
    n, key = node
    s3 = s3_client(n, key)
    b = bucket_name("quota-early")
    s3.create_bucket(Bucket=b)
    n.cli("bucket", "set-quotas", b, "--max-size", "1M")
    host = f"127.0.0.1:{n.s3_port}"
    path = f"/{b}/huge"

    def head_only(length: int) -> bytes:
        signed = sign_v4("PUT", host, path, [], {"content-length": str(length), "expect": "100-continue"},
                         "UNSIGNED-PAYLOAD", key)
        with socket.create_connection(("127.0.0.1", n.s3_port), timeout=5) as sock:
            lines = [f"PUT {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in signed.headers.items()]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            return sock.recv(65536)

    answer = head_only(50 * MiB)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b"AccessDenied" in answer and b"maximum total size of objects for this bucket: 1000000" in answer
    # A body that fits is asked for.
    assert head_only(1000).startswith(b"HTTP/1.1 100"), "the body of a PUT that fits is asked for"


def test_counters_follow_overwrites_deletes_multipart_and_versions(node):
    n, key = node
    s3 = s3_client(n, key)
    b = bucket_name("quota-count")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="small", Body=b"s" * 100)          # inline
    s3.put_object(Bucket=b, Key="big", Body=random_bytes(3 * MiB, seed=1))  # blocks
    s3.put_object(Bucket=b, Key="big", Body=random_bytes(MiB, seed=2))      # overwrite
    assert usage(n, b) == (2, 100 + MiB)
    up = s3.create_multipart_upload(Bucket=b, Key="mp")
    etags = [s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=i,
                            Body=random_bytes(5 * MiB, seed=i))["ETag"] for i in (1, 2)]
    # Parts of an upload in progress are not objects yet.
    assert usage(n, b) == (2, 100 + MiB)
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": i, "ETag": e} for i, e in zip((1, 2), etags)]})
    assert usage(n, b) == (3, 100 + 11 * MiB)
    s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "small"})
    s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "small"}, {"Key": "nope"}]})
    assert usage(n, b) == (3, 100 + 11 * MiB)
    # Versioned: every stored version counts, delete markers do not.
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=b, Key="copy", Body=b"v" * 10)["VersionId"]
    s3.put_object(Bucket=b, Key="copy", Body=b"w" * 20)
    assert usage(n, b) == (5, 130 + 11 * MiB)
    s3.delete_object(Bucket=b, Key="copy")  # a delete marker
    assert usage(n, b) == (5, 130 + 11 * MiB)
    s3.delete_object(Bucket=b, Key="copy", VersionId=v1)
    assert usage(n, b) == (4, 120 + 11 * MiB)
    # A quota on a versioned bucket counts the versions kept.
    n.cli("bucket", "set-quotas", b, "--max-objects", "5")
    s3.put_object(Bucket=b, Key="copy", Body=b"x")
    refused(lambda: s3.put_object(Bucket=b, Key="copy", Body=b"y"), "maximum objects for this bucket: 5")
    # `hangar stats` reads the same counters.
    row = next(x for x in n.cli_json("stats")["buckets"] if x["name"] == b)
    assert (row["objects"], row["bytes"]) == (5, 121 + 11 * MiB)


def test_counters_survive_a_restart_and_kill(tmp_path):
    # Durable commits: a kill -9 loses nothing acknowledged.
    n = Node(tmp_path / "restart", fsync=True)
    n.start()
    key = n.create_key("restart", create_bucket=True)
    s3 = s3_client(n, key)
    b = bucket_name("quota-restart")
    s3.create_bucket(Bucket=b)
    for i in range(5):
        s3.put_object(Bucket=b, Key=f"k{i}", Body=b"z" * (i + 1))
    n.kill9()
    n.start()
    assert usage(n, b) == (5, 15)
    s3 = s3_client(n, key)
    s3.delete_object(Bucket=b, Key="k4")
    n.stop()
    n.start()
    assert usage(n, b) == (4, 10)
    n.stop()


# ---------------------------------------------------------------- 3 nodes


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "qc")
    key = key_of(nodes[0].cli_json("key", "create", "quotas"), "quotas")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def wait_usage(nodes: list[Node], bucket: str, want: tuple[int, int]) -> None:
    """Every node reports `want`: a write returns at its quorum, and the
    last replica counts it a moment later."""
    deadline = time.monotonic() + 10
    while True:
        got = [usage(n, bucket) for n in nodes]
        if all(g == want for g in got):
            return
        assert time.monotonic() < deadline, (got, want)
        time.sleep(0.1)


def test_quotas_through_every_node_of_a_cluster(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("quota-cluster")
    clients[0].create_bucket(Bucket=b)
    nodes[1].cli("bucket", "set-quotas", b, "--max-objects", "4", "--max-size", "4M")
    # Each write through another node; each node then reports the same.
    for i in range(4):
        clients[i % 3].put_object(Bucket=b, Key=f"o{i}", Body=random_bytes(100_000 * (i + 1), seed=i))
    wait_usage(nodes, b, (4, 1_000_000))
    for c in clients:
        refused(lambda c=c: c.put_object(Bucket=b, Key="more", Body=b"x"), "maximum objects for this bucket: 4")
    clients[2].delete_object(Bucket=b, Key="o0")
    wait_usage(nodes, b, (3, 900_000))
    clients[1].put_object(Bucket=b, Key="more", Body=b"x")
    # Growing o3 (400 000 bytes) to 3 500 000 would make 4 000 001 bytes.
    msg = refused(lambda: clients[0].put_object(Bucket=b, Key="o3", Body=random_bytes(3_500_000, seed=9)),
                  "maximum total size of objects for this bucket: 4000000")
    assert "already 900001 bytes, and this object would add 3100000 bytes" in msg, msg
    # Multipart through three nodes.
    nodes[0].cli("bucket", "set-quotas", b, "--max-objects", "none", "--max-size", "none")
    up = clients[0].create_multipart_upload(Bucket=b, Key="mp")
    part = clients[1].upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"m" * 5000)
    clients[2].complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    wait_usage(nodes, b, (5, 905_001))
    for n in nodes:
        row = next(x for x in n.cli_json("stats")["buckets"] if x["name"] == b)
        assert (row["objects"], row["bytes"]) == (5, 905_001)


# ---------------------------------------------------------------- upgrade

PREV_BIN = os.environ.get("HANGAR_PREV_BIN")


@pytest.mark.skipif(not PREV_BIN, reason="HANGAR_PREV_BIN (a hangar binary without usage counters) not set")
def test_objects_stored_by_a_binary_without_counters_are_counted_at_the_first_start(tmp_path, monkeypatch):
    n = Node(tmp_path / "prev", fsync=True)
    monkeypatch.setattr(hangar_testlib, "HANGAR_BIN", Path(PREV_BIN))
    n.start()
    key = n.create_key("prev", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="plain")
    s3.create_bucket(Bucket="versioned")
    s3.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
    for i in range(4):
        s3.put_object(Bucket="plain", Key=f"k{i}", Body=random_bytes(1000 * (i + 1), seed=i))
        s3.put_object(Bucket="versioned", Key="v", Body=random_bytes(2 * MiB + i, seed=i))
    s3.delete_object(Bucket="plain", Key="k0")
    s3.delete_object(Bucket="versioned", Key="v")  # a delete marker
    n.stop()
    monkeypatch.setattr(hangar_testlib, "HANGAR_BIN", HANGAR_BIN)
    n.start()
    try:
        assert usage(n, "plain") == (3, 9000)
        assert usage(n, "versioned") == (4, 8 * MiB + 6)
        assert "object rows stored before them counted" in n.log.read_text()
        n.cli("bucket", "set-quotas", "plain", "--max-objects", "3")
        refused(lambda: s3_client(n, key).put_object(Bucket="plain", Key="k9", Body=b"x"), "maximum objects")
    finally:
        n.stop()
