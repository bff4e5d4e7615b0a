"""The cluster layout between real `hangar` processes (issue 4): roles
assigned in three zones, staged changes shown with their predicted moves,
applied versions gossiped to every node, a fourth node added and removed,
staged changes reverted, a node that was down catching up, impossible
layouts refused with the library's message, and nodes with another
replication factor refused.

The tests of this module run in order on one cluster (each one reads the
state it starts from), plus a separate 5-node cluster at the end."""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from cluster_testlib import RF, ZONES, converge, current_hash, make_node, node_id, peer_addr, replicas, show, \
    staged_empty, version, wait_for, wait_full_mesh
from hangar_testlib import HANGAR_BIN

@pytest.fixture(scope="module")
def secret():
    return secrets.token_hex(32)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, secret):
    first = make_node(tmp_path_factory, "lay1", secret, [])
    first_addr = peer_addr(first)
    nodes = [first] + [make_node(tmp_path_factory, f"lay{i}", secret, [first_addr]) for i in (2, 3)]
    for n in nodes:
        n.start()
    ids = [node_id(n) for n in nodes]
    wait_full_mesh(nodes, ids)
    yield nodes, ids
    for n in nodes:
        n.stop()


@pytest.fixture(scope="module")
def fourth(tmp_path_factory, secret, cluster):
    nodes, _ = cluster
    n = make_node(tmp_path_factory, "lay4", secret, [peer_addr(nodes[0])])
    yield n
    n.stop()


def test_three_zones_assign_show_apply(cluster):
    nodes, ids = cluster
    # Each node stages its own role: concurrent assigns on different nodes all survive.
    for n, me, zone in zip(nodes, ids, ZONES):
        n.cli("layout", "assign", me[:10], "-z", zone, "-c", "1T", "-t", f"rack-{zone}")
    wait_for(lambda: all(len(show(n)["staged"]["roles"]) == 3 for n in nodes), 10, "3 staged roles on every node")
    view = show(nodes[1])
    assert view["current"]["version"] == 0
    staged = {r["node"]: r["staged"] for r in view["staged"]["roles"]}
    assert staged == {me: {"zone": z, "capacity": 10**12, "tags": [f"rack-{z}"]} for me, z in zip(ids, ZONES)}
    ok = view["outcome"]["ok"]
    assert ok["version"] == 1 and ok["moves"] == 256 * RF
    assert {z["zone"]: z["partitions"] for z in ok["zones"]} == {z: 256 for z in ZONES}
    text = nodes[1].cli("layout", "show").stdout
    assert "STAGED CHANGES" in text and "Partition replicas moved: 768" in text, text
    assert "hangar layout apply --version 1" in text, text
    # Only current + 1 is accepted.
    bad = nodes[2].cli("layout", "apply", "--version", "2", check=False)
    assert bad.returncode != 0 and "the next one is 1" in bad.stderr, bad.stderr
    out = nodes[2].cli("layout", "apply", "--version", "1").stdout
    assert "Layout version 1 applied" in out, out
    took = converge(nodes, 1)
    print(f"version 1 on every node {took:.2f}s after apply returned")
    for n in nodes:
        st = n.cli_json("status")
        assert st["layout_version"] == 1
        assert st["health"]["status"] == "healthy" and st["health"]["healthy"] == 256, st["health"]
        rows = {p["id"]: p for p in st["peers"]}
        for me, zone in zip(ids, ZONES):
            assert rows[me]["zone"] == zone and rows[me]["capacity"] == 10**12 and rows[me]["partitions"] == 256
            assert rows[me]["hostname"], rows[me]
            assert rows[me]["data_disk"]["total"] > 0 and rows[me]["metadata_disk"]["avail"] > 0
        assert staged_empty(n)
    text = nodes[0].cli("status").stdout
    assert "Cluster health: HEALTHY" in text and "dc2" in text, text
    hist = nodes[0].cli_json("layout", "history")
    assert [v["version"] for v in hist["versions"]] == [1]
    assert len(hist["versions"][0]["hash"]) == 64


