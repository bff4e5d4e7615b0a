"""The chaos suite: a 3-node cluster (replication factor 3) of real `hangar
server` processes, each in its own network namespace, under load from
several boto3 clients, with one kind of fault injected repeatedly per
scenario; every acknowledged write is recorded, and at the end every key is
read back through every node and compared byte for byte (doc/chaos.md).

Used by script/chaos (all scenarios, configurable length) and by
test_chaos_short.py (each scenario once, briefly, in CI); its nodes and
cluster (`ChaosNode`, `Cluster`) also by script/netlab and test_netlab.py.

Network: netlab.py's (node slot i is namespace `hgc-n<i>`, 10.231.0.<i>;
the clients and this script are in the root namespace, 10.231.0.254).
Faults on the network are iptables rules inside a node's namespace.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import traceback
from pathlib import Path

import boto3
import botocore.exceptions
from botocore.config import Config

from hangar_testlib import HANGAR_BIN, REGION, die_with_parent, tail
from netlab import Net, Profile, namespaces_usable, sh  # noqa: F401 - script/chaos reads namespaces_usable here

KiB = 1024
MiB = 1024 * 1024
S3_PORT, RPC_PORT, ADMIN_PORT = 3900, 3901, 3903
FAKETIME_LIB = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))),
                    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"))
BUCKET = "chaos"


def log(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait_for(cond, timeout: float, what: str, interval: float = 0.2) -> float:
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        try:
            if cond():
                return time.monotonic() - t0
        except Exception as e:  # noqa: BLE001 - the admin socket may not be up yet
            last = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


# ---------------------------------------------------------------- nodes


class ChaosNode:
    """One `hangar server` in the namespace of its slot. `gen` counts the
    identities that slot had (a replaced node is a new generation)."""

    def __init__(self, root: Path, slot: int, secret: str, ping_timeout_msec: int, gen: int = 1,
                 data_tmpfs_mib: int | None = None, fsync: bool | None = False, extra: str = ""):
        self.slot, self.gen = slot, gen
        self.ip = Net.ip(slot)
        self.ns = Net.ns(slot)
        self.root = root / f"n{slot}-g{gen}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.meta = self.root / "meta"
        self.datafs = self.root / "datafs"  # the data disk: a tmpfs when data_tmpfs_mib is set
        self.data = self.datafs / "data"
        self.config = self.root / "hangar.toml"
        self.log = self.root / "server.log"
        self.proc: subprocess.Popen | None = None
        self.skew: str | None = None
        self.tmpfs_mib = data_tmpfs_mib
        self.datafs.mkdir(exist_ok=True)
        if data_tmpfs_mib:
            sh("mount", "-t", "tmpfs", "-o", f"size={data_tmpfs_mib}m", "hgc-data", str(self.datafs))
        self.data.mkdir(exist_ok=True)
        self.secret = secret
        self.ping_timeout_msec = ping_timeout_msec
        self.bootstrap: list[str] = []
        # `metadata_fsync` as given (None: the default); `extra`: more
        # top-level settings.
        self.fsync, self.extra = fsync, extra
        self.write_config()

    def write_config(self) -> None:
        peers = ", ".join(f'"{p}"' for p in self.bootstrap)
        self.config.write_text(
            f"""metadata_dir = "{self.meta}"
data_dir = "{self.data}"
db_engine = "redb"
replication_factor = 3
rpc_secret = "{self.secret}"
rpc_bind_addr = "{self.ip}:{RPC_PORT}"
rpc_public_addr = "{self.ip}:{RPC_PORT}"
bootstrap_peers = [{peers}]
rpc_ping_timeout_msec = {self.ping_timeout_msec}
{"" if self.fsync is None else f"metadata_fsync = {str(self.fsync).lower()}"}
block_size = "1MiB"
compression_level = 1
{self.extra}

[s3_api]
api_bind_addr = "{self.ip}:{S3_PORT}"
s3_region = "{REGION}"

[admin]
api_bind_addr = "{self.ip}:{ADMIN_PORT}"
"""
        )

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{S3_PORT}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.ip}:{ADMIN_PORT}"

    @property
    def name(self) -> str:
        return f"n{self.slot}" + (f"g{self.gen}" if self.gen > 1 else "")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60, skew: str | None = None) -> None:
        assert not self.running()
        self.skew = skew
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"
        cmd = ["ip", "netns", "exec", self.ns]
        if skew:
            # `env` and `ip netns exec` exec in place: the pid is hangar's.
            cmd += ["env", f"LD_PRELOAD={FAKETIME_LIB}", f"FAKETIME={skew}", "FAKETIME_DONT_FAKE_MONOTONIC=1"]
        cmd += [str(HANGAR_BIN), "-c", str(self.config), "server"]
        with open(self.log, "ab") as logf:
            logf.write(f"\n==== chaos: start at {dt.datetime.now(dt.timezone.utc).isoformat()} "
                       f"(real clock){' with FAKETIME=' + skew if skew else ''}\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode} at start:\n{tail(self.log)}")
            try:
                with socket.create_connection((self.ip, S3_PORT), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not listen within {timeout}s:\n{tail(self.log)}")
                time.sleep(0.1)
        wait_for(lambda: self.cli("status", timeout=5).returncode == 0, 20, f"{self.name} admin socket")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20) -> None:
        if not self.running():
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.tmpfs_mib:
            sh("umount", "-l", str(self.datafs), check=False)
            self.tmpfs_mib = None

    def cli(self, *args: str, check: bool = False, timeout: float = 30) -> subprocess.CompletedProcess:
        res = subprocess.run([str(HANGAR_BIN), "-c", str(self.config), *args], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise RuntimeError(f"{self.name}: hangar {' '.join(args)} exited {res.returncode}: "
                               f"{res.stdout.strip()} {res.stderr.strip()}")
        return res

    def cli_json(self, *args: str, timeout: float = 30):
        return json.loads(self.cli(*args, "--json", check=True, timeout=timeout).stdout)

    def peer_addr(self) -> str:
        return self.cli("node", "id", "-q", check=True).stdout.strip()

    def node_id(self) -> str:
        return self.peer_addr().split("@")[0]

    def block_files(self) -> dict[str, Path]:
        """Block files on this node's disk: hash -> path (temporary files left out)."""
        out = {}
        if not self.data.exists():
            return out
        for l1 in self.data.iterdir():
            if l1.name == "quarantine" or not l1.is_dir():
                continue
            for l2 in l1.iterdir():
                if not l2.is_dir():
                    continue
                for f in l2.iterdir():
                    if not f.name.startswith("."):
                        out[f.name.removesuffix(".zst")] = f
        return out

    def temp_files(self) -> list[Path]:
        if not self.data.exists():
            return []
        return [p for p in self.data.rglob(".*") if p.is_file()]


