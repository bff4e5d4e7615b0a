"""Resync in a 3-node cluster (replication factor 3, one zone per node):
a node whose data directory was wiped, or whose whole store was, gets
every block back while clients keep reading and writing; a corrupt block
file is quarantined and replaced while GETs keep succeeding; a node killed
in the middle of a resync resumes from its queue without fetching what it
already stored, and a byte-rate limit holds; a fourth node added and then
removed gets (and gives back) its partitions' blocks, old holders delete
their copies only once the new ones hold them, and the old layout version
retires. Every object is checked byte for byte through every node."""

from __future__ import annotations

import re
import shutil
import threading
import time
import urllib.request

import pytest

from hangar_testlib import MiB, Node, block_sizes, bucket_name, random_bytes, s3_client, sha256
from cluster_testlib import converge, key_of, laid_out_cluster, make_node, node_id, peer_addr, wait_for


def body(i: int, salt: int = 0) -> bytes:
    """Mixed sizes; every other object compressible; distinct for each
    (i, salt), so that no block of a later write equals an earlier one."""
    size = [1_500, 300_000, 1_500_000, 3_200_000][i % 4]
    if i % 2:
        return (f"object {i}/{salt} compressible text " * (size // 28 + 1)).encode()[:size]
    return random_bytes(size, 4200 + i + 100_000 * salt)


def with_lines(n: Node, *lines: str) -> Node:
    n.config.write_text("\n".join(lines) + "\n" + n.config.read_text())
    return n


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "rs")
    key = key_of(nodes[0].cli_json("key", "create", "resync"), "resync")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    bucket = bucket_name("resync")
    s3_client(nodes[0], key).create_bucket(Bucket=bucket)
    objects: dict[str, str] = {}
    c = s3_client(nodes[0], key)
    for i in range(32):
        b = body(i)
        c.put_object(Bucket=bucket, Key=f"base/{i}", Body=b)
        objects[f"base/{i}"] = sha256(b)
    wait_for(lambda: len({frozenset(block_sizes(n)) for n in nodes}) == 1 and block_sizes(nodes[0]), 30,
             "every node holds every block")
    yield nodes, key, bucket, objects
    for n in nodes:
        n.stop()


def check_all(nodes, key, bucket, objects):
    for n in nodes:
        c = s3_client(n, key)
        for k, digest in objects.items():
            assert sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) == digest, (n.root, k)


def resync_stats(n: Node) -> dict:
    return n.cli_json("worker", "info", "block-resync")["stats"]


class Load:
    """A client writing new objects and reading old ones through `node`
    while a test runs; every acknowledged write is recorded."""

    def __init__(self, node, key, bucket, objects, tag):
        self.c = s3_client(node, key)
        self.bucket, self.objects, self.tag = bucket, objects, tag
        self.salt = sum(tag.encode()) + len(tag)
        self.acked: dict[str, str] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run)

    def run(self):
        i = 0
        old = list(self.objects.items())
        while not self.stop.is_set():
            k = f"{self.tag}/{i}"
            b = body(i, self.salt)
            try:
                self.c.put_object(Bucket=self.bucket, Key=k, Body=b)
                self.acked[k] = sha256(b)
                ok, digest = old[i % len(old)]
                got = self.c.get_object(Bucket=self.bucket, Key=ok)["Body"].read()
                if sha256(got) != digest:
                    self.errors.append(f"{ok}: wrong content")
            except Exception as e:  # two nodes of three are up: nothing may fail
                self.errors.append(f"{k}: {e!r}")
            i += 1
            time.sleep(0.05)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(60)


def test_a_wiped_data_directory_refills_while_clients_work(setup):
    nodes, key, bucket, objects = setup
    n1, n2, n3 = nodes
    want = block_sizes(n1)
    n3.stop()
    shutil.rmtree(n3.data)
    with Load(n1, key, bucket, objects, "during-data-wipe") as load:
        n3.start()
        took = wait_for(lambda: set(want) <= set(block_sizes(n3)), 120, "node 3 holds every block again")
    stats = resync_stats(n3)
    print(f"wiped data directory refilled in {took:.1f}s: {stats}")
    assert stats["blocks_fetched"] >= len(want), (stats, len(want))
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{n3.admin_port}/metrics", timeout=10).read().decode()
    fetched = re.search(r"^hangar_resync_fetched_blocks_total (\d+)$", metrics, re.M)
    assert fetched and int(fetched.group(1)) == stats["blocks_fetched"], metrics[-2000:]
    assert load.errors == [], load.errors[:5]
    objects.update(load.acked)
    assert n3.cli_json("block", "list-errors") == []
    check_all(nodes, key, bucket, objects)


