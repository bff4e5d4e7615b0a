"""Bucket notifications (AWS S3 API reference,
PutBucketNotificationConfiguration / GetBucketNotificationConfiguration;
AWS S3 User Guide, "Event notification types and destinations" and
"Event message structure") delivered to a real HTTP receiver
(`[[notify_webhook]]`) and to real brokers (`[[notify_redis]]`,
`[[notify_nats]]`, `[[notify_amqp]]`; notify_testlib.py): the
configuration's checks, every acknowledged PUT and DELETE producing its
event with S3's fields, a target down and back, a node killed with events
waiting, each broker restarted under writes, and on three nodes each
event delivered once while they are all up, and still delivered with the
sender killed."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Node, bucket_name, error_code, metric, s3_client
from cluster_testlib import key_of, laid_out_cluster
from notify_testlib import RABBITMQ, Nats, Rabbit, Receiver, Redis, wait_until

TOKEN = "notify-test-token"
HMAC_SECRET = "notify-hmac-secret"


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


def config(prefix: str = "in/") -> dict:
    return {"QueueConfigurations": [
        {"Id": "created", "QueueArn": ARN, "Events": ["s3:ObjectCreated:*"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix},
                                            {"Name": "suffix", "Value": ".txt"}]}}},
        {"Id": "removed", "QueueArn": ARN, "Events": ["s3:ObjectRemoved:*"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}},
    ]}


@pytest.fixture(scope="module")
def receiver():
    r = Receiver(HMAC_SECRET)
    yield r
    r.close()


def broker(tmp_path_factory, cls, program: str):
    """A started `cls` broker in a fresh directory, stopped afterwards;
    the suite fails (rather than skips) when its `program` is missing."""
    if shutil.which(program) is None and not os.path.exists(program):
        pytest.fail(f"{program} is missing: run script/install-test-deps")
    b = cls(tmp_path_factory.mktemp(cls.__name__.lower()))
    yield b
    b.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    yield from broker(tmp_path_factory, Redis, "redis-server")


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory):
    yield from broker(tmp_path_factory, Nats, "nats-server")


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    yield from broker(tmp_path_factory, Rabbit, RABBITMQ)


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
        assert metric(hooked, 'hangar_notify_failures_total{target="hook"}') >= 1
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
    r = Receiver(HMAC_SECRET)
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
        sent = [metric(n, 'hangar_notify_delivered_total{target="hook"}') for n in nodes]
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


@pytest.mark.parametrize("broker,target", [("redis_server", "stream"), ("nats_server", "jet"),
                                           ("rabbit", "rabbit")])
def test_a_broker_gets_every_event_through_its_restart(request, hooked, broker, target):
    arn = {"stream": REDIS_ARN, "jet": NATS_ARN, "rabbit": AMQP_ARN}[target]
    failed = f'hangar_notify_failures_total{{target="{target}"}}'
    server = request.getfixturevalue(broker)
    s3 = s3_client(hooked, hooked.create_key(f"to-{broker}", create_bucket=True))
    b = bucket_name("notify-broker")
    s3.create_bucket(Bucket=b)
    s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={
        "TopicConfigurations": [{"Id": "to-broker", "TopicArn": arn,
                                 "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})

    def got() -> list[tuple[str, dict]]:
        return [(name, m["Records"][0]) for name, m in server.messages()
                if m["Records"][0]["s3"]["bucket"]["name"] == b]

    s3.put_object(Bucket=b, Key="first.txt", Body=b"1")
    s3.delete_object(Bucket=b, Key="first.txt")
    wait_until(lambda: len(got()) >= 2, 20, "2 messages")
    first = got()
    assert [n for n, _ in first] == ["s3:ObjectCreated:Put", "s3:ObjectRemoved:Delete"]
    assert [r["eventName"] for _, r in first] == ["ObjectCreated:Put", "ObjectRemoved:Delete"]
    assert first[0][1]["s3"]["configurationId"] == "to-broker"
    assert first[0][1]["s3"]["object"]["key"] == "first.txt"
    # The broker down: writes are acknowledged all the same, and their
    # events reach it once it is back.
    failures = metric(hooked, failed)
    server.stop()
    try:
        keys = [f"while-down-{i}.txt" for i in range(10)]
        for k in keys:
            s3.put_object(Bucket=b, Key=k, Body=k.encode())
        wait_until(lambda: metric(hooked, failed) > failures, 15,
                   "a failed delivery")
    finally:
        server.start()
    wait_until(lambda: {r["s3"]["object"]["key"] for _, r in got()} >= set(keys), 90,
               "every event written while the broker was down")
