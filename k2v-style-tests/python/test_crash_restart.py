"""Private nodes that get stopped, killed and restarted on the same directories."""

import hashlib
import threading
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    MiB,
    Node,
    error_code,
    object_path,
    random_bytes,
    s3_client,
    send,
    sha256,
    sign_v4,
)


@pytest.fixture
def private_node(tmp_path):
    n = Node(tmp_path / "node", fsync=True)
    n.start()
    yield n
    if n.proc is not None and n.proc.poll() is None:
        n.proc.kill()
        n.proc.wait(10)


def _upload_then_kill(node, key, bucket, obj, data, kill_after):
    """PUT `data` (UNSIGNED-PAYLOAD, Content-Length) in 1 MiB writes and kill -9
    the server once `kill_after` bytes are on the wire."""
    path = object_path(bucket, obj)
    s = sign_v4(
        "PUT",
        f"127.0.0.1:{node.s3_port}",
        path,
        [],
        {"content-length": str(len(data))},
        "UNSIGNED-PAYLOAD",
        key,
    )
    sent = {"n": 0}
    killed = threading.Event()

    def body():
        for i in range(0, len(data), MiB):
            if i >= kill_after and not killed.is_set():
                node.kill9()
                killed.set()
            yield data[i : i + MiB]
            sent["n"] = i + MiB

    try:
        send(node, "PUT", path, [], s.headers, body(), timeout=30)
    except OSError:
        pass  # connection reset/broken pipe: the server is gone
    assert killed.is_set(), f"upload finished before the kill ({sent['n']} bytes sent)"


def test_kill9_mid_upload_keeps_old_object(private_node):
    node = private_node
    key = node.create_key("crash", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="crash")
    old = random_bytes(50 * MiB, 1)
    s3.put_object(Bucket="crash", Key="big", Body=old)
    old_etag = s3.head_object(Bucket="crash", Key="big")["ETag"]
    new = random_bytes(50 * MiB, 2)
    _upload_then_kill(node, key, "crash", "big", new, kill_after=25 * MiB)

    node.start()
    s3 = s3_client(node, key)
    head = s3.head_object(Bucket="crash", Key="big")
    assert head["ETag"] == old_etag
    assert head["ContentLength"] == len(old)
    got = s3.get_object(Bucket="crash", Key="big")["Body"].read()
    assert sha256(got) == sha256(old)
    listed = s3.list_objects_v2(Bucket="crash")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("big", len(old))]
    # the node is healthy: the same key can be written again afterwards
    s3.put_object(Bucket="crash", Key="big", Body=new)
    assert sha256(s3.get_object(Bucket="crash", Key="big")["Body"].read()) == sha256(new)


def test_kill9_mid_upload_of_new_key_leaves_nothing(private_node):
    node = private_node
    key = node.create_key("crash2", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="crash")
    _upload_then_kill(node, key, "crash", "fresh", random_bytes(20 * MiB, 3), kill_after=10 * MiB)
    node.start()
    s3 = s3_client(node, key)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="crash", Key="fresh")
    assert error_code(e.value) == "NoSuchKey"
    assert s3.list_objects_v2(Bucket="crash")["KeyCount"] == 0


def test_sigterm_is_clean_and_data_persists(private_node):
    node = private_node
    key = node.create_key("persist", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="persist")
    objs = {"empty": b"", "small": b"inline", "big": random_bytes(3 * MiB + 1, 9)}
    for k, v in objs.items():
        s3.put_object(Bucket="persist", Key=k, Body=v, Metadata={"k": k})
    t0 = time.monotonic()
    assert node.stop() == 0, "SIGTERM must stop the server cleanly (exit 0)"
    assert time.monotonic() - t0 < 20
    node.start()
    s3 = s3_client(node, key)
    for k, v in objs.items():
        got = s3.get_object(Bucket="persist", Key=k)
        assert got["Body"].read() == v and got["Metadata"] == {"k": k}
    # keys and permissions persist too
    assert key.id in [k["access_key_id"] for k in node.cli_json("key", "list")]
    assert node.cli_json("bucket", "info", "persist")["objects"] == 3


def test_kill9_after_ack_keeps_object(private_node):
    # with metadata_fsync = true an acknowledged PUT survives kill -9
    node = private_node
    key = node.create_key("durable", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="durable")
    data = random_bytes(2 * MiB + 3, 5)
    s3.put_object(Bucket="durable", Key="k", Body=data)
    node.kill9()
    node.start()
    s3 = s3_client(node, key)
    got = s3.get_object(Bucket="durable", Key="k")["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


@pytest.mark.parametrize("engine", ["sled", "redb"])
def test_sigterm_right_after_writes_keeps_them_without_fsync(tmp_path, engine):
    """With metadata_fsync = false an acknowledged write may be lost by a
    crash, but never by a clean stop: SIGTERM flushes the metadata store."""
    n = Node(tmp_path / "node", fsync=False)
    n.config.write_text(n.config.read_text().replace('db_engine = "redb"', f'db_engine = "{engine}"'))
    n.start()
    key = n.create_key("flush", create_bucket=True)
    s3_client(n, key).create_bucket(Bucket="flush")
    written = []
    try:
        for round_ in range(4):
            c = s3_client(n, key)
            for i in range(10):
                k = f"r{round_}-{i}"
                c.put_object(Bucket="flush", Key=k, Body=k.encode())
                written.append(k)
            assert n.stop() == 0
            n.start()
            c = s3_client(n, key)
            for k in written:
                assert c.get_object(Bucket="flush", Key=k)["Body"].read() == k.encode(), (round_, k)
    finally:
        n.stop()
