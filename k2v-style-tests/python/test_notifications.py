"""Bucket notifications (AWS S3 API reference,
PutBucketNotificationConfiguration / GetBucketNotificationConfiguration;
AWS S3 User Guide, "Event notification types and destinations" and
"Event message structure") delivered to a real HTTP receiver configured
as a `[[notify_webhook]]`: the configuration's checks, every acknowledged
PUT and DELETE producing its event with S3's fields, a target down and
back, a node killed with events waiting, and on three nodes each event
delivered once while they are all up, and still delivered with a node
killed."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, bucket_name, error_code, free_port, metric, s3_client, wait_port
from cluster_testlib import key_of, laid_out_cluster

TOKEN = "notify-test-token"
HMAC_SECRET = "notify-hmac-secret"


class Receiver:
    """An HTTP server on loopback that records each POSTed event message,
    or answers 503 while `down`."""

    def __init__(self):
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
                    want = "sha256=" + hmac.new(HMAC_SECRET.encode(), body, hashlib.sha256).hexdigest()
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


def with_webhook(n: Node, port: int) -> Node:
    n.config.write_text(n.config.read_text() + f"""
[[notify_webhook]]
id = "hook"
endpoint = "http://127.0.0.1:{port}/events"
auth_token = "{TOKEN}"
hmac_secret = "{HMAC_SECRET}"
""")
    return n


ARN = "arn:hangar:sqs::hook:webhook"
REDIS_ARN = "arn:hangar:sqs::stream:redis"
NATS_ARN = "arn:hangar:sqs::jet:nats"
AMQP_ARN = "arn:hangar:sqs::rabbit:amqp"
RABBITMQ = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class Rabbit:
    """A real RabbitMQ broker (Debian's rabbitmq-server) on a port of its
    own, its data in a directory that survives its restart, and a durable
    queue hangar-events."""

    def __init__(self, root):
        self.root = root
        self.port = free_port()
        self.name = f"hangartest{self.port}@localhost"
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

    def take_all(self) -> list[tuple[str, dict]]:
        out = []
        with self.channel() as ch:
            while True:
                method, props, body = ch.basic_get("hangar-events", auto_ack=True)
                if method is None:
                    return out
                out.append((props.headers.get("Hangar-Event"), json.loads(body)))


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

    def entries(self, stream: str) -> list[dict]:
        import redis
        r = redis.Redis(port=self.port)
        try:
            return [{k.decode(): v.decode() for k, v in fields.items()}
                    for _, fields in r.xrange(stream)]
        finally:
            r.close()


def config(prefix: str = "in/") -> dict:
    return {"QueueConfigurations": [
        {"Id": "created", "QueueArn": ARN, "Events": ["s3:ObjectCreated:*"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix},
                                            {"Name": "suffix", "Value": ".txt"}]}}},
        {"Id": "removed", "QueueArn": ARN, "Events": ["s3:ObjectRemoved:*"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}},
    ]}


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: run script/install-test-deps")
    r = Redis(tmp_path_factory.mktemp("redis"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory):
    if shutil.which("nats-server") is None:
        pytest.fail("nats-server is missing: run script/install-test-deps")
    n = Nats(tmp_path_factory.mktemp("nats"))
    yield n
    n.stop()


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    if not os.path.exists(RABBITMQ):
        pytest.fail("rabbitmq-server is missing: run script/install-test-deps")
    r = Rabbit(tmp_path_factory.mktemp("rabbit"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def hooked(tmp_path_factory, receiver, redis_server, nats_server, rabbit):
    n = with_webhook(Node(tmp_path_factory.mktemp("notify")), receiver.port)
    n.config.write_text(n.config.read_text() + f"""
[[notify_redis]]
id = "stream"
address = "redis://127.0.0.1:{redis_server.port}"
stream = "hangar-events"

[[notify_nats]]
id = "jet"
address = "nats://127.0.0.1:{nats_server.port}"
subject = "hangar.events"

[[notify_amqp]]
id = "rabbit"
address = "amqp://guest:guest@127.0.0.1:{rabbit.port}/%2f"
routing_key = "hangar-events"
""")
    n.start()
    yield n
    n.stop()


def test_configurations_are_checked_and_read_back(hooked):
    s3 = s3_client(hooked, hooked.create_key("cfg", create_bucket=True))
    b = bucket_name("notify-cfg")
    s3.create_bucket(Bucket=b)
    assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=config())
    got = s3.get_bucket_notification_configuration(Bucket=b)
    assert got["QueueConfigurations"] == config()["QueueConfigurations"]
    refused = [
        # A destination the operator did not configure.
        ({"QueueConfigurations": [{"QueueArn": "arn:hangar:sqs::nope:webhook",
                                   "Events": ["s3:ObjectCreated:*"]}]}, "InvalidArgument"),
        ({"QueueConfigurations": [{"QueueArn": ARN, "Events": ["s3:NoSuchEvent"]}]},
         "InvalidArgument"),
        # Two rules for the same event of the same keys.
        ({"QueueConfigurations": [{"QueueArn": ARN, "Events": ["s3:ObjectCreated:*"]},
                                  {"QueueArn": ARN, "Events": ["s3:ObjectCreated:Put"]}]},
         "InvalidArgument"),
        # Hangar cannot tell a copy from a PUT: refused, not silently unsent.
        ({"QueueConfigurations": [{"QueueArn": ARN, "Events": ["s3:ObjectCreated:Copy"]}]},
         "NotImplemented"),
    ]
    for cfg, code in refused:
        with pytest.raises(ClientError) as e:
            s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=cfg)
        assert error_code(e.value) == code, cfg
    assert s3.get_bucket_notification_configuration(Bucket=b)["QueueConfigurations"] == \
        config()["QueueConfigurations"]
    # Another key may not read or change it (owner permission).
    other = s3_client(hooked, hooked.create_key("cfg-other"))
    with pytest.raises(ClientError) as e:
        other.get_bucket_notification_configuration(Bucket=b)
    assert error_code(e.value) == "AccessDenied"
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={})
    assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket=b)


def test_every_acknowledged_write_is_delivered_with_s3s_fields(hooked, receiver):
    s3 = s3_client(hooked, hooked.create_key("events", create_bucket=True))
    b = bucket_name("notify-ev")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=config())
    put1 = s3.put_object(Bucket=b, Key="in/a b.txt", Body=b"one")
    s3.put_object(Bucket=b, Key="in/a b.txt", Body=b"two!")
    s3.put_object(Bucket=b, Key="in/skip.bin", Body=b"suffix does not match")
    s3.put_object(Bucket=b, Key="out/skip.txt", Body=b"prefix does not match")
    up = s3.create_multipart_upload(Bucket=b, Key="in/m.txt")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="in/m.txt", UploadId=up, PartNumber=1, Body=b"m" * 100)
    s3.complete_multipart_upload(Bucket=b, Key="in/m.txt", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    s3.delete_object(Bucket=b, Key="in/a b.txt")
    want = [("ObjectCreated:Put", "in/a+b.txt"), ("ObjectCreated:Put", "in/a+b.txt"),
            ("ObjectCreated:CompleteMultipartUpload", "in/m.txt"),
            ("ObjectRemoved:Delete", "in/a+b.txt")]
    mine = lambda: [e for e in receiver.events if e["s3"]["bucket"]["name"] == b]  # noqa: E731
    wait_until(lambda: len(mine()) >= len(want), 20, f"{len(want)} events of {b}")
    time.sleep(1)
    events = mine()
    assert sorted((e["eventName"], e["s3"]["object"]["key"]) for e in events) == sorted(want)
    first = events[0]
    assert first["eventVersion"] == "2.1" and first["eventSource"] == "aws:s3"
    assert first["awsRegion"] == hooked.region
    assert first["s3"]["s3SchemaVersion"] == "1.0"
    assert first["s3"]["configurationId"] == "created"
    assert first["s3"]["bucket"]["arn"] == f"arn:aws:s3:::{b}"
    assert first["s3"]["object"]["size"] == 3
    assert first["s3"]["object"]["eTag"] == put1["ETag"].strip('"')
    assert "versionId" not in first["s3"]["object"]
    assert first["eventTime"].endswith("Z")
    # A key's events arrive in the order of their sequencer.
    seqs = [e["s3"]["object"]["sequencer"] for e in events if e["s3"]["object"]["key"] == "in/a+b.txt"]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert receiver.auth == {f"Bearer {TOKEN}"}
    assert receiver.bad_signatures == 0


def test_versioned_buckets_name_the_version_of_each_event(hooked, receiver):
    s3 = s3_client(hooked, hooked.create_key("versions", create_bucket=True))
    b = bucket_name("notify-ver")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=config())
    put = s3.put_object(Bucket=b, Key="in/v.txt", Body=b"v1")
    marker = s3.delete_object(Bucket=b, Key="in/v.txt")
    mine = lambda: [e for e in receiver.events if e["s3"]["bucket"]["name"] == b]  # noqa: E731
    wait_until(lambda: len(mine()) >= 2, 20, "2 events")
    got = {e["eventName"]: e["s3"]["object"].get("versionId") for e in mine()}
    assert got == {"ObjectCreated:Put": put["VersionId"],
                   "ObjectRemoved:DeleteMarkerCreated": marker["VersionId"]}


def test_a_target_down_then_back_and_a_node_killed_lose_no_event(hooked, receiver):
    s3 = s3_client(hooked, hooked.create_key("down", create_bucket=True))
    b = bucket_name("notify-down")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=config())
    receiver.down = True
    try:
        attempts = receiver.attempts
        keys = [f"in/k{i}.txt" for i in range(20)]
        for k in keys[:10]:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: receiver.attempts > attempts, 10, "a delivery attempt")
        assert metric(hooked, "hangar_notify_queued") >= 10
        assert metric(hooked, "hangar_notify_failures_total") >= 1
        worker = {w["name"]: w for w in hooked.cli_json("worker", "list")}["notifications"]
        assert worker["queue_length"] >= 10 and worker["errors"] >= 1 and worker["last_error"], worker
        # Killed with its events waiting: they are on disk.
        for k in keys[10:]:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        hooked.kill9()
        hooked.start()
    finally:
        receiver.down = False
    got = lambda: {k for n, k in receiver.names() if n == "ObjectCreated:Put" and k.startswith("in/k")}  # noqa: E731
    wait_until(lambda: got() >= set(keys), 90, "every event of the writes made while the target was down")
    wait_until(lambda: metric(hooked, "hangar_notify_queued") == 0, 10, "an empty queue")


def test_three_nodes_deliver_each_event_once_and_survive_a_kill(tmp_path_factory):
    r = Receiver()
    nodes = laid_out_cluster(tmp_path_factory, "ntf", configure=lambda n: with_webhook(n, r.port))
    try:
        info = nodes[0].cli_json("key", "create", "ntf")
        nodes[0].cli("key", "allow", info["access_key_id"], "--create-bucket")
        key = key_of(info)
        clients = [s3_client(n, key) for n in nodes]
        b = bucket_name("notify-3")
        clients[0].create_bucket(Bucket=b)
        clients[0].put_bucket_notification_configuration(Bucket=b, NotificationConfiguration=config())
        keys = [f"in/{i}.txt" for i in range(30)]
        for i, k in enumerate(keys):
            clients[i % 3].put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: {k for _, k in r.names()} >= set(keys), 30, "30 events")
        time.sleep(3)
        # All up: one delivery per event, not one per replica.
        assert sorted(k for _, k in r.names()) == sorted(keys)
        sent = [metric(n, "hangar_notify_delivered_total") for n in nodes]
        assert sorted(sent) == [0, 0, 30], sent
        # The sender killed: the writes made meanwhile are delivered all the
        # same, by another replica once the sender has been down for the
        # takeover delay; duplicates allowed.
        sender = sent.index(30)
        nodes[sender].kill9()
        others = [c for i, c in enumerate(clients) if i != sender]
        more = [f"in/more{i}.txt" for i in range(10)]
        for i, k in enumerate(more):
            others[i % 2].put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: {k for _, k in r.names()} >= set(more), 90, "the events written with the sender down")
        nodes[sender].start()
    finally:
        for n in nodes:
            n.stop()
        r.close()


def test_a_redis_stream_gets_every_event_through_a_broker_restart(hooked, redis_server):
    s3 = s3_client(hooked, hooked.create_key("redis", create_bucket=True))
    b = bucket_name("notify-redis")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={
        "QueueConfigurations": [{"Id": "to-redis", "QueueArn": REDIS_ARN,
                                 "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
    mine = lambda: [e for e in redis_server.entries("hangar-events") if e["key"].startswith(b + "/")]  # noqa: E731
    s3.put_object(Bucket=b, Key="first.txt", Body=b"1")
    s3.delete_object(Bucket=b, Key="first.txt")
    wait_until(lambda: len(mine()) >= 2, 20, "2 stream entries")
    first = mine()
    assert [e["event"] for e in first] == ["s3:ObjectCreated:Put", "s3:ObjectRemoved:Delete"]
    record = json.loads(first[0]["records"])["Records"][0]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["configurationId"] == "to-redis"
    assert record["s3"]["object"]["key"] == "first.txt"
    # The broker down: writes are acknowledged all the same, and their
    # events reach the stream once it is back.
    failures = metric(hooked, "hangar_notify_failures_total")
    redis_server.stop()
    try:
        keys = [f"while-down-{i}.txt" for i in range(10)]
        for k in keys:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: metric(hooked, "hangar_notify_failures_total") > failures, 10, "a failed XADD")
    finally:
        redis_server.start()
    wait_until(lambda: {e["key"] for e in mine()} >= {f"{b}/{k}" for k in keys}, 60,
               "every event written while the broker was down")


def test_a_nats_jetstream_gets_every_event_through_a_server_restart(hooked, nats_server):
    s3 = s3_client(hooked, hooked.create_key("nats", create_bucket=True))
    b = bucket_name("notify-nats")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={
        "TopicConfigurations": [{"Id": "to-nats", "TopicArn": NATS_ARN,
                                 "Events": ["s3:ObjectCreated:*"]}]})
    got = lambda: [(h, m["Records"][0]) for h, m in nats_server.messages()  # noqa: E731
                   if m["Records"][0]["s3"]["bucket"]["name"] == b]
    s3.put_object(Bucket=b, Key="first.txt", Body=b"1")
    wait_until(lambda: len(got()) >= 1, 20, "a JetStream message")
    header, record = got()[0]
    assert header == "s3:ObjectCreated:Put" and record["s3"]["configurationId"] == "to-nats"
    failures = metric(hooked, "hangar_notify_failures_total")
    nats_server.stop()
    try:
        keys = [f"while-down-{i}.txt" for i in range(10)]
        for k in keys:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: metric(hooked, "hangar_notify_failures_total") > failures, 15, "a failed publish")
    finally:
        nats_server.start()
    wait_until(lambda: {r["s3"]["object"]["key"] for _, r in got()} >= set(keys), 60,
               "every event written while the server was down")


def test_a_rabbitmq_queue_gets_every_event_through_a_broker_restart(hooked, rabbit):
    s3 = s3_client(hooked, hooked.create_key("amqp", create_bucket=True))
    b = bucket_name("notify-amqp")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={
        "QueueConfigurations": [{"Id": "to-amqp", "QueueArn": AMQP_ARN,
                                 "Events": ["s3:ObjectCreated:*"]}]})
    taken: list[tuple[str, dict]] = []
    got = lambda: [r for _, m in taken for r in m["Records"]  # noqa: E731
                   if r["s3"]["bucket"]["name"] == b]

    def take():
        taken.extend(rabbit.take_all())
        return got()

    s3.put_object(Bucket=b, Key="first.txt", Body=b"1")
    wait_until(lambda: len(take()) >= 1, 20, "an AMQP message")
    assert taken[-1][0] == "s3:ObjectCreated:Put"
    assert got()[0]["s3"]["configurationId"] == "to-amqp"
    failures = metric(hooked, "hangar_notify_failures_total")
    rabbit.stop()
    try:
        keys = [f"while-down-{i}.txt" for i in range(10)]
        for k in keys:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: metric(hooked, "hangar_notify_failures_total") > failures, 15, "a failed publish")
    finally:
        rabbit.start()
    wait_until(lambda: {r["s3"]["object"]["key"] for r in take()} >= set(keys), 90,
               "every event written while the broker was down")
