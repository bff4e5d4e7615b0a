"""`Expect: 100-continue` on empty bodies, answered as S3 answers it: `100
Continue` before the final answer, on a connection that stays open, so that
aws-cli and boto3 (which send the header on every PUT of a file, empty ones
included) reuse their connections and never retry."""

import io
import re
import socket

import boto3
import botocore.config
import pytest

from clients import AwsCli
from hangar_testlib import REGION, object_path, random_bytes, sign_v4

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _head(node, key, method: str, bucket: str, obj: str, headers: dict[str, str], payload: str) -> bytes:
    host = f"127.0.0.1:{node.s3_port}"
    path = object_path(bucket, obj)
    s = sign_v4(method, host, path, [], headers, payload, key)
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in s.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _empty_expect_put(node, key, bucket: str, obj: str) -> bytes:
    return _head(
        node, key, "PUT", bucket, obj,
        {"content-length": "0", "expect": "100-continue"}, EMPTY_SHA256,
    )


def _read_answer(sock: socket.socket, buf: bytearray) -> tuple[bytes, bytes]:
    """Reads one final answer (skipping nothing): returns its head and body;
    `buf` keeps what was read past it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed mid-answer: {bytes(buf)[:200]!r}"
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end])
    del buf[:end]
    m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    length = int(m.group(1)) if m else 0
    while len(buf) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        buf += chunk
    body = bytes(buf[:length])
    del buf[:length]
    return head, body


def test_empty_expect_put_gets_100_continue_and_keeps_the_connection(node, admin_key, bucket, s3):
    with socket.create_connection(("127.0.0.1", node.s3_port), timeout=10) as sock:
        buf = bytearray()
        for i in range(3):
            sock.sendall(_empty_expect_put(node, admin_key, bucket, f"empty-{i}"))
            interim, _ = _read_answer(sock, buf)
            assert interim == CONTINUE, interim
            head, _ = _read_answer(sock, buf)
            assert head.startswith(b"HTTP/1.1 200 "), head
            assert b"connection: close" not in head.lower(), head
        # The same connection then serves a request without the header.
        sock.sendall(_head(node, admin_key, "GET", bucket, "empty-2", {}, EMPTY_SHA256))
        head, body = _read_answer(sock, buf)
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert body == b""
    for i in range(3):
        assert s3.head_object(Bucket=bucket, Key=f"empty-{i}")["ContentLength"] == 0


def test_pipelined_empty_expect_put_is_answered_in_order(node, admin_key, bucket, s3):
    """A client that sends its next request before reading the answer to the
    one before: the interim answer is never written inside an earlier
    answer; without it the connection closes after the empty PUT's answer."""
    data = random_bytes(256 * 1024, 77)
    s3.put_object(Bucket=bucket, Key="big", Body=data)
    with socket.create_connection(("127.0.0.1", node.s3_port), timeout=10) as sock:
        sock.sendall(
            _head(node, admin_key, "GET", bucket, "big", {}, EMPTY_SHA256)
            + _empty_expect_put(node, admin_key, bucket, "after-get")
        )
        buf = bytearray()
        head, body = _read_answer(sock, buf)
        assert head.startswith(b"HTTP/1.1 200 ") and body == data, head
        head, _ = _read_answer(sock, buf)
        if head == CONTINUE:
            head, _ = _read_answer(sock, buf)
            assert b"connection: close" not in head.lower(), head
        else:
            assert b"connection: close" in head.lower(), head
        assert head.startswith(b"HTTP/1.1 200 "), head
    assert s3.head_object(Bucket=bucket, Key="after-get")["ContentLength"] == 0


def _connections_opened(debug_log: str) -> int:
    # urllib3's two ways of opening a connection: a new one, or a pooled
    # one the server had closed.
    return len(re.findall(r"Starting new HTTP connection|Resetting dropped connection", debug_log))


def test_awscli_copies_50_empty_files_with_no_retry(node, admin_key, bucket, s3, tmp_path):
    src = tmp_path / "empties"
    src.mkdir()
    for i in range(50):
        (src / f"e{i:02}").write_bytes(b"")
    aws = AwsCli(node, admin_key, tmp_path)
    # aws-cli's own retry policy, so that a retry would show in its log.
    del aws.env["AWS_MAX_ATTEMPTS"]
    res = aws.run("--debug", "s3", "cp", "--recursive", str(src), f"s3://{bucket}/empties/", timeout=120)
    log = res.stderr
    assert "Retry needed" not in log
    assert "Received a non 100 Continue response" not in log
    assert log.count("100 Continue response seen") == 50
    # aws-cli runs 10 transfers at once: at most one connection each.
    assert _connections_opened(log) <= 12, _connections_opened(log)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="empties/")
    assert listed["KeyCount"] == 50
    assert all(o["Size"] == 0 for o in listed["Contents"])


def test_boto3_empty_file_puts_reuse_one_connection(node, admin_key, bucket, tmp_path, caplog):
    s3 = boto3.client(
        "s3",
        endpoint_url=node.endpoint,
        aws_access_key_id=admin_key.id,
        aws_secret_access_key=admin_key.secret,
        region_name=REGION,
        config=botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": 3},
            read_timeout=20,
        ),
    )
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    caplog.set_level("DEBUG", logger="urllib3")
    for i in range(10):
        with open(empty, "rb") as f:
            r = s3.put_object(Bucket=bucket, Key=f"boto-empty-{i}", Body=f)
        assert r["ResponseMetadata"]["RetryAttempts"] == 0
        # A file body of any size carries the header; one with content after
        # empty ones proves the connection's state is clean.
        r = s3.put_object(Bucket=bucket, Key=f"boto-small-{i}", Body=io.BytesIO(b"x" * (i + 1)))
        assert r["ResponseMetadata"]["RetryAttempts"] == 0
    assert _connections_opened(caplog.text) == 1, caplog.text[-2000:]
    for i in range(10):
        assert s3.get_object(Bucket=bucket, Key=f"boto-empty-{i}")["Body"].read() == b""


@pytest.mark.parametrize("length", [0, 1024])
def test_refused_expect_put_still_closes(node, admin_key, bucket, length):
    """A refusal sent before the body is read closes the connection: the
    client may still be about to send a body the server will not read."""
    bad = type(admin_key)(admin_key.id, "x" * len(admin_key.secret))
    payload = EMPTY_SHA256 if length == 0 else "UNSIGNED-PAYLOAD"
    req = _head(node, bad, "PUT", bucket, "refused", {"content-length": str(length), "expect": "100-continue"}, payload)
    with socket.create_connection(("127.0.0.1", node.s3_port), timeout=10) as sock:
        sock.sendall(req)
        buf = bytearray()
        head, _ = _read_answer(sock, buf)
        if head == CONTINUE:
            head, _ = _read_answer(sock, buf)
        assert head.startswith(b"HTTP/1.1 403 "), head
        assert b"connection: close" in head.lower(), head
