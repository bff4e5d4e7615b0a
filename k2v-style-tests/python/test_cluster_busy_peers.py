"""A 3-node cluster (rf 3) busy with uploads through every node, with a
ping timeout (100 ms) shorter than its calls take under that load: pings
are answered late, but the peers keep answering calls, so none is declared
down and no connection is closed under the calls in flight; every PUT is
acknowledged, and every acknowledged PUT reads back through every node.
(Before, two late pings marked the peer down and closed its connection:
every call on it failed with "connection lost", PUTs lost their quorum.)"""

from __future__ import annotations

import concurrent.futures
import os
import re
import time

import pytest

from hangar_testlib import MiB, bucket_name, s3_client, sha256
from cluster_testlib import key_of, laid_out_cluster

PING_TIMEOUT_MSEC = 100
WRITERS = 48
SECONDS = 26  # five ping rounds (every 5 s): a peer is down after two failed in a row


def short_pings(n):
    text = n.config.read_text()
    text = re.sub(r"rpc_ping_timeout_msec = \d+", f"rpc_ping_timeout_msec = {PING_TIMEOUT_MSEC}", text)
    # The upload gate off: it would refuse part of the load (boto3 waits for
    # `100 Continue`) that is here to make the calls slower than the pings.
    n.config.write_text("s3_upload_latency_target_msec = 0\n" + text)
    return n


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "busy", configure=short_pings)
    yield nodes
    for n in nodes:
        n.stop()


def test_busy_peers_that_answer_calls_late_pings_are_not_declared_down(cluster):
    nodes = cluster
    key = key_of(nodes[0].cli_json("key", "create", "busy"), "busy")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    bucket = bucket_name("busy")
    s3_client(nodes[0], key).create_bucket(Bucket=bucket)
    logs_before = [n.log.read_text() if n.log.exists() else "" for n in nodes]
    acked: dict[str, str] = {}
    errors: list[str] = []
    deadline = time.monotonic() + SECONDS

    def writer(w: int):
        c = s3_client(nodes[w % 3], key)
        i = 0
        while time.monotonic() < deadline:
            body = os.urandom(MiB)
            k = f"w{w}/{i}"
            try:
                c.put_object(Bucket=bucket, Key=k, Body=body)
                acked[k] = sha256(body)
            except Exception as e:  # every node is up: nothing may fail
                errors.append(f"{k}: {e!r}")
            i += 1

    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(writer, range(WRITERS)))
    new_logs = [n.log.read_text()[len(before):] for n, before in zip(nodes, logs_before)]
    downs = [line for log in new_logs for line in log.splitlines() if "peer is down" in line or "connection lost" in line]
    print(f"{len(acked)} PUTs acknowledged in {SECONDS} s, {len(errors)} failed; {len(downs)} peer-down/lost lines")
    assert not downs, downs[:5]
    assert not errors, errors[:5]
    assert len(acked) >= WRITERS
    for n in nodes:
        assert sum(p["is_up"] for p in n.cli_json("status")["peers"]) == 3
    # Every acknowledged PUT, through every node.
    def check(n):
        c = s3_client(n, key)
        return [(n.root, k) for k, digest in acked.items()
                if sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) != digest]

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        wrong = [w for ws in pool.map(check, nodes) for w in ws]
    assert not wrong, wrong[:5]
