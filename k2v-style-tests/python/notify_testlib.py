"""The receivers of bucket notifications for test_notifications.py: an
HTTP server that records each POSTed event message (`Receiver`), and real
brokers started on loopback ports of their own — redis-server (`Redis`),
nats-server with JetStream (`Nats`) and RabbitMQ (`Rabbit`) — each
restartable with what it took kept, and each answering `messages()`: the
(event name, S3 event message) pairs it received, in order. It holds no
tests itself."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hangar_testlib import free_port, wait_port

RABBITMQ = "/usr/lib/rabbitmq/bin/rabbitmq-server"


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


class Receiver:
    """An HTTP server on loopback that records each POSTed event message,
    checking its signature under `hmac_secret`, or answers 503 while
    `down`."""

    def __init__(self, hmac_secret: str):
        self.events: list[dict] = []
        self.auth: set[str] = set()
        self.bad_signatures = 0
        self.down = False
        self.attempts = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.attempts += 1
                    if receiver.down:
                        self.send_response(503)
                        self.end_headers()
                        return
                    receiver.auth.add(self.headers.get("Authorization", ""))
                    want = "sha256=" + hmac.new(hmac_secret.encode(), body, hashlib.sha256).hexdigest()
                    if self.headers.get("X-Hangar-Signature") != want:
                        receiver.bad_signatures += 1
                    receiver.events.extend(json.loads(body)["Records"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def names(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(e["eventName"], e["s3"]["object"]["key"]) for e in self.events]

    def close(self):
        self.server.shutdown()


class Rabbit:
    """A real RabbitMQ broker (Debian's rabbitmq-server) on a port of its
    own, its data in a directory that survives its restart, and a durable
    queue hangar-events."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.name = f"hangartest{self.port}@localhost"
        self.taken: list[tuple[str, dict]] = []
        self.proc = None
        self.start()
        with self.channel() as ch:
            ch.queue_declare("hangar-events", durable=True)

    def start(self):
        env = dict(os.environ, HOME=str(self.root), RABBITMQ_NODE_PORT=str(self.port),
                   RABBITMQ_DIST_PORT=str(free_port()), RABBITMQ_NODENAME=self.name,
                   RABBITMQ_MNESIA_BASE=str(self.root / "mnesia"),
                   RABBITMQ_LOG_BASE=str(self.root / "log"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(self.root / "plugins"),
                   RABBITMQ_CONFIG_FILE=str(self.root / "none"))
        self.proc = subprocess.Popen([RABBITMQ], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(self.port, self.proc, 60)

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)

    @contextlib.contextmanager
    def channel(self):
        import pika
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        try:
            yield conn.channel()
        finally:
            conn.close()

    def messages(self) -> list[tuple[str, dict]]:
        """Every message the queue hangar-events held (taken from it, and
        kept here): its `Hangar-Event` header and its body."""
        with self.channel() as ch:
            while True:
                method, props, body = ch.basic_get("hangar-events", auto_ack=True)
                if method is None:
                    return list(self.taken)
                self.taken.append((props.headers.get("Hangar-Event"), json.loads(body)))


class Nats:
    """A real nats-server on loopback with JetStream on a store directory
    (so that its stream survives its restart), and a stream HANGAR taking
    the subject hangar.events."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.proc = None
        self.start()
        self.run(self._add_stream)

    def start(self):
        self.proc = subprocess.Popen(
            ["nats-server", "-js", "-sd", str(self.root), "-a", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, 20)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)

    def run(self, job):
        import asyncio

        import nats

        async def go():
            nc = await nats.connect(f"nats://127.0.0.1:{self.port}")
            try:
                return await job(nc.jetstream())
            finally:
                await nc.close()
        return asyncio.run(go())

    @staticmethod
    async def _add_stream(js):
        await js.add_stream(name="HANGAR", subjects=["hangar.events"])

    def messages(self) -> list[tuple[str, dict]]:
        async def read(js):
            info = await js.stream_info("HANGAR")
            out = []
            if info.state.messages == 0:
                return out
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                m = await js.get_msg("HANGAR", seq)
                out.append((m.headers.get("Hangar-Event"), json.loads(m.data)))
            return out
        return self.run(read)


class Redis:
    """A real redis-server on loopback, with an append-only file so that
    what it took survives its restart."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root),
             "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, 20)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)

    def messages(self) -> list[tuple[str, dict]]:
        """Every entry of the stream hangar-events: its `event` field and
        its `records` message, after checking its `key` field."""
        import redis
        r = redis.Redis(port=self.port)
        try:
            out = []
            for _, fields in r.xrange("hangar-events"):
                f = {k.decode(): v.decode() for k, v in fields.items()}
                message = json.loads(f["records"])
                rec = message["Records"][0]
                assert f["key"] == f'{rec["s3"]["bucket"]["name"]}/{rec["s3"]["object"]["key"]}', f
                out.append((f["event"], message))
            return out
        finally:
            r.close()
