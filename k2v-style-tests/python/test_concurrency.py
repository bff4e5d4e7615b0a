"""Concurrent writers and readers on one key: every read returns one complete
version (never a mix, never a partial object), and the last write wins whole."""

import concurrent.futures as cf
import threading

from hangar_testlib import MiB, md5_hex, random_bytes, s3_client, sha256

VERSIONS = [random_bytes(3 * MiB + i, 100 + i) for i in range(4)]
DIGESTS = {sha256(v): i for i, v in enumerate(VERSIONS)}


def test_concurrent_overwrites_leave_one_whole_version(node, admin_key, bucket):
    clients = [s3_client(node, admin_key) for _ in VERSIONS]

    def put(i):
        clients[i].put_object(Bucket=bucket, Key="hot", Body=VERSIONS[i])

    with cf.ThreadPoolExecutor(len(VERSIONS)) as ex:
        list(ex.map(put, range(len(VERSIONS))))
    c = clients[0]
    body = c.get_object(Bucket=bucket, Key="hot")["Body"].read()
    assert sha256(body) in DIGESTS
    head = c.head_object(Bucket=bucket, Key="hot")
    assert head["ETag"] == f'"{md5_hex(body)}"'
    assert head["ContentLength"] == len(body)


def test_reads_during_overwrites_see_whole_versions(node, admin_key, bucket):
    writer = s3_client(node, admin_key)
    writer.put_object(Bucket=bucket, Key="hot", Body=VERSIONS[0])
    stop = threading.Event()
    seen = []
    errors = []

    def read_loop():
        r = s3_client(node, admin_key)
        for _ in range(200):
            if stop.is_set():
                return
            try:
                got = r.get_object(Bucket=bucket, Key="hot")
                body = got["Body"].read()
            except Exception as e:  # any failure of a read is a finding
                errors.append(repr(e))
                return
            seen.append(DIGESTS.get(sha256(body), -1))
            if got["ContentLength"] != len(body):
                errors.append("Content-Length does not match the body")

    readers = [threading.Thread(target=read_loop) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for round_ in range(3):
            for i in range(1, len(VERSIONS)):
                writer.put_object(Bucket=bucket, Key="hot", Body=VERSIONS[i])
    finally:
        stop.set()
        for t in readers:
            t.join(60)
    assert not errors, errors
    assert seen and -1 not in seen, "a read returned bytes of no written version"