# ---------------------------------------------------------------- the cluster


class Cluster:
    """Three `ChaosNode`s, one layout zone each (the profile's zones when the
    network is shaped), and a key allowed to create buckets. `profile`
    shapes the links (netlab.py); `load` adds the load namespace; `fsync`
    and `extra` go to every node's configuration; `bucket` is created when
    given."""

    def __init__(self, workdir: Path, ping_timeout_msec: int = 2000, tmpfs_slot: int | None = None,
                 tmpfs_mib: int = 64, profile: Profile | None = None, load: bool = False,
                 fsync: bool | None = False, extra: str = "", bucket: str | None = BUCKET):
        self.workdir = workdir
        self.net = Net(3, load=load)
        self.profile = profile
        self.fsync, self.extra, self.bucket = fsync, extra, bucket
        self.secret = secrets.token_hex(32)
        self.ping_timeout_msec = ping_timeout_msec
        self.tmpfs_slot, self.tmpfs_mib = tmpfs_slot, tmpfs_mib
        self.nodes: dict[int, ChaosNode] = {}
        self.retired: list[ChaosNode] = []
        self.key_id = self.key_secret = ""

    def __enter__(self):
        try:
            self.net.setup()
            if self.profile is not None:
                self.net.shape(self.profile)
        except BaseException:
            self.net.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.cleanup()

    def cleanup(self) -> None:
        for n in list(self.nodes.values()) + self.retired:
            try:
                n.cleanup()
            except Exception:  # noqa: BLE001 - clean up the rest whatever happens
                traceback.print_exc()
        self.net.teardown()

    def new_node(self, slot: int, gen: int = 1) -> ChaosNode:
        tm = self.tmpfs_mib if slot == self.tmpfs_slot else 2048 if slot == 2 and self.tmpfs_slot else None
        return ChaosNode(self.workdir, slot, self.secret, self.ping_timeout_msec, gen, data_tmpfs_mib=tm,
                         fsync=self.fsync, extra=self.extra)

    def start(self) -> None:
        first = self.new_node(1)
        self.nodes[1] = first
        first.start()
        contact = first.peer_addr()
        for s in (2, 3):
            n = self.new_node(s)
            n.bootstrap = [contact]
            n.write_config()
            self.nodes[s] = n
            n.start()
        self.wait_mesh(30)
        for s, n in self.nodes.items():
            zone = self.profile.zone(s) if self.profile else s
            n.cli("layout", "assign", n.node_id()[:16], "-z", f"dc{zone}", "-c", "1G", check=True)
        wait_for(lambda: len(first.cli_json("layout", "show")["staged"]["roles"]) == 3, 15, "3 staged roles")
        first.cli("layout", "apply", "--version", "1", check=True)
        self.wait_layout(1, 20)
        info = first.cli_json("key", "create", "chaos")
        self.key_id, self.key_secret = info["access_key_id"], info["secret_access_key"]
        first.cli("key", "allow", self.key_id, "--create-bucket", check=True)
        if self.bucket:
            self.client(first).create_bucket(Bucket=self.bucket)

    def up_nodes(self) -> list[ChaosNode]:
        return [n for n in self.nodes.values() if n.running()]

    def wait_mesh(self, timeout: float) -> float:
        """Every running node sees every other running node up."""
        def full():
            ups = self.up_nodes()
            ids = {n.node_id() for n in ups}
            for n in ups:
                seen = {p["id"] for p in n.cli_json("status", timeout=10)["peers"] if p["is_up"]}
                if not ids <= seen:
                    return False
            return True
        return wait_for(full, timeout, "a full mesh", 0.3)

    def wait_layout(self, version: int, timeout: float) -> float:
        def same():
            views = [n.cli_json("layout", "show")["current"] for n in self.up_nodes()]
            return all(v["version"] == version for v in views) and len({v["hash"] for v in views}) == 1
        return wait_for(same, timeout, f"layout version {version} everywhere")

    def client(self, node: ChaosNode, read_timeout: float = 30):
        return boto3.client(
            "s3", endpoint_url=node.endpoint, region_name=REGION,
            aws_access_key_id=self.key_id, aws_secret_access_key=self.key_secret,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                          retries={"max_attempts": 1, "mode": "standard"},
                          connect_timeout=5, read_timeout=read_timeout, max_pool_connections=4),
        )

    def table_digests(self) -> dict[str, str]:
        return {n.name: json.dumps(n.cli_json("table", "status"), sort_keys=True) for n in self.up_nodes()}

    def missing_blocks(self) -> dict[str, list[str]]:
        """Per node, the blocks some node holds a file of that this node
        references (its own `block info`: count > 0) but has no file of.
        (Files of unreferenced blocks, waiting for the block GC's delay, are
        not missing anywhere.)"""
        ups = self.up_nodes()
        files = {n.name: set(n.block_files()) for n in ups}
        union = set().union(*files.values())
        out: dict[str, list[str]] = {}
        lock = threading.Lock()

        def check(n, hashes):
            for h in hashes:
                try:
                    info = n.cli_json("block", "info", h)
                except Exception as e:  # noqa: BLE001
                    with lock:
                        out.setdefault(n.name, []).append(f"{h[:12]} ({e})")
                    continue
                if info.get("refcount", 0) > 0 and not info.get("file"):
                    with lock:
                        out.setdefault(n.name, []).append(h)

        jobs = []
        for n in ups:
            lack = sorted(union - files[n.name])
            for i in range(4):
                jobs.append(threading.Thread(target=check, args=(n, lack[i::4])))
        for j in jobs:
            j.start()
        for j in jobs:
            j.join()
        return out

    def wait_converged(self, timeout: float) -> float | None:
        """Until every node's tables hold the same rows (`table status`
        digests equal) and no node lacks the file of a block it references;
        None if not within `timeout`."""
        self.last_missing: dict = {}

        def same():
            views = [json.dumps(strip_counts(n.cli_json("table", "status")), sort_keys=True)
                     for n in self.up_nodes()]
            if len(set(views)) != 1:
                self.last_missing = {"tables": "differ"}
                return False
            self.last_missing = self.missing_blocks()
            return not self.last_missing

        try:
            return wait_for(same, timeout, "replicas converged", 1.0)
        except TimeoutError:
            return None

    def describe_missing(self) -> str:
        m = getattr(self, "last_missing", {})
        if "tables" in m:
            return "the tables' digests still differ"
        return "; ".join(f"{k} lacks {len(v)} referenced blocks, e.g. {[h[:12] for h in v[:3]]}" for k, v in m.items())


