"""The chaos suite's history mode (doc/chaos.md, "Histories checked for
linearizability"): client threads pinned to each node of a real cluster
(chaos_lib.py: one network namespace per node) record every operation's
invocation and completion (one monotonic clock) and result — PUT, GET,
DELETE, conditional PUT (`If-None-Match: *`, `If-Match`),
CompleteMultipartUpload, ListObjectsV2 — on a small set of keys, while
nemeses break the cluster: kill -9 of one node, two at once or all, SIGSTOP,
a partition (the cut-off node keeps its clients), a clock 15 minutes ahead
or behind (libfaketime), a full data disk, and a layout change (a fourth
node added, then removed) under load. At the end, with every fault healed,
every key is read through every node and listed through every node, and
those reads join the history.

The histories are then checked by linearizability.py, per key:

- `rw` keys take unconditional writes (PUT, DELETE, CompleteMultipartUpload)
  and reads (GET, a ListObjectsV2 of the key's name): read-after-write as
  the `consistent` mode promises it (doc/layout.md, quorums; doc/replication.md
  §7), checked as linearizability of a register;
- `cas` keys take only conditional writes and reads: exactly one
  `If-None-Match: *` wins, an `If-Match` succeeds only on the current ETag
  (doc/replication.md §10; unconditional writes and deletes are kept off
  these keys, since §10 says they are not ordered with a Paxos round).

Keys are renewed every few seconds (a new generation of each key slot) so
that each key's history stays short and every key sees a race of
`If-None-Match: *` writers at its start. The final reads make "every
acknowledged write readable, nothing resurrected" part of the same check,
for every key the run touched.

Used by script/chaos (`script/chaos history`) and test_chaos_history.py.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import math
import random
import signal
import threading
import time
import traceback
from pathlib import Path

import boto3
import botocore.exceptions
from botocore.config import Config

import chaos_lib
import linearizability as lz
from chaos_lib import BUCKET, REGION, ChaosNode, Cluster, Net, log, wait_for
from linearizability import DELETE, FAIL, GET, INF, OK, PUT, PUT_IF_ABSENT, PUT_IF_MATCH, UNKNOWN, Op

NEMESES = ("kill1", "kill2", "killall", "sigstop", "partition", "skew+", "skew-", "diskfull", "layout")


@dataclasses.dataclass
class HParams:
    seconds: float = 60.0  # the whole load, about
    nemeses: tuple = NEMESES  # injected in this order, cycling until the time is up
    fault_seconds: float = 6.0  # how long a fault lasts (kill: down time; skew: time on the faked clock)
    quiet_seconds: float = 4.0  # healthy time between two faults
    clients_per_node: int = 2
    rw_keys: int = 3
    cas_keys: int = 3
    rotate_seconds: float = 6.0  # a key slot gets a new key this often
    seed: int = 1
    ping_timeout_msec: int = 2000
    read_timeout: float = 10.0
    # None: the nodes' default metadata_fsync (what a user gets); True/False: set
    metadata_fsync: bool | None = None
    # the nodes' consistency_mode ("dangerous": read and write quorums of 1,
    # which a history check must catch)
    consistency_mode: str = "consistent"


class HistoryNode(ChaosNode):
    """A chaos node whose config leaves `metadata_fsync` at its default
    unless told (chaos_lib's nodes set it to false), in a consistency mode."""

    def __init__(self, *args, fsync: bool | None = None, consistency_mode: str = "consistent", **kw):
        super().__init__(*args, fsync=fsync, extra=f'consistency_mode = "{consistency_mode}"', **kw)


class HistoryCluster(Cluster):
    """chaos_lib's cluster with a fourth slot (for the layout change) and
    nodes of the chosen durability."""

    def __init__(self, workdir: Path, p: HParams, tmpfs_slot: int | None):
        super().__init__(workdir, p.ping_timeout_msec, tmpfs_slot, 64)
        self.net = Net(4)
        self.fsync = p.metadata_fsync
        self.consistency_mode = p.consistency_mode

    def new_node(self, slot: int, gen: int = 1) -> ChaosNode:
        tm = self.tmpfs_mib if slot == self.tmpfs_slot else 2048 if slot == 2 and self.tmpfs_slot else None
        return HistoryNode(self.workdir, slot, self.secret, self.ping_timeout_msec, gen, data_tmpfs_mib=tm,
                           fsync=self.fsync, consistency_mode=self.consistency_mode)


# ---------------------------------------------------------------- the recorder


def md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def multipart_etag(parts: list[bytes]) -> str:
    return hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + f"-{len(parts)}"


class Recorder:
    """The history: every operation with its invocation and completion
    instants (time.monotonic(), one clock for every client) and result."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops: list[Op] = []
        self.next_id = 0
        self.bodies: dict[str, str] = {}  # ETag -> sha256 of the body written with it
        self.corrupt: list[str] = []  # a body read back that is not the one written with its ETag
        self.counts = collections.Counter()  # (op name, outcome) -> n
        self.samples: dict[tuple, str] = {}
        self.dropped_reads = 0
        self.failures: list[tuple] = []  # (call, op name, outcome, slot, message) of every failed op

    def add(self, key, kind, call, ret, value=None, expect=None, outcome=OK, client="", note=""):
        with self.lock:
            o = Op(self.next_id, key, kind, call, INF if outcome == UNKNOWN else ret, value, expect, outcome,
                   client, note)
            self.next_id += 1
            self.ops.append(o)
            return o

    def count(self, name: str, outcome: str, message: str = "", call: float | None = None,
              slot: int = 0) -> None:
        with self.lock:
            self.counts[(name, outcome)] += 1
            if outcome != "ok" and not outcome.startswith("http 412") and call is not None:
                self.failures.append((call, name, outcome, slot, message[:200]))
            if outcome != "ok" and (name, outcome) not in self.samples:
                self.samples[(name, outcome)] = message[:240]


def answer(e: Exception) -> tuple[int | None, str, str]:
    """(HTTP status or None when no answer came, code, message)."""
    if isinstance(e, botocore.exceptions.ClientError):
        meta = e.response.get("ResponseMetadata", {})
        err = e.response.get("Error", {})
        return meta.get("HTTPStatusCode"), str(err.get("Code")), err.get("Message") or ""
    return None, type(e).__name__, str(e)


def make_body(rng: random.Random) -> bytes:
    """Unique (a random prefix); most inline in the metadata, some in blocks."""
    n = rng.randint(50, 2000) if rng.random() < 0.7 else rng.randint(4 * 1024, 40 * 1024)
    return rng.randbytes(16) + bytes([rng.randrange(256)]) * (n - 16)


def s3_client(cluster: Cluster, node: ChaosNode, read_timeout: float):
    """A boto3 client that never retries: `total_max_attempts = 1`.
    (botocore's `max_attempts` counts retries *after* the first attempt,
    so chaos_lib's `max_attempts: 1` retries once: a retried
    CompleteMultipartUpload whose first attempt had published the object
    was answered 404 NoSuchUpload, and a retried conditional PUT would
    turn a win into a 412.)"""
    return boto3.client(
        "s3", endpoint_url=node.endpoint, region_name=REGION,
        aws_access_key_id=cluster.key_id, aws_secret_access_key=cluster.key_secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1, "mode": "standard"},
                      connect_timeout=5, read_timeout=read_timeout, max_pool_connections=4),
    )


class Keys:
    """The key slots and their current generation: `rw<i>-<gen>` and
    `cas<i>-<gen>`, all names of one length so that no key's name is a
    prefix of another's (a listing by prefix reads one key)."""

    def __init__(self, p: HParams):
        self.lock = threading.Lock()
        self.slots = [f"rw{i}" for i in range(p.rw_keys)] + [f"cas{i}" for i in range(p.cas_keys)]
        self.gen = {s: 0 for s in self.slots}
        self.all: set[str] = {self.name(s, 0) for s in self.slots}

    @staticmethod
    def name(slot: str, gen: int) -> str:
        return f"{slot}-{gen:06d}"

    def current(self) -> list[str]:
        with self.lock:
            return [self.name(s, g) for s, g in self.gen.items()]

    def rotate(self, i: int) -> None:
        with self.lock:
            s = self.slots[i % len(self.slots)]
            self.gen[s] += 1
            self.all.add(self.name(s, self.gen[s]))


class Client:
    """One thread pinned to one node."""

    def __init__(self, h: "HistoryRun", slot: int, idx: int):
        self.h, self.slot, self.idx = h, slot, idx
        self.name = f"c{slot}.{idx}"
        self.rng = random.Random(h.p.seed * 7919 + slot * 101 + idx)
        self.s3 = None
        self.gen = None
        self.etags: dict[str, str] = {}  # key -> the last ETag this client saw there

    def client(self):
        node = self.h.cluster.nodes[self.slot]
        if self.s3 is None or self.gen != node.gen:
            self.s3 = s3_client(self.h.cluster, node, self.h.p.read_timeout)
            self.gen = node.gen
        return self.s3

    def run(self) -> None:
        try:
            while not self.h.stop.is_set():
                self.one()
        except Exception:  # noqa: BLE001 - a bug of the harness must be seen
            self.h.crashes.append(traceback.format_exc())

    def one(self) -> None:
        key = self.rng.choice(self.h.keys.current())
        r = self.rng.random()
        if key.startswith("rw"):
            if r < 0.30:
                self.put(key, None)
            elif r < 0.40:
                self.delete(key)
            elif r < 0.48:
                self.multipart(key)
            elif r < 0.58:
                self.list(key)
            else:
                self.get(key)
        else:
            if r < 0.25:
                self.put(key, "*")
            elif r < 0.55:
                # the ETag this client saw last; now and then a made-up one
                seen = self.etags.get(key) or ("0" * 32 if self.rng.random() < 0.5 else None)
                if seen is None:
                    self.put(key, "*")
                else:
                    self.put(key, "match", seen)
            elif r < 0.65:
                self.list(key)
            else:
                self.get(key)

    def _err(self, name, e, call, t1):
        status, code, msg = answer(e)
        outcome = f"http {status} {code}" if status else f"no answer ({code})"
        self.h.rec.count(name, outcome, msg, call or time.monotonic(), self.slot)
        if status is None:
            self.s3 = None  # a fresh connection pool
        return status, code

    def put(self, key: str, cond: str | None, expect: str | None = None) -> None:
        body = make_body(self.rng)
        etag = md5(body)
        with self.h.rec.lock:
            self.h.rec.bodies[etag] = hashlib.sha256(body).hexdigest()
        kind, name, extra = PUT, "PUT", {}
        if cond == "*":
            kind, name, extra = PUT_IF_ABSENT, "PUT If-None-Match", {"IfNoneMatch": "*"}
        elif cond == "match":
            kind, name, extra = PUT_IF_MATCH, "PUT If-Match", {"IfMatch": f'"{expect}"'}
        c = self.client()
        call = time.monotonic()
        try:
            got = c.put_object(Bucket=BUCKET, Key=key, Body=body, **extra)
            t1 = time.monotonic()
            if got.get("ETag", "").strip('"') != etag:
                self.h.anomalies.append(f"PUT {key} via n{self.slot}: ETag {got.get('ETag')} for a body of MD5 {etag}")
            self.h.rec.add(key, kind, call, t1, etag, expect, OK, self.name, f"via n{self.slot}")
            self.h.rec.count(name, "ok")
            self.etags[key] = etag
        except Exception as e:  # noqa: BLE001 - every outcome is recorded
            t1 = time.monotonic()
            status, code = self._err(name, e, call, t1)
            refused = status == 412 or (kind == PUT_IF_MATCH and status == 404)
            if refused and kind != PUT:
                self.h.rec.add(key, kind, call, t1, etag, expect, FAIL, self.name, f"via n{self.slot}: {status}")
                self.etags.pop(key, None)
            else:
                self.h.rec.add(key, kind, call, INF, etag, expect, UNKNOWN, self.name,
                               f"via n{self.slot}: {status or ''} {code}")
                self.h.note_unexpected(self.slot, status, code, f"{name} {key}")

    def delete(self, key: str) -> None:
        c = self.client()
        call = time.monotonic()
        try:
            c.delete_object(Bucket=BUCKET, Key=key)
            self.h.rec.add(key, DELETE, call, time.monotonic(), None, None, OK, self.name, f"via n{self.slot}")
            self.h.rec.count("DELETE", "ok")
        except Exception as e:  # noqa: BLE001
            status, code = self._err("DELETE", e, call, time.monotonic())
            self.h.rec.add(key, DELETE, call, INF, None, None, UNKNOWN, self.name, f"via n{self.slot}: {code}")
            self.h.note_unexpected(self.slot, status, code, f"DELETE {key}")

    def multipart(self, key: str) -> None:
        """One part (it may be small: it is the last); the write is the
        Complete, whose ETag is known in advance."""
        c = self.client()
        body = make_body(self.rng)
        etag = multipart_etag([body])
        with self.h.rec.lock:
            self.h.rec.bodies[etag] = hashlib.sha256(body).hexdigest()
        try:
            up = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
            part = c.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=1, Body=body)["ETag"]
        except Exception as e:  # noqa: BLE001 - no Complete sent: nothing can be published
            self._err("multipart before Complete", e, 0, 0)
            return
        call = time.monotonic()
        try:
            got = c.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up,
                                              MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]})
            t1 = time.monotonic()
            if got.get("ETag", "").strip('"') != etag:
                self.h.anomalies.append(f"Complete {key}: ETag {got.get('ETag')}, expected {etag}")
            self.h.rec.add(key, PUT, call, t1, etag, None, OK, self.name, f"Complete via n{self.slot}")
            self.h.rec.count("CompleteMultipartUpload", "ok")
        except Exception as e:  # noqa: BLE001
            status, code = self._err("CompleteMultipartUpload", e, call, time.monotonic())
            self.h.rec.add(key, PUT, call, INF, etag, None, UNKNOWN, self.name,
                           f"Complete via n{self.slot}: {code}")
            self.h.note_unexpected(self.slot, status, code, f"Complete {key}")

    def get(self, key: str, note: str = "") -> None:
        c = self.client()
        call = time.monotonic()
        try:
            got = c.get_object(Bucket=BUCKET, Key=key)
            body = got["Body"].read()
            t1 = time.monotonic()
            etag = got["ETag"].strip('"')
            want = self.h.rec.bodies.get(etag)
            if want != hashlib.sha256(body).hexdigest():
                self.h.rec.corrupt.append(f"GET {key} via n{self.slot}: ETag {etag}, body sha256 "
                                          f"{hashlib.sha256(body).hexdigest()[:12]}, written {str(want)[:12]}")
            self.h.rec.add(key, GET, call, t1, etag, None, OK, self.name, f"via n{self.slot}{note}")
            self.h.rec.count("GET", "ok")
            if key.startswith("cas"):
                self.etags[key] = etag
        except Exception as e:  # noqa: BLE001
            t1 = time.monotonic()
            status, code, _ = answer(e)
            if status == 404 and code == "NoSuchKey":
                self.h.rec.add(key, GET, call, t1, None, None, OK, self.name, f"via n{self.slot}{note}")
                self.h.rec.count("GET", "ok")
                self.etags.pop(key, None)
            else:
                self._err("GET", e, call, t1)
                self.h.rec.dropped_reads += 1

    def list(self, key: str) -> None:
        c = self.client()
        call = time.monotonic()
        try:
            got = c.list_objects_v2(Bucket=BUCKET, Prefix=key)
            t1 = time.monotonic()
            items = [o for o in got.get("Contents", []) if o["Key"] == key]
            value = items[0]["ETag"].strip('"') if items else None
            self.h.rec.add(key, GET, call, t1, value, None, OK, self.name, f"ListObjectsV2 via n{self.slot}")
            self.h.rec.count("ListObjectsV2", "ok")
        except Exception as e:  # noqa: BLE001
            self._err("ListObjectsV2", e, call, time.monotonic())
            self.h.rec.dropped_reads += 1


