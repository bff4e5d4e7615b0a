"""Admission control: when the RAM budget for data in flight is spent, a new
upload waits briefly, then gets 503 SlowDown with retry hints; nothing it
sent is stored, and the upload holding the budget completes intact. When the
queue of waiters is full too, the refusal comes at once."""

from __future__ import annotations

import socket
import time

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