def counter(n: Node, name: str) -> int:
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{n.admin_port}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{name} (\d+)$", metrics, re.M)
    assert m, f"{name} not in the metrics"
    return int(m.group(1))


def test_a_source_serving_clients_defers_to_an_idle_replica_but_serves_when_all_are_busy(setup):
    """Node 1 serves a client throughout: node 3's refill is served by
    node 2, node 1 deferring; with clients on node 2 as well, both defer
    and the refill is served anyway (deferral never starves it)."""
    nodes, key, bucket, objects = setup
    n1, n2, n3 = nodes
    want = block_sizes(n1)
    for busy in ([n1], [n1, n2]):
        served0 = [counter(n, "hangar_block_resync_served_total") for n in (n1, n2)]
        n3.stop()
        shutil.rmtree(n3.data)
        loads = [Load(n, key, bucket, objects, f"defer-{len(busy)}-{i}") for i, n in enumerate(busy)]
        for load in loads:
            load.__enter__()
        try:
            time.sleep(0.5)
            n3.start()
            wait_for(lambda: set(want) <= set(block_sizes(n3)), 120, "node 3 holds every block again")
        finally:
            for load in loads:
                load.__exit__()
        for load in loads:
            assert load.errors == [], load.errors[:5]
            objects.update(load.acked)
        s1, s2 = (counter(n, "hangar_block_resync_served_total") - c for n, c in zip((n1, n2), served0))
        print(f"clients on {len(busy)} node(s): node 1 served {s1}, node 2 {s2} of {len(want)} blocks; "
              f"node 3: {resync_stats(n3)}")
        assert s1 + s2 >= len(want), (s1, s2, len(want))
        if len(busy) == 1:
            # Node 1 is asked again without the option only when node 2 did
            # not answer with the block: nearly every block came from node 2
            # (without deferral, the refill spreads over both sources).
            assert s1 <= len(want) // 10, (s1, s2, len(want))
    check_all(nodes, key, bucket, objects)


def test_a_wiped_node_refills_from_the_reference_table(setup):
    """Metadata and data gone, identity kept: the block reference table's
    anti-entropy gives the node its references back, and its table hook
    queues every block for the resync worker."""
    nodes, key, bucket, objects = setup
    n1, n2, n3 = nodes
    want = block_sizes(n1)
    n2.stop()
    shutil.rmtree(n2.data)
    for f in n2.meta.iterdir():
        if f.name.startswith("db."):
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    with Load(n3, key, bucket, objects, "during-full-wipe") as load:
        n2.start()
        took = wait_for(lambda: set(want) <= set(block_sizes(n2)), 150, "node 2 holds every block again")
    print(f"wiped node refilled in {took:.1f}s: {resync_stats(n2)}")
    assert not load.errors, load.errors[:5]
    objects.update(load.acked)
    check_all(nodes, key, bucket, objects)


def test_a_corrupt_block_is_quarantined_and_replaced_while_gets_succeed(setup):
    nodes, key, bucket, objects = setup
    n1 = nodes[0]
    files = block_sizes(n1)
    victim = max(files, key=files.get)
    path = next(p for p in n1.data.rglob(f"{victim}*") if "quarantine" not in p.parts)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    # Every GET through node 1 succeeds: the corrupt copy is skipped.
    c = s3_client(n1, key)
    for k, digest in objects.items():
        assert sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) == digest, k
    qdir = n1.data / "quarantine"
    wait_for(lambda: qdir.exists() and any(q.name.startswith(victim) for q in qdir.iterdir()), 30,
             "the corrupt copy quarantined")
    quarantined = next(q for q in qdir.iterdir() if q.name.startswith(victim))
    assert quarantined.read_bytes() == bytes(raw), "the corrupt copy is kept as it was"
    wait_for(lambda: path.exists() and path.read_bytes() != bytes(raw), 30, "a good copy fetched again")
    info = n1.cli_json("block", "info", victim)
    assert info["refcount"] >= 1 and info["file"] is not None, info
    check_all(nodes, key, bucket, objects)


