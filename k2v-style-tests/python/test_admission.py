"""Admission control: when the RAM budget for data in flight is spent, a new
upload waits briefly, then gets 503 SlowDown with retry hints; nothing it
sent is stored, and the upload holding the budget completes intact. When the
queue of waiters is full too, the refusal comes at once. When block
operations are slower than the latency target, the part of the budget
requests may hold shrinks, and the surplus is refused at once."""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, error_code, http_status, random_bytes, s3_client, sign_v4


@pytest.fixture(scope="module")
def tight_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("tight"))
    # Five 1 MiB buffers: exactly one streaming upload at a time.
    text = n.config.read_text()
    n.config.write_text('s3_ram_buffer_max = "5MiB"\ns3_admission_wait_msec = 300\n' + text)
    n.start()
    yield n
    n.stop()


@pytest.fixture(scope="module")
def no_queue_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("noqueue"))
    # One streaming upload at a time, no room to wait, and a long wait that a
    # refusal must not sit through.
    text = n.config.read_text()
    n.config.write_text(
        's3_ram_buffer_max = "5MiB"\ns3_ram_queue_max = "0"\ns3_admission_wait_msec = 5000\n' + text
    )
    n.start()
    yield n
    n.stop()


@pytest.fixture(scope="module")
def impatient_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("impatient"))
    # 64 buffers, and a latency target no block store can meet: the limit
    # falls to its floor of 8 blocks, the queue to 8 blocks with it.
    text = n.config.read_text()
    n.config.write_text(
        's3_ram_buffer_max = "64MiB"\ns3_admission_wait_msec = 5000\ns3_latency_target_msec = 1\n' + text
    )
    n.start()
    yield n
    n.stop()


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


def _admission_limit(node: Node) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^hangar_s3_admission_limit_bytes ([0-9.e+]+)$", text, re.M)
    assert m, "hangar_s3_admission_limit_bytes is not exposed"
    return float(m.group(1))


def test_slow_block_operations_shrink_the_limit_and_the_surplus_is_refused_at_once(impatient_node):
    node = impatient_node
    key = node.create_key("impatient", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="impatient")
    assert _admission_limit(node) == 64 << 20
    acked: dict[str, bytes] = {}
    refusals: list[float] = []
    other: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + 6

    def client(c: int) -> None:
        cs = s3_client(node, key)
        i = 0
        while time.monotonic() < stop:
            k, body = f"c{c}-{i}", random_bytes((1 << 20) + 17, c * 1000 + i)
            i += 1
            t0 = time.monotonic()
            try:
                cs.put_object(Bucket="impatient", Key=k, Body=body)
                with lock:
                    acked[k] = body
            except ClientError as e:
                with lock:
                    if http_status(e) == 503 and error_code(e) == "SlowDown":
                        assert e.response["ResponseMetadata"]["HTTPHeaders"].get("retry-after") == "1"
                        refusals.append(time.monotonic() - t0)
                    else:
                        other.append(f"{k}: {e}")

    threads = [threading.Thread(target=client, args=(c,)) for c in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not other, other[:5]
    # Shrunk to the floor: 8 blocks of 1 MiB.
    assert _admission_limit(node) == 8 << 20
    assert acked and refusals, (len(acked), len(refusals))
    # Refused at once (the queue is full), not after the 5 s wait: the
    # median refusal, a whole request of a debug build, in well under it.
    refusals.sort()
    assert refusals[len(refusals) // 2] < 1.0, refusals[len(refusals) // 2]
    for k, body in acked.items():
        assert s3.get_object(Bucket="impatient", Key=k)["Body"].read() == body, k
