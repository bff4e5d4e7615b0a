"""A node whose disk stalls while its process runs (issue 27 §5): node 3's
data or metadata directory is an ext4 file system of its own on a loop
device, frozen with fsfreeze(8), so every write there blocks.

- Data: node 3 still answers pings and serves metadata. Uploads through
  node 1 must keep completing at the write quorum (nodes 1 and 2) instead
  of running out of node 1's block RAM budget on copies that node 3 never
  finishes, and once the disk thaws node 3 must get every block through
  its resync queue.
- Metadata: node 3 coordinates the creation of a third of the bucket
  names, and its commits block. Once one has waited
  `metadata_stall_timeout_msec`, it answers pings "unfit", its peers report
  it down, and the names it coordinated are created through the next node.

Needs root, losetup, mkfs.ext4 and fsfreeze: skipped without them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import blake3
import botocore.exceptions

from hangar_testlib import MiB, Node, random_bytes, s3_client
from cluster_testlib import laid_out_cluster, node_id

BUDGET_MIB = 8


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30).stdout.strip()


class LoopFs:
    """An ext4 file system in a file, mounted on `root/mnt`, or over
    directory `mnt` (its files copied in)."""

    def __init__(self, root: Path, size_mib: int = 256, mnt: Path | None = None):
        self.img, self.mnt = root / "disk.img", mnt or root / "mnt"
        self.mnt.mkdir(parents=True, exist_ok=True)
        keep = root / "keep"
        shutil.copytree(self.mnt, keep)
        with open(self.img, "wb") as f:
            f.truncate(size_mib * MiB)
        _run("mkfs.ext4", "-q", "-F", str(self.img))
        self.dev = _run("losetup", "--find", "--show", str(self.img))
        _run("mount", self.dev, str(self.mnt))
        shutil.copytree(keep, self.mnt, dirs_exist_ok=True)
        self.frozen = False

    def freeze(self) -> None:
        _run("fsfreeze", "--freeze", str(self.mnt))
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            _run("fsfreeze", "--unfreeze", str(self.mnt))
            self.frozen = False

    def remove(self) -> None:
        self.thaw()
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True, timeout=30)
        subprocess.run(["losetup", "-d", self.dev], capture_output=True, timeout=30)


def _can_loop_or_skip() -> None:
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "fsfreeze")):
        pytest.skip("needs root, losetup, mkfs.ext4 and fsfreeze")


def _loop_fs_or_skip(root: Path, mnt: Path | None = None) -> LoopFs:
    _can_loop_or_skip()
    try:
        return LoopFs(root, mnt=mnt)
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"cannot mount a loop device here: {e}")


def block_files(n: Node) -> set[str]:
    """Names of the block files under a node's data directory."""
    data = Path(re.search(r'(?m)^data_dir = "(.*)"$', n.config.read_text()).group(1))
    return {p.name.split(".")[0] for p in data.rglob("*") if p.is_file() and not p.name.startswith(".")}


