"""DeleteBucket racing PUTs into the bucket it deletes: an empty bucket,
several writers PUTting new keys into it, and a DeleteBucket sent at the
same moment. Whatever the interleaving, the two cannot both win: either
DeleteBucket answers `BucketNotEmpty` (some PUT came first) or no PUT was
acknowledged (each got `NoSuchBucket`, or `409 OperationAborted` while the
deletion was deciding). A deletion that succeeds after a PUT got 200 has
destroyed an acknowledged object (doc/replication.md, "Deleting a bucket").

Before fences, DeleteBucket checked the bucket was empty and then wrote
its tombstone: a PUT that had found the bucket before the tombstone and
published its object between the check and the tombstone was acknowledged
into a deleted bucket. Run on one node and on a 3-node cluster, through
different nodes."""

from __future__ import annotations

import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Key, Node, bucket_name, error_code, http_status, random_bytes, s3_client
from cluster_testlib import laid_out_cluster

ROUNDS = 40
WRITERS = 4
BODY = 64 * 1024
# What a refused PUT may answer: the bucket is gone, or its deletion is
# deciding. Anything else (a 500, a 503 that is not a retry hint) fails.
REFUSALS = {(404, "NoSuchBucket"), (409, "OperationAborted")}


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("delrace1"))
    n.start()
    key = n.create_key("delrace", create_bucket=True)
    yield [n], key
    n.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "delrace")
    info = nodes[0].cli_json("key", "create", "delrace")
    nodes[0].cli("key", "allow", info["access_key_id"], "--create-bucket")
    key = Key(info["access_key_id"], info["secret_access_key"], "delrace")
    yield nodes, key
    for n in nodes:
        n.stop()


def one_round(nodes, key, rnd: random.Random) -> dict:
    """One race; returns what each side got."""
    name = bucket_name("delrace")
    admin = s3_client(nodes[0], key)
    admin.create_bucket(Bucket=name)
    # Each writer and the deleter talk to a node of their own (in turn).
    writers = [s3_client(nodes[(i + 1) % len(nodes)], key) for i in range(WRITERS)]
    deleter = s3_client(nodes[rnd.randrange(len(nodes))], key)
    # Some writers may be seen by every node before the deletion starts,
    # others land in its middle: the deleter starts after a random delay.
    delay = rnd.uniform(0, 0.03)
    barrier = threading.Barrier(WRITERS + 1)
    puts: list = [None] * WRITERS
    deleted: list = [None]
    body = random_bytes(BODY, rnd.randrange(1 << 30))

    def write(i: int):
        barrier.wait()
        time.sleep(rnd.uniform(0, 0.03))
        try:
            writers[i].put_object(Bucket=name, Key=f"k{i}", Body=body)
            puts[i] = "ok"
        except ClientError as e:
            puts[i] = (http_status(e), error_code(e))

    def delete():
        barrier.wait()
        time.sleep(delay)
        try:
            deleter.delete_bucket(Bucket=name)
            deleted[0] = "ok"
        except ClientError as e:
            deleted[0] = (http_status(e), error_code(e))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    threads.append(threading.Thread(target=delete))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return {"bucket": name, "puts": puts, "delete": deleted[0]}


def check_rounds(nodes, key, seed: int):
    rnd = random.Random(seed)
    outcomes = {"deleted": 0, "not_empty": 0}
    for _ in range(ROUNDS):
        r = one_round(nodes, key, rnd)
        acked = [i for i, p in enumerate(r["puts"]) if p == "ok"]
        for p in r["puts"]:
            if p != "ok":
                outcomes[p[1]] = outcomes.get(p[1], 0) + 1
        bad = [p for p in r["puts"] if p != "ok" and p not in REFUSALS]
        assert not bad, f"a PUT failed with an unexpected error: {r}"
        if r["delete"] == "ok":
            outcomes["deleted"] += 1
            assert not acked, (
                f"DeleteBucket succeeded after PUTs {acked} were acknowledged "
                f"into the bucket (objects lost): {r}"
            )
            # The bucket is gone through every node.
            for n in nodes:
                c = s3_client(n, key)
                with pytest.raises(ClientError) as e:
                    c.head_bucket(Bucket=r["bucket"])
                assert http_status(e.value) == 404, r
        else:
            assert r["delete"] == (409, "BucketNotEmpty"), r
            outcomes["not_empty"] += 1
            # Every acknowledged object is there and whole, through every node.
            for n in nodes:
                c = s3_client(n, key)
                for i in acked:
                    got = c.get_object(Bucket=r["bucket"], Key=f"k{i}")["Body"].read()
                    assert len(got) == BODY, r
    print(f"outcomes: {outcomes}")
    # Both outcomes happened, or the race was not exercised.
    assert outcomes["deleted"] > 0 and outcomes["not_empty"] > 0, outcomes


def test_delete_bucket_racing_puts_one_node(single):
    nodes, key = single
    check_rounds(nodes, key, seed=1)


def test_delete_bucket_racing_puts_three_nodes(cluster):
    nodes, key = cluster
    check_rounds(nodes, key, seed=3)