def test_fourth_node_moves_as_predicted(cluster, fourth):
    nodes, ids = cluster
    v0 = version(nodes[0])
    fourth.start()
    new_id = node_id(fourth)
    # A new node gets the cluster's layout as soon as it connects.
    took = wait_for(lambda: version(fourth) == v0, 15, "the new node has the layout")
    print(f"new node had version {v0} {took:.2f}s after start")
    nodes[1].cli("layout", "assign", new_id[:10], "-z", ZONES[0], "-c", "1T")
    before = show(nodes[0])
    wait_for(lambda: len(show(nodes[0])["staged"]["roles"]) == 1, 10, "staged role reached node 1")
    predicted = show(nodes[0])["outcome"]["ok"]
    n_moves = predicted["moves"]
    assert n_moves > 0
    text = nodes[0].cli("layout", "show").stdout
    assert f"Partition replicas moved: {n_moves}" in text, text
    nodes[0].cli("layout", "apply", "--version", str(v0 + 1))
    everyone = nodes + [fourth]
    converge(everyone, v0 + 1)
    after = show(fourth)
    moved = replicas(after) - replicas(before)
    assert len(moved) == n_moves, (len(moved), n_moves)
    # Zone dc1 now has two nodes sharing its 256 copies; the new node only received.
    assert all(node == new_id for _, node in moved)
    counts = {r["id"]: r["partitions"] for r in after["current"]["roles"]}
    assert counts[new_id] == n_moves and counts[new_id] + counts[ids[0]] == 256
    assert after["current"]["report"]["moves"] == n_moves


def test_gateway_then_remove(cluster, fourth):
    nodes, ids = cluster
    v = version(nodes[0])
    gone = node_id(fourth)
    # First a gateway: it keeps its zone, gives up its partitions.
    before = show(nodes[1])
    nodes[1].cli("layout", "assign", gone[:10], "-g")
    predicted = show(nodes[1])["outcome"]["ok"]["moves"]
    nodes[1].cli("layout", "apply", "--version", str(v + 1))
    converge(nodes + [fourth], v + 1)
    after = show(nodes[0])
    assert len(replicas(after) - replicas(before)) == predicted > 0
    role = next(r for r in after["current"]["roles"] if r["id"] == gone)
    assert role["gateway"] and role["capacity"] is None and role["zone"] == ZONES[0] and role["partitions"] == 0
    row = next(p for p in nodes[2].cli_json("status")["peers"] if p["id"] == gone)
    assert row["gateway"] is True and row["partitions"] == 0
    assert "gateway" in nodes[2].cli("status").stdout
    v += 1
    nodes[2].cli("layout", "remove", gone[:12])
    wait_for(lambda: any(r["staged"] is None for r in show(nodes[2])["staged"]["roles"]), 5, "removal staged")
    predicted = show(nodes[2])["outcome"]["ok"]["moves"]
    before = show(nodes[2])
    nodes[2].cli("layout", "apply", "--version", str(v + 1))
    converge(nodes + [fourth], v + 1)
    after = show(nodes[0])
    assert gone not in {r["id"] for r in after["current"]["roles"]}
    assert len(replicas(after) - replicas(before)) == predicted
    st = nodes[0].cli_json("status")
    row = next(p for p in st["peers"] if p["id"] == gone)
    assert row["zone"] is None and row["partitions"] == 0
    assert st["health"]["healthy"] == 256