def test_uploads_complete_at_quorum_while_a_replica_disk_stalls(tmp_path_factory):
    fs = _loop_fs_or_skip(tmp_path_factory.mktemp("stalldisk"))
    made = []

    def configure(n: Node) -> Node:
        made.append(n)
        text = n.config.read_text()
        budget = BUDGET_MIB
        if len(made) == 3:
            text = re.sub(r'(?m)^data_dir = ".*"$', f'data_dir = "{fs.mnt}/data"', text)
            # A bigger node: it accepts (and, stalled, holds) more block
            # puts at once than node 1 has budget for.
            budget = 8 * BUDGET_MIB
        n.config.write_text(f'block_ram_buffer_max = "{budget}MiB"\n' + text)
        return n

    nodes = []
    try:
        nodes = laid_out_cluster(tmp_path_factory, "stall", configure=configure)
        n1, _, n3 = nodes
        key = n1.create_key("stall", create_bucket=True)
        c1 = s3_client(n1, key, read_timeout=30)
        c1.create_bucket(Bucket="stall")
        c1.put_object(Bucket="stall", Key="before", Body=random_bytes(MiB, 1))

        fs.freeze()
        # Three times the budget of node 1, in 1 MiB blocks that do not
        # compress: without the fix, node 3's unfinished copies hold node
        # 1's whole budget after the first eight, and the rest wait, then
        # fail with 503 SlowDown.
        count, failures, slow = 3 * BUDGET_MIB, [], []
        bodies = {f"k{i}": random_bytes(MiB, 100 + i) for i in range(count)}

        def put(names):
            c = s3_client(n1, key, read_timeout=30)
            for k in names:
                t0 = time.monotonic()
                try:
                    c.put_object(Bucket="stall", Key=k, Body=bodies[k])
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    failures.append((k, repr(e)[:200]))
                    continue
                if time.monotonic() - t0 > 5:
                    slow.append((k, round(time.monotonic() - t0, 1)))

        names = sorted(bodies)
        threads = [threading.Thread(target=put, args=(names[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not failures, f"{len(failures)} of {count} uploads failed while node 3's disk stalled: {failures[:3]}"
        assert not slow, f"uploads waited on the stalled replica: {slow[:5]}"
        # Node 3 still answers and serves what it has.
        assert n3.cli_json("status")["peers"]

        fs.thaw()
        # Every block reaches node 3 (its resync queue) once its disk thaws.
        want = block_files(nodes[0])
        deadline = time.monotonic() + 90
        while not want <= block_files(n3):
            assert time.monotonic() < deadline, f"node 3 lacks {len(want - block_files(n3))} blocks 90 s after the thaw"
            time.sleep(1)
        for k in ("before", names[0], names[-1]):
            got = s3_client(n3, key).get_object(Bucket="stall", Key=k)["Body"].read()
            assert got == (bodies[k] if k in bodies else random_bytes(MiB, 1))
    finally:
        fs.thaw()
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.stop()
        fs.remove()


def coordinator(name: str, ids: list[str]) -> str:
    """The node that coordinates the creation of bucket `name` when all are
    up (src/model/src/bucket_create.rs, `rank`)."""
    return max(ids, key=lambda i: blake3.blake3(bytes.fromhex(i) + name.encode(),
                                                derive_key_context="hangar 2026-12 bucket coordinator").digest())


def test_buckets_whose_coordinator_metadata_disk_stalls_are_created_through_another(tmp_path_factory):
    _can_loop_or_skip()
    root = tmp_path_factory.mktemp("stallmeta")
    made, mounted = [], []

    def configure(n: Node) -> Node:
        made.append(n)
        if len(made) == 3:
            # Node 3's whole metadata directory (store, layout, admin
            # socket) on its own file system.
            mounted.append(_loop_fs_or_skip(root, mnt=n.meta))
        return n

    nodes = []
    try:
        nodes = laid_out_cluster(tmp_path_factory, "stallmeta", configure=configure)
        n1, n2, n3 = nodes
        fs = mounted[0]
        ids = [node_id(n) for n in nodes]
        key = n1.create_key("stallmeta", create_bucket=True)
        c1 = s3_client(n1, key, read_timeout=30)
        c1.create_bucket(Bucket="existing")
        names = [f"stalled-{i}" for i in range(40)]
        theirs = [b for b in names if coordinator(b, ids) == ids[2]][:3]
        others = [b for b in names if coordinator(b, ids) != ids[2]][:2]
        assert len(theirs) == 3 and len(others) == 2

        fs.freeze()
        t0 = time.monotonic()
        # Node 3 cannot commit anything now. Names others coordinate are
        # created at once (node 3 is one replica of three: a quorum is left).
        for b in others:
            c1.create_bucket(Bucket=b)
        # Node 3's names: refused (503) while node 3 is reported up, then
        # created through the next node. Without the health check, refused
        # for as long as the disk is frozen.
        created_after = {}
        for b in theirs:
            while True:
                try:
                    c1.create_bucket(Bucket=b)
                    created_after[b] = round(time.monotonic() - t0, 1)
                    break
                except botocore.exceptions.ClientError as e:
                    assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
                except botocore.exceptions.ReadTimeoutError:
                    pass
                assert time.monotonic() - t0 < 60, f"{b} not created 60 s into the stall; created: {created_after}"
                time.sleep(0.5)
        print(f"created through another node after {created_after} s of stall")
        assert n1.cli_json("status")["peers"], "node 1 answers"
        assert not any(p["is_up"] for p in n1.cli_json("status")["peers"] if p["id"] == ids[2]), \
            "node 3 is reported down while its metadata disk stalls"
        # Objects are written at the quorum of nodes 1 and 2 meanwhile.
        c1.put_object(Bucket="existing", Key="during", Body=b"x" * 1000)

        fs.thaw()
        # Node 3 comes back up and learns the buckets created without it.
        deadline = time.monotonic() + 60
        c3 = s3_client(n3, key, read_timeout=30)
        for b in theirs + others:
            while True:
                try:
                    c3.head_bucket(Bucket=b)
                    break
                except (botocore.exceptions.ClientError, botocore.exceptions.ReadTimeoutError):
                    assert time.monotonic() < deadline, f"node 3 does not know {b} 60 s after the thaw"
                    time.sleep(1)
        assert c3.get_object(Bucket="existing", Key="during")["Body"].read() == b"x" * 1000
        assert n2.cli_json("status")["peers"]
    finally:
        for fs in mounted:
            fs.thaw()
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.stop()
        for fs in mounted:
            fs.remove()
