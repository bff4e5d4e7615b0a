"""Burial of tombstones (doc/table-rows.md, "Tombstones"): once every
replica holds a deleted object's tombstone, it is moved out of the table's
tree so that listings no longer read past it. Checked with real `hangar`
processes: through every node of a 3-node cluster (listings show exactly
the live keys, a deleted key stays deleted, a key written again after its
burial is listed), and across kill -9 of a lone node while it buries."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster_testlib import key_of, laid_out_cluster
from hangar_testlib import Node, bucket_name, error_code, eventually, metric, s3_client

QUEUE = 'hangar_gc_queue_entries{queue="tombstone_burial"}'


def burial_done(node: Node) -> bool:
    """The node's burial queue is empty (the gauge is sampled every 5 s)."""
    return metric(node, QUEUE, absent=-1) == 0


def buried(node: Node) -> int:
    return {w["name"]: w for w in node.cli_json("worker", "list")}["tombstone-burial"]["processed"]


def listed(s3, bucket: str) -> list[str]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 7}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def absent(s3, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except Exception as e:  # noqa: BLE001 - botocore's ClientError
        return error_code(e) in ("404", "NoSuchKey")
    return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "bury")
    yield nodes
    for n in nodes:
        n.stop()


def test_buried_tombstones_leave_listings_through_every_node(cluster):
    info = cluster[0].cli_json("key", "create", "burial")
    key = key_of(info, "burial")
    cluster[0].cli("key", "allow", key.id, "--create-bucket")
    clients = [s3_client(n, key) for n in cluster]
    bucket = bucket_name("burial")
    clients[0].create_bucket(Bucket=bucket)
    names = [f"obj/{i:03}" for i in range(40)]
    for i, name in enumerate(names):
        clients[i % 3].put_object(Bucket=bucket, Key=name, Body=f"body {i}".encode())
    keep = names[::10]
    gone = [n for n in names if n not in keep]
    answer = clients[1].delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in gone]})
    assert len(answer.get("Deleted", [])) == len(gone), answer
    before = [buried(n) for n in cluster]
    # Buried 10 s after the delete, once every replica holds the tombstone;
    # each replica buries its own copy.
    eventually(lambda: all(buried(n) - b >= len(gone) for n, b in zip(cluster, before)),
               timeout=60, what="every node buried the 36 tombstones")
    eventually(lambda: all(burial_done(n) for n in cluster), timeout=30, what="burial queues empty")
    for s3 in clients:
        assert listed(s3, bucket) == keep
        for name in gone[::5]:
            assert absent(s3, bucket, name), name
    # A key written again after its tombstone was buried is back everywhere.
    clients[2].put_object(Bucket=bucket, Key=gone[0], Body=b"again")
    for s3 in clients:
        assert listed(s3, bucket) == sorted(keep + [gone[0]])
        assert s3.get_object(Bucket=bucket, Key=gone[0])["Body"].read() == b"again"


def test_a_node_killed_while_it_buries_keeps_every_delete_and_every_object(tmp_path):
    n = Node(tmp_path / "n", fsync=True)
    # The product's default durability (the helper writes it explicitly).
    n.config.write_text(n.config.read_text().replace("metadata_fsync = true\n", ""))
    n.start()
    try:
        key = n.create_key("burial", create_bucket=True)
        s3 = s3_client(n, key)
        bucket = bucket_name("killburial")
        s3.create_bucket(Bucket=bucket)
        names = [f"k/{i:05}" for i in range(10_000)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b""), names))
        keep = names[::10]
        kept = set(keep)
        gone = [k for k in names if k not in kept]
        for i in range(0, len(gone), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in gone[i:i + 1000]],
                                                     "Quiet": True})
        # Burial starts 10 s after the deletes, 1 000 of the 9 000
        # tombstones a transaction: kill as soon as the first batch is
        # reported (the others are being buried or due; in a debug build
        # the kill lands inside the pass), then again 1.5 s after the
        # restart, when the entries left are due at once.
        eventually(lambda: buried(n) > 0, timeout=40, what="a first burial batch")
        for pause in (0, 1.5):
            time.sleep(pause)
            n.kill9()
            n.start()
            s3 = s3_client(n, key)
            assert listed(s3, bucket) == keep
        eventually(lambda: burial_done(n), timeout=60, what="burial queue empty")
        assert listed(s3, bucket) == keep
        for name in gone[::397]:
            assert absent(s3, bucket, name), name
        s3.put_object(Bucket=bucket, Key=gone[1], Body=b"back")
        assert listed(s3, bucket) == sorted(keep + [gone[1]])
    finally:
        n.stop()