def test_a_node_killed_mid_resync_resumes_without_fetching_twice_and_the_rate_limit_holds(setup):
    nodes, key, bucket, objects = setup
    n1, n2, n3 = nodes
    want = block_sizes(n1)
    total = sum(want.values())
    n3.stop()
    shutil.rmtree(n3.data)
    limit = 4_000_000
    text = n3.config.read_text()
    n3.config.write_text(f"resync_max_bytes_per_sec = {limit}\n" + text)
    n3.start()
    wait_for(lambda: sum(block_sizes(n3).values()) > total * 0.15, 120, "a part refilled")
    b0, t0 = sum(block_sizes(n3).values()), time.monotonic()
    wait_for(lambda: sum(block_sizes(n3).values()) > b0 + total * 0.3 or set(want) <= set(block_sizes(n3)),
             120, "more refilled")
    b1, t1 = sum(block_sizes(n3).values()), time.monotonic()
    rate = (b1 - b0) / (t1 - t0)
    print(f"limited resync: {rate / 1e6:.2f} MB/s for a limit of {limit / 1e6:.2f} MB/s")
    # The files are counted every 0.1 s: a block of up to 1 MiB lands at once.
    assert rate <= limit * 1.1 + 2 * MiB / (t1 - t0), rate
    assert rate >= limit * 0.5, rate
    n3.kill9()
    present = set(block_sizes(n3)) & set(want)
    assert 0 < len(present) < len(want), (len(present), len(want))
    n3.config.write_text(text)
    n3.start()
    wait_for(lambda: set(want) <= set(block_sizes(n3)), 120, "node 3 holds every block after the restart")
    fetched = resync_stats(n3)["blocks_fetched"]
    assert fetched == len(want) - len(present), (fetched, len(want), len(present))
    check_all(nodes, key, bucket, objects)


def test_a_fourth_node_gets_its_partitions_blocks_and_gives_them_back(setup, tmp_path_factory):
    import re

    nodes, key, bucket, objects = setup
    n1, n2, n3 = nodes
    secret = re.search(r'rpc_secret = "([0-9a-f]+)"', n1.config.read_text()).group(1)
    n4 = make_node(tmp_path_factory, "rs4", secret, [peer_addr(n1)])
    everyone = [n1, n2, n3, n4]
    all_blocks = set(block_sizes(n1))

    def history(n):
        return n.cli_json("layout", "history")

    def placed_right(members):
        """Every block on exactly the 3 nodes of its partition."""
        show = n1.cli_json("layout", "show")["current"]
        holders: dict[int, set[str]] = {}
        for r in show["roles"]:
            for p in r["partition_list"]:
                holders.setdefault(p, set()).add(r["id"])
        ids = {node_id(n): n for n in members}
        files = {i: set(block_sizes(n)) for i, n in ids.items()}
        blocks = set().union(*files.values())
        if not all_blocks <= blocks:
            return False
        for h in blocks:
            where = {i for i, f in files.items() if h in f}
            if where != holders[int(h[:2], 16)]:
                return False
        return True

    try:
        n4.start()
        v = history(n1)["current_version"]
        wait_for(lambda: history(n4)["current_version"] == v, 15, "the new node has the layout")
        with Load(n1, key, bucket, objects, "adding-node") as load:
            n1.cli("layout", "assign", node_id(n4)[:12], "-z", "dc4", "-c", "1G")
            wait_for(lambda: len(n1.cli_json("layout", "show")["staged"]["roles"]) == 1, 10, "staged")
            n1.cli("layout", "apply", "--version", str(v + 1))
            converge(everyone, v + 1)
            took = wait_for(lambda: [x["version"] for x in history(n1)["versions"]] == [v + 1], 180,
                            "the old layout version retired")
            print(f"version {v + 1} synced and {v} retired {took:.1f}s after apply")
        assert not load.errors, load.errors[:5]
        objects.update(load.acked)
        all_blocks = set(block_sizes(n1)) | set(block_sizes(n4))
        took = wait_for(lambda: placed_right(everyone), 120, "every block on its partition's 3 nodes")
        print(f"blocks placed for 4 nodes {took:.1f}s after retirement; n4: {resync_stats(n4)}")
        check_all(everyone, key, bucket, objects)

        def metadata_rows_of_n4() -> int:
            stats = n1.cli_json("stats")
            [mine] = [x for x in stats["nodes"] if x["id"] == node_id(n4)]
            tables = mine["report"]["tables"]
            return sum(tables[t] for t in ("object", "version", "mpu", "mpu_part"))

        assert metadata_rows_of_n4() > 0, "node 4 holds rows of its partitions"

        # And back: node 4 leaves; its partitions' blocks go to the others.
        with Load(n2, key, bucket, objects, "removing-node") as load:
            n2.cli("layout", "remove", node_id(n4)[:12])
            wait_for(lambda: len(n2.cli_json("layout", "show")["staged"]["roles"]) == 1, 10, "staged removal")
            n2.cli("layout", "apply", "--version", str(v + 2))
            converge(everyone, v + 2)
            wait_for(lambda: [x["version"] for x in history(n1)["versions"]] == [v + 2], 180,
                     "the 4-node version retired")
        assert not load.errors, load.errors[:5]
        objects.update(load.acked)
        all_blocks = set().union(*(set(block_sizes(n)) for n in everyone))
        wait_for(lambda: all(all_blocks <= set(block_sizes(n)) for n in (n1, n2, n3)), 120,
                 "the three nodes hold every block again")
        wait_for(lambda: not block_sizes(n4), 120, "node 4 handed over and deleted its blocks")

        # Its object, version and upload rows leave too (the sync worker's
        # pass after the retirement), and nothing is lost by it.
        wait_for(lambda: metadata_rows_of_n4() == 0, 90, "node 4 dropped the rows of the partitions it left")
        check_all([n1, n2, n3], key, bucket, objects)
    finally:
        n4.stop()


