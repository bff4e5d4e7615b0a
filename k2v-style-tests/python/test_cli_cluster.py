"""The operator CLI on a 3-node cluster (replication factor 3): `hangar
stats` through any node matching a workload (objects and bytes per bucket,
each node's table rows and block files), `hangar status` showing each
node's layout version, sync and resync and a stopped node as down (table
and `--json`), `layout apply --wait` following a layout change to its end
with plain progress lines, a key expiry set through one node refused by
the others, and exit code 5 when too few nodes are up."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from hangar_testlib import bucket_name, random_bytes, s3_client
from cluster_testlib import converge, laid_out_cluster, node_id, wait_for

MiB = 1024 * 1024
SIZES = [1_000, 4_000, 300_000, MiB, MiB + 1, 2 * MiB + 5]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "clicl")
    yield nodes
    for n in nodes:
        n.stop()


def expected_blocks() -> tuple[int, int]:
    """Block files and bytes of SIZES: one file per started MiB past the
    3072-byte inline threshold, stored plain (random bytes)."""
    big = [n for n in SIZES if n > 3072]
    return sum(-(-n // MiB) for n in big), sum(big)


def test_stats_match_a_workload_on_every_node(cluster):
    first = cluster[0]
    key = first.create_key("stats", create_bucket=True)
    s3 = s3_client(first, key)
    bucket = bucket_name("clstats")
    s3.create_bucket(Bucket=bucket)
    for i, n in enumerate(SIZES):
        s3.put_object(Bucket=bucket, Key=f"o{i}", Body=random_bytes(n, seed=500 + i))
    blocks, block_bytes = expected_blocks()
    ids = [node_id(n) for n in cluster]
    for n in cluster:
        v = n.cli_json("stats")
        row = next(b for b in v["buckets"] if b["name"] == bucket)
        assert (row["objects"], row["bytes"]) == (len(SIZES), sum(SIZES)), row
        assert sorted(x["id"] for x in v["nodes"]) == sorted(ids)

    # Every node stores every partition (rf 3), so each ends up with every
    # row and block; the third copy of a write may land a little later.
    def all_nodes_hold_it():
        v = first.cli_json("stats")
        for x in v["nodes"]:
            r = x["report"]
            if r is None or r["tables"].get("object") != len(SIZES):
                return False
            if (r["blocks"] or {}).get("count") != blocks or r["blocks"]["bytes"] != block_bytes:
                return False
        return True

    wait_for(all_nodes_hold_it, 60, "every node holding every object row and block")
    v = first.cli_json("stats")
    for x in v["nodes"]:
        assert x["is_up"] and x["report_error"] is None
        assert x["report"]["tables"]["bucket"] >= 1 and x["report"]["tables"]["key"] >= 1
        assert x["report"]["data_disk"]["total"] > 0
    text = cluster[1].cli("stats").stdout
    assert f"{bucket}" in text and str(sum(SIZES)) in text
    assert sum(1 for line in text.splitlines() if re.match(r"[0-9a-f]{16}\*? ", line)) >= 3, text


def test_status_shows_what_each_node_is_doing(cluster):
    ids = [node_id(n) for n in cluster]

    def all_synced():
        v = cluster[1].cli_json("status")
        return all(p["report"] and p["report"]["layout_version"] == 1 and p["layout_sync"]["state"] == "synced"
                   for p in v["peers"])

    wait_for(all_synced, 60, "every node reporting layout version 1, synced")
    v = cluster[1].cli_json("status")
    assert sorted(p["id"] for p in v["peers"]) == sorted(ids)
    for p in v["peers"]:
        r = p["report"]
        assert p["is_up"] and p["report_error"] is None
        assert r["resync"]["queue"] >= 0 and r["resync"]["in_flight"] >= 0
        assert r["scrub"]["status"] in ("idle", "running", "paused")
        assert r["data_disk"]["avail"] > 0
        assert p["layout_sync"]["sync"] == 1 and p["layout_sync"]["ack"] == 1
    text = cluster[1].cli("status").stdout
    assert "==== WHAT EACH NODE IS DOING ====" in text, text
    doing = text.split("==== WHAT EACH NODE IS DOING ====")[1]
    for i in ids:
        line = next(x for x in doing.splitlines() if x.startswith(i[:16]))
        assert re.match(rf"{i[:16]}\*? +up +1 +synced +\d+ +\d+ +(idle|running|paused)", line), line


def test_layout_apply_wait_follows_the_change_to_its_end(cluster):
    first = cluster[0]
    me = node_id(first)
    first.cli("layout", "assign", me[:12], "-c", "2G")
    res = first.cli("layout", "apply", "--version", "2", "--wait", "--timeout", "180", timeout=200)
    assert "Layout version 2 applied." in res.stdout, res
    lines = res.stderr.strip().splitlines()
    assert lines[-1] == "Layout version 2 synced: every node holds its data and reads from it.", res.stderr
    assert all("\r" not in x for x in lines)
    progress = [x for x in lines if x.startswith("layout version 2: ")]
    assert progress and re.match(
        r"layout version 2: acknowledged by \d/3 nodes, synced by \d/3 storage nodes, read from by \d/3 "
        r"\(\d+/9, \d+%\)$", progress[0]), lines
    converge(cluster, 2)
    hist = first.cli_json("layout", "history")
    assert [x["version"] for x in hist["versions"]] == [2], hist


def test_a_key_expiry_set_through_one_node_is_enforced_by_every_node(cluster):
    import botocore.exceptions

    from hangar_testlib import Key

    first, second, third = cluster
    info = first.cli_json("key", "create", "cl-exp")
    key = Key(info["access_key_id"], info["secret_access_key"], "cl-exp")
    for n in cluster:
        wait_for(lambda: bool(s3_client(n, key).list_buckets()), 20, "the key on every node")
    second.cli("key", "set", "cl-exp", "--expires", "2020-01-01T00:00:00Z")
    for n in (first, third):
        # The key table is on every node: the change is there when the command returns.
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3_client(n, key).list_buckets()
        assert e.value.response["Error"]["Code"] == "InvalidAccessKeyId", e.value.response
        assert n.cli_json("key", "info", "cl-exp")["expired"] is True
    third.cli("key", "set", "cl-exp", "--never-expires")
    for n in cluster:
        s3_client(n, key).list_buckets()


def test_a_hung_node_does_not_hang_status(cluster):
    first, _, third = cluster
    third_id = node_id(third)
    os.kill(third.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        v = first.cli_json("status")
        took = time.monotonic() - t0
        row = next(p for p in v["peers"] if p["id"] == third_id)
        # Asked while still seen up, it times out (2 s); or it is seen down.
        assert row["report"] is None and row["report_error"], row
        assert took < 6, took
        print(f"status with a SIGSTOPped node: {took:.2f} s ({row['report_error']})")
    finally:
        os.kill(third.proc.pid, signal.SIGCONT)
    wait_for(lambda: next(p for p in first.cli_json("status")["peers"] if p["id"] == third_id)["report"],
             30, "the node answering again")


def test_a_stopped_node_shows_down_and_too_few_nodes_exit_5(cluster):
    first, second, third = cluster
    third_id = node_id(third)
    third.stop()
    wait_for(lambda: not next(p for p in first.cli_json("status")["peers"] if p["id"] == third_id)["is_up"],
             20, "the stopped node seen down")
    v = first.cli_json("status")
    down = next(p for p in v["peers"] if p["id"] == third_id)
    assert down["report"] is None and down["report_error"] == "node is down"
    assert v["health"]["status"] == "degraded"
    assert sum(p["is_up"] for p in v["peers"]) == 2
    text = first.cli("status").stdout
    rows = [x for x in text.splitlines() if x.startswith(third_id[:16])]
    assert len(rows) == 2 and all(" DOWN " in x for x in rows), text
    stats = first.cli_json("stats")
    node = next(x for x in stats["nodes"] if x["id"] == third_id)
    assert not node["is_up"] and node["report"] is None
    # Reads still have their quorum: the counts are still exact.
    assert stats["totals"]["objects"] >= len(SIZES)

    # With two of three down, a change has no quorum: exit 5, and the
    # message says what to do.
    second.stop()
    wait_for(lambda: sum(p["is_up"] for p in first.cli_json("status")["peers"]) == 1, 20, "two nodes down")
    res = first.cli("bucket", "create", bucket_name("noquorum"), check=False)
    assert res.returncode == 5 and "hangar status" in res.stderr, res
