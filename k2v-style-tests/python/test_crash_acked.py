"""kill -9 loses no acknowledged write (issue 27 §1): a node (with the
default durability settings, and with both fsyncs off), and all three nodes
of a cluster at the same moment (defaults), are killed at random moments of a mixed load — PUTs (inline and
block-backed), multipart uploads, DELETEs, conditional PUTs (If-None-Match:
* and If-Match) — restarted, and every key is read back through every node
in turn, twice round, without waiting for the nodes to agree.

Each key belongs to one worker thread, which runs its operations on it one
after the other, so the key's state is exactly that of its last acknowledged
operation; an operation still in flight when the node died may or may not
have happened, so its outcome is also accepted. Nothing else is: a key whose
acknowledged PUT is missing, or whose acknowledged DELETE came undone, fails
the test, and so does a key read through one node in the outcome of the
operation in flight and then through another in the state before it (reads
going back in time: before blocking read repair, 1 full-suite run of 3).
The default configs carry no metadata_fsync or data_fsync line.
Before the journal and the durable defaults (b5b7b09), both the single-node
and the cluster test lost acknowledged writes (6 and 8 keys in one run)."""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from dataclasses import dataclass, field

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, error_code, http_status, s3_client
from cluster_testlib import laid_out_cluster, node_id, wait_for, wait_full_mesh

BUCKET = "crash-acked"
KEYS_PER_WORKER = 6
WORKERS = 12
INLINE = 300  # bytes: stored inline in the object row
BLOCK = 70 * 1024  # bytes: stored as a block


def with_default_durability(n: Node) -> Node:
    """Drops the test harness's metadata_fsync line: the defaults apply."""
    n.config.write_text(re.sub(r"(?m)^metadata_fsync = .*\n", "", n.config.read_text()))
    return n


def digest(b: bytes | None) -> str | None:
    return None if b is None else hashlib.sha256(b).hexdigest()


@dataclass
class KeyState:
    """What the node acknowledged of one key, and what may also be there."""

    acked: str | None = None  # digest of the body, None when absent
    etag: str | None = None
    maybe: set = field(default_factory=set)  # outcomes of unanswered operations
    # What was done to the key, for the failure message: (op, digest sent,
    # outcome, client retries).
    log: list = field(default_factory=list)