def strip_counts(st):
    """`table status` without what is this node's own (its name, its id)."""
    if isinstance(st, dict):
        return {k: strip_counts(v) for k, v in st.items() if k not in ("node", "node_id", "id")}
    if isinstance(st, list):
        return [strip_counts(v) for v in st]
    return st


# ---------------------------------------------------------------- the record of writes


ABSENT = "absent"
REFUSED = "refused (no connection)"


@dataclasses.dataclass
class KeyState:
    """What a key may hold: `allowed` is the set of sha256 (or ABSENT) it
    may read back as. After an acknowledged op it is exactly that op's
    result; after an op that was not acknowledged (failed or unknown) the
    op may or may not have landed, so its result joins the set and the key
    is retired (its writer never touches it again, so no late landing of
    that op can reorder with a later acknowledged one)."""

    allowed: set
    history: list  # every value (sha256 or ABSENT) ever written, in order
    retired: bool = False
    acked_writes: int = 0
    # Each write as "OP value outcome via nS HH:MM:SS.mmm-HH:MM:SS.mmm", to
    # place a bad read among the faults (the log's times are wall clock).
    log: list = dataclasses.field(default_factory=list)


class Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.keys: dict[str, KeyState] = {}
        self.ops = collections.Counter()  # (op, outcome) -> count
        self.error_samples: dict[tuple, str] = {}
        self.latencies: list[tuple[int, float, float, str, str]] = []  # (slot, t0, t1, op, outcome)
        self.read_violations: list[str] = []

    def new_key(self, key: str) -> None:
        with self.lock:
            self.keys[key] = KeyState(allowed={ABSENT}, history=[ABSENT])

    def result(self, key: str, op: str, value: str | None, outcome: str, slot: int, t0: float, t1: float,
               message: str = "") -> None:
        with self.lock:
            self.ops[(op, outcome)] += 1
            self.latencies.append((slot, t0, t1, op, outcome))
            if outcome != "ok" and (op, outcome) not in self.error_samples:
                self.error_samples[(op, outcome)] = message[:300]
            # A refused write is counted as refused but still allowed to
            # have happened: botocore reported "could not connect" for a PUT
            # that the killed node had received and published (its restart
            # log showed the upload and its row), so "never sent" cannot be
            # told from the client side.
            if op == "GET" or key is None:
                return
            st = self.keys[key]
            st.history.append(value)
            st.log.append(f"{op} {value[:12]} {outcome} via n{slot} {wall(t0)}-{wall(t1)}")
            if outcome == "ok":
                st.allowed = {value}
                st.acked_writes += 1
            else:
                st.allowed.add(value)
                st.retired = True


def wall(t: float) -> str:
    """A time.monotonic() instant as wall-clock HH:MM:SS.mmm (UTC)."""
    w = time.time() - (time.monotonic() - t)
    return time.strftime("%H:%M:%S", time.gmtime(w)) + f".{int(w * 1000) % 1000:03d}"