def test_the_scrub_finds_a_corrupt_block_and_keeps_its_place_across_a_restart(setup):
    """`repair scrub start` re-reads every block slowly (tranquility 40: the
    pass takes a few seconds), quarantines the corrupt copy and the resync
    replaces it; paused mid-pass, the scrub keeps its cursor and counts
    across a restart, and resumed, it finishes the pass where it was."""
    nodes, key, bucket, objects = setup
    n1 = nodes[0]
    files = block_sizes(n1)
    victim = min(files)  # the first block the scrub visits (hash order)
    path = next(p for p in n1.data.rglob(f"{victim}*") if "quarantine" not in p.parts)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0x55
    path.write_bytes(bytes(raw))
    n1.cli("worker", "set", "scrub-tranquility", "40")
    n1.cli("repair", "scrub", "start")

    def scrub():
        return n1.cli_json("worker", "info", "block-scrub")["scrub"]

    wait_for(lambda: scrub()["checked"] >= 5, 60, "the scrub under way")
    n1.cli("repair", "scrub", "pause")
    time.sleep(0.5)
    paused = scrub()
    assert paused["status"] == "paused" and paused["corrupt"] == 1, paused
    assert 0 < paused["checked"] < len(files), (paused, len(files))
    qdir = n1.data / "quarantine"
    assert any(q.name.startswith(victim) and q.read_bytes() == bytes(raw) for q in qdir.iterdir())
    n1.stop()
    n1.start()
    again = scrub()
    assert again["status"] == "paused" and again["cursor"] == paused["cursor"], (again, paused)
    assert again["checked"] == paused["checked"]
    n1.cli("worker", "set", "scrub-tranquility", "0")
    n1.cli("repair", "scrub", "resume")
    wait_for(lambda: scrub()["status"] == "idle", 60, "the pass finished")
    done = scrub()
    assert done["last_pass_done_msec"] and done["checked"] >= len(files) - 1, (done, len(files))
    assert done["corrupt"] == 1, done
    wait_for(lambda: path.exists() and path.read_bytes() != bytes(raw), 30, "a good copy fetched again")
    bad = n1.cli("repair", "scrub", "resume", check=False)
    assert bad.returncode != 0 and "idle" in bad.stderr, bad.stderr
    check_all(nodes, key, bucket, objects)
