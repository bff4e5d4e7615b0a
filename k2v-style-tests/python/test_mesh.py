"""The RPC mesh between real `hangar` processes: a full mesh forms from one
bootstrap peer, a node without the cluster secret is kept out, a killed node
is marked down by the pings and is back up soon after it restarts."""

from __future__ import annotations

import re
import secrets
import subprocess
import time

import pytest

from hangar_testlib import HANGAR_BIN, Node

PING_TIMEOUT_MSEC = 1000


def _node(tmp_path_factory, name: str, secret: str, bootstrap: list[str]) -> Node:
    n = Node(tmp_path_factory.mktemp(name))
    text = n.config.read_text()
    text = re.sub(r'rpc_secret = "[0-9a-f]+"', f'rpc_secret = "{secret}"', text)
    peers = ", ".join(f'"{p}"' for p in bootstrap)
    n.config.write_text(
        f"bootstrap_peers = [{peers}]\nrpc_ping_timeout_msec = {PING_TIMEOUT_MSEC}\n" + text
    )
    return n


def node_id(n: Node) -> str:
    out = subprocess.run(
        [str(HANGAR_BIN), "-c", str(n.config), "node", "id", "-q"],
        capture_output=True, text=True, check=True, timeout=30,
    )
    return out.stdout.strip()


def peers(n: Node) -> dict[str, bool]:
    st = n.cli_json("status")
    return {p["id"]: p["is_up"] for p in st["peers"] if not p["is_self"]}


def wait_for(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    secret = secrets.token_hex(32)
    first = _node(tmp_path_factory, "mesh1", secret, [])
    first_addr = node_id(first)
    others = [_node(tmp_path_factory, f"mesh{i}", secret, [first_addr]) for i in (2, 3)]
    nodes = [first, *others]
    for n in nodes:
        n.start()
    yield nodes
    for n in nodes:
        n.stop()


def test_full_mesh_forms_from_one_bootstrap_peer(cluster):
    ids = [node_id(n).split("@")[0] for n in cluster]
    for n, me in zip(cluster, ids):
        want = {i for i in ids if i != me}
        wait_for(lambda: {i for i, up in peers(n).items() if up} == want, 20, f"full mesh seen by {me[:8]}")


def test_node_without_the_secret_is_refused(cluster, tmp_path_factory):
    intruder = _node(tmp_path_factory, "intruder", secrets.token_hex(32), [node_id(cluster[0])])
    intruder.start()
    try:
        time.sleep(3)
        assert peers(intruder) == {} or not any(peers(intruder).values())
        intruder_id = node_id(intruder).split("@")[0]
        for n in cluster:
            assert intruder_id not in peers(n)
        log = intruder.log.read_text()
        assert "certificate" in log.lower() or "handshake" in log.lower(), log[-2000:]
    finally:
        intruder.stop()


def test_killed_node_goes_down_and_comes_back(cluster):
    victim = cluster[2]
    vid = node_id(victim).split("@")[0]
    wait_for(lambda: peers(cluster[0]).get(vid) is True, 20, "victim up")
    victim.kill9()
    # Pings every 5 s, down after 2 missed ones of 1 s each.
    took = wait_for(lambda: peers(cluster[0]).get(vid) is False, 2 * 5 + 2 * PING_TIMEOUT_MSEC / 1000 + 3, "victim marked down")
    print(f"marked down after {took:.1f}s")
    victim.start()
    back = wait_for(lambda: peers(cluster[0]).get(vid) is True and peers(cluster[1]).get(vid) is True, 10, "victim back up")
    print(f"back up after {back:.1f}s")
    assert back < 5