def test_stage_then_revert(cluster):
    nodes, ids = cluster
    v = version(nodes[0])
    nodes[0].cli("layout", "assign", ids[1][:10], "-c", "2T")
    nodes[0].cli("layout", "config", "-r", "2")
    wait_for(lambda: not staged_empty(nodes[1]), 5, "staged change reached node 2")
    view = show(nodes[1])
    assert view["staged"]["parameters"] == {"current": "maximum", "staged": 2}
    assert view["staged"]["roles"][0]["staged"]["capacity"] == 2 * 10**12
    # The tags and zone not given were kept from the current role.
    assert view["staged"]["roles"][0]["staged"]["zone"] == ZONES[1]
    out = nodes[1].cli("layout", "revert").stdout
    assert "dropped" in out, out
    wait_for(lambda: all(staged_empty(n) for n in nodes), 5, "revert everywhere")
    assert all(version(n) == v for n in nodes)
    assert "Nothing was staged" in nodes[2].cli("layout", "revert").stdout
    bad = nodes[0].cli("layout", "apply", "--version", str(v + 1), check=False)
    assert bad.returncode != 0 and "no staged changes" in bad.stderr, bad.stderr


def test_impossible_layouts_say_why(cluster):
    nodes, ids = cluster
    v = version(nodes[0])
    # Two storage nodes left with replication factor 3.
    nodes[0].cli("layout", "remove", ids[2][:10])
    view = show(nodes[0])
    msg = "replication factor 3 needs at least 3 storage nodes, but the layout has 2"
    assert msg in view["outcome"]["error"], view["outcome"]
    assert "APPLYING IS IMPOSSIBLE" in nodes[0].cli("layout", "show").stdout
    bad = nodes[0].cli("layout", "apply", "--version", str(v + 1), check=False)
    assert bad.returncode != 0 and msg in bad.stderr, bad.stderr
    nodes[0].cli("layout", "revert")
    # A capacity of 0, an unknown node, and a role with no zone are refused at once.
    bad = nodes[0].cli("layout", "assign", ids[0][:10], "-c", "0", check=False)
    assert bad.returncode != 0 and "at least 256 bytes" in bad.stderr, bad.stderr
    bad = nodes[0].cli("layout", "assign", "ffffffffffff", "-z", "x", "-c", "1T", check=False)
    assert bad.returncode != 0 and "no known node id starts with" in bad.stderr, bad.stderr
    bad = nodes[0].cli("layout", "config", "-r", "4", check=False)
    assert bad.returncode != 0 and "larger than the replication factor 3" in bad.stderr, bad.stderr
    bad = nodes[0].cli("layout", "skip-dead-nodes", "--version", str(v), check=False)
    assert bad.returncode != 0 and "no dead node" in bad.stderr, bad.stderr
    assert staged_empty(nodes[0]) and version(nodes[0]) == v


def test_stopped_node_catches_up(cluster):
    nodes, ids = cluster
    v = version(nodes[0])
    victim = nodes[2]
    victim.stop()
    nodes[0].cli("layout", "assign", ids[0][:10], "-c", "2T", "-t", "bigger")
    nodes[0].cli("layout", "apply", "--version", str(v + 1))
    converge(nodes[:2], v + 1)
    assert nodes[0].cli_json("status")["health"]["status"] in ("degraded", "healthy")
    victim.start()
    took = wait_for(lambda: version(victim) == v + 1, 15, "restarted node catches up")
    print(f"restarted node had version {v + 1} {took:.2f}s after its S3 port opened")
    converge(nodes, v + 1)
    role = next(r for r in show(victim)["current"]["roles"] if r["id"] == ids[0])
    assert role["capacity"] == 2 * 10**12 and role["tags"] == ["bigger"]
    # Once every node acknowledged and synced the new version (their data
    # layers report it), the older versions retire.
    wait_for(lambda: [x["version"] for x in victim.cli_json("layout", "history")["versions"]] == [v + 1],
             60, "the older versions retired")
    hist = victim.cli_json("layout", "history")
    assert hist["versions"][-1]["status"] == "current"
    assert hist["synced_version"] == v + 1 and hist["min_sync_ack"] == v + 1, hist


