"""Objects in a 3-node cluster (replication factor 3, one zone per node):
any node serves any request. An object PUT through one node reads back
through every other at once; listings, deletes, copies and multipart
uploads work across nodes; concurrent PUTs of one key through different
nodes converge to one whole version; a node killed during a stream of
writes loses nothing acknowledged, and catches up when it returns."""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import threading
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, bucket_name, error_code, http_status, md5_hex, random_bytes, s3_client, sha256
from cluster_testlib import key_of, quick_tombstone_cluster, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = quick_tombstone_cluster(tmp_path_factory, "ctl")
    yield nodes
    for n in nodes:
        n.stop()


@pytest.fixture(scope="module")
def setup(cluster):
    n1, n2, n3 = cluster
    key = key_of(n1.cli_json("key", "create", "objects"), "objects")
    n1.cli("key", "allow", key.id, "--create-bucket")
    name = bucket_name("objects")
    s3_client(n1, key).create_bucket(Bucket=name)
    return cluster, key, name


def test_a_put_through_one_node_reads_back_through_every_node_at_once(setup):
    nodes, key, bucket = setup
    for i, writer in enumerate(nodes):
        for size in (100, 3 * 1024 + 1, 2 * MiB + 3):
            body = random_bytes(size, 10 * i + size % 7)
            k = f"from-{i}/{size}"
            s3_client(writer, key).put_object(Bucket=bucket, Key=k, Body=body)
            for reader in nodes:
                got = s3_client(reader, key).get_object(Bucket=bucket, Key=k)
                assert sha256(got["Body"].read()) == sha256(body), (i, size, reader.root)
                assert got["ETag"] == f'"{md5_hex(body)}"'
    for reader in nodes:
        listed = s3_client(reader, key).list_objects_v2(Bucket=bucket, Prefix="from-")
        assert listed["KeyCount"] == 9, listed.get("Contents")


def test_delete_copy_and_ranges_across_nodes(setup):
    (n1, n2, n3), key, bucket = setup
    body = random_bytes(3 * MiB + 11, 77)
    s3_client(n1, key).put_object(Bucket=bucket, Key="src", Body=body)
    s3_client(n2, key).copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    got = s3_client(n3, key).get_object(Bucket=bucket, Key="dst", Range="bytes=1048570-2097160")
    assert got["Body"].read() == body[1048570:2097161]
    s3_client(n3, key).delete_object(Bucket=bucket, Key="src")
    for n in (n1, n2, n3):
        with pytest.raises(ClientError) as e:
            s3_client(n, key).get_object(Bucket=bucket, Key="src")
        assert error_code(e.value) == "NoSuchKey"
        assert sha256(s3_client(n, key).get_object(Bucket=bucket, Key="dst")["Body"].read()) == sha256(body)


def test_a_multipart_upload_spread_over_three_nodes(setup):
    (n1, n2, n3), key, bucket = setup
    parts = [random_bytes(5 * MiB, 1), random_bytes(123, 2)]
    up = s3_client(n1, key).create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = []
    for i, (p, n) in enumerate(zip(parts, (n2, n3)), start=1):
        r = s3_client(n, key).upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=i, Body=p)
        etags.append(r["ETag"])
    listed = s3_client(n1, key).list_parts(Bucket=bucket, Key="mp", UploadId=up)
    assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2]
    s3_client(n1, key).complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    for n in (n1, n2, n3):
        assert sha256(s3_client(n, key).get_object(Bucket=bucket, Key="mp")["Body"].read()) == sha256(b"".join(parts))
    with pytest.raises(ClientError) as e:
        s3_client(n2, key).list_parts(Bucket=bucket, Key="mp", UploadId=up)
    assert error_code(e.value) == "NoSuchUpload"


