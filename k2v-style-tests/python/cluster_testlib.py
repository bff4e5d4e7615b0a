"""Helpers for tests of real multi-node clusters: nodes configured to join
one another (`make_node`), a laid-out 3-node cluster (`laid_out_cluster`,
`quick_tombstone_cluster`), keys made through the CLI (`key_of`), node ids
and peer addresses, and waiting for the layout to converge. Used by the
cluster tests of this directory; it holds no tests itself."""

from __future__ import annotations

import re
import secrets
import time

from hangar_testlib import Key, Node

RF = 3
ZONES = ["dc1", "dc2", "dc3"]


def make_node(tmp_path_factory, name: str, secret: str, bootstrap: list[str], rf: int = RF) -> Node:
    n = Node(tmp_path_factory.mktemp(name))
    text = n.config.read_text()
    text = re.sub(r'rpc_secret = "[0-9a-f]+"', f'rpc_secret = "{secret}"', text)
    text = text.replace("replication_factor = 1", f"replication_factor = {rf}")
    peers = ", ".join(f'"{p}"' for p in bootstrap)
    n.config.write_text(f"bootstrap_peers = [{peers}]\nrpc_ping_timeout_msec = 1000\n" + text)
    return n


def laid_out_cluster(tmp_path_factory, prefix: str, secret: str | None = None,
                     configure=lambda n: n) -> list[Node]:
    """Three started nodes named `<prefix>1..3` (rf 3), a full mesh, one
    zone each, layout version 1 applied and seen by all. `configure` may
    change each node (its config file) before it starts, and returns it."""
    secret = secret or secrets.token_hex(32)
    first = configure(make_node(tmp_path_factory, f"{prefix}1", secret, []))
    first.start()
    nodes = [first] + [configure(make_node(tmp_path_factory, f"{prefix}{i}", secret, [peer_addr(first)]))
                       for i in (2, 3)]
    for n in nodes[1:]:
        n.start()
    ids = [node_id(n) for n in nodes]
    wait_full_mesh(nodes, ids)
    for n, me, zone in zip(nodes, ids, ["dc1", "dc2", "dc3"]):
        n.cli("layout", "assign", me[:12], "-z", zone, "-c", "1G")
    wait_for(lambda: len(first.cli_json("layout", "show")["staged"]["roles"]) == 3, 10, "3 staged roles")
    first.cli("layout", "apply", "--version", "1")
    converge(nodes, 1)
    return nodes


def quick_tombstone_cluster(tmp_path_factory, prefix: str) -> list[Node]:
    """A laid-out 3-node cluster (`laid_out_cluster`) whose tombstones are
    collected 3 s after they are written (a day by default). The caller
    stops the nodes."""
    def quick_tombstones(n: Node) -> Node:
        n.config.write_text("tombstone_gc_delay_secs = 3\n" + n.config.read_text())
        return n

    return laid_out_cluster(tmp_path_factory, prefix, configure=quick_tombstones)


def key_of(info: dict, name: str = "") -> Key:
    """The `Key` in the JSON answer of `hangar key create NAME --json`."""
    return Key(info["access_key_id"], info["secret_access_key"], name, info["canonical_id"])


def up_peers(n: Node) -> set[str]:
    """The ids of the peers node `n` reports up (itself left out)."""
    return {p["id"] for p in n.cli_json("status")["peers"] if p["is_up"] and not p["is_self"]}


def wait_full_mesh(nodes: list[Node], ids: list[str], timeout: float = 20) -> None:
    """Waits until each of `nodes` (whose ids are `ids`) reports all the
    others up."""
    for n, me in zip(nodes, ids):
        wait_for(lambda n=n, me=me: up_peers(n) == set(ids) - {me}, timeout, f"full mesh seen by {me[:8]}")


def peer_addr(n: Node) -> str:
    return n.cli("node", "id", "-q").stdout.strip()


def node_id(n: Node) -> str:
    return peer_addr(n).split("@")[0]


def wait_for(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        try:
            if cond():
                return time.monotonic() - t0
        except RuntimeError as e:  # the admin socket may not be up yet
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last})")


def show(n: Node) -> dict:
    return n.cli_json("layout", "show")


def version(n: Node) -> int:
    return n.cli_json("status")["layout_version"]


def current_hash(n: Node) -> str:
    return show(n)["current"]["hash"]


def replicas(view: dict) -> set[tuple[int, str]]:
    """(partition, node) pairs of the current version in a `layout show --json`."""
    return {(p, r["id"]) for r in view["current"]["roles"] for p in r["partition_list"]}


def converge(nodes: list[Node], want_version: int, timeout: float = 10) -> float:
    """Waits until every node has the same current version and content."""
    def same():
        views = [show(n)["current"] for n in nodes]
        return all(v["version"] == want_version for v in views) and len({v["hash"] for v in views}) == 1

    return wait_for(same, timeout, f"layout version {want_version} on {len(nodes)} nodes")


def staged_empty(n: Node) -> bool:
    s = show(n)["staged"]
    return not s["roles"] and s["parameters"] is None