def test_other_replication_factor_is_refused(cluster, tmp_path_factory, secret):
    nodes, ids = cluster
    v = version(nodes[0])
    odd = make_node(tmp_path_factory, "lay-rf2", secret, [peer_addr(nodes[0])], rf=2)
    odd.start()
    try:
        odd_id = node_id(odd)

        def refused_both_ways():
            mine = {p["id"]: p.get("layout_refused") for p in odd.cli_json("status")["peers"]}
            theirs = {p["id"]: p.get("layout_refused") for p in nodes[0].cli_json("status")["peers"]}
            return mine.get(ids[0]) and theirs.get(odd_id)

        wait_for(refused_both_ways, 15, "refusal seen on both sides")
        why = next(p["layout_refused"] for p in odd.cli_json("status")["peers"] if p["id"] == ids[0])
        assert "replication factor" in why and "cannot join" in why, why
        assert version(odd) == 0
        assert "Layout exchange refused" in odd.cli("status").stdout
        assert "replication factor mismatch" in odd.log.read_text()
        bad = nodes[0].cli("layout", "assign", odd_id[:10], "-z", "dc1", "-c", "1T", check=False)
        assert bad.returncode != 0 and "cannot get a role" in bad.stderr and "cannot join" in bad.stderr, bad.stderr
        # The cluster's layout did not change.
        assert version(nodes[0]) == v and ids[0] in {r["id"] for r in show(nodes[0])["current"]["roles"]}
    finally:
        odd.stop()