def test_concurrent_puts_of_one_key_through_different_nodes_converge_whole(setup):
    nodes, key, bucket = setup
    bodies = [random_bytes(200_000 + i, 300 + i) for i in range(9)]
    digests = {sha256(b) for b in bodies}
    for round_ in range(5):
        k = f"hot-{round_}"
        clients = [s3_client(nodes[i % 3], key) for i in range(len(bodies))]
        barrier = threading.Barrier(len(bodies))

        def put(i):
            barrier.wait()
            clients[i].put_object(Bucket=bucket, Key=k, Body=bodies[i])

        with cf.ThreadPoolExecutor(len(bodies)) as ex:
            list(ex.map(put, range(len(bodies))))
        seen = set()
        for n in nodes:
            got = s3_client(n, key).get_object(Bucket=bucket, Key=k)
            data = got["Body"].read()
            assert sha256(data) in digests and got["ContentLength"] == len(data)
            seen.add(sha256(data))
        assert len(seen) == 1, f"round {round_}: nodes disagree"



@pytest.mark.parametrize("kind", ["if-none-match", "if-match"])
def test_concurrent_conditional_puts_through_different_nodes_have_exactly_one_winner(setup, kind):
    """Six clients, two per node, PUT the same key at once with
    `If-None-Match: *` (fresh key) or `If-Match` on the current ETag: exactly
    one gets 200, the others 412, and every node then serves the winner."""
    nodes, key, bucket = setup
    for round_ in range(6):
        k = f"cond-{kind}/{round_}"
        bodies = [random_bytes(2000 + i * 900 + round_, 500 + 10 * round_ + i) for i in range(6)]
        extra = {}
        if kind == "if-match":
            first = s3_client(nodes[0], key).put_object(Bucket=bucket, Key=k, Body=b"v0")
            extra = {"IfMatch": first["ETag"]}
        else:
            extra = {"IfNoneMatch": "*"}
        clients = [s3_client(nodes[i % 3], key) for i in range(len(bodies))]
        barrier = threading.Barrier(len(bodies))
        outcome: list = [None] * len(bodies)

        def put(i):
            barrier.wait()
            try:
                clients[i].put_object(Bucket=bucket, Key=k, Body=bodies[i], **extra)
                outcome[i] = 200
            except ClientError as e:
                outcome[i] = http_status(e)

        with cf.ThreadPoolExecutor(len(bodies)) as ex:
            list(ex.map(put, range(len(bodies))))
        assert sorted(outcome) == [200] + [412] * (len(bodies) - 1), (round_, outcome)
        winner = bodies[outcome.index(200)]
        for n in nodes:
            assert s3_client(n, key).get_object(Bucket=bucket, Key=k)["Body"].read() == winner

def test_kill9_of_a_node_during_writes_loses_no_acknowledged_object(setup):
    (n1, n2, n3), key, bucket = setup
    acked: dict[str, str] = {}
    errors: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def writer(w, node):
        c = s3_client(node, key)
        i = 0
        while not stop.is_set() and i < 300:
            k = f"stream/{w}/{i}"
            body = random_bytes(1000 + (i % 3) * 600_000, w * 1000 + i)
            i += 1
            try:
                c.put_object(Bucket=bucket, Key=k, Body=body)
            except ClientError as e:
                if http_status(e) != 503:
                    errors.append(f"{k}: {e}")
                continue
            except Exception as e:  # a connection to a killed node, never an acknowledged write
                errors.append(f"{k}: {e!r}")
                continue
            with lock:
                acked[k] = sha256(body)

    threads = [threading.Thread(target=writer, args=(w, n)) for w, n in enumerate([n1, n2, n1, n2])]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        n3.kill9()
        time.sleep(2.0)
        n3.start()
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    assert not errors, errors[:5]
    assert len(acked) > 20, len(acked)
    for n in (n1, n2, n3):
        c = s3_client(n, key)
        for k, digest in acked.items():
            assert sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) == digest, (n.root, k)
    print(f"{len(acked)} acknowledged PUTs across the kill -9 of node 3, all read back through every node")