class Worker(threading.Thread):
    """Runs random operations on its own keys until told to stop or until the
    node stops answering."""

    def __init__(self, wid: int, client, states: dict[str, KeyState], stop: threading.Event, seed: int):
        super().__init__(daemon=True)
        self.wid, self.c, self.states, self.stop = wid, client, states, stop
        self.rng = random.Random(seed)
        self.failure: str | None = None
        self.counts: dict[str, int] = {}

    def body(self) -> bytes:
        n = INLINE if self.rng.random() < 0.6 else BLOCK
        return self.rng.randbytes(n)

    def run(self) -> None:
        keys = [k for k in self.states]
        while not self.stop.is_set():
            k = self.rng.choice(keys)
            st = self.states[k]
            op = self.rng.choice(["put", "put", "delete", "if-none-match", "if-match", "multipart"])
            try:
                self.one(op, k, st)
                st.log.append((op, self.pending, "ok", self.retries))
            except ClientError as e:
                retried = e.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
                st.log.append((op, self.pending, error_code(e), retried))
                if http_status(e) == 412 and not retried:
                    # The key's state is known exactly, so no condition
                    # this worker sends may fail. Only a retried one may:
                    # the client retries a 503, and an attempt that failed
                    # with its outcome unknown may have been published,
                    # by a later Paxos round, before the retry's condition
                    # was checked (AWS says the same of its conditional
                    # writes: a retry's 412 may follow a first attempt that
                    # succeeded).
                    self.failure = f"{op} on {k} refused: {e}; operations (op, body, outcome, retries): {st.log}"
                    return
                self.ambiguous(st)
                return
            except AssertionError as e:
                self.failure = str(e)
                return
            except Exception as e:
                # The node died under the request: its outcome is unknown.
                st.log.append((op, self.pending, type(e).__name__, None))
                self.ambiguous(st)
                return
            self.counts[op] = self.counts.get(op, 0) + 1

    def ambiguous(self, st: KeyState) -> None:
        st.maybe.add(self.pending)

    def one(self, op: str, k: str, st: KeyState) -> None:
        self.retries = None
        if op == "delete":
            self.pending = None
            r = self.c.delete_object(Bucket=BUCKET, Key=k)
            self.retries = r["ResponseMetadata"].get("RetryAttempts")
            st.acked, st.etag = None, None
            return
        if op == "multipart":
            parts = [self.rng.randbytes(5 * 1024 * 1024), self.body()] if self.rng.random() < 0.1 else [self.body()]
            data = b"".join(parts)
            self.pending = digest(data)
            up = self.c.create_multipart_upload(Bucket=BUCKET, Key=k)["UploadId"]
            done = []
            for i, p in enumerate(parts, 1):
                r = self.c.upload_part(Bucket=BUCKET, Key=k, UploadId=up, PartNumber=i, Body=p)
                done.append({"PartNumber": i, "ETag": r["ETag"]})
            r = self.c.complete_multipart_upload(
                Bucket=BUCKET, Key=k, UploadId=up, MultipartUpload={"Parts": done}
            )
            self.retries = r["ResponseMetadata"].get("RetryAttempts")
            st.acked, st.etag = self.pending, r["ETag"]
            return
        data = self.body()
        self.pending = digest(data)
        extra = {}
        if op == "if-none-match":
            if st.acked is not None:
                # Must be refused: the key exists (acknowledged, so durable).
                try:
                    self.c.put_object(Bucket=BUCKET, Key=k, Body=data, IfNoneMatch="*")
                except ClientError as e:
                    assert error_code(e) == "PreconditionFailed", e
                    return
                raise AssertionError(f"If-None-Match: * over existing {k} answered 200")
            extra = {"IfNoneMatch": "*"}
        elif op == "if-match":
            if st.etag is None:
                return
            extra = {"IfMatch": st.etag}
        r = self.c.put_object(Bucket=BUCKET, Key=k, Body=data, **extra)
        self.retries = r["ResponseMetadata"].get("RetryAttempts")
        st.acked, st.etag = self.pending, r["ETag"]


def read(client, k: str) -> tuple[str | None, str | None]:
    try:
        r = client.get_object(Bucket=BUCKET, Key=k)
    except ClientError as e:
        assert error_code(e) == "NoSuchKey", e
        return None, None
    return digest(r["Body"].read()), r["ETag"]


def run_round(clients, states, seed: int, kill) -> dict[str, int]:
    """Mixed load through `clients` (worker i uses client i % len), killed by
    `kill()` after a random 1.0–2.5 s. Returns the operations acknowledged."""
    stop = threading.Event()
    workers = []
    for w in range(WORKERS):
        mine = {k: s for k, s in states.items() if k.startswith(f"w{w}/")}
        workers.append(Worker(w, clients[w % len(clients)], mine, stop, seed * 100 + w))
    for t in workers:
        t.start()
    time.sleep(random.Random(seed).uniform(1.0, 2.5))
    kill()
    stop.set()
    for t in workers:
        t.join(60)
        assert not t.is_alive(), "a worker did not stop after the kill"
    failures = [t.failure for t in workers if t.failure]
    assert not failures, failures
    counts: dict[str, int] = {}
    for t in workers:
        for op, n in t.counts.items():
            counts[op] = counts.get(op, 0) + n
    return counts


def read_in_turn(clients, k: str) -> list:
    """The key's (digest, ETag) through each client in turn, twice round, at
    once after the restart: no waiting for the nodes to agree."""
    return [read(c, k) for _ in range(2) for c in clients]


