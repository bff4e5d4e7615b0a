"""Conditional writes in a 3-node cluster, decided by a Paxos round per key
(doc/replication.md, "Conditional writes"): many rounds of concurrent
`If-None-Match: *` and `If-Match` PUTs of one key through all three nodes
have exactly one winner, whose body every node then serves; with one node
paused (SIGSTOP) the two others still decide; with two paused, a
conditional PUT fails at once with 503. Unconditional PUTs send no Paxos
message at all (the RPC counters of /metrics say so)."""

from __future__ import annotations

import concurrent.futures as cf
import re
import signal
import statistics
import threading
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import bucket_name, http_status, random_bytes, s3_client
from cluster_testlib import key_of, laid_out_cluster, wait_for

PAXOS_ENDPOINTS = ("hangar/object/paxos/prepare", "hangar/object/paxos/accept", "hangar/object/paxos/commit")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "cond")
    n1 = nodes[0]
    key = key_of(n1.cli_json("key", "create", "cond"), "cond")
    n1.cli("key", "allow", key.id, "--create-bucket")
    name = bucket_name("cond")
    s3_client(n1, key).create_bucket(Bucket=name)
    yield nodes, key, name
    for n in nodes:
        n.stop()


def race(nodes, key, bucket, k, bodies, extra, live=None):
    """PUTs `bodies` of key `k` at once, client i through node i % len(live);
    returns each one's HTTP status."""
    live = live or nodes
    clients = [s3_client(live[i % len(live)], key) for i in range(len(bodies))]
    barrier = threading.Barrier(len(bodies))
    outcome: list = [None] * len(bodies)

    def put(i):
        barrier.wait()
        try:
            clients[i].put_object(Bucket=bucket, Key=k, Body=bodies[i], **extra)
            outcome[i] = 200
        except ClientError as e:
            outcome[i] = (http_status(e), e.response["Error"].get("Message"))

    with cf.ThreadPoolExecutor(len(bodies)) as ex:
        list(ex.map(put, range(len(bodies))))
    return outcome


def check_one_winner(nodes, key, bucket, k, bodies, outcome, round_):
    statuses = [o if o == 200 else o[0] for o in outcome]
    assert sorted(statuses) == [200] + [412] * (len(bodies) - 1), (round_, outcome)
    winner = bodies[statuses.index(200)]
    for n in nodes:
        assert s3_client(n, key).get_object(Bucket=bucket, Key=k)["Body"].read() == winner, (round_, n.root)


@pytest.mark.parametrize("kind", ["if-none-match", "if-match"])
def test_many_rounds_of_concurrent_conditional_puts_through_all_nodes_have_one_winner(setup, kind):
    nodes, key, bucket = setup
    for round_ in range(25):
        k = f"rounds-{kind}/{round_}"
        n = 6 + round_ % 4
        bodies = [random_bytes(100 + 37 * i + round_, 1000 * round_ + i) for i in range(n)]
        if kind == "if-match":
            first = s3_client(nodes[round_ % 3], key).put_object(Bucket=bucket, Key=k, Body=b"v0")
            extra = {"IfMatch": first["ETag"]}
        else:
            extra = {"IfNoneMatch": "*"}
        outcome = race(nodes, key, bucket, k, bodies, extra)
        check_one_winner(nodes, key, bucket, k, bodies, outcome, round_)