def test_a_paused_node_does_not_stall_puts_and_gets_through_the_others(setup):
    """SIGSTOP one node of three: PUTs and GETs through the others complete
    at their usual latency (quorum of the two live nodes), not after an RPC
    timeout."""
    import signal

    (n1, n2, n3), key, bucket = setup
    c = s3_client(n1, key)
    body = random_bytes(1 * MiB + 5, 9)

    def timed(n):
        t = []
        for i in range(n):
            t0 = time.monotonic()
            c.put_object(Bucket=bucket, Key=f"paused/{i}", Body=body)
            assert c.get_object(Bucket=bucket, Key=f"paused/{i}")["Body"].read() == body
            t.append(time.monotonic() - t0)
        return sorted(t)[len(t) // 2]

    before = timed(5)
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        during = timed(10)
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    print(f"PUT+GET of 1 MiB: median {before * 1000:.0f} ms before, {during * 1000:.0f} ms with a node paused")
    assert during < max(1.0, 5 * before), (before, during)


def test_with_two_nodes_of_three_down_object_writes_fail_at_once_with_503(setup):
    (n1, n2, n3), key, bucket = setup
    c = s3_client(n1, key)
    c.put_object(Bucket=bucket, Key="before", Body=b"x" * 5000)
    n2.stop()
    n3.stop()
    try:
        wait_for(lambda: sum(p["is_up"] for p in n1.cli_json("status")["peers"]) == 1, 15, "two nodes seen down")
        for body in (b"small", random_bytes(2 * MiB, 3)):
            t0 = time.monotonic()
            with pytest.raises(ClientError) as e:
                c.put_object(Bucket=bucket, Key="refused", Body=body)
            took = time.monotonic() - t0
            assert http_status(e.value) == 503, e.value.response
            assert "quorum" in e.value.response["Error"]["Message"], e.value.response["Error"]
            assert took < 3, took
        with pytest.raises(ClientError) as e:
            c.get_object(Bucket=bucket, Key="before")
        assert http_status(e.value) == 503
    finally:
        n2.start()
        n3.start()
    wait_for(lambda: sum(p["is_up"] for p in n1.cli_json("status")["peers"]) == 3, 20, "all nodes up again")
    assert s3_client(n2, key).get_object(Bucket=bucket, Key="before")["Body"].read() == b"x" * 5000


def table_status(n) -> dict[str, tuple[int, str]]:
    return {t["table"]: (t["rows"], t["digest"]) for t in n.cli_json("table", "status")}


def test_tombstones_are_removed_from_every_replica_once_all_hold_them(setup):
    """Deleted objects leave tombstones (object rows and version entries);
    once every replica holds them and the delay (3 s here) passed, the
    tombstone-gc workers remove them from all three nodes together, and the
    replicas still agree. (Runs before the layout change below: a node of a
    layout version that is not retired yet, and is down, keeps tombstones.)"""
    (n1, n2, n3), key, bucket = setup
    c = s3_client(n2, key)
    for i in range(20):
        c.put_object(Bucket=bucket, Key=f"doomed/{i}", Body=random_bytes(4000 + i * 50_000, i))
    wait_for(lambda: len({str(table_status(n)) for n in (n1, n2, n3)}) == 1, 60, "replicas agree")
    before = table_status(n1)
    for i in range(20):
        s3_client(n3, key).delete_object(Bucket=bucket, Key=f"doomed/{i}")

    def collected():
        views = [table_status(n) for n in (n1, n2, n3)]
        return all(v == views[0] for v in views) and views[0]["object"][0] <= before["object"][0] - 20

    took = wait_for(collected, 60, "tombstones removed on every replica")
    print(f"tombstones gone from every replica {took:.1f}s after the deletes: {table_status(n1)}")
    for n in (n1, n2, n3):
        with pytest.raises(ClientError) as e:
            s3_client(n, key).get_object(Bucket=bucket, Key="doomed/3")
        assert error_code(e.value) == "NoSuchKey"

def test_a_layout_change_under_load_loses_nothing(setup, tmp_path_factory):
    """A fourth node is added, then removed, while clients PUT through nodes
    1 and 2: every acknowledged object is readable through every node
    throughout (new writes go to the nodes of every active layout version;
    reads find old data on the old holders)."""
    import re

    from cluster_testlib import converge, make_node, node_id, peer_addr, version

    (n1, n2, n3), key, bucket = setup
    secret = re.search(r'rpc_secret = "([0-9a-f]+)"', n1.config.read_text()).group(1)
    n4 = make_node(tmp_path_factory, "obj4", secret, [peer_addr(n1)])
    acked: dict[str, str] = {}
    errors: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def writer(w, node):
        c = s3_client(node, key)
        i = 0
        while not stop.is_set() and i < 400:
            k = f"moving/{w}/{i}"
            body = random_bytes(500 + (i % 2) * 1_100_000, 7000 + w * 1000 + i)
            i += 1
            try:
                c.put_object(Bucket=bucket, Key=k, Body=body)
            except Exception as e:  # nothing may fail while every node is up
                errors.append(f"{k}: {e!r}")
                continue
            with lock:
                acked[k] = sha256(body)

    threads = [threading.Thread(target=writer, args=(w, n)) for w, n in enumerate([n1, n2])]
    for t in threads:
        t.start()
    try:
        v = version(n1)
        n4.start()
        n4_id = node_id(n4)
        wait_for(lambda: version(n4) == v, 15, "the new node has the layout")
        n1.cli("layout", "assign", n4_id[:12], "-z", "dc4", "-c", "1G")
        wait_for(lambda: len(n1.cli_json("layout", "show")["staged"]["roles"]) == 1, 10, "staged")
        n1.cli("layout", "apply", "--version", str(v + 1))
        converge([n1, n2, n3, n4], v + 1)
        time.sleep(1.5)
        n2.cli("layout", "remove", n4_id[:12])
        wait_for(lambda: len(n2.cli_json("layout", "show")["staged"]["roles"]) == 1, 10, "staged removal")
        n2.cli("layout", "apply", "--version", str(v + 2))
        converge([n1, n2, n3, n4], v + 2)
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    try:
        assert not errors, errors[:5]
        assert len(acked) > 20, len(acked)
        for n in (n1, n2, n3, n4):
            c = s3_client(n, key)
            for k, digest in acked.items():
                assert sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) == digest, (n.root, k)
        listed = s3_client(n3, key).list_objects_v2(Bucket=bucket, Prefix="moving/", MaxKeys=1000)
        assert listed["KeyCount"] == len(acked)
        print(f"{len(acked)} PUTs acknowledged while a node was added and removed; all readable through 4 nodes")
    finally:
        n4.stop()