def test_restart_with_other_replication_factor_refuses_to_start(fourth):
    fourth.stop()
    cfg = fourth.config.read_text().replace(f"replication_factor = {RF}", "replication_factor = 2")
    fourth.config.write_text(cfg)
    res = subprocess.run([str(HANGAR_BIN), "-c", str(fourth.config), "server"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode != 0
    assert "replication factor 3" in res.stderr and "replication_factor = 2" in res.stderr, res.stderr


def test_five_node_cluster(tmp_path_factory):
    secret = secrets.token_hex(32)
    first = make_node(tmp_path_factory, "five1", secret, [])
    addr = peer_addr(first)
    nodes = [first] + [make_node(tmp_path_factory, f"five{i}", secret, [addr]) for i in range(2, 6)]
    try:
        for n in nodes:
            n.start()
        ids = [node_id(n) for n in nodes]
        wait_for(lambda: sum(p["is_up"] for p in first.cli_json("status")["peers"]) == 5, 20, "5 nodes up")
        zones = ["dc1", "dc1", "dc2", "dc2", "dc3"]
        caps = ["1T", "1T", "1T", "1T", "2T"]
        for me, z, c in zip(ids, zones, caps):
            first.cli("layout", "assign", me[:10], "-z", z, "-c", c)
        predicted = show(first)["outcome"]["ok"]
        assert predicted["moves"] == 768
        nodes[3].cli("layout", "apply", "--version", "1")
        wait_for(lambda: len(show(nodes[3])["staged"]["roles"]) == 0, 5, "staging cleared")
        converge(nodes, 1)
        view = show(nodes[4])
        zone_parts = {z["zone"]: z["partitions"] for z in view["current"]["report"]["zones"]}
        assert zone_parts == {"dc1": 256, "dc2": 256, "dc3": 256}
        # Every partition on 3 distinct nodes in 3 distinct zones.
        by_part: dict[int, set[str]] = {}
        zone_of = dict(zip(ids, zones))
        for p, node in replicas(view):
            by_part.setdefault(p, set()).add(node)
        assert len(by_part) == 256 and all(len(s) == 3 and len({zone_of[x] for x in s}) == 3 for s in by_part.values())
        # One node down: every partition keeps a write quorum (2 of 3).
        nodes[4].stop()
        wait_for(lambda: first.cli_json("status")["health"]["status"] == "degraded", 20, "degraded health")
        h = first.cli_json("status")["health"]
        assert h["degraded"] == 256 and h["unavailable"] == 0, h
        # Two nodes of different zones down: the partitions they share lose their quorum.
        nodes[3].stop()
        wait_for(lambda: first.cli_json("status")["health"]["status"] == "unavailable", 20, "unavailable health")
        h = first.cli_json("status")["health"]
        shared = sum(1 for s in by_part.values() if ids[3] in s and ids[4] in s)
        assert h["unavailable"] == shared and h["healthy"] == 256 - len(
            [s for s in by_part.values() if ids[3] in s or ids[4] in s]), h
        # The operator counts the dead nodes as done with version 1.
        out = first.cli_json("layout", "skip-dead-nodes", "--version", "1")
        # Each dead node's ack is set here unless its own had reached this
        # node before it stopped (gossip timing), hence at most 2 changes.
        assert set(out["nodes"]) == {ids[3], ids[4]} and out["changed"] <= 2, out
        hist = nodes[1].cli_json("layout", "history")
        assert hist["trackers"][ids[3]] == {"ack": 1} and hist["trackers"][ids[4]] == {"ack": 1}, hist
        # Their sync acknowledgement was not set: they hold partitions of
        # version 1, which cannot sync without them, and the text says what
        # the operator can do.
        assert out["sync_ack"] == "blocked" and hist["synced_version"] < 1, (out, hist)
        text = first.cli("layout", "skip-dead-nodes", "--version", "1").stdout
        assert "cannot sync while these nodes are down" in text and "--allow-missing-data" in text, text
        out = first.cli_json("layout", "skip-dead-nodes", "--version", "1", "--allow-missing-data")
        assert out["sync_ack"] in ("when_synced", "set"), out
    finally:
        for n in nodes:
            n.stop()


def test_same_version_applied_on_two_sides_converges(tmp_path_factory):
    """Two nodes that cannot talk each apply their own version 1; once they
    meet, both keep the same content (the larger hash) and report the
    conflict instead of silently splitting."""
    secret = secrets.token_hex(32)
    a = make_node(tmp_path_factory, "split-a", secret, [], rf=1)
    b = make_node(tmp_path_factory, "split-b", secret, [], rf=1)
    try:
        a.start()
        b.start()
        hashes = set()
        for n, zone in ((a, "east"), (b, "west")):
            n.cli("layout", "assign", node_id(n)[:10], "-z", zone, "-c", "1G")
            n.cli("layout", "apply", "--version", "1")
            hashes.add(current_hash(n))
        assert len(hashes) == 2
        a.cli("node", "connect", peer_addr(b))
        wait_for(lambda: current_hash(a) == current_hash(b), 15, "one version 1 on both nodes")
        kept = current_hash(a)
        assert kept == max(hashes)
        for n in (a, b):
            view = show(n)
            assert set(view["conflicts"]["1"]) == hashes, view["conflicts"]
            assert "applied twice" in n.cli("layout", "show").stdout
        assert "applied twice" in (a.log.read_text() + b.log.read_text())
    finally:
        a.stop()
        b.stop()


def test_single_node_lays_itself_out(tmp_path):
    """`hangar single-node` gives its node the whole key space on first start
    (and leaves the layout alone on the next)."""
    from hangar_testlib import free_port

    port = free_port()
    while not _port_pair_free(port):
        port = free_port()
    cmd = [str(HANGAR_BIN), "single-node", "--dir", str(tmp_path / "dev"), "--port", str(port)]
    cfg = tmp_path / "dev" / "hangar.toml"
    for attempt in range(2):
        log = tmp_path / f"single{attempt}.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: "Hangar is running" in log.read_text() or proc.poll() is not None, 60, "banner")
            assert proc.poll() is None, log.read_text()
            st = json.loads(subprocess.run([str(HANGAR_BIN), "-c", str(cfg), "status", "--json"],
                                           capture_output=True, text=True, check=True, timeout=30).stdout)
            assert st["layout_version"] == 1 and st["health"]["status"] == "healthy", st
            me = next(p for p in st["peers"] if p["is_self"])
            assert me["zone"] == "dc1" and me["partitions"] == 256 and me["capacity"] >= 10**9
        finally:
            proc.terminate()
            proc.wait(20)


def _port_pair_free(port: int) -> bool:
    import socket

    for p, kind in ((port, socket.SOCK_STREAM), (port + 1, socket.SOCK_DGRAM)):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True
