"""Anomalies the history mode of the chaos suite found (doc/chaos.md,
"Anomalies found by the history check"), each as a test against real
processes that failed while the anomaly was there."""

from __future__ import annotations

import hashlib
import random
import threading
import time

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

import linearizability as lz
from hangar_testlib import REGION, bucket_name
from linearizability import FAIL, GET, OK, PUT_IF_ABSENT, PUT_IF_MATCH, UNKNOWN
from cluster_testlib import key_of, laid_out_cluster


@pytest.fixture
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "hr")
    yield nodes
    for n in nodes:
        n.stop()


def client(node, key):
    """No retries at all (botocore's `max_attempts: 1` retries once)."""
    return boto3.client(
        "s3", endpoint_url=node.endpoint, region_name=REGION,
        aws_access_key_id=key.id, aws_secret_access_key=key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1, "mode": "standard"},
                      connect_timeout=5, read_timeout=30),
    )


# The history `script/chaos history` recorded (2026-12-05, run 3, key
# cas1-000049), minimised: an If-Match chain through n1, n2 and n3; the
# last write, through n2, was answered 412, but its value was published:
# a GET through n3 and one through n2 read it while the write was still in
# flight, and the next If-Match naming its ETag succeeded.
RECORDED = [
    (PUT_IF_ABSENT, "df0997e6", None, OK, 3878.022, 3878.169, "c1.0 via n1"),
    (PUT_IF_MATCH, "b4dfaf2b", "df0997e6", OK, 3878.990, 3879.077, "c3.1 via n3"),
    (PUT_IF_MATCH, "37a9258b", "b4dfaf2b", OK, 3879.767, 3879.812, "c1.1 via n1"),
    (PUT_IF_MATCH, "a507add6", "37a9258b", OK, 3879.988, 3880.073, "c3.1 via n3"),
    (PUT_IF_MATCH, "c3440aa5", "a507add6", OK, 3880.287, 3880.339, "c1.1 via n1"),
    (PUT_IF_MATCH, "557b8962", "c3440aa5", OK, 3880.522, 3880.606, "c2.0 via n2"),
    (PUT_IF_MATCH, "9fcfc551", "557b8962", OK, 3880.606, 3880.666, "c2.0 via n2"),
    (PUT_IF_MATCH, "1e2064e6", "9fcfc551", OK, 3881.128, 3881.337, "c2.0 via n2"),
    (PUT_IF_MATCH, "cb18ce25", "1e2064e6", FAIL, 3881.337, 3881.582, "c2.0 via n2: 412"),
    (GET, "cb18ce25", None, OK, 3881.439, 3881.460, "c3.0 via n3"),
    (GET, "cb18ce25", None, OK, 3881.451, 3881.467, "c2.1 via n2"),
    (PUT_IF_MATCH, "7de26d30", "cb18ce25", OK, 3881.467, 3881.506, "c2.1 via n2"),
]


def test_the_recorded_history_is_not_linearizable():
    """What the checker said of the recorded history, kept as data: the
    412 cannot be placed anywhere, since the key held its ETag before the
    412 answered and nothing else could have written it."""
    ops = [lz.Op(i, "k", kind, call, ret, value, expect, outcome, note=note)
           for i, (kind, value, expect, outcome, call, ret, note) in enumerate(RECORDED)]
    r = lz.check_key(ops)
    assert r.linearizable is False
    # the search stops at the first read of the 412's value
    assert r.blocked is not None and r.blocked.kind == GET and r.blocked.value == "cb18ce25", r.explain()
    # the same history with that write answered 200 is fine
    fixed = [o if o.outcome != FAIL else lz.Op(o.id, "k", o.kind, o.call, o.ret, o.value, o.expect, OK)
             for o in ops]
    assert lz.check_key(fixed).linearizable


