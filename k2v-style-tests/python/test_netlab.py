"""A 3-node cluster (replication factor 3, default durability) on the
network test bed (netlab.py, doc/netlab.md): each node in a namespace and
a zone of its own, 20 ms of round trip between any two nodes. The links
really are that slow; every object PUT through any node reads back, byte
for byte, through every node; a node cut off from the other two leaves the
other two writing, and once healed it catches up on what it missed. Its
links are paced by BBR (the round trip picks it).
Skipped only when network namespaces cannot be created here (not root)."""

from __future__ import annotations

import hashlib
import os

import pytest

import netlab
from chaos_lib import Cluster, wait_for

USABLE, WHY = netlab.namespaces_usable()
pytestmark = pytest.mark.skipif(not USABLE, reason=f"network test bed skipped: {WHY}")

RTT_MS = 20.0
BUCKET = "netlab"


def body(i: int) -> bytes:
    # Two blocks and a bit (block_size 1 MiB) for some, inline for others.
    size = 2 * 1024 * 1024 + 17 if i % 2 == 0 else 3000
    return hashlib.sha256(str(i).encode()).digest() * (size // 32) + os.urandom(size % 32)


def read_back_everywhere(c: Cluster, objects: dict[str, bytes], nodes) -> None:
    for n in nodes:
        s3 = c.client(n)
        for key, want in objects.items():
            got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            assert got == want, f"{key} through {n.name}: {len(got)} bytes, not the {len(want)} written"


def test_cluster_on_a_20ms_network_writes_reads_partitions_and_heals(tmp_path):
    profile = netlab.uniform("test-20ms", RTT_MS)
    with Cluster(tmp_path, profile=profile, load=True, fsync=None, bucket=BUCKET) as c:
        net = c.net
        # The shaping is real: node to node costs the round trip, the load
        # namespace (zone 1) is next to node 1 and 20 ms from the others.
        for a, b in ((1, 2), (2, 3), (3, 1), (netlab.LOAD_SLOT, 2)):
            rtt = net.rtt_ms(a, b)
            assert RTT_MS * 0.95 <= rtt <= RTT_MS * 3, f"{net.ns(a)} -> {net.ns(b)}: {rtt:.1f} ms"
        near = net.rtt_ms(netlab.LOAD_SLOT, 1)
        assert near < 5, f"the load namespace is {near:.1f} ms from node 1, its zone's"

        c.start()
        nodes = [c.nodes[s] for s in (1, 2, 3)]
        objects: dict[str, bytes] = {}
        for i, n in enumerate(nodes * 2):
            key = f"via-{n.name}-{i}"
            objects[key] = body(i)
            c.client(n).put_object(Bucket=BUCKET, Key=key, Body=objects[key])
        read_back_everywhere(c, objects, nodes)
        # rpc_congestion_control = "auto" (the default) paces a 20 ms link
        # by BBR, which keeps a long link full (doc/netlab.md); the same
        # nodes on loopback are paced by Cubic (src/net/tests/mesh.rs).
        for n in nodes:
            paced = {p["id"][:16]: p["congestion_control"] for p in n.cli_json("status")["peers"] if not p["is_self"]}
            assert sorted(paced.values()) == ["bbr", "bbr"], f"{n.name}: {paced}"

        # Node 3 cut off from its peers: writes through 1 and 2 still reach
        # a quorum of 2 over the 20 ms link.
        net.partition(3, "both")
        missed: dict[str, bytes] = {}
        for i, n in enumerate(nodes[:2] * 2):
            key = f"while-n3-cut-{i}"
            missed[key] = body(100 + i)
            c.client(n).put_object(Bucket=BUCKET, Key=key, Body=missed[key])
        read_back_everywhere(c, missed, nodes[:2])

        net.heal(3)
        c.wait_mesh(60)
        objects.update(missed)
        read_back_everywhere(c, objects, nodes)
        # And node 3 holds what it missed itself: rows and block files.
        took = c.wait_converged(180)
        assert took is not None, f"not converged after the heal: {c.describe_missing()}"
        net.check_delays()
        wait_for(lambda: all(n.running() for n in nodes), 5, "every node still running")
