"""The admin HTTP API on a 3-node cluster (replication factor 3): the
layout staged, reverted, applied and seen by every node through the API,
`/health` following the cluster from "no layout" through healthy and
degraded to unavailable with its one-line reason, and skip-dead-nodes."""

from __future__ import annotations

import json
import subprocess

import pytest

from admin_api_lib import ADMIN_TOKEN, admin_url, call, meshed_nodes, ok
from hangar_testlib import HANGAR_BIN
from cluster_testlib import wait_for


def health(n) -> tuple[int, dict]:
    status, _, body = call(n, "GET", "/health", token=None)
    return status, json.loads(body)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    ns, ids = meshed_nodes(tmp_path_factory, "api")
    yield ns, ids
    for n in ns:
        n.stop()


def test_layout_through_the_api_and_health(nodes):
    ns, ids = nodes
    first = ns[0]
    status, h = health(first)
    assert status == 503 and h["status"] == "unavailable", h
    assert h["reason"].startswith("no layout applied: writes would not reach 3 nodes"), h

    def assign_all():
        for i, zone in zip(ids, ["dc1", "dc2", "dc3"]):
            r = ok(first, "POST", "/v2/AssignClusterLayoutRoles",
                   {"nodes": [i[:12]], "zone": zone, "capacity": 10**9})
            assert r["staged"][0]["node"] == i and r["staged"][0]["role"]["zone"] == zone

    assign_all()
    shown = ok(first, "GET", "/v2/GetClusterLayout")
    assert len(shown["staged"]["roles"]) == 3 and shown["outcome"]["ok"]["version"] == 1
    assert ok(first, "POST", "/v2/RevertClusterLayout")["reverted"] is True
    assert ok(first, "GET", "/v2/GetClusterLayout")["staged"]["roles"] == []
    assign_all()
    ok(first, "POST", "/v2/SetClusterLayoutParameters", {"zone_redundancy": "3"})
    applied = ok(first, "POST", "/v2/ApplyClusterLayout", {"version": 1})
    assert applied["version"] == 1 and applied["report"]["moves"] == 3 * 256
    status, _, body = call(first, "POST", "/v2/ApplyClusterLayout", body={"version": 1})
    assert status == 400 and "next one is 2" in json.loads(body)["message"], body

    # Every node serves the same version through its own API.
    def same_everywhere():
        views = [ok(n, "GET", "/v2/GetClusterLayout")["current"] for n in ns]
        return {(v["version"], v["hash"]) for v in views} == {(1, views[0]["hash"])}
    wait_for(same_everywhere, 15, "layout version 1 on every node")
    for n in ns:
        wait_for(lambda: health(n) == (200, health(n)[1]) and health(n)[1]["status"] == "healthy",
                 20, "healthy")
    # The CLI over --admin-url on node 2 says what node 2's socket says.
    res = subprocess.run([str(HANGAR_BIN), "--admin-url", admin_url(ns[1]), "--admin-token", ADMIN_TOKEN,
                          "layout", "show"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout == ns[1].cli("layout", "show").stdout
    assert ok(ns[2], "GET", "/v2/GetClusterLayoutHistory")["current_version"] == 1
    wait_for(lambda: set(ok(ns[2], "GET", "/v2/GetClusterLayoutHistory")["trackers"]) == set(ids),
             30, "every node's progress in the history")

    # One node of three down: degraded, still 200.
    ns[2].stop()
    wait_for(lambda: health(first)[1]["status"] == "degraded", 30, "degraded")
    status, h = health(first)
    assert status == 200 and h["reason"] == "256 of 256 partitions miss a replica but keep their quorums (consistent mode)", h
    assert first.cli("health").returncode == 0

    # Two down: unavailable, 503, and `hangar health` says why.
    ns[1].stop()
    wait_for(lambda: health(first)[0] == 503, 30, "unavailable")
    h = health(first)[1]
    assert h["status"] == "unavailable" and h["reason"] == "1 of 3 nodes up: keys and buckets need 2", h
    res = first.cli("health", check=False)
    assert res.returncode == 1 and "answered 503 Service Unavailable: 1 of 3 nodes up" in res.stderr, res
    # Writes are refused as /health said.
    status, _, body = call(first, "POST", "/v2/CreateKey", body={"name": "no-quorum"})
    assert status == 503 and json.loads(body)["code"] == "Unavailable", body

    skipped = ok(first, "POST", "/v2/ClusterLayoutSkipDeadNodes", {"version": 1})
    assert set(skipped["nodes"]) == set(ids[1:]), skipped
