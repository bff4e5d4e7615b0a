"""Admission control: when the RAM budget for data in flight is spent, a new
upload waits briefly, then gets 503 SlowDown with retry hints; nothing it
sent is stored, and the upload holding the budget completes intact."""

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


def _start_slow_put(node: Node, key, bucket: str, obj: str, data: bytes, first: int) -> socket.socket:
    host = f"127.0.0.1:{node.s3_port}"
    path = f"/{bucket}/{obj}"
    s = sign_v4("PUT", host, path, [], {"content-length": str(len(data))}, "UNSIGNED-PAYLOAD", key)
    head = f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in s.headers.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", node.s3_port))
    sock.sendall(head.encode() + data[:first])
    return sock


def test_spent_budget_answers_slow_down_and_loses_nothing(tight_node):
    key = tight_node.create_key("tight", create_bucket=True)
    s3 = s3_client(tight_node, key)  # no retries: the SlowDown must be seen
    s3.create_bucket(Bucket="tight")
    slow_data = random_bytes(3 << 20, 1)
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
        sock.sendall(slow_data[64 << 10 :])
        sock.settimeout(30)
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
        assert b" 200 " in status_line, status_line
    finally:
        sock.close()
    assert s3.get_object(Bucket="tight", Key="slow")["Body"].read() == slow_data
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="tight")["Contents"])
    assert keys == ["slow", "small"]
    # With the budget free again, the same upload succeeds.
    body = random_bytes(2 << 20, 2)
    s3.put_object(Bucket="tight", Key="rejected", Body=body)
    assert s3.get_object(Bucket="tight", Key="rejected")["Body"].read() == body