def test_a_node_whose_metadata_was_wiped_converges_to_the_same_merkle_roots(setup):
    """Stop a node, delete its metadata store (its identity and layout kept),
    restart it: anti-entropy gives it every row again, and every table's
    digest of Merkle roots then equals the other replicas'. Also checks that
    after the kill -9 and layout tests above, all replicas agree."""
    (n1, n2, n3), key, bucket = setup
    for i in range(5):
        s3_client(n1, key).put_object(Bucket=bucket, Key=f"before-wipe/{i}", Body=random_bytes(5000 + i, i))

    def agree(nodes):
        views = [table_status(n) for n in nodes]
        return all(v == views[0] for v in views) and views[0]["object"][0] > 0

    wait_for(lambda: agree([n1, n2, n3]), 60, "three replicas with equal table digests")
    n3.stop()
    wiped = [f for f in n3.meta.iterdir() if f.name.startswith("db.")]
    assert wiped, list(n3.meta.iterdir())
    for f in wiped:
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    n3.start()
    took = wait_for(lambda: agree([n1, n2, n3]), 90, "node 3 converged after the wipe")
    print(f"wiped node converged {took:.1f}s after its restart: {table_status(n3)}")
    c = s3_client(n3, key)
    for i in range(5):
        assert c.get_object(Bucket=bucket, Key=f"before-wipe/{i}")["Body"].read() == random_bytes(5000 + i, i)