# ---------------------------------------------------------------- the run


@dataclasses.dataclass
class KeyVerdict:
    key: str
    ops: int
    result: lz.KeyResult
    minimal: list | None = None

    @property
    def known(self) -> str:
        """A label for anomaly 1 of doc/chaos.md (a conditional write
        answered 412 whose value was published; fixed, so a regression):
        the minimal history holds a refused write whose value another of
        its operations observed."""
        if not self.minimal:
            return ""
        seen = {o.value for o in self.minimal if o.kind == GET} | {
            o.expect for o in self.minimal if o.kind == PUT_IF_MATCH and o.outcome == OK}
        if any(o.outcome == FAIL and o.value in seen for o in self.minimal):
            return "like anomaly 1 (a 412 whose value was published): a regression"
        return ""


class HistoryRun:
    def __init__(self, p: HParams, workdir: Path):
        self.p = p
        self.workdir = workdir / "history"
        self.rng = random.Random(p.seed)
        self.rec = Recorder()
        self.keys = Keys(p)
        self.stop = threading.Event()
        self.crashes: list[str] = []
        self.anomalies: list[str] = []  # found outside the checker (ETags)
        self.unexpected: list[str] = []  # 4xx answers to writes other than 412/404
        # node slot -> when its clock was last set right (inf while skewed)
        self.skewed: dict[int, float] = {}
        self.faults: list[str] = []
        self.windows: list[tuple[float, float]] = []  # (start, end) of each fault
        self.fault_counts = collections.Counter()
        self.verdicts: list[KeyVerdict] = []
        self.error = ""
        self.seconds = 0.0
        self.check_seconds = 0.0
        self.final_reads = 0

    def fault(self, kind: str, what: str, t0: float | None = None) -> None:
        if t0 is not None:
            self.windows.append((t0, time.monotonic()))
        self.fault_counts[kind] += 1
        self.faults.append(what)
        log(f"history: {what}")

    # ------------------------------------------------------------ nemeses

    def nemesis(self, kind: str) -> None:
        c, p, rng = self.cluster, self.p, self.rng
        slots = [1, 2, 3]
        t0 = time.monotonic()
        if kind in ("kill1", "kill2", "killall"):
            n = {"kill1": 1, "kill2": 2, "killall": 3}[kind]
            victims = rng.sample(slots, n)
            for s in victims:
                c.nodes[s].kill9()
            time.sleep(p.fault_seconds)
            for s in victims:
                c.nodes[s].start()
            what = f"n{victims[0]}" if n == 1 else f"{' and '.join(f'n{s}' for s in victims)} at once"
            self.fault(kind, f"kill -9 {what}, restarted after {p.fault_seconds:.0f}s", t0)
        elif kind == "sigstop":
            s = rng.choice(slots)
            c.nodes[s].signal(signal.SIGSTOP)
            time.sleep(p.fault_seconds)
            c.nodes[s].signal(signal.SIGCONT)
            self.fault(kind, f"SIGSTOP n{s} for {p.fault_seconds:.0f}s", t0)
        elif kind == "partition":
            s = rng.choice(slots)
            c.net.partition(s, "both")
            time.sleep(p.fault_seconds)
            c.net.heal(s)
            self.fault(kind, f"n{s} cut off from its peers (its clients still reach it) for {p.fault_seconds:.0f}s",
                       t0)
        elif kind in ("skew+", "skew-"):
            s = rng.choice(slots)
            skew = "+15m" if kind == "skew+" else "-15m"
            n = c.nodes[s]
            self.skewed[s] = math.inf
            n.stop()
            n.start(skew=skew)
            time.sleep(p.fault_seconds)
            n.stop()
            n.start()
            self.skewed[s] = time.monotonic()
            self.fault(kind, f"n{s} restarted with its clock {skew} (libfaketime) for {p.fault_seconds:.0f}s, "
                             "then on the real clock", t0)
        elif kind == "diskfull":
            s = c.tmpfs_slot
            if s is None:
                return
            n = c.nodes[s]
            left = chaos_lib.DiskFull.fill(None, n)
            time.sleep(p.fault_seconds)
            (n.datafs / "filler").unlink(missing_ok=True)
            self.fault(kind, f"n{s} data disk full ({left} bytes free) for {p.fault_seconds:.0f}s", t0)
        elif kind == "layout":
            self.layout_change()
        else:
            raise ValueError(kind)

    def layout_change(self) -> None:
        """A fourth node joins the layout under load; once the new version
        is synced and the old one retired, it is removed again and stopped
        once that version retired too."""
        c = self.cluster
        helper = c.nodes[1]
        t0 = time.monotonic()
        n4 = c.new_node(4, gen=1 + sum(1 for r in c.retired if r.slot == 4))
        n4.bootstrap = [helper.peer_addr()]
        n4.write_config()
        n4.start()
        c.nodes[4] = n4
        v = helper.cli_json("layout", "show")["current"]["version"]
        helper.cli("layout", "assign", n4.node_id()[:16], "-z", "dc4", "-c", "1G", check=True)
        wait_for(lambda: len(helper.cli_json("layout", "show")["staged"]["roles"]) == 1, 15, "1 staged role")
        helper.cli("layout", "apply", "--version", str(v + 1), check=True)
        self.wait_retired(helper, v + 1, 180)
        added = time.monotonic() - t0
        helper.cli("layout", "remove", n4.node_id()[:16], check=True)
        wait_for(lambda: len(helper.cli_json("layout", "show")["staged"]["roles"]) == 1, 15, "1 staged removal")
        helper.cli("layout", "apply", "--version", str(v + 2), check=True)
        self.wait_retired(helper, v + 2, 180)
        n4.stop()
        del c.nodes[4]
        c.retired.append(n4)
        self.fault("layout", f"n4 added (layout v{v + 1}, old version retired {added:.0f}s after) then removed "
                             f"(v{v + 2}, retired {time.monotonic() - t0 - added:.0f}s after), under load", t0)

    @staticmethod
    def wait_retired(helper: ChaosNode, version: int, timeout: float) -> None:
        def only():
            h = helper.cli_json("layout", "history")
            return [x["version"] for x in h["versions"]] == [version]
        wait_for(only, timeout, f"layout v{version} alone in the history", 1)

    def heal_all(self) -> None:
        c = self.cluster
        for s in range(1, 5):
            c.net.heal(s)
        for n in c.nodes.values():
            if n.running():
                n.signal(signal.SIGCONT)
            (n.datafs / "filler").unlink(missing_ok=True)
        for n in c.nodes.values():
            if not n.running():
                n.start()

    # ------------------------------------------------------------ the run

    def run(self) -> "HistoryRun":
        t_start = time.monotonic()
        p = self.p
        import shutil

        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        tmpfs = 3 if "diskfull" in p.nemeses else None
        self.cluster = HistoryCluster(self.workdir, p, tmpfs)
        try:
            with self.cluster:
                self.cluster.start()
                self.load_and_break()
                self.heal_all()
                self.cluster.wait_mesh(60)
                self.final_reads_all()
        except Exception:  # noqa: BLE001 - reported
            self.error = traceback.format_exc()
            for n in list(self.cluster.nodes.values()):
                self.error += f"\n{n.name} log tail:\n{chaos_lib.tail(n.log, 15)}"
        self.seconds = time.monotonic() - t_start
        t0 = time.monotonic()
        self.check()
        self.check_seconds = time.monotonic() - t0
        self.save()
        return self

    def load_and_break(self) -> None:
        p = self.p
        clients = [Client(self, s, i) for s in (1, 2, 3) for i in range(p.clients_per_node)]
        threads = [threading.Thread(target=c.run, daemon=True) for c in clients]

        def rotate():
            i = 0
            step = p.rotate_seconds / len(self.keys.slots)
            while not self.stop.wait(step):
                self.keys.rotate(i)
                i += 1

        rot = threading.Thread(target=rotate, daemon=True)
        for t in threads + [rot]:
            t.start()
        t_end = time.monotonic() + p.seconds
        try:
            time.sleep(min(p.quiet_seconds, 3))
            i = 0
            while time.monotonic() < t_end and p.nemeses:
                kind = p.nemeses[i % len(p.nemeses)]
                i += 1
                self.nemesis(kind)
                time.sleep(p.quiet_seconds)
            left = t_end - time.monotonic()
            if left > 0:
                time.sleep(left)
        finally:
            self.stop.set()
            for t in threads + [rot]:
                t.join(p.read_timeout + 30)

    def final_reads_all(self) -> None:
        """Every key through every node (GET, then one listing of the
        bucket per node), each read joining the history."""
        keys = sorted(self.keys.all)
        nodes = [s for s in (1, 2, 3) if s in self.cluster.nodes]

        def reader(slot):
            try:
                read(slot)
            except Exception:  # noqa: BLE001 - reported
                self.crashes.append(f"final reads through n{slot}: {traceback.format_exc()}")

        def read(slot):
            c = Client(self, slot, 99)
            c.name = f"final.n{slot}"
            for k in keys:
                for attempt in range(5):
                    before = len(self.rec.ops)
                    c.get(k, note=" (final)")
                    if len(self.rec.ops) > before:
                        break
                    time.sleep(0.5 * (attempt + 1))
            call = time.monotonic()
            listed = {}
            s3 = c.client()
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
                for o in page.get("Contents", []):
                    listed[o["Key"]] = o["ETag"].strip('"')
            t1 = time.monotonic()
            for k in keys:
                self.rec.add(k, GET, call, t1, listed.get(k), None, OK, c.name, f"final listing via n{slot}")

        ts = [threading.Thread(target=reader, args=(s,)) for s in nodes]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.final_reads = len(keys) * len(nodes)

    # ------------------------------------------------------------ the check

    def check(self) -> None:
        for key, ops in sorted(lz.by_key(self.rec.ops).items()):
            r = lz.check_key(ops, key=key)
            v = KeyVerdict(key, len(ops), r)
            if r.linearizable is False:
                try:
                    v.minimal = lz.minimise(ops)
                except AssertionError:
                    v.minimal = None
            self.verdicts.append(v)

    def note_unexpected(self, slot: int, status: int | None, code: str, what: str) -> None:
        """A 4xx answer to a write other than 412/404 is unexpected, but
        for `403 RequestTimeTooSkewed` from a node whose clock a skew fault
        set 15 minutes off (until 5 s after it is set right): S3 refuses a
        request signed more than 15 minutes from its own clock."""
        if status is None or not 400 <= status < 500:
            return
        if code == "RequestTimeTooSkewed" and self.skewed.get(slot, -math.inf) + 5 >= time.monotonic():
            return
        self.unexpected.append(f"{what} via n{slot}: {status} {code}")

    @property
    def bad_keys(self) -> list[KeyVerdict]:
        return [v for v in self.verdicts if v.result.linearizable is False]

    @property
    def undecided(self) -> list[KeyVerdict]:
        return [v for v in self.verdicts if v.result.linearizable is None]

    @property
    def anomaly_count(self) -> int:
        return len(self.bad_keys) + len(self.rec.corrupt) + len(self.anomalies)

    @property
    def passed(self) -> bool:
        return (not self.error and not self.crashes and not self.bad_keys and not self.rec.corrupt
                and not self.anomalies and not self.undecided and not self.unexpected and self.final_reads > 0)

    def save(self) -> None:
        """The history as JSON lines (one op a line), for a regression test."""
        path = self.workdir / "history.jsonl"
        with open(path, "w") as f:
            for o in self.rec.ops:
                d = dataclasses.asdict(o)
                d["ret"] = None if o.ret == INF else o.ret
                f.write(json.dumps(d) + "\n")
        self.history_path = path

    def render(self) -> str:
        r = self.rec
        out = [f"== history: {'PASS' if self.passed else 'FAIL'} ({self.seconds:.0f}s run, "
               f"{self.check_seconds:.1f}s check)"]
        if self.error:
            out.append(f"  error: {self.error}")
        for c in self.crashes[:3]:
            out.append(f"  client crashed: {c}")
        by = collections.Counter(o.kind for o in r.ops)
        outs = collections.Counter(o.outcome for o in r.ops if o.kind != GET)
        out.append(f"  operations recorded: {len(r.ops)} ({dict(by)}); writes: {dict(outs)}; "
                   f"failed reads left out: {r.dropped_reads}; final reads: {self.final_reads} GETs + listings")
        for (name, o), n in sorted(r.counts.items()):
            out.append(f"    {name:26} {o:40} {n}")
        for (name, o), m in sorted(r.samples.items()):
            out.append(f"    e.g. {name} {o}: {m!r}")
        calm = [f for f in r.failures if not any(a - 1 <= f[0] <= b + 5 for a, b in self.windows)]
        out.append(f"  failed operations: {len(r.failures)}, of them {len(calm)} outside the faults "
                   "(more than 5 s after a fault ended, or before it began)")
        for call, name, o, slot, m in calm[:8]:
            out.append(f"    {name} via n{slot} {o} at {chaos_lib.wall(call)}: {m[:120]!r}")
        out.append(f"  faults injected ({len(self.faults)}): {dict(self.fault_counts)}")
        out += [f"    {f}" for f in self.faults]
        out.append(f"  keys checked: {len(self.verdicts)}, linearizable: "
                   f"{sum(1 for v in self.verdicts if v.result.linearizable)}, not: {len(self.bad_keys)}, "
                   f"undecided: {len(self.undecided)}; longest key history {max((v.ops for v in self.verdicts), default=0)} ops, "
                   f"most search steps {max((v.result.steps for v in self.verdicts), default=0)}")
        for v in self.bad_keys[:6]:
            if v.known:
                out.append(f"  {v.key}: {v.known}")
            out.append("  " + v.result.explain().replace("\n", "\n  "))
            if v.minimal:
                out.append(f"  minimal non-linearizable history of {v.key} ({len(v.minimal)} of {v.ops} ops):")
                out += [f"    {o.describe()}" for o in v.minimal]
        for v in self.undecided[:3]:
            out.append("  " + v.result.explain())
        for x in r.corrupt[:5]:
            out.append(f"  corrupt: {x}")
        for x in self.anomalies[:5]:
            out.append(f"  anomaly: {x}")
        for x in self.unexpected[:5]:
            out.append(f"  unexpected answer: {x}")
        out.append(f"  anomalies: {self.anomaly_count}")
        return "\n".join(out)


def load_history(path: Path) -> list[Op]:
    ops = []
    for line in Path(path).read_text().splitlines():
        d = json.loads(line)
        d["ret"] = INF if d["ret"] is None else d["ret"]
        ops.append(Op(**d))
    return ops

