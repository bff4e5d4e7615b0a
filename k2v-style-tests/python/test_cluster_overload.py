"""A cluster node whose block writes just failed for overload refuses new
uploads on arrival (`s3_shed_after_overload_msec`, doc/operations.md
"Overload"), instead of letting each wait for its share of the block budget
and be refused seconds later.

Node 1's block budget (`block_ram_buffer_max`) holds one block. Node 3 is
stopped (SIGSTOP) but not declared down (a long ping timeout), so the
copy of an acknowledged upload to it keeps that budget. The next upload
through node 1 waits for the budget for its whole wait (5 s) and gets
`503 SlowDown`; the one after it is refused at once while the window
lasts, before its body, for a client that sent `Expect: 100-continue`
(botocore does for PutObject); a client that sends its body anyway is not
shed (it would save nothing) and waits for the budget as before. Nothing refused is stored; once node 3
runs again and the window has passed, uploads are accepted, and every
acknowledged one reads back through every node."""

from __future__ import annotations

import os
import re
import signal
import time

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from hangar_testlib import (
    REGION,
    MiB,
    bucket_name,
    error_code,
    http_status,
    metric,
    rejections,
    s3_client,
    signed_request,
)
from cluster_testlib import key_of, laid_out_cluster, wait_for

BUDGET_WAIT_S = 5  # hangar_block::replicated::DEFAULT_BUDGET_WAIT


def configure(window_msec: int):
    def f(n):
        text = n.config.read_text()
        text = re.sub(r"rpc_ping_timeout_msec = \d+", "rpc_ping_timeout_msec = 120000", text)
        n.config.write_text(
            'block_ram_buffer_max = "1100KiB"\n'
            f"s3_shed_after_overload_msec = {window_msec}\n"
            "rpc_timeout_msec = 120000\n" + text
        )
        return n
    return f


@pytest.fixture(scope="module", params=[1500, 0], ids=["window", "off"])
def cluster(request, tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, f"shed{request.param}", configure=configure(request.param))
    yield request.param, nodes
    for n in nodes:
        if n.proc is not None and n.proc.poll() is None:
            n.proc.send_signal(signal.SIGCONT)
        n.stop()


def one_attempt(node, key):
    """A boto3 client that never retries: the shared helper's `max_attempts`
    still allows one retry, which would be refused too (and counted) or,
    after the window, wait for the budget."""
    return boto3.client(
        "s3", endpoint_url=node.endpoint, region_name=REGION,
        aws_access_key_id=key.id, aws_secret_access_key=key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1, "mode": "standard"}))


def refused(call) -> tuple[float, str, str]:
    t0 = time.monotonic()
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call()
    err = e.value.response["Error"]
    assert http_status(e.value) == 503 and error_code(e.value) == "SlowDown", err
    return time.monotonic() - t0, err.get("Message", ""), e.value.response["ResponseMetadata"]["HTTPHeaders"].get(
        "retry-after", "")


def test_uploads_are_refused_on_arrival_after_a_block_write_overload(cluster):
    window_msec, (n1, n2, n3) = cluster
    key = key_of(n1.cli_json("key", "create", "shed"), "shed")
    n1.cli("key", "allow", key.id, "--create-bucket")
    bucket = bucket_name("shed")
    s3 = one_attempt(n1, key)
    s3.create_bucket(Bucket=bucket)
    acked = {"before": os.urandom(MiB)}
    s3.put_object(Bucket=bucket, Key="before", Body=acked["before"])

    # The third copy of "before" may still hold node 1's one-block budget
    # after the PUT was acknowledged: stopping node 3 then would make "held"
    # wait for it (it failed so once in the full suite).
    wait_for(lambda: metric(n1, "hangar_block_ram_buffer_in_use_bytes") == 0, 30, "node 1's block budget free")
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        # Acknowledged by nodes 1 and 2; its copy to node 3 holds node 1's budget.
        acked["held"] = os.urandom(MiB)
        s3.put_object(Bucket=bucket, Key="held", Body=acked["held"])
        took, msg, _ = refused(lambda: s3.put_object(Bucket=bucket, Key="waits", Body=os.urandom(MiB)))
        assert took >= BUDGET_WAIT_S - 0.5, took
        took, msg, retry = refused(lambda: s3.put_object(Bucket=bucket, Key="next", Body=os.urandom(MiB)))
        if window_msec:
            assert took < 1.0, took
            assert "block writes to its replicas are overloaded" in msg, msg
            assert retry == "1", retry
            assert rejections(n1, "block_overload") == 1
            # A client that sends its body without waiting (no Expect) is
            # not shed: refusing it early would not spare it its body. It
            # waits for the budget as before.
            t0 = time.monotonic()
            r = signed_request(n1, key, "PUT", bucket, "no-expect", body=os.urandom(MiB))
            assert (r.status, r.code) == (503, "SlowDown"), (r.status, r.body[:300])
            assert b"buffers for data in flight are full" in r.body, r.body
            assert time.monotonic() - t0 >= BUDGET_WAIT_S - 0.5
            assert rejections(n1, "block_overload") == 1
            # Small objects are kept in rows, not blocks: still accepted.
            acked["small"] = b"s" * 100
            s3.put_object(Bucket=bucket, Key="small", Body=acked["small"])
        else:
            # Without the window every upload waits out the budget.
            assert took >= BUDGET_WAIT_S - 0.5, took
            assert rejections(n1, "block_overload") == 0
    finally:
        n3.proc.send_signal(signal.SIGCONT)

    # The held copy completes; after the window uploads are accepted again.
    time.sleep(max(window_msec / 1000, 0) + 0.5)
    acked["after"] = os.urandom(MiB)
    wait_for(lambda: s3.put_object(Bucket=bucket, Key="after", Body=acked["after"]) is not None, 30,
             "an upload accepted after the window")
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))
    assert listed == sorted(acked), listed
    for n in (n1, n2, n3):
        c = s3_client(n, key)
        for k, body in acked.items():
            assert c.get_object(Bucket=bucket, Key=k)["Body"].read() == body, (n.s3_port, k)