def test_an_if_match_answered_412_never_has_its_value_published(three):
    """Nine clients, three through each node, race If-Match writes on one
    key for 15 s, each naming the ETag it saw last (some a made-up one, as
    in the chaos run, whose rounds complete other proposers' values); every
    operation is recorded and the history checked for linearizability."""
    n1 = three[0]
    key = key_of(n1.cli_json("key", "create", "k-412"), "k-412")
    n1.cli("key", "allow", key.id, "--create-bucket")
    bucket = bucket_name("if-match-412")
    client(n1, key).create_bucket(Bucket=bucket)
    obj = "contended"
    ops: list[lz.Op] = []
    lock = threading.Lock()
    stop = time.monotonic() + 15

    def record(kind, call, ret, value, expect, outcome, note):
        with lock:
            ops.append(lz.Op(len(ops), obj, kind, call, lz.INF if outcome == UNKNOWN else ret, value, expect,
                             outcome, note=note))

    def worker(node, idx):
        rng = random.Random(idx)
        c = client(node, key)
        seen = None
        while time.monotonic() < stop:
            body = rng.randbytes(16) + b"x" * rng.randint(10, 500)
            etag = hashlib.md5(body).hexdigest()
            call = time.monotonic()
            if seen is None or rng.random() < 0.15:
                try:
                    got = c.get_object(Bucket=bucket, Key=obj)
                    got["Body"].read()
                    seen = got["ETag"].strip('"')
                    record(GET, call, time.monotonic(), seen, None, OK, f"{idx}")
                except botocore.exceptions.ClientError as e:
                    if e.response["Error"]["Code"] == "NoSuchKey":
                        record(GET, call, time.monotonic(), None, None, OK, f"{idx}")
                        seen = None
                        try:
                            c.put_object(Bucket=bucket, Key=obj, Body=body, IfNoneMatch="*")
                            record(PUT_IF_ABSENT, call, time.monotonic(), etag, None, OK, f"{idx}")
                        except botocore.exceptions.ClientError as e2:
                            status = e2.response["ResponseMetadata"]["HTTPStatusCode"]
                            record(PUT_IF_ABSENT, call, time.monotonic(), etag, None,
                                   FAIL if status == 412 else UNKNOWN, f"{idx}")
                continue
            expect = seen if rng.random() < 0.8 else "0" * 32
            try:
                c.put_object(Bucket=bucket, Key=obj, Body=body, IfMatch=f'"{expect}"')
                record(PUT_IF_MATCH, call, time.monotonic(), etag, expect, OK, f"{idx}")
                seen = etag
            except botocore.exceptions.ClientError as e:
                status = e.response["ResponseMetadata"]["HTTPStatusCode"]
                record(PUT_IF_MATCH, call, time.monotonic(), etag, expect, FAIL if status == 412 else UNKNOWN,
                       f"{idx}: {status}")
                seen = None
            except Exception:  # noqa: BLE001 - no answer: unknown
                record(PUT_IF_MATCH, call, time.monotonic(), etag, expect, UNKNOWN, f"{idx}")
                seen = None

    ts = [threading.Thread(target=worker, args=(n, i * 3 + j)) for i, n in enumerate(three) for j in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for n in three:
        call = time.monotonic()
        got = client(n, key).get_object(Bucket=bucket, Key=obj)
        got["Body"].read()
        record(GET, call, time.monotonic(), got["ETag"].strip('"'), None, OK, f"final via {n.endpoint}")
    r = lz.check_key(ops)
    text = f"{len(ops)} operations; " + r.explain()
    if r.linearizable is False:
        m = lz.minimise(ops)
        text += "\nminimal:\n" + "\n".join(o.describe() for o in m)
    # Each 412 whose value was read or named by a successful If-Match, and
    # whether that value had been replaced before the 412 was answered
    # (what the reading of proposer.rs in doc/chaos.md predicts).
    for o in ops:
        if o.outcome != FAIL:
            continue
        seen = [x for x in ops if x.kind == GET and x.value == o.value]
        over = [x for x in ops if x.kind == PUT_IF_MATCH and x.outcome == OK and x.expect == o.value]
        if seen or over:
            text += (f"\n412 with its value published: {o.describe()}; read {len(seen)} times; replaced by "
                     + (", ".join(f"{x.describe()}" for x in over) or "nothing")
                     + (" (before the 412 was answered)" if any(x.ret < o.ret for x in over) else ""))
    print(text)
    assert sum(1 for o in ops if o.kind == PUT_IF_MATCH and o.outcome == OK) > 50, text
    assert r.linearizable, text
