"""Concurrent CreateBucket of one new name through every node of a 3-node
cluster (replication factor 3), as the overload benchmark does when it
starts one load generator per node: exactly one creation succeeds, the
other requests of the same key answer `BucketAlreadyOwnedByYou`, those of
another key `BucketAlreadyExists` (and that key gets no access); the
bucket then works through every node, and no object PUT right after the
race is lost. A paused coordinator gives a clear 503 with retry hints,
then the next node takes over (doc/replication.md §9)."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import REGION, Key, bucket_name, error_code, http_status, s3_client
from cluster_testlib import laid_out_cluster, node_id, wait_for

ROUNDS = 15
# Requests per node in each round: 2, so 6 creates of one name at once.
PER_NODE = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "race")
    yield nodes
    for n in nodes:
        n.stop()


def new_key(node, name: str) -> Key:
    info = node.cli_json("key", "create", name)
    node.cli("key", "allow", info["access_key_id"], "--create-bucket")
    return Key(info["access_key_id"], info["secret_access_key"], name)


def race(clients: list, name: str, after=None) -> list:
    """Sends CreateBucket(name) through every client at the same moment;
    returns, per client, "ok" or the error code. `after(i, client, result)`
    runs in client i's thread right after its answer."""
    results: list = [None] * len(clients)
    barrier = threading.Barrier(len(clients))

    def one(i: int):
        c = clients[i]
        barrier.wait()
        try:
            c.create_bucket(Bucket=name)
            results[i] = "ok"
        except ClientError as e:
            results[i] = (http_status(e), error_code(e))
        if after is not None:
            after(i, c, results[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def listed(c, bucket: str) -> set[str]:
    out, token = set(), None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = c.list_objects_v2(Bucket=bucket, **kw)
        out |= {o["Key"] for o in r.get("Contents", [])}
        if not r.get("IsTruncated"):
            return out
        token = r["NextContinuationToken"]


def test_racing_creates_by_one_key_give_one_bucket_that_every_node_serves(cluster):
    key = new_key(cluster[0], "racer")
    clients = [s3_client(n, key) for n in cluster for _ in range(PER_NODE)]
    per_node = [s3_client(n, key) for n in cluster]
    failures = []
    for r in range(ROUNDS):
        name = bucket_name(f"one-key-{r}")
        results = race(clients, name)
        ok = results.count("ok")
        owned = results.count((409, "BucketAlreadyOwnedByYou"))
        if ok != 1 or owned != len(clients) - 1:
            failures.append((name, results))
            continue
        for c in per_node:
            assert c.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
        for i, c in enumerate(per_node):
            c.put_object(Bucket=name, Key=f"through-{i}", Body=b"x")
        for c in per_node:
            assert listed(c, name) == {f"through-{i}" for i in range(len(per_node))}, name
    assert not failures, f"{len(failures)} of {ROUNDS} rounds: {failures[:3]}"


def test_racing_creates_by_two_keys_give_one_owner(cluster):
    a, b = new_key(cluster[1], "racer-a"), new_key(cluster[2], "racer-b")
    keys = [a, b] * (len(cluster) * PER_NODE // 2)
    nodes = [n for n in cluster for _ in range(PER_NODE)]
    clients = [s3_client(n, k) for n, k in zip(nodes, keys)]
    failures = []
    for r in range(ROUNDS):
        name = bucket_name(f"two-keys-{r}")
        results = race(clients, name)
        winners = [keys[i] for i, res in enumerate(results) if res == "ok"]
        if len(winners) != 1:
            failures.append((name, results))
            continue
        owner = winners[0]
        other = b if owner == a else a
        for i, res in enumerate(results):
            if res == "ok":
                continue
            want = "BucketAlreadyOwnedByYou" if keys[i] == owner else "BucketAlreadyExists"
            if res != (409, want):
                failures.append((name, results))
                break
        for n in cluster:
            s3_client(n, owner).put_object(Bucket=name, Key="mine", Body=b"1")
            loser = s3_client(n, other)
            for call in (lambda: loser.list_objects_v2(Bucket=name),
                         lambda: loser.put_object(Bucket=name, Key="theirs", Body=b"2"),
                         lambda: loser.get_object(Bucket=name, Key="mine")):
                with pytest.raises(ClientError) as e:
                    call()
                assert http_status(e.value) == 403, (name, e.value.response)
    assert not failures, f"{len(failures)} of {ROUNDS} rounds: {failures[:3]}"


def test_objects_put_right_after_racing_creates_are_all_kept(cluster):
    """Each racer PUTs objects as soon as its create is answered (201 or
    409 owned): every acknowledged PUT is listed and read back through
    every node afterwards."""
    key = new_key(cluster[0], "racer-objects")
    clients = [s3_client(n, key) for n in cluster for _ in range(PER_NODE)]
    per_node = [s3_client(n, key) for n in cluster]
    acked: dict[str, dict[str, bytes]] = {}
    lock = threading.Lock()
    errors = []

    for r in range(ROUNDS):
        name = bucket_name(f"objects-{r}")
        acked[name] = {}

        def put_after(i, c, res, name=name):
            if res != "ok" and res != (409, "BucketAlreadyOwnedByYou"):
                errors.append((name, i, res))
                return
            for j in range(3):
                k, body = f"c{i}-{j}", f"{name}/{i}/{j}".encode()
                try:
                    c.put_object(Bucket=name, Key=k, Body=body)
                except ClientError as e:
                    errors.append((name, k, error_code(e)))
                    continue
                with lock:
                    acked[name][k] = body

        race(clients, name, after=put_after)
    lost = []
    for name, objs in acked.items():
        for c in per_node:
            try:
                seen = listed(c, name)
            except ClientError as e:
                lost.append((name, "list", error_code(e)))
                continue
            missing = set(objs) - seen
            if missing:
                lost.append((name, "not listed", sorted(missing)))
            for k, body in objs.items():
                try:
                    got = c.get_object(Bucket=name, Key=k)["Body"].read()
                except ClientError as e:
                    lost.append((name, k, error_code(e)))
                    continue
                if got != body:
                    lost.append((name, k, "other content"))
    total = sum(len(o) for o in acked.values())
    assert not lost, f"{len(lost)} losses among {total} acknowledged PUTs: {lost[:5]}"
    assert not errors, errors[:5]
    assert total == ROUNDS * len(clients) * 3
    # No node ever merged two buckets of one name (bucket.rs, `displaced`).
    for n in cluster:
        assert id_conflicts(n) == 0, n.root


def id_conflicts(n) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{n.admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines()
              if line.startswith("hangar_bucket_id_conflicts_total")]
    assert len(values) == 1, "hangar_bucket_id_conflicts_total is exposed"
    return values[0]


def coordinator_of(name: str, ids: list[str]) -> str:
    """The node that coordinates creations of `name` while every node is
    up: the highest rendezvous rank (src/model/src/bucket_create.rs)."""
    import blake3

    def rank(node: str) -> bytes:
        h = blake3.blake3(derive_key_context="hangar 2026-12 bucket coordinator")
        h.update(bytes.fromhex(node) + name.encode())
        return h.digest()

    return max(ids, key=rank)


def test_a_paused_coordinator_gives_a_clear_503_then_the_next_node_takes_over(cluster):
    """SIGSTOP one node: creations of names it coordinates, sent through the
    others before they see it down, answer 503 ServiceUnavailable with
    retry hints; once it is seen down, the next node by rank coordinates
    them; every bucket made is served by every node once it runs again."""
    import signal
    import time

    n1, n2, n3 = cluster
    ids = [node_id(n) for n in cluster]
    key = new_key(n1, "paused")
    clients = [one_attempt(n, key) for n in (n1, n2)]
    names, i = [], 0
    while len(names) < 4:
        name = bucket_name(f"paused-{i}")
        i += 1
        if coordinator_of(name, ids) == ids[2]:
            names.append(name)
    outcomes: dict[str, object] = {}

    def create(i: int, name: str):
        try:
            clients[i % 2].create_bucket(Bucket=name)
            outcomes[name] = "ok"
        except ClientError as e:
            hint = e.response["ResponseMetadata"]["HTTPHeaders"].get("retry-after")
            outcomes[name] = (http_status(e), error_code(e), hint, e.response["Error"]["Message"])

    n3.proc.send_signal(signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=create, args=(i, nm)) for i, nm in enumerate(names)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        took = time.monotonic() - t0
        print(f"while paused ({took:.1f}s):", [r if r == "ok" else r[:3] for r in outcomes.values()])
        for name, res in outcomes.items():
            assert res != "ok" and res[:3] == (503, "ServiceUnavailable", "1") and "coordinator" in res[3], (name, res)
        assert took < 30, f"{took:.1f}s"
        # Node 3 is seen down after two missed pings (about 11 s, which is
        # also when the calls above failed): the next node by rank
        # coordinates its names.
        wait_for(lambda: not [p for p in n1.cli_json("status")["peers"] if p["id"] == ids[2] and p["is_up"]],
                 15, "node 3 seen down")
        for i, name in enumerate(names):
            try:
                clients[i % 2].create_bucket(Bucket=name)
            except ClientError as e:
                # The first attempt may have finished before its answer was lost.
                assert error_code(e) == "BucketAlreadyOwnedByYou", (name, e.response)
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    for n in cluster:
        c = s3_client(n, key)
        # Node 3 missed the key's grants while paused: anti-entropy brings them.
        wait_for(lambda: all(ok_head(c, name) for name in names), 60, f"{n.root} serving the buckets")


def one_attempt(node, key: Key):
    """A boto3 client that does not retry (s3_client's retries once)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=node.endpoint, region_name=REGION, aws_access_key_id=key.id,
        aws_secret_access_key=key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=60))


def ok_head(c, name: str) -> bool:
    try:
        c.head_bucket(Bucket=name)
        return True
    except ClientError:
        return False