def check(clients, states) -> int:
    """Every key, through every client, is in its acknowledged state or in
    the outcome of its unanswered operation, and reads are monotonic: once
    a read showed the outcome of the unanswered operation (which may have
    reached one replica only), every later read through any node shows it
    too (blocking read repair, doc/replication.md §4). That is then the
    key's new state."""
    lost = []
    for k, st in states.items():
        seen = read_in_turn(clients, k)
        digests = [d for d, _ in seen]
        assert all(d == st.acked or d in st.maybe for d in digests), (
            f"{k}: a node shows a state that was never written or was replaced "
            f"by an acknowledged one: {seen}, acknowledged {st.acked}, in flight {st.maybe}; "
            f"operations (op, body, outcome, retries): {st.log}")
        first_new = next((i for i, d in enumerate(digests) if d != st.acked), None)
        if first_new is not None:
            assert all(d == digests[first_new] for d in digests[first_new:]), (
                f"{k}: reads in turn through the nodes went back in time: {seen} "
                f"(acknowledged {st.acked}); operations: {st.log}")
        got = digests[-1]
        if got != st.acked and got not in st.maybe:
            lost.append((k, st.acked, got, st.maybe))
        st.acked = got
        st.etag = seen[-1][1]
        st.maybe = set()
        st.log.append(("check", got, "read", None))
    assert not lost, f"{len(lost)} keys lost their acknowledged state, e.g. {lost[:3]}"
    return len(states)


def settled(n: Node) -> bool:
    """Whether node `n` has settled the uploads the kill interrupted: a
    conditional write in flight may sit accepted by some acceptors, and the
    node's start-up scan (worker `stale-uploads`) completes or kills such a
    value; only then is the key's state final (doc/replication.md §10,
    "Interrupted writes"). Before, a check could read a key as absent and
    the next If-None-Match on it find the settled value (412)."""
    return all(w["state"] == "done" for w in n.cli_json("worker", "list") if w["name"] == "stale-uploads")


def fresh_states() -> dict[str, KeyState]:
    return {f"w{w}/k{i}": KeyState() for w in range(WORKERS) for i in range(KEYS_PER_WORKER)}


@pytest.mark.parametrize("setting", ["defaults", "fsync-off"])
def test_kill9_of_a_node_loses_no_acknowledged_write(tmp_path, setting):
    """With the defaults, and with both fsyncs off (the journal keeps a
    process crash from losing anything; only a power cut could)."""
    node = with_default_durability(Node(tmp_path / "node"))
    assert "fsync" not in node.config.read_text()
    if setting == "fsync-off":
        node.config.write_text("metadata_fsync = false\ndata_fsync = false\n" + node.config.read_text())
    node.start()
    try:
        key = node.create_key("crash", create_bucket=True)
        s3_client(node, key).create_bucket(Bucket=BUCKET)
        states = fresh_states()
        total: dict[str, int] = {}
        for rnd in range(3):
            client = s3_client(node, key, read_timeout=20)
            counts = run_round([client], states, seed=rnd, kill=node.kill9)
            for op, n in counts.items():
                total[op] = total.get(op, 0) + n
            node.start()
            wait_for(lambda: settled(node), 60, "interrupted uploads settled after the restart")
            check([s3_client(node, key)], states)
        # The load did exercise every kind of operation.
        assert all(total.get(op, 0) > 0 for op in ("put", "delete", "multipart", "if-match")), total
        assert sum(total.values()) > 100, total
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()


def test_kill9_of_a_whole_cluster_at_once_loses_no_acknowledged_write(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "crashall", configure=with_default_durability)
    try:
        key = nodes[0].create_key("crash", create_bucket=True)
        s3_client(nodes[0], key).create_bucket(Bucket=BUCKET)
        ids = [node_id(n) for n in nodes]
        states = fresh_states()
        total = 0

        def kill_all():
            for n in nodes:
                n.proc.kill()
            for n in nodes:
                n.proc.wait(10)

        for rnd in range(2):
            clients = [s3_client(n, key, read_timeout=20) for n in nodes]
            total += sum(run_round(clients, states, seed=10 + rnd, kill=kill_all).values())
            for n in nodes:
                n.start()
            wait_full_mesh(nodes, ids, 30)
            for n in nodes:
                wait_for(lambda n=n: settled(n), 60, "interrupted uploads settled after the restart")
            check([s3_client(n, key) for n in nodes], states)
        assert total > 50, total
    finally:
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.stop()
