"""Nothing is buffered before it is authorised, and no client takes every
connection (issue 27, section 3).

One node of its own (so its RSS is this module's doing) with a private
bucket, a small connection limit (300), a per-address limit (100) and a
short header deadline (3 s). Hostile clients come from their own loopback
addresses (127.0.0.2 and up) and the well-behaved one from 127.0.0.1:

- anonymous browser-form POSTs announcing a 60 MiB file to the private
  bucket are answered `403 AccessDenied` once their form fields are read,
  without the node reading their file part (before: the node read and held
  up to 64 MiB of each, and answered only once it had all of it);
- anonymous XML bodies (DeleteObjects) to a missing bucket or to a private
  bucket with a policy are answered before they are read (before: read up
  to 20 MiB, then answered); authorised ones are read 256 MiB at most at
  once on the node, the others answered `503 SlowDown` unread;
- with the node's connection slots full of half-sent request heads, a
  signed request is still served in under a second (before: `503` until
  the stalled heads timed out), and every stalled connection is closed
  within the header deadline;
- one address holds at most its share of the connections;
- the node raises its open-file limit to what its connection limit needs
  and refuses to start, naming the setting, when it cannot."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import time

import pytest

from hangar_testlib import HANGAR_BIN, Node, s3_client, sign_v4

MiB = 1 << 20
MAX_CONNECTIONS = 300
PER_ADDRESS = 100
HEADER_TIMEOUT = 3.0
# RSS growth allowed while each attack's connections are open, in MiB.
RSS_BOUND_MIB = 64


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("unauthorised"))
    n.config.write_text(
        f"s3_max_connections = {MAX_CONNECTIONS}\n"
        f"s3_max_connections_per_address = {PER_ADDRESS}\n"
        f"s3_header_timeout_msec = {int(HEADER_TIMEOUT * 1000)}\n"
        + n.config.read_text()
    )
    n.start()
    key = n.create_key("owner", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="private")
    s3.create_bucket(Bucket="withpolicy")
    s3.put_bucket_policy(
        Bucket="withpolicy",
        Policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"AWS": [key.id]},
                "Action": "s3:DeleteObject",
                "Resource": "arn:aws:s3:::withpolicy/*",
            }],
        }),
    )
    yield n, key, s3
    assert n.proc.poll() is None, "the node died"
    n.stop()


def rss_mib(node: Node) -> float:
    for line in open(f"/proc/{node.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def connect(port: int, source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def push(s: socket.socket, data: bytes) -> int:
    """Sends what the kernel takes of `data` without waiting; returns it."""
    s.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += s.send(data[sent:sent + 256 * 1024])
    except (BlockingIOError, ConnectionResetError, BrokenPipeError):
        pass
    s.settimeout(5)
    return sent


def answer(s: socket.socket, deadline: float) -> tuple[int | None, bytes]:
    """The status and body the server sent by `deadline` (time.monotonic();
    None: none)."""
    got = b""
    try:
        while True:
            s.settimeout(max(0.05, deadline - time.monotonic()))
            data = s.recv(65536)
            if not data:
                break
            got += data
            if b"\r\n\r\n" in got and b"</Error>" in got or time.monotonic() > deadline:
                break
    except (socket.timeout, ConnectionResetError, BlockingIOError):
        pass
    if not got.startswith(b"HTTP/1.1 "):
        return None, got
    return int(got.split(b" ", 2)[1]), got


def anonymous_post_head(port: int, bucket: str, file_len: int) -> tuple[bytes, bytes]:
    """The head and form fields (up to the file's content) of an anonymous
    browser POST whose file part announces `file_len` bytes."""
    boundary = "----hostileboundary"
    fields = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nstolen\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    head = (
        f"POST /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(fields) + file_len + len(tail)}\r\n\r\n"
    ).encode()
    return head, fields


def test_an_anonymous_post_is_refused_before_its_file_is_read(guarded):
    n, _, s3 = guarded
    port = n.s3_port
    before = rss_mib(n)
    head, fields = anonymous_post_head(port, "private", 60 * MiB)
    chunk = b"x" * (4 * MiB)
    conns = []
    t0 = time.monotonic()
    for i in range(80):
        s = connect(port, "127.0.0.2")
        s.sendall(head + fields)
        push(s, chunk)
        conns.append(s)
    grown = rss_mib(n) - before
    statuses = []
    deadline = time.monotonic() + 5
    for s in conns:
        status, body = answer(s, deadline)
        statuses.append((status, b"AccessDenied" in body))
        s.close()
    took = time.monotonic() - t0
    assert statuses == [(403, True)] * len(conns), statuses[:5]
    assert grown < RSS_BOUND_MIB, f"RSS grew by {grown:.0f} MiB"
    assert took < 20
    assert "Contents" not in s3.list_objects_v2(Bucket="private")


def test_a_v2_signed_post_is_refused_before_its_file_is_read(guarded):
    """Signature V2 is refused by default: a V2 form from the bucket's owner
    gets `400 InvalidRequest` once its fields are read, not after s3s has
    read its file."""
    import base64
    import hashlib
    import hmac

    n, key, _ = guarded
    port = n.s3_port
    policy = base64.b64encode(json.dumps({
        "expiration": "2099-01-01T00:00:00.000Z",
        "conditions": [{"bucket": "private"}, ["starts-with", "$key", ""]],
    }).encode()).decode()
    sig = base64.b64encode(hmac.new(key.secret.encode(), policy.encode(), hashlib.sha1).digest()).decode()
    b = "----v2boundary"
    fields = "".join(
        f"--{b}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
        for k, v in [("key", "v2"), ("AWSAccessKeyId", key.id), ("policy", policy), ("signature", sig)]
    ) + f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n"
    head = (f"POST /private HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: multipart/form-data; boundary={b}\r\n"
            f"Content-Length: {len(fields) + 60 * MiB}\r\n\r\n")
    s = connect(port, "127.0.0.7")
    s.sendall(head.encode() + fields.encode())
    push(s, b"x" * MiB)
    status, body = answer(s, time.monotonic() + 5)
    s.close()
    assert (status, b"InvalidRequest" in body) == (400, True), body[:300]


@pytest.mark.parametrize("bucket,status,code", [
    ("missing-bucket", 404, b"NoSuchBucket"),
    ("withpolicy", 403, b"AccessDenied"),
])
def test_anonymous_xml_is_refused_before_it_is_read(guarded, bucket, status, code):
    n, _, _ = guarded
    port = n.s3_port
    before = rss_mib(n)
    head = (
        f"POST /{bucket}?delete HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {20 * MiB - 1}\r\n\r\n<Delete>"
    ).encode()
    chunk = b"<Object><Key>k</Key></Object>" * (2 * MiB // 29)
    conns = []
    for _ in range(60):
        s = connect(port, "127.0.0.5")
        s.sendall(head)
        push(s, chunk)
        conns.append(s)
    grown = rss_mib(n) - before
    got = []
    deadline = time.monotonic() + 5
    for s in conns:
        st, body = answer(s, deadline)
        got.append((st, code in body))
        s.close()
    assert got == [(status, True)] * len(conns), got[:5]
    assert grown < RSS_BOUND_MIB, f"RSS grew by {grown:.0f} MiB"


def test_authorised_xml_bodies_are_bounded_in_total(guarded):
    """Signed DeleteObjects announcing 20 MiB each: the node reads at most
    256 MiB of such bodies at once (12 of them); the others are answered
    `503 SlowDown` before their body is read."""
    n, key, _ = guarded
    port = n.s3_port
    host = f"127.0.0.1:{port}"
    length = 20 * MiB - 1
    conns = []
    for i in range(20):
        sig = sign_v4("POST", host, "/private", [("delete", "")],
                      {"content-length": str(length)}, "UNSIGNED-PAYLOAD", key)
        head = "POST /private?delete= HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in sig.headers.items())
        s = connect(port, "127.0.0.6")
        s.sendall(head.encode() + b"\r\n<Delete>")
        push(s, b"<Object><Key>k</Key></Object>" * (MiB // 29))
        conns.append(s)
    deadline = time.monotonic() + 3
    got = [answer(s, deadline) for s in conns]
    refused = [st for st, body in got if st == 503 and b"SlowDown" in body]
    pending = [st for st, _ in got if st is None]
    assert (len(refused), len(pending)) == (8, 12), [st for st, _ in got]
    for s in conns:
        s.close()


def half_head(port: int, source: str) -> socket.socket:
    s = connect(port, source)
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return s


def closed(s: socket.socket) -> bool:
    """Whether the server closed `s` (EOF or reset, possibly after a 503)."""
    s.setblocking(False)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        s.settimeout(5)


def test_slow_heads_and_bodies_keep_rss_bounded_and_a_client_served(guarded):
    """150 half heads and 100 signed PUTs announcing 60 MiB that stall after
    64 KiB, held together: the node's RSS grows under 64 MiB and a signed
    client is served in under a second meanwhile."""
    n, key, s3 = guarded
    port = n.s3_port
    host = f"127.0.0.1:{port}"
    before = rss_mib(n)
    conns = [half_head(port, f"127.0.3.{1 + i % 50}") for i in range(150)]
    for i in range(100):
        sig = sign_v4("PUT", host, f"/private/slow{i}", [], {"content-length": str(60 * MiB)},
                      "UNSIGNED-PAYLOAD", key)
        head = f"PUT /private/slow{i} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in sig.headers.items())
        s = connect(port, f"127.0.4.{1 + i % 50}")
        s.sendall(head.encode() + b"\r\n")
        push(s, b"b" * (64 * 1024))
        conns.append(s)
    time.sleep(1)
    grown = rss_mib(n) - before
    for i in range(3):
        fresh = s3_client(n, key)
        t0 = time.monotonic()
        fresh.put_object(Bucket="private", Key=f"served{i}", Body=b"ok")
        assert fresh.get_object(Bucket="private", Key=f"served{i}")["Body"].read() == b"ok"
        assert time.monotonic() - t0 < 1.0
    assert grown < RSS_BOUND_MIB, f"RSS grew by {grown:.0f} MiB"
    for s in conns:
        s.close()


def test_a_flood_of_half_heads_does_not_lock_a_signed_client_out(guarded):
    n, key, s3 = guarded
    port = n.s3_port
    flood = []
    opened = {}
    # From 100 addresses (4 each: below the per-address limit), more
    # connections than the node serves.
    for i in range(MAX_CONNECTIONS + 100):
        s = half_head(port, f"127.0.1.{1 + i % 100}")
        flood.append(s)
        opened[s] = time.monotonic()
    # The slots are full of stalled heads; a signed client gets in at once.
    for _ in range(3):
        t0 = time.monotonic()
        s3.head_bucket(Bucket="private")
        assert time.monotonic() - t0 < 1.0
        # The flood goes on.
        for i in range(20):
            s = half_head(port, f"127.0.2.{1 + i}")
            flood.append(s)
            opened[s] = time.monotonic()
    # Every stalled connection is closed within the header deadline.
    deadline = time.monotonic() + HEADER_TIMEOUT + 2
    while time.monotonic() < deadline and not all(closed(s) for s in flood):
        time.sleep(0.2)
    left = [s for s in flood if not closed(s)]
    assert not left, f"{len(left)} stalled connections still open"
    for s in flood:
        s.close()


def test_one_address_holds_at_most_its_share(guarded):
    n, _, _ = guarded
    port = n.s3_port
    conns = [half_head(port, "127.0.0.9") for _ in range(PER_ADDRESS + 40)]
    time.sleep(0.5)
    shut = sum(closed(s) for s in conns)
    # The address's oldest stalled heads made room for its newest.
    assert shut >= 40
    assert all(closed(s) for s in conns[:40])
    for s in conns:
        s.close()


def test_the_node_raises_its_open_file_limit_or_refuses_to_start(tmp_path):
    n = Node(tmp_path / "fd")
    # hangar needs a descriptor per connection: started with a soft limit
    # of 256 and 2 000 connections, it raises its own soft limit.
    n.config.write_text("s3_max_connections = 2000\n" + n.config.read_text())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 4096:
        pytest.skip(f"the hard open-file limit is {hard}")

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    proc = subprocess.Popen(
        [str(HANGAR_BIN), "-c", str(n.config), "server"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        preexec_fn=low,
    )
    try:
        deadline = time.monotonic() + 10
        limit = 256
        while time.monotonic() < deadline and proc.poll() is None:
            for line in open(f"/proc/{proc.pid}/limits"):
                if line.startswith("Max open files"):
                    limit = int(line.split()[3])
            if limit > 2000:
                break
            time.sleep(0.1)
        assert limit > 2000, f"soft open-file limit {limit}"
    finally:
        proc.terminate()
        proc.wait(20)
    # More connections than the hard limit allows: it says which setting.
    n.config.write_text(f"s3_max_connections = {hard * 2}\n" + n.config.read_text().split("\n", 1)[1])
    out = subprocess.run(
        [str(HANGAR_BIN), "-c", str(n.config), "server"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )
    assert out.returncode != 0
    assert "s3_max_connections" in out.stdout + out.stderr, out.stdout + out.stderr
