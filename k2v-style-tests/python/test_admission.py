"""Admission control: when the RAM budget for data in flight is spent, a new
upload waits briefly, then gets 503 SlowDown with retry hints; nothing it
sent is stored, and the upload holding the budget completes intact. When the
queue of waiters is full too, the refusal comes at once."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    Node,
    bucket_name,
    error_code,
    http_status,
    metric,
    random_bytes,
    rejections,
    s3_client,
    sign_v4,
    signed_request,
)


def _node_with(tmp_path_factory, name: str, settings: str):
    """A started node whose config begins with the top-level `settings`."""
    n = Node(tmp_path_factory.mktemp(name))
    n.config.write_text(settings + n.config.read_text())
    n.start()
    yield n
    n.stop()


@pytest.fixture(scope="module")
def tight_node(tmp_path_factory):
    # Five 1 MiB buffers: exactly one streaming upload at a time.
    yield from _node_with(tmp_path_factory, "tight", 's3_ram_buffer_max = "5MiB"\ns3_admission_wait_msec = 300\n')


@pytest.fixture(scope="module")
def no_queue_node(tmp_path_factory):
    # One streaming upload at a time, no room to wait, and a long wait that a
    # refusal must not sit through.
    yield from _node_with(
        tmp_path_factory, "noqueue", 's3_ram_buffer_max = "5MiB"\ns3_ram_queue_max = "0"\ns3_admission_wait_msec = 5000\n'
    )


def _start_slow_put(node: Node, key, bucket: str, obj: str, data: bytes, first: int) -> socket.socket:
    host = f"127.0.0.1:{node.s3_port}"
    path = f"/{bucket}/{obj}"
    s = sign_v4("PUT", host, path, [], {"content-length": str(len(data))}, "UNSIGNED-PAYLOAD", key)
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in s.headers.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", node.s3_port))
    sock.sendall(head.encode() + data[:first])
    return sock


def _finish_slow_put(sock: socket.socket, data: bytes, sent: int) -> None:
    sock.sendall(data[sent:])
    sock.settimeout(30)
    status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert b" 200 " in status_line, status_line


def test_spent_budget_answers_slow_down_and_loses_nothing(tight_node):
    key = tight_node.create_key("tight", create_bucket=True)
    s3 = s3_client(tight_node, key)  # no retries: the SlowDown must be seen
    s3.create_bucket(Bucket="tight")
    # Five blocks long: its share is the whole budget.
    slow_data = random_bytes(5 << 20, 1)
    sock = _start_slow_put(tight_node, key, "tight", "slow", slow_data, 64 << 10)
    try:
        # Wait until the slow upload holds the budget (it is past the inline size).
        time.sleep(0.5)
        t0 = time.monotonic()
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket="tight", Key="rejected", Body=random_bytes(2 << 20, 2))
        waited = time.monotonic() - t0
        assert http_status(e.value) == 503 and error_code(e.value) == "SlowDown"
        headers = e.value.response["ResponseMetadata"]["HTTPHeaders"]
        assert headers.get("retry-after") == "1"
        assert headers.get("x-amz-retry-after") == "1000"
        assert 0.25 <= waited < 10
        # Small objects need no buffers and still go through.
        s3.put_object(Bucket="tight", Key="small", Body=b"tiny")
        _finish_slow_put(sock, slow_data, 64 << 10)
    finally:
        sock.close()
    assert s3.get_object(Bucket="tight", Key="slow")["Body"].read() == slow_data
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="tight")["Contents"])
    assert keys == ["slow", "small"]
    # With the budget free again, the same upload succeeds.
    body = random_bytes(2 << 20, 2)
    s3.put_object(Bucket="tight", Key="rejected", Body=body)
    assert s3.get_object(Bucket="tight", Key="rejected")["Body"].read() == body


def test_full_queue_refuses_at_once(no_queue_node):
    key = no_queue_node.create_key("noqueue", create_bucket=True)
    s3 = s3_client(no_queue_node, key)
    s3.create_bucket(Bucket="noqueue")
    slow_data = random_bytes(5 << 20, 3)
    sock = _start_slow_put(no_queue_node, key, "noqueue", "slow", slow_data, 64 << 10)
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket="noqueue", Key="refused", Body=random_bytes(2 << 20, 4))
        waited = time.monotonic() - t0
        assert http_status(e.value) == 503 and error_code(e.value) == "SlowDown"
        assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("retry-after") == "1"
        # Not the 5 s wait: refused as soon as the request asked for its share.
        assert waited < 2, waited
        _finish_slow_put(sock, slow_data, 64 << 10)
    finally:
        sock.close()
    assert s3.get_object(Bucket="noqueue", Key="slow")["Body"].read() == slow_data
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="noqueue")["Contents"]]
    assert keys == ["slow"]


def _raw_put(node: Node, key, bucket: str, obj: str, data: bytes) -> bytes:
    """A PUT sent as a client without `Expect: 100-continue` sends it: the
    whole body at once, then the answer read. Returns the status line."""
    host = f"127.0.0.1:{node.s3_port}"
    path = f"/{bucket}/{obj}"
    s = sign_v4("PUT", host, path, [], {"content-length": str(len(data))}, "UNSIGNED-PAYLOAD", key)
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in s.headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", node.s3_port)) as sock:
        sock.settimeout(30)
        sock.sendall(head.encode() + data)
        answer = b""
        while b"</Error>" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        # Still open for the next request: the refused body was read to its end.
        sock.sendall(f"HEAD /{bucket} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        again = sock.recv(65536)
    assert again.startswith(b"HTTP/1.1 "), again[:100]
    return answer


def test_a_refused_body_is_read_so_the_client_gets_the_slow_down(no_queue_node):
    # A client that sends its whole body before reading (no 100-continue)
    # must see the 503, not a connection reset in the middle of its body.
    key = no_queue_node.create_key("refusedbody", create_bucket=True)
    s3 = s3_client(no_queue_node, key)
    s3.create_bucket(Bucket="refusedbody")
    slow_data = random_bytes(5 << 20, 5)
    sock = _start_slow_put(no_queue_node, key, "refusedbody", "slow", slow_data, 64 << 10)
    try:
        time.sleep(0.5)
        for i in range(5):
            answer = _raw_put(no_queue_node, key, "refusedbody", f"refused-{i}", random_bytes(4 << 20, 10 + i))
            assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
            assert b"<Code>SlowDown</Code>" in answer, answer[:400]
        _finish_slow_put(sock, slow_data, 64 << 10)
    finally:
        sock.close()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="refusedbody")["Contents"]]
    assert keys == ["slow"]



@pytest.fixture(scope="module")
def gated_node(tmp_path_factory):
    # The upload gate with a target so short that, once the node has a
    # measured rate, its limit is its floor: eight 1 MiB blocks queued or
    # reserved. An admitted upload reserves one block until its first block
    # reaches the store, for at most a second.
    yield from _node_with(tmp_path_factory, "gated", "s3_upload_latency_target_msec = 1\n")


def _expect_put_head(node: Node, key, bucket: str, obj: str, length: int) -> tuple[socket.socket, bytes]:
    """Sends a PUT's head with `Expect: 100-continue`, as aws-cli and boto3
    do, and returns the socket and the first answer: `100 Continue`, or a
    final status sent before any body byte."""
    host = f"127.0.0.1:{node.s3_port}"
    path = f"/{bucket}/{obj}"
    s = sign_v4("PUT", host, path, [], {"content-length": str(length), "expect": "100-continue"},
                "UNSIGNED-PAYLOAD", key)
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in s.headers.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", node.s3_port))
    sock.settimeout(10)
    sock.sendall(head.encode())
    answer = sock.recv(65536)
    while answer.startswith(b"HTTP/1.1 503") and b"</Error>" not in answer:
        answer += sock.recv(65536)
    return sock, answer


def test_the_upload_gate_refuses_waiting_clients_before_their_body(gated_node):
    key = gated_node.create_key("gated", create_bucket=True)
    s3 = s3_client(gated_node, key)
    s3.create_bucket(Bucket="gated")
    # A node never busy has no rate and admits everything.
    assert metric(gated_node, "hangar_s3_upload_limit_bytes") == 0
    # Keep it busy (blocks queued at least half of a 500 ms window) until
    # it has measured its rate: four uploads at once, over and over.
    warm = random_bytes(16 << 20, 29)
    with ThreadPoolExecutor(4) as pool:
        for _ in range(20):
            list(pool.map(lambda i: s3.put_object(Bucket="gated", Key="warm-up", Body=warm), range(8)))
            if metric(gated_node, "hangar_s3_upload_limit_bytes") > 0:
                break
    assert metric(gated_node, "hangar_s3_upload_limit_bytes") == 8 << 20
    bodies = {f"admitted-{i}": random_bytes(1 << 20, 30 + i) for i in range(8)}
    # Eight uploads told to go on, none of their bodies sent yet: their
    # reservations fill the floor.
    t0 = time.monotonic()
    held = []
    for name, body in bodies.items():
        sock, answer = _expect_put_head(gated_node, key, "gated", name, len(body))
        held.append((sock, body))
        assert answer.startswith(b"HTTP/1.1 100 Continue"), answer[:200]
    try:
        assert metric(gated_node, "hangar_s3_upload_queue_bytes") == 8 << 20
        # The warm-up may have been refused too (its client retried).
        refused_before = rejections(gated_node, "upload_latency")
        refused_sock, answer = _expect_put_head(gated_node, key, "gated", "refused", 1 << 20)
        refused_sock.close()
        assert time.monotonic() - t0 < 0.9, "the reservations may have expired"
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert b"100 Continue" not in answer
        assert b"<Code>SlowDown</Code>" in answer and b"s3_upload_latency_target_msec" in answer, answer
        assert b"retry-after: 1\r\n" in answer.lower(), answer[:400]
        assert rejections(gated_node, "upload_latency") == refused_before + 1
        # A client that sends its body without waiting is admitted (refusing
        # it would not spare it the body) and counted.
        bodies["no-expect"] = random_bytes(1 << 20, 21)
        r = signed_request(gated_node, key, "PUT", "gated", "no-expect", body=bodies["no-expect"])
        assert r.status == 200, r.body[:300]
        # Objects kept in rows do not pass the gate.
        bodies["small"] = b"tiny"
        s3.put_object(Bucket="gated", Key="small", Body=b"tiny")
        # A client that holds its body back holds the gate for the target
        # only: then its reservation lapses and uploads are admitted again.
        time.sleep(max(0.0, t0 + 1.3 - time.monotonic()))
        assert metric(gated_node, "hangar_s3_upload_queue_bytes") == 0
        bodies["later"] = random_bytes(1 << 20, 22)
        late, answer = _expect_put_head(gated_node, key, "gated", "later", len(bodies["later"]))
        held.append((late, bodies["later"]))
        assert answer.startswith(b"HTTP/1.1 100 Continue"), answer[:200]
        for sock, body in held:
            _finish_slow_put(sock, body, 0)
    finally:
        for sock, _ in held:
            sock.close()
    assert rejections(gated_node, "upload_latency") == refused_before + 1
    bodies["warm-up"] = warm
    for name, data in bodies.items():
        assert s3.get_object(Bucket="gated", Key=name)["Body"].read() == data, name
    names = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="gated")["Contents"])
    assert names == sorted(bodies)


def test_one_client_alone_is_never_refused_by_the_upload_gate(node, tmp_path):
    """The gate (on by default) refuses uploads whose blocks would wait past
    the target; one aws-cli copying a big file, ten 8 MiB parts at once, is
    the node's whole load, and must go through without a retry."""
    from clients import AwsCli
    key = node.create_key("alone", create_bucket=True)
    s3 = s3_client(node, key)
    bucket = bucket_name("alone")
    s3.create_bucket(Bucket=bucket)
    # The shared node: count only this test's refusals.
    refused_before = rejections(node, "upload_latency")
    aws = AwsCli(node, key, tmp_path)
    cfg = tmp_path / "aws-config"
    cfg.write_text(cfg.read_text().replace("multipart_threshold = 5GB", "multipart_threshold = 8MB"))
    src = tmp_path / "big.in"
    data = random_bytes(160 << 20, 40)
    src.write_bytes(data)
    # The first copy gives the node its measured rate, the second runs
    # against it; aws-cli makes one attempt (AWS_MAX_ATTEMPTS=1).
    for name in ("first", "second"):
        aws.run("s3", "cp", str(src), f"s3://{bucket}/{name}", timeout=240)
        assert s3.head_object(Bucket=bucket, Key=name)["ContentLength"] == len(data)
    assert metric(node, "hangar_s3_upload_limit_bytes") > 0, "no rate was measured"
    assert rejections(node, "upload_latency") == refused_before
    dst = tmp_path / "big.out"
    aws.run("s3", "cp", f"s3://{bucket}/second", str(dst), timeout=240)
    assert dst.read_bytes() == data