def classify(exc: Exception) -> tuple[str, str]:
    """(outcome, message): `http <status> <Code>` for an S3 error answer,
    `unknown <type>` when no answer came (timeout, connection reset)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        meta = exc.response.get("ResponseMetadata", {})
        err = exc.response.get("Error", {})
        return f"http {meta.get('HTTPStatusCode')} {err.get('Code')}", err.get("Message") or ""
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return REFUSED, str(exc)  # no connection, as botocore tells it (see Record.result)
    return f"unknown {type(exc).__name__}", str(exc)


# ---------------------------------------------------------------- load


def make_body(rng: random.Random, size_class: float) -> bytes:
    """Mixed sizes: inline (< 3 KiB), one block, several blocks (> 1 MiB);
    half of them compressible. Every body is unique (a random prefix)."""
    if size_class < 0.3:
        n = rng.randint(0, 3000)
    elif size_class < 0.7:
        n = rng.randint(10 * KiB, 300 * KiB)
    else:
        n = rng.randint(MiB + 100 * KiB, 3 * MiB)
    prefix = rng.randbytes(16)
    if rng.random() < 0.5:
        unit = rng.randbytes(rng.randint(100, 4000))
        return (prefix + unit * (n // len(unit) + 1))[:max(n, 16)]
    return prefix + rng.randbytes(max(n - 16, 0))


class Load:
    """`writers` threads; each owns its keys (w<t>/<n>), picks a node at
    random for every op (so a key written through one node is overwritten
    through another), and mixes new PUTs, overwrites, DELETEs and GETs
    checked against the record."""

    def __init__(self, cluster: Cluster, record: Record, writers: int, seed: int, pause: float = 0.0,
                 big_fraction: float = 0.3):
        self.cluster, self.record = cluster, record
        self.writers, self.seed, self.pause = writers, seed, pause
        self.big_fraction = big_fraction
        self.stop_ev = threading.Event()
        self.go = threading.Event()  # cleared: the writers wait between ops
        self.go.set()
        self.idle = threading.Semaphore(0)
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True) for t in range(writers)]
        self.bytes_acked = 0
        self.crashes: list[str] = []

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def hold(self) -> None:
        """Returns once every writer is between ops and waiting."""
        self.go.clear()
        for _ in self.threads:
            self.idle.acquire(timeout=120)

    def resume(self) -> None:
        self.go.set()

    def stop(self) -> None:
        self.stop_ev.set()
        self.go.set()
        for t in self.threads:
            t.join(120)

    def run(self, t: int) -> None:
        try:
            self._run(t)
        except Exception:  # noqa: BLE001 - a bug of the load itself must be seen
            self.crashes.append(traceback.format_exc())

    def _run(self, t: int) -> None:
        rng = random.Random(self.seed * 1000 + t)
        clients = {}
        mine: list[str] = []
        seq = 0
        rec = self.record
        while not self.stop_ev.is_set():
            if not self.go.is_set():
                self.idle.release()
                self.go.wait()
                continue
            slots = sorted(self.cluster.nodes)
            slot = rng.choice(slots)
            node = self.cluster.nodes[slot]
            ck = (slot, node.gen)
            if ck not in clients:
                clients[ck] = self.cluster.client(node)
            c = clients[ck]
            live = [k for k in mine if not rec.keys[k].retired]
            r = rng.random()
            if r < 0.35 or len(live) < 3:
                op, key = "PUT", f"w{t}/{seq:05d}"
                seq += 1
                rec.new_key(key)
                mine.append(key)
            elif r < 0.60:
                op, key = "PUT", rng.choice(live)
            elif r < 0.70:
                op, key = "DELETE", rng.choice(live)
            else:
                op, key = "GET", rng.choice(live)
            t0 = time.monotonic()
            try:
                if op == "PUT":
                    big = rng.random() < self.big_fraction
                    body = make_body(rng, 0.7 + 0.3 * rng.random() if big else 0.7 * rng.random())
                    value = hashlib.sha256(body).hexdigest()
                    c.put_object(Bucket=BUCKET, Key=key, Body=body)
                    rec.result(key, op, value, "ok", slot, t0, time.monotonic())
                    self.bytes_acked += len(body)
                elif op == "DELETE":
                    value = ABSENT
                    c.delete_object(Bucket=BUCKET, Key=key)
                    rec.result(key, op, value, "ok", slot, t0, time.monotonic())
                else:
                    value = None
                    allowed = set(rec.keys[key].allowed)
                    try:
                        got = hashlib.sha256(c.get_object(Bucket=BUCKET, Key=key)["Body"].read()).hexdigest()
                    except botocore.exceptions.ClientError as e:
                        if e.response.get("Error", {}).get("Code") != "NoSuchKey":
                            raise
                        got = ABSENT
                    rec.result(key, op, None, "ok", slot, t0, time.monotonic())
                    if got not in allowed:
                        what = "an older value" if got in rec.keys[key].history else "a value never written"
                        with rec.lock:
                            rec.read_violations.append(
                                f"GET {key} through {node.name} at {wall(t0)} read {what} ({got[:12]}), "
                                f"allowed {sorted(a[:12] for a in allowed)}; writes {rec.keys[key].log[-3:]}")
            except Exception as e:  # noqa: BLE001 - every outcome is recorded
                outcome, msg = classify(e)
                rec.result(key if op != "GET" else None, op, value, outcome, slot, t0, time.monotonic(), msg)
                if outcome.startswith("unknown"):
                    clients.pop(ck, None)  # a fresh connection pool
                time.sleep(0.05)
            if self.pause:
                time.sleep(self.pause)


# ---------------------------------------------------------------- final verification


@dataclasses.dataclass
class Verdict:
    keys: int = 0
    reads: int = 0
    ok: int = 0
    lost: list = dataclasses.field(default_factory=list)
    corrupt: list = dataclasses.field(default_factory=list)
    stale: list = dataclasses.field(default_factory=list)
    unreadable: list = dataclasses.field(default_factory=list)
    listing: list = dataclasses.field(default_factory=list)

    @property
    def bad(self) -> int:
        return len(self.lost) + len(self.corrupt) + len(self.stale) + len(self.unreadable) + len(self.listing)


def get_with_retry(c, key: str, tries: int = 6):
    last = None
    for i in range(tries):
        try:
            return hashlib.sha256(c.get_object(Bucket=BUCKET, Key=key)["Body"].read()).hexdigest(), None
        except botocore.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") == "NoSuchKey":
                return ABSENT, None
            last = classify(e)
        except Exception as e:  # noqa: BLE001
            last = classify(e)
        time.sleep(0.5 * (i + 1))
    return None, last


def verify(cluster: Cluster, record: Record, threads: int = 6) -> Verdict:
    """Every key through every node, byte for byte (sha256 of the whole
    body); and each node's listing holds every key that must exist and no
    key that must be absent."""
    v = Verdict(keys=len(record.keys))
    lock = threading.Lock()
    nodes = list(cluster.up_nodes())
    work = [(n, k) for n in nodes for k in sorted(record.keys)]

    def worker(part):
        clients = {}
        for n, k in part:
            c = clients.setdefault(n.name, cluster.client(n, read_timeout=60))
            st = record.keys[k]
            got, err = get_with_retry(c, k)
            with lock:
                v.reads += 1
                where = f"{k} through {n.name}"
                if got is None:
                    v.unreadable.append(f"{where}: {err}")
                elif got in st.allowed:
                    v.ok += 1
                elif got == ABSENT:
                    v.lost.append(f"{where}: 404, allowed {sorted(a[:12] for a in st.allowed)}")
                elif got in st.history:
                    v.stale.append(f"{where}: an older value {got[:12]} (history {[h[:12] for h in st.history]}, "
                                   f"allowed {sorted(a[:12] for a in st.allowed)}; writes {st.log})")
                else:
                    v.corrupt.append(f"{where}: {got[:12]} was never written")

    parts = [work[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    must = {k for k, st in record.keys.items() if ABSENT not in st.allowed}
    must_not = {k for k, st in record.keys.items() if st.allowed == {ABSENT}}
    for n in nodes:
        c = cluster.client(n, read_timeout=60)
        listed = set()
        try:
            for page in c.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
                listed.update(o["Key"] for o in page.get("Contents", []))
        except Exception as e:  # noqa: BLE001
            v.listing.append(f"listing through {n.name} failed: {classify(e)}")
            continue
        missing, extra = must - listed, must_not & listed
        if missing:
            v.listing.append(f"listing through {n.name} misses {len(missing)} keys, e.g. {sorted(missing)[:3]}")
        if extra:
            v.listing.append(f"listing through {n.name} shows {len(extra)} deleted keys, e.g. {sorted(extra)[:3]}")
    return v


def verify_block_files(node: ChaosNode) -> list[str]:
    """Each block file on the node's disk decompresses (if .zst) and hashes
    to its name (blake3)."""
    import blake3
    import zstandard

    bad = []
    for h, p in node.block_files().items():
        try:
            raw = p.read_bytes()
            if p.name.endswith(".zst"):
                raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=64 * MiB)
            if blake3.blake3(raw).hexdigest() != h:
                bad.append(f"{p}: content hashes to {blake3.blake3(raw).hexdigest()[:16]}")
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001
            bad.append(f"{p}: {e!r}")
    return bad


# ---------------------------------------------------------------- scenarios


@dataclasses.dataclass
class Params:
    rounds: int = 3
    seconds: float = 20.0  # load per round, about
    writers: int = 4
    ping_timeout_msec: int = 2000
    stop_min: float = 4.0
    stop_max: float = 20.0
    seed: int = 1


@dataclasses.dataclass
class Report:
    name: str
    faults: list = dataclasses.field(default_factory=list)
    checks: list = dataclasses.field(default_factory=list)  # (what, ok: bool, detail)
    notes: list = dataclasses.field(default_factory=list)
    record: Record | None = None
    verdict: Verdict | None = None
    fault_windows: list = dataclasses.field(default_factory=list)  # (slot, t0, t1)
    seconds: float = 0.0
    error: str = ""

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        self.checks.append((what, ok, detail))

    @property
    def passed(self) -> bool:
        return (not self.error and (self.verdict is not None and self.verdict.bad == 0)
                and not (self.record and self.record.read_violations) and all(ok for _, ok, _ in self.checks))

    def longest_healthy_stall(self) -> tuple[float, str]:
        """The longest op through a node that had no fault during the op."""
        best, what = 0.0, ""
        if self.record is None:
            return best, what
        for slot, t0, t1, op, outcome in self.record.latencies:
            if any(s == slot and t0 < b and t1 > a for s, a, b in self.fault_windows):
                continue
            if t1 - t0 > best:
                best, what = t1 - t0, f"{op} through n{slot} ({outcome})"
        return best, what

    def faulted_ops(self) -> str:
        """Ops through a node while it was faulted: outcomes and the longest."""
        if self.record is None:
            return ""
        outs = collections.Counter()
        longest = 0.0
        for slot, t0, t1, op, outcome in self.record.latencies:
            if any(s == slot and t0 < b and t1 > a for s, a, b in self.fault_windows):
                outs["ok" if outcome == "ok" else outcome] += 1
                longest = max(longest, t1 - t0)
        return f"{sum(outs.values())} ops ({dict(outs)}), longest {longest:.2f}s"

    def render(self) -> str:
        out = [f"== scenario {self.name}: {'PASS' if self.passed else 'FAIL'} ({self.seconds:.0f}s)"]
        if self.error:
            out.append(f"  error: {self.error}")
        r = self.record
        if r is not None:
            for op in ("PUT", "DELETE", "GET"):
                outs = {o: c for (p, o), c in r.ops.items() if p == op}
                total = sum(outs.values())
                if not total:
                    continue
                acked = outs.get("ok", 0)
                unknown = sum(c for o, c in outs.items() if o.startswith("unknown"))
                failed = ", ".join(f"{o}: {c}" for o, c in sorted(outs.items()) if o != "ok")
                out.append(f"  {op:6} attempted {total}, acked {acked}, failed {total - acked - unknown}, "
                           f"unknown {unknown} ({100 * unknown / total:.1f} %){'  [' + failed + ']' if failed else ''}")
            for (op, o), m in sorted(r.error_samples.items()):
                out.append(f"    {op} {o}: {m!r}")
            stall, what = self.longest_healthy_stall()
            out.append(f"  longest op through a healthy node: {stall:.2f}s ({what})")
            out.append(f"  through the faulted node during its faults: {self.faulted_ops()}")
            if r.read_violations:
                out.append(f"  reads during the load that saw a wrong value: {len(r.read_violations)}")
                out += [f"    {x}" for x in r.read_violations[:10]]
        out.append(f"  faults injected ({len(self.faults)}): " + "; ".join(self.faults))
        v = self.verdict
        if v is not None:
            out.append(f"  verification: {v.keys} keys x {len(v.__dict__) and v.reads // max(v.keys, 1)} nodes = "
                       f"{v.reads} reads: ok {v.ok}, lost {len(v.lost)}, corrupt {len(v.corrupt)}, "
                       f"stale {len(v.stale)}, unreadable {len(v.unreadable)}, listing problems {len(v.listing)}")
            for name in ("lost", "corrupt", "stale", "unreadable", "listing"):
                for x in getattr(v, name)[:8]:
                    out.append(f"    {name}: {x}")
        for what, ok, detail in self.checks:
            out.append(f"  check {'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)


class Scenario:
    name = "base"
    tmpfs_slot: int | None = None
    tmpfs_mib = 64

    def __init__(self, params: Params, workdir: Path):
        self.p = params
        self.workdir = workdir / self.name
        self.rng = random.Random(params.seed)
        self.report = Report(self.name)
        self.record = Record()
        self.report.record = self.record

    def fault(self, slot: int, what: str) -> None:
        self.report.faults.append(what)
        log(f"{self.name}: {what}")

    def window(self, slot: int, t0: float, t1: float | None = None) -> None:
        self.report.fault_windows.append((slot, t0, t1 if t1 is not None else time.monotonic()))

    def run(self) -> Report:
        t_start = time.monotonic()
        if self.workdir.exists():  # a previous run's: start afresh
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        cluster = Cluster(self.workdir, self.p.ping_timeout_msec, self.tmpfs_slot, self.tmpfs_mib)
        self.cluster = cluster
        try:
            with cluster:
                cluster.start()
                load = Load(cluster, self.record, self.p.writers, self.p.seed, **self.load_args())
                self.load = load
                with load:
                    time.sleep(self.warmup())
                    self.inject(cluster)
                    time.sleep(min(3, self.p.seconds / 4))
                if load.crashes:
                    self.report.error = "the load crashed: " + load.crashes[0]
                self.heal_all(cluster)
                for n in cluster.nodes.values():
                    if not n.running():
                        n.start()
                cluster.wait_mesh(60)
                self.before_verify(cluster)
                log(f"{self.name}: verifying {len(self.record.keys)} keys through {len(cluster.up_nodes())} nodes")
                self.report.verdict = verify(cluster, self.record)
                self.after_verify(cluster)
        except Exception:  # noqa: BLE001 - reported, and the run goes on with the next scenario
            self.report.error = traceback.format_exc()
            for n in list(cluster.nodes.values()):
                self.report.notes.append(f"{n.name} log tail:\n{tail(n.log, 15)}")
        self.report.seconds = time.monotonic() - t_start
        return self.report

    def load_args(self) -> dict:
        return {}

    def warmup(self) -> float:
        return min(3, self.p.seconds / 4)

    def converge_paused(self, cluster: Cluster, timeout: float) -> float | None:
        """Pauses the load and waits for the replicas to converge."""
        self.load.hold()
        try:
            return cluster.wait_converged(timeout)
        finally:
            self.load.resume()

    def inject(self, cluster: Cluster) -> None:
        raise NotImplementedError

    def heal_all(self, cluster: Cluster) -> None:
        for s in range(1, 4):
            cluster.net.heal(s)
        for n in cluster.nodes.values():
            if n.running():
                n.signal(signal.SIGCONT)

    def before_verify(self, cluster: Cluster) -> None:
        pass

    def after_verify(self, cluster: Cluster) -> None:
        pass

    def round_seconds(self) -> float:
        return self.p.seconds / max(self.p.rounds, 1)


class Kill9(Scenario):
    name = "kill9"

    def inject(self, cluster):
        for r in range(self.p.rounds):
            slot = self.rng.randint(1, 3)
            n = cluster.nodes[slot]
            down = self.rng.uniform(1, 5)
            t0 = time.monotonic()
            n.kill9()
            time.sleep(down)
            n.start()
            t1 = time.monotonic()
            self.fault(slot, f"kill -9 {n.name}, restarted after {t1 - t0:.1f}s")
            self.window(slot, t0, t1 + 5)  # its peers take a moment to see it up again
            time.sleep(max(self.round_seconds() - down, 3))


class SigStop(Scenario):
    name = "sigstop"

    def inject(self, cluster):
        for r in range(self.p.rounds):
            slot = self.rng.randint(1, 3)
            n = cluster.nodes[slot]
            pause = self.rng.uniform(self.p.stop_min, self.p.stop_max)
            t0 = time.monotonic()
            n.signal(signal.SIGSTOP)
            time.sleep(pause)
            n.signal(signal.SIGCONT)
            self.fault(slot, f"SIGSTOP {n.name} for {pause:.1f}s")
            self.window(slot, t0, time.monotonic() + 2)
            time.sleep(max(self.round_seconds() - pause, 3))


class Partition(Scenario):
    name = "partition"

    def inject(self, cluster):
        directions = ["both", "in", "out"]
        for r in range(max(self.p.rounds, 3)):
            slot = self.rng.randint(1, 3)
            direction = directions[r % 3]
            length = self.rng.uniform(self.p.stop_min, self.p.stop_max)
            t0 = time.monotonic()
            cluster.net.partition(slot, direction)
            time.sleep(length)
            cluster.net.heal(slot)
            self.fault(slot, f"n{slot} cut off ({'both directions' if direction == 'both' else 'incoming only' if direction == 'in' else 'outgoing only'}) for {length:.1f}s")
            self.window(slot, t0, time.monotonic() + 2)
            time.sleep(max(self.round_seconds() - length, 3))


class DiskFull(Scenario):
    """Node 3's data_dir is a tmpfs of 64 MiB; a filler file takes what the
    blocks leave, then goes, repeatedly; at the end, with the load stopped,
    node 2's data disk (a 2 GiB tmpfs) is filled too for a moment, so that a
    PUT can reach no write quorum: what clients get then is recorded and
    must be a 5xx naming the problem. Then both disks get their space back
    (n3's tmpfs grows to 2 GiB)."""

    name = "disk-full"
    tmpfs_slot = 3
    tmpfs_mib = 64

    def fill(self, n: ChaosNode) -> int:
        """A filler file takes every free byte of the node's data disk;
        returns the bytes left free."""
        try:
            with open(n.datafs / "filler", "ab") as f:
                chunk = b"\0" * MiB
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError:
            pass
        st = os.statvfs(n.datafs)
        return st.f_bavail * st.f_frsize

    def inject(self, cluster):
        n = cluster.nodes[3]
        for r in range(self.p.rounds):
            t0 = time.monotonic()
            left = self.fill(n)
            length = self.round_seconds()
            time.sleep(length)
            (n.datafs / "filler").unlink(missing_ok=True)
            self.fault(3, f"n3 data disk full ({left} bytes free) for {length:.1f}s, then the filler removed")
            self.window(3, t0)
            time.sleep(2)
        # The last round: full for good, by the load itself
        t0 = time.monotonic()
        left = self.fill(n)
        time.sleep(self.round_seconds())
        self.fault(3, f"n3 data disk full ({left} bytes free) until the end of the load")
        self.window(3, t0, time.monotonic() + 1e9)

    def two_full(self, cluster):
        """n2 and n3 full: PUTs of multi-block objects through n1."""
        n2 = cluster.nodes[2]
        self.fill(n2)
        self.fill(cluster.nodes[3])
        self.fault(2, "n2 data disk full too (with n3's), for 3 PUTs through n1")
        c = cluster.client(cluster.nodes[1])
        got = []
        rng = random.Random(5)
        for i in range(3):
            key = f"twofull/{i}"
            self.record.new_key(key)
            body = make_body(rng, 0.9)
            value = hashlib.sha256(body).hexdigest()
            t0 = time.monotonic()
            try:
                c.put_object(Bucket=BUCKET, Key=key, Body=body)
                self.record.result(key, "PUT", value, "ok", 1, t0, time.monotonic())
                got.append(("ok", ""))
            except Exception as e:  # noqa: BLE001
                outcome, msg = classify(e)
                self.record.result(key, "PUT", value, outcome, 1, t0, time.monotonic(), msg)
                got.append((outcome, msg))
        (n2.datafs / "filler").unlink(missing_ok=True)
        clear = [o for o, m in got if o.startswith("http 5") and ("space" in m.lower() or "disk" in m.lower()
                                                                 or "quorum" in m.lower())]
        self.report.check("with 2 data disks of 3 full, a PUT fails with a 5xx naming the problem",
                          len(clear) == len(got), "; ".join(f"{o}: {m[:160]!r}" for o, m in got))

    def before_verify(self, cluster):
        n = cluster.nodes[3]
        self.two_full(cluster)
        # What clients got through the full node, while it was full
        puts = {o: c for (p, o), c in self.record.ops.items() if p == "PUT"}
        fivexx = [(o, m) for (p, o), m in self.record.error_samples.items() if o.startswith("http 5")]
        unclear = [o for o, m in fivexx if not m or m.lower() in ("internal error", "internalerror")]
        self.report.check("every 5xx answer names the problem", not unclear,
                          f"{len(fivexx)} kinds of 5xx seen; without a clear message: {unclear}" if fivexx else "no 5xx seen")
        self.report.notes.append(f"PUT outcomes: {dict(puts)}")
        (n.datafs / "filler").unlink(missing_ok=True)
        sh("mount", "-o", "remount,size=2g", str(n.datafs))
        self.fault(3, "n3 data disk grown to 2 GiB")
        took = cluster.wait_converged(240)
        self.report.check("the tables converged and the full node holds every block it references",
                          took is not None, f"in {took:.1f}s" if took is not None else
                          f"not within 240s: {cluster.describe_missing()}")
        bad = verify_block_files(n)
        self.report.check("every block file on the full node checks (blake3 of its content = its name)",
                          not bad, f"{len(n.block_files())} files" + (f"; bad: {bad[:3]}" if bad else ""))
        tmp = n.temp_files()
        self.report.notes.append(f"temporary block files left on n3: {len(tmp)}")
        errs = n.cli_json("block", "list-errors")
        self.report.check("no block resync errors left on n3", errs == [], f"{len(errs)} errors" if errs else "")


class ClockSkew(Scenario):
    """Node 2 restarted with its clock 10 minutes ahead (libfaketime), then
    back to the real clock, repeatedly; plus a dedicated writer that
    overwrites keys through n2 and then through n1/n3 and reads each back."""

    name = "clock-skew"

    def load_args(self):
        return {}

    def skewed_log_offset(self, n: ChaosNode, since: float) -> float | None:
        """Seconds between the log timestamps of the lines written after the
        last start and the real time they were read."""
        text = n.log.read_text(errors="replace")
        part = text.rsplit("==== chaos: start at", 1)[-1]
        stamps = re.findall(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)", part, re.M)
        if not stamps:
            return None
        last = dt.datetime.fromisoformat(stamps[-1].replace("Z", "+00:00"))
        return (last - dt.datetime.now(dt.timezone.utc)).total_seconds()

    def pingpong(self, cluster: Cluster, stop: threading.Event) -> None:
        """Key pp/<i>: PUT through n2, PUT through n1 or n3, GET through
        the third; DELETE through n2 then PUT through another; every read
        must see the later acknowledged write."""
        rec = self.record
        i = 0
        clients = {}
        while not stop.is_set():
            key = f"pp/{i:04d}"
            i += 1
            rec.new_key(key)
            other = self.rng.choice([1, 3])
            third = 4 - other
            steps = [("PUT", 2), ("PUT", other), ("GET", third), ("DELETE", 2), ("GET", other),
                     ("PUT", 2), ("DELETE", other), ("GET", 2), ("PUT", other), ("GET", 2)]
            for op, slot in steps:
                n = cluster.nodes[slot]
                ck = (slot, n.gen)
                c = clients.setdefault(ck, cluster.client(n))
                t0 = time.monotonic()
                value = ABSENT
                try:
                    if op == "PUT":
                        body = make_body(self.rng, self.rng.random())
                        value = hashlib.sha256(body).hexdigest()
                        c.put_object(Bucket=BUCKET, Key=key, Body=body)
                        rec.result(key, op, value, "ok", slot, t0, time.monotonic())
                    elif op == "DELETE":
                        c.delete_object(Bucket=BUCKET, Key=key)
                        rec.result(key, op, ABSENT, "ok", slot, t0, time.monotonic())
                    else:
                        got, err = get_with_retry(c, key, tries=1)
                        if got is None:
                            raise RuntimeError(str(err))
                        rec.result(None, op, None, "ok", slot, t0, time.monotonic())
                        allowed = rec.keys[key].allowed
                        if got not in allowed:
                            with rec.lock:
                                rec.read_violations.append(
                                    f"GET {key} through n{slot} after {[s for s in steps]}: got "
                                    f"{'absent' if got == ABSENT else got[:12]}, the last acknowledged write is "
                                    f"{sorted(a[:12] for a in allowed)}")
                except Exception as e:  # noqa: BLE001
                    outcome, msg = classify(e) if not isinstance(e, RuntimeError) else ("unknown get", str(e))
                    rec.result(key if op != "GET" else None, op, value, outcome, slot, t0,
                               time.monotonic(), msg)
                    clients.pop(ck, None)
                    break
                if rec.keys[key].retired:
                    break

    def inject(self, cluster):
        n = cluster.nodes[2]
        stop = threading.Event()
        pp = threading.Thread(target=self.pingpong, args=(cluster, stop), daemon=True)
        pp.start()
        try:
            for r in range(self.p.rounds):
                t0 = time.monotonic()
                n.stop()
                n.start(skew="+10m")
                time.sleep(1.5)
                off = self.skewed_log_offset(n, t0)
                self.report.check(f"round {r + 1}: n2's log timestamps are 10 minutes ahead",
                                  off is not None and 560 < off < 640,
                                  f"offset {off:.0f}s" if off is not None else "no timestamp in the log")
                self.fault(2, f"n2 restarted with FAKETIME=+10m (log offset {off if off is None else round(off)}s)")
                time.sleep(self.round_seconds() / 2)
                n.stop()
                n.start()
                self.window(2, t0)
                self.fault(2, "n2 restarted on the real clock")
                time.sleep(self.round_seconds() / 2)
        finally:
            stop.set()
            pp.join(60)
        pp_keys = [k for k in self.record.keys if k.startswith("pp/")]
        self.report.notes.append(f"ping-pong keys: {len(pp_keys)}, acked writes on them: "
                                 f"{sum(self.record.keys[k].acked_writes for k in pp_keys)}")


class Wipe(Scenario):
    """A node stopped, its metadata store and block files deleted (node_key
    and cluster_layout kept), restarted under load; between rounds, wait
    until the replicas converge again (a second wipe before the first one
    refilled would be two failures at once)."""

    name = "wipe"

    def warmup(self):
        return max(self.round_seconds(), 3)

    def inject(self, cluster):
        for r in range(self.p.rounds):
            slot = self.rng.randint(1, 3)
            n = cluster.nodes[slot]
            t0 = time.monotonic()
            n.kill9()
            shutil.rmtree(n.data)
            n.data.mkdir()
            for f in n.meta.iterdir():
                if f.name.startswith("db."):
                    shutil.rmtree(f) if f.is_dir() else f.unlink()
            kept = sorted(f.name for f in n.meta.iterdir())
            n.start()
            self.fault(slot, f"{n.name} killed, wiped (kept {kept}), restarted")
            time.sleep(self.round_seconds())
            self.window(slot, t0)
            took = self.converge_paused(cluster, 180)
            self.report.check(f"round {r + 1}: replicas converged again after wiping {n.name} (load paused)",
                              took is not None, f"{took:.1f}s" if took is not None else
                              f"not within 180s: {cluster.describe_missing()}")


class Replace(Scenario):
    """A node killed for good and replaced by a new one (new identity) in the
    same slot and zone: `layout remove` old + `assign` new + `apply`; then
    `skip-dead-nodes` for the dead one; the old layout version must retire
    and the new node hold every block."""

    name = "replace"

    def warmup(self):
        return max(self.round_seconds(), 3)

    def inject(self, cluster):
        for r in range(self.p.rounds):
            slot = self.rng.randint(1, 3)
            old = cluster.nodes[slot]
            helper = next(x for s, x in cluster.nodes.items() if s != slot)
            old_id = old.node_id()
            t0 = time.monotonic()
            old.kill9()
            cluster.retired.append(old)
            new = cluster.new_node(slot, old.gen + 1)
            new.bootstrap = [helper.peer_addr()]
            new.write_config()
            new.start()
            cluster.nodes[slot] = new
            new_id = new.node_id()
            v = helper.cli_json("layout", "show")["current"]["version"]
            helper.cli("layout", "remove", old_id[:16], check=True)
            helper.cli("layout", "assign", new_id[:16], "-z", f"dc{slot}", "-c", "1G", check=True)
            wait_for(lambda: len(helper.cli_json("layout", "show")["staged"]["roles"]) == 2, 15, "2 staged changes")
            helper.cli("layout", "apply", "--version", str(v + 1), check=True)
            self.fault(slot, f"{old.name} ({old_id[:8]}) killed and replaced by {new.name} ({new_id[:8]}), layout v{v + 1}")
            cluster.wait_layout(v + 1, 30)
            t_apply = time.monotonic()
            # The documented procedure for a dead node: skip-dead-nodes sets
            # its ack now, and its sync-ack only once the cluster has synced
            # the new version (doc/layout.md §4), so it is run again then.
            res = helper.cli("layout", "skip-dead-nodes", "--version", str(v + 1))
            first = (res.stdout + res.stderr).strip().replace("\n", " ")[:160]

            def hist():
                return helper.cli_json("layout", "history")

            try:
                took_sync = wait_for(lambda: hist()["synced_version"] >= v + 1, 180, f"v{v + 1} synced", 1)
                res2 = helper.cli("layout", "skip-dead-nodes", "--version", str(v + 1))
                second = (res2.stdout + res2.stderr).strip().replace("\n", " ")[:160]
                took = wait_for(lambda: [x["version"] for x in hist()["versions"]] == [v + 1], 60,
                                "the old layout version retired", 1)
                self.report.check(f"round {r + 1}: v{v + 1} synced by the new node and v{v} retired "
                                  "(history shows only the new version)", True,
                                  f"synced {took_sync:.1f}s after apply, retired {time.monotonic() - t_apply:.1f}s "
                                  f"after apply; skip-dead-nodes right after apply: {first!r}; "
                                  f"once synced: {second!r}")
            except TimeoutError as e:
                self.report.check(f"round {r + 1}: v{v} retired", False,
                                  f"{e}; history: {json.dumps(hist())[:600]}")
            self.window(slot, t0)
            time.sleep(self.round_seconds())

    def before_verify(self, cluster):
        took = cluster.wait_converged(180)
        self.report.check("the tables converged and every node holds every block it references",
                          took is not None, f"{took:.1f}s" if took is not None else
                          f"not within 180s: {cluster.describe_missing()}")
        n = cluster.nodes[1]
        files = sorted(n.block_files())
        ids = {x.node_id() for x in cluster.nodes.values()}
        wrong = []
        for h in self.rng.sample(files, min(5, len(files))):
            info = n.cli_json("block", "info", h)
            text = json.dumps(info)
            holders = set(re.findall(r"[0-9a-f]{64}", text)) - {h}
            if not holders <= ids and holders:
                wrong.append((h[:12], sorted(x[:8] for x in holders - ids)))
        self.report.check("`hangar block info` of sampled blocks names only the current nodes", not wrong, str(wrong) if wrong else f"{min(5, len(files))} blocks")


SCENARIOS = {c.name: c for c in (Kill9, SigStop, Partition, DiskFull, ClockSkew, Wipe, Replace)}