def rpc_calls(n) -> dict[str, float]:
    """This node's calls made per Paxos endpoint (summed over peers)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{n.admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {e: 0.0 for e in PAXOS_ENDPOINTS}
    for line in text.splitlines():
        m = re.match(r'hangar_rpc_calls_total\{(.*)\} (\S+)$', line)
        if not m:
            continue
        ep = re.search(r'endpoint="([^"]*)"', m.group(1))
        if ep and ep.group(1) in out:
            out[ep.group(1)] += float(m.group(2))
    return out


def test_unconditional_puts_send_no_paxos_message_and_keep_their_latency(setup):
    nodes, key, bucket = setup
    before = [rpc_calls(n) for n in nodes]
    clients = [s3_client(n, key) for n in nodes]
    body = random_bytes(2000, 5)
    plain = []
    for i in range(60):
        t0 = time.monotonic()
        clients[i % 3].put_object(Bucket=bucket, Key=f"plain/{i}", Body=body)
        plain.append(time.monotonic() - t0)
    after = [rpc_calls(n) for n in nodes]
    assert after == before, "an unconditional PUT sent a Paxos message"
    cond = []
    for i in range(60):
        t0 = time.monotonic()
        clients[i % 3].put_object(Bucket=bucket, Key=f"cond/{i}", Body=body, IfNoneMatch="*")
        cond.append(time.monotonic() - t0)
    # The counters do see conditional writes (so the check above can fail).
    later = [rpc_calls(n) for n in nodes]
    assert all(later[i]["hangar/object/paxos/prepare"] > after[i]["hangar/object/paxos/prepare"] for i in range(3))
    print(f"PUT of 2000 bytes, median of 60: unconditional {statistics.median(plain) * 1000:.1f} ms, "
          f"If-None-Match {statistics.median(cond) * 1000:.1f} ms")


def test_with_one_node_paused_the_two_others_still_decide(setup):
    nodes, key, bucket = setup
    n1, n2, n3 = nodes
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        for round_ in range(8):
            k = f"paused/{round_}"
            bodies = [random_bytes(300 + i, 77 * round_ + i) for i in range(6)]
            t0 = time.monotonic()
            outcome = race(nodes, key, bucket, k, bodies, {"IfNoneMatch": "*"}, live=[n1, n2])
            took = time.monotonic() - t0
            check_one_winner([n1, n2], key, bucket, k, bodies, outcome, round_)
            # The paused node costs no RPC timeout: the majority answers.
            assert took < 4, (round_, took)
        # If-Match on the ETag the winner got.
        k = "paused/if-match"
        first = s3_client(n1, key).put_object(Bucket=bucket, Key=k, Body=b"v0")
        bodies = [random_bytes(500 + i, 9 + i) for i in range(6)]
        outcome = race(nodes, key, bucket, k, bodies, {"IfMatch": first["ETag"]}, live=[n1, n2])
        check_one_winner([n1, n2], key, bucket, k, bodies, outcome, "if-match")
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: sum(p["is_up"] for p in n1.cli_json("status")["peers"]) == 3, 30, "node 3 up again")
    # The resumed node serves the winners too.
    got = s3_client(n3, key).get_object(Bucket=bucket, Key="paused/if-match")["Body"].read()
    assert got != b"v0"


def test_with_two_nodes_of_three_paused_a_conditional_put_fails_at_once_with_503(setup):
    nodes, key, bucket = setup
    n1, n2, n3 = nodes
    c = s3_client(n1, key)
    c.put_object(Bucket=bucket, Key="two-down/exists", Body=b"x")
    n2.proc.send_signal(signal.SIGSTOP)
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: sum(p["is_up"] for p in n1.cli_json("status")["peers"]) == 1, 30, "two nodes seen down")
        for extra in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}):
            t0 = time.monotonic()
            with pytest.raises(ClientError) as e:
                c.put_object(Bucket=bucket, Key="two-down/new", Body=b"small", **extra)
            took = time.monotonic() - t0
            assert http_status(e.value) == 503, e.value.response
            msg = e.value.response["Error"]["Message"]
            assert "quorum" in msg and "conditional write" in msg, msg
            assert took < 2, took
    finally:
        n2.proc.send_signal(signal.SIGCONT)
        n3.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: sum(p["is_up"] for p in n1.cli_json("status")["peers"]) == 3, 30, "all nodes up again")
    # Nothing of the refused writes was published, and the key is free.
    s3_client(n2, key).put_object(Bucket=bucket, Key="two-down/new", Body=b"after", IfNoneMatch="*")
    assert s3_client(n3, key).get_object(Bucket=bucket, Key="two-down/new")["Body"].read() == b"after"
