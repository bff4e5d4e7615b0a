"""Blocks are reclaimed: overwritten and deleted objects' blocks, and the
blocks of an upload cut short by kill -9, disappear after the grace delay,
while blocks still referenced elsewhere (deduplicated content) stay; the
workers report what they did in `hangar worker list`."""

from __future__ import annotations

import socket
import time

import pytest

from hangar_testlib import Node, block_files, eventually, random_bytes, s3_client, sign_v4


@pytest.fixture(scope="module")
def gc_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("gc"))
    n.config.write_text("block_gc_delay_secs = 1\n" + n.config.read_text())
    n.start()
    key = n.create_key("gc", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="gcbucket")
    yield n, key, s3
    n.stop()


def test_deleted_and_overwritten_blocks_are_reclaimed(gc_node):
    n, _, s3 = gc_node
    before = block_files(n.data)
    s3.put_object(Bucket="gcbucket", Key="a", Body=random_bytes(3 << 20, 1))
    first = block_files(n.data) - before
    assert len(first) == 3
    s3.put_object(Bucket="gcbucket", Key="a", Body=random_bytes(3 << 20, 2))
    second = block_files(n.data) - before - first
    assert len(second) == 3
    eventually(lambda: not (first & block_files(n.data)), 20, "the overwritten blocks to go")
    assert second <= block_files(n.data)
    s3.delete_object(Bucket="gcbucket", Key="a")
    eventually(lambda: not (second & block_files(n.data)), 20, "the deleted blocks to go")
    workers = {w["name"]: w for w in n.cli_json("worker", "list")}
    assert workers["block-gc"]["processed"] >= 6
    assert workers["version-gc"]["processed"] >= 6
    assert workers["block-gc"]["errors"] == 0


def test_shared_blocks_stay_while_referenced(gc_node):
    n, _, s3 = gc_node
    body = random_bytes(2 << 20, 3)
    s3.put_object(Bucket="gcbucket", Key="x", Body=body)
    s3.put_object(Bucket="gcbucket", Key="y", Body=body)
    shared = {f for f in block_files(n.data)}
    s3.delete_object(Bucket="gcbucket", Key="x")
    time.sleep(3)  # several GC passes past the grace delay
    assert s3.get_object(Bucket="gcbucket", Key="y")["Body"].read() == body
    s3.delete_object(Bucket="gcbucket", Key="y")
    eventually(lambda: not (shared & block_files(n.data)), 20, "the shared blocks to go")


def test_blocks_of_an_upload_killed_midway_are_reclaimed(gc_node):
    n, key, s3 = gc_node
    data = random_bytes(3 << 20, 4)
    path = "/gcbucket/cut"
    host = f"127.0.0.1:{n.s3_port}"
    s = sign_v4("PUT", host, path, [], {"content-length": str(len(data))}, "UNSIGNED-PAYLOAD", key)
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in s.headers.items()) + "\r\n"
    before = block_files(n.data)
    sock = socket.create_connection(("127.0.0.1", n.s3_port))
    sock.sendall(head.encode() + data[: (5 << 20) // 2])
    eventually(lambda: len(block_files(n.data) - before) >= 2, 20, "the first blocks on disk")
    orphans = block_files(n.data) - before
    n.kill9()
    sock.close()
    n.start()
    eventually(lambda: not (orphans & block_files(n.data)), 30, "the orphaned blocks to go")
    keys = [o["Key"] for o in s3_client(n, key).list_objects_v2(Bucket="gcbucket").get("Contents", [])]
    assert "cut" not in keys
