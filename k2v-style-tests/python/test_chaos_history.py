"""The chaos suite's history mode, short (chaos_history.py, doc/chaos.md):
a 3-node cluster in network namespaces, six clients pinned two to a node
recording every operation (PUT, GET, DELETE, conditional PUTs,
CompleteMultipartUpload, ListObjectsV2) on a few keys, while one node is
killed with kill -9 and restarted and then one is cut off from its peers;
then every key read through every node. Fails if any key's history is
not linearizable (linearizability.py), a body read back is not the one
written with its ETag, a write got an unexpected 4xx, or a client
crashed; the report (operations, faults, verdicts, and for a failure the
minimal history) is printed either way. Skipped only when network
namespaces cannot be created here (not root)."""

from __future__ import annotations

import os

import pytest

import chaos_history
import chaos_lib

USABLE, WHY = chaos_lib.namespaces_usable()
pytestmark = pytest.mark.skipif(not USABLE, reason=f"chaos suite skipped: {WHY}")


def test_histories_under_kill9_and_a_partition_are_linearizable(tmp_path):
    p = chaos_history.HParams(
        seconds=float(os.environ.get("CHAOS_HISTORY_SECONDS", "20")),
        nemeses=("kill1", "partition"),
        fault_seconds=4.0,
        quiet_seconds=3.0,
        clients_per_node=2,
        seed=int(os.environ.get("CHAOS_SEED", "7")),
    )
    run = chaos_history.HistoryRun(p, tmp_path).run()
    text = run.render()
    print(text)
    assert run.fault_counts["kill1"] >= 1 and run.fault_counts["partition"] >= 1, text
    assert len(run.rec.ops) >= 200, text
    assert run.passed, text


def test_the_check_catches_a_cluster_that_promises_less(tmp_path):
    """The same harness against nodes in `consistency_mode = "dangerous"`
    (read and write quorums of 1) with one node cut off from its peers
    while its clients go on: stale reads and two If-None-Match:* winners
    follow, and the check must say so. Shows that recording, final reads
    and checker together can fail."""
    p = chaos_history.HParams(
        seconds=10.0,
        nemeses=("partition",),
        fault_seconds=5.0,
        quiet_seconds=2.0,
        clients_per_node=2,
        seed=int(os.environ.get("CHAOS_SEED", "7")),
        consistency_mode="dangerous",
    )
    run = chaos_history.HistoryRun(p, tmp_path).run()
    text = run.render()
    print(text)
    assert not run.error and not run.crashes, text
    assert run.fault_counts["partition"] >= 1, text
    assert run.bad_keys, text
    # each shown with a minimal history
    assert all(v.minimal for v in run.bad_keys), text
