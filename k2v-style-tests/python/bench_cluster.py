"""Clusters of real `hangar server` processes for the benchmarks in script/.

`start_cluster` starts `count` nodes on loopback (one zone each), forms the
mesh, applies layout version 1 and creates an access key allowed to create
buckets: what `script/bench-resync` and `script/bench-overload` measure on.
"""

from __future__ import annotations

import re
import secrets
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from hangar_testlib import Key, Node, s3_client


def wait(cond, timeout: float, what: str, every: float = 0.05) -> float:
    """Polls `cond` every `every` seconds until it holds; exits the
    benchmark if `timeout` passes."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(every)
    raise SystemExit(f"{Path(sys.argv[0]).name}: timed out after {timeout}s waiting for {what}")


def get_loop(endpoint: str, key: Key, bucket: str, keys: list[str], stop, out) -> None:
    """GETs `keys` of `bucket` through `endpoint` in turn, one at a time,
    until `stop` is set, then sends `out` the list of (start, seconds).

    Meant to run in a process of its own (multiprocessing, spawned): in the
    benchmark's process it would share the GIL with the threads that poll
    the nodes, and wait up to the interpreter's switch interval (5 ms) for
    it, which a latency measurement must not include. Sends "ready" after
    its first GET.
    """
    c = s3_client(SimpleNamespace(endpoint=endpoint), key)
    got = []
    i = 0
    while not stop.is_set():
        t0 = time.monotonic()
        c.get_object(Bucket=bucket, Key=keys[i % len(keys)])["Body"].read()
        took = time.monotonic() - t0
        if i == 0:
            out.send("ready")
        else:
            got.append((t0, took))
        i += 1
    out.send(got)


def make_node(root: Path, name: str, secret: str, boot: list[str], rf: int = 3, extra: str = "") -> Node:
    """A node (not started) of a cluster sharing `secret`, bootstrapped from
    `boot`, with replication factor `rf` and `extra` top-level config lines."""
    n = Node(root / name)
    t = n.config.read_text()
    t = re.sub(r'rpc_secret = "[0-9a-f]+"', f'rpc_secret = "{secret}"', t)
    t = t.replace("replication_factor = 1", f"replication_factor = {rf}")
    peers = ", ".join(f'"{p}"' for p in boot)
    n.config.write_text(f"bootstrap_peers = [{peers}]\nrpc_ping_timeout_msec = 2000\n{extra}" + t)
    n.base_config = n.config.read_text()
    return n


def start_cluster(root: Path, count: int = 3, rf: int = 3, extra: str = "") -> tuple[list[Node], Key]:
    """`count` started nodes with layout version 1 applied, and a key."""
    secret = secrets.token_hex(32)
    n1 = make_node(root, "n1", secret, [], rf, extra)
    n1.start()
    addr = n1.cli("node", "id", "-q").stdout.strip()
    nodes = [n1] + [make_node(root, f"n{i}", secret, [addr], rf, extra) for i in range(2, count + 1)]
    for n in nodes[1:]:
        n.start()
    ids = [n.cli("node", "id", "-q").stdout.strip().split("@")[0] for n in nodes]
    wait(lambda: all(sum(p["is_up"] for p in n.cli_json("status")["peers"]) == count for n in nodes), 30, "mesh")
    for i, (n, node_id) in enumerate(zip(nodes, ids)):
        n.cli("layout", "assign", node_id[:12], "-z", f"dc{i + 1}", "-c", "100G")
    wait(lambda: len(n1.cli_json("layout", "show")["staged"]["roles"]) == count, 10, "staged roles")
    n1.cli("layout", "apply", "--version", "1")
    wait(lambda: all(n.cli_json("status")["layout_version"] == 1 for n in nodes), 20, "layout")
    k = n1.cli_json("key", "create", "bench")
    key = Key(k["access_key_id"], k["secret_access_key"], "bench")
    n1.cli("key", "allow", key.id, "--create-bucket")
    return nodes, key
