"""Slow and idle clients cannot take the S3 endpoint from everyone else.

An attacker opens more connections than the node serves and sends half a
request head on each (slowloris): at the limit the connection that has
waited longest for its head is closed to make room, so a well-behaved
client is served at once, and the others are closed once the header
timeout passes. Only when every connection is inside a request does one
more get `503 SlowDown` at once. A client that stops sending a body half way is cut off
after the idle timeout, and one that sends nothing after connecting after
the header timeout."""

from __future__ import annotations

import json
import socket
import time

import pytest

from hangar_testlib import Node, s3_client, sign_v4


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("slow"))
    n.config.write_text(
        "s3_max_connections = 50\ns3_header_timeout_msec = 2000\ns3_idle_timeout_msec = 2000\n"
        + n.config.read_text()
    )
    n.start()
    key = n.create_key("slow", create_bucket=True)
    s3_client(n, key).create_bucket(Bucket="slow")
    yield n, key
    n.stop()


def half_open(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return s


def closed_within(s: socket.socket, limit: float, got: list | None = None) -> float | None:
    """Seconds until the server closes `s` (reads EOF or a reset), or None;
    what it sent before is appended to `got`."""
    s.settimeout(limit)
    t0 = time.monotonic()
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return time.monotonic() - t0
            if got is not None:
                got.append(data)
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - t0
    except socket.timeout:
        return None


def plain_get(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1])


def test_a_slowloris_flood_makes_room_and_is_cleared(small):
    n, _ = small
    port = n.s3_port
    # A normal request works (403: anonymous; what matters is an answer).
    assert plain_get(port) in (200, 403)
    # The server gives the request's connection slot back just after it
    # closes the socket: let it, so the flood fills exactly the 50 slots.
    time.sleep(0.5)
    flood = [half_open(port) for _ in range(50)]
    time.sleep(0.2)
    # Past the limit the connection that has waited longest for its head
    # (the flood's first) is closed to make room, and the newcomer served.
    t0 = time.monotonic()
    assert plain_get(port) in (200, 403)
    assert time.monotonic() - t0 < 1.0
    assert closed_within(flood[0], 1) is not None
    # The other half-open connections are closed once the header timeout
    # passed.
    waits = [closed_within(s, 6) for s in flood[1:]]
    assert all(w is not None for w in waits), waits
    assert max(waits) < 5, max(waits)
    for s in flood:
        s.close()
    # And a well-behaved client is served again.
    assert plain_get(port) in (200, 403)


def stalled_put(n: Node, key, name: str) -> socket.socket:
    """A signed PUT announcing 1 000 000 bytes that sends 1000 of them."""
    host = f"127.0.0.1:{n.s3_port}"
    signed = sign_v4("PUT", host, f"/slow/{name}", [], {"content-length": "1000000"},
                     "UNSIGNED-PAYLOAD", key)
    head = f"PUT /slow/{name} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in signed.headers.items())
    s = socket.create_connection(("127.0.0.1", n.s3_port), timeout=10)
    s.sendall(head.encode() + b"\r\n" + b"x" * 1000)
    return s


def test_with_every_connection_inside_a_request_one_more_gets_503(small):
    n, key = small
    time.sleep(0.5)
    busy = [stalled_put(n, key, f"busy{i}") for i in range(50)]
    time.sleep(0.5)
    # No connection waits for a head: nothing to close, so the newcomer is
    # answered 503 SlowDown at once and closed.
    extra = socket.create_connection(("127.0.0.1", n.s3_port), timeout=5)
    t0 = time.monotonic()
    head = extra.recv(4096)
    took = time.monotonic() - t0
    assert head.startswith(b"HTTP/1.1 503"), head
    assert b"SlowDown" in head and b"Retry-After: 1" in head, head
    assert took < 1.0, took
    extra.close()
    # The stalled bodies are cut off after the idle timeout.
    waits = [closed_within(s, 6) for s in busy]
    assert all(w is not None for w in waits), waits
    for s in busy:
        s.close()
    assert plain_get(n.s3_port) in (200, 403)


def test_a_body_that_stops_half_way_is_cut_off(small):
    """A signed PUT (so the server waits for its body) whose client sends
    1000 of the announced 1 000 000 bytes, then nothing."""
    n, key = small
    s = stalled_put(n, key, "stalled")
    got: list[bytes] = []
    took = closed_within(s, 8, got)
    s.close()
    assert took is not None and 1.5 < took < 6, (took, got)
    # Nothing was stored.
    with pytest.raises(Exception):
        s3_client(n, key).head_object(Bucket="slow", Key="stalled")


def test_a_connection_that_sends_nothing_is_closed(small):
    n, _ = small
    s = socket.create_connection(("127.0.0.1", n.s3_port), timeout=10)
    took = closed_within(s, 8)
    s.close()
    assert took is not None and 1.5 < took < 6, took


# ---------------------------------------------------------------- admin endpoint


@pytest.fixture(scope="module")
def small_admin(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("slow-admin"))
    n.config.write_text(
        "admin_max_connections = 20\nadmin_header_timeout_msec = 2000\nadmin_idle_timeout_msec = 2000\n"
        + n.config.read_text() + 'admin_token = "slow-admin-token"\n'
    )
    n.start()
    yield n
    n.stop()


def health_status(port: int) -> int:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1])


def test_the_admin_endpoint_refuses_a_slowloris_flood_and_recovers(small_admin):
    port = small_admin.admin_port
    assert health_status(port) == 200
    time.sleep(0.5)  # as in test_a_slowloris_flood_is_refused_and_cleared
    flood = [half_open(port) for _ in range(20)]
    time.sleep(0.2)
    extra = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.monotonic()
    head = extra.recv(4096)
    took = time.monotonic() - t0
    assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head, head
    assert took < 1.0, took
    extra.close()
    waits = [closed_within(s, 6) for s in flood]
    assert all(w is not None for w in waits), waits
    assert max(waits) < 5, max(waits)
    for s in flood:
        s.close()
    assert health_status(port) == 200


def test_an_admin_body_that_stops_half_way_is_cut_off(small_admin):
    port = small_admin.admin_port
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /v2/CreateKey HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer slow-admin-token\r\n"
              b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\": \"")
    took = closed_within(s, 8)
    s.close()
    assert took is not None and 1.5 < took < 6, took
    keys = json.loads(small_admin.cli("key", "list", "--json").stdout)
    assert keys == [], keys


def test_an_admin_connection_that_sends_nothing_is_closed(small_admin):
    s = socket.create_connection(("127.0.0.1", small_admin.admin_port), timeout=10)
    took = closed_within(s, 8)
    s.close()
    assert took is not None and 1.5 < took < 6, took
