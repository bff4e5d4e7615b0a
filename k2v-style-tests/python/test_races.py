"""Races between writers of one key, and between a copy and a writer of its
source: whatever the interleaving, every write the server acknowledged is
whole, and the object that remains reads back whole as one of them (never an
object whose size promises bytes its blocks no longer hold).

These run on a private node whose block GC grace is 1 s, so that a version
wrongly queued for collection loses its block list (the version collector
runs at once) and then its block files (after the grace) before the checks."""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import html
import http.client
import random
import re
import socket
import threading
import time

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import (
    Key,
    KiB,
    MiB,
    Node,
    md5_hex,
    object_path,
    random_bytes,
    s3_client,
    sha256,
    sign_v4,
    xml_error,
)

GRACE_SECS = 1
THREADS = 12


@pytest.fixture(scope="module")
def race_node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("races"))
    n.config.write_text(f"block_gc_delay_secs = {GRACE_SECS}\n" + n.config.read_text())
    n.start()
    key = n.create_key("races", create_bucket=True)
    # One client per thread (a boto3 client is made here, in one thread).
    clients = [s3_client(n, key) for _ in range(THREADS)]
    yield n, key, clients
    n.stop()


@pytest.fixture
def race_bucket(race_node, request):
    _, _, clients = race_node
    name = "r-" + request.node.name.replace("_", "-")[5:40].strip("-")
    clients[0].create_bucket(Bucket=name)
    return name


def settle() -> None:
    """Let the version collector run (it is woken by every publish) and the
    block GC pass beyond its grace delay (it runs every second here)."""
    time.sleep(GRACE_SECS + 2.5)


def race(fns: list) -> list:
    """Runs the callables at once (each in its own thread, released together
    by a barrier); returns their results, or the ClientError each raised."""
    barrier = threading.Barrier(len(fns))

    def run(fn):
        barrier.wait()
        try:
            return fn()
        except ClientError as e:
            return e

    with cf.ThreadPoolExecutor(len(fns)) as ex:
        return list(ex.map(run, fns))


def describe(e: ClientError) -> str:
    meta = e.response.get("ResponseMetadata", {})
    err = e.response.get("Error", {})
    return f"{meta.get('HTTPStatusCode')} {err.get('Code')}: {err.get('Message')}"


def multipart_etag(parts: list[bytes]) -> str:
    md5s = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(md5s).hexdigest()}-{len(parts)}"'


def check_object(c, bucket: str, key: str, acked: dict[str, str]) -> str | None:
    """None if `key` reads back whole as one of the acknowledged writes
    (`acked`: body sha256 → ETag the write was answered with), else what is wrong."""
    try:
        got = c.get_object(Bucket=bucket, Key=key)
        body = got["Body"].read()
    except ClientError as e:
        try:
            h = c.head_object(Bucket=bucket, Key=key)
            head = f"HEAD says {h['ContentLength']} bytes, ETag {h['ETag']}"
        except ClientError as he:
            head = f"HEAD: {describe(he)}"
        return f"{key}: GET failed with {describe(e)} ({head})"
    digest = sha256(body)
    if digest not in acked:
        return f"{key}: GET returned {len(body)} bytes that no acknowledged write sent"
    if got["ContentLength"] != len(body):
        return f"{key}: Content-Length {got['ContentLength']} but {len(body)} bytes"
    if got["ETag"] != acked[digest]:
        return f"{key}: GET ETag {got['ETag']} but the write was answered {acked[digest]}"
    h = c.head_object(Bucket=bucket, Key=key)
    if h["ContentLength"] != len(body) or h["ETag"] != got["ETag"]:
        return f"{key}: HEAD says {h['ContentLength']} bytes {h['ETag']}, GET {len(body)} {got['ETag']}"
    return None


# ---------------------------------------------------------------- PUT vs PUT

PUT_ROUNDS = 60
# Per round (cyclically), the size of the body of writer i: ~200 KB (one
# block); just above the inline threshold (3 KiB); inline bodies mixed with
# two-block ones (1 MiB + 200 KB).
PUT_SIZES = (
    ("200 KB", lambda i: 200 * KiB + 37 * i),
    ("3 KiB + 1", lambda i: 3 * KiB + 1 + 37 * i),
    ("inline or 2 blocks", lambda i: 2 * KiB + 37 * i if i % 2 else MiB + 200 * KiB + 37 * i),
)


def test_concurrent_puts_of_one_key_leave_a_whole_acknowledged_object(race_node, race_bucket):
    """A dozen clients (one thread each) PUT distinct bodies to one key at
    once, for PUT_ROUNDS fresh keys (body sizes in PUT_SIZES): every PUT is
    acknowledged with the MD5 of its body, and each key then reads back, GET
    and HEAD, as exactly one of the acknowledged bodies, also after the
    version collector and the block GC have run."""
    _, _, clients = race_node
    acked_by_key: dict[str, dict[str, str]] = {}
    problems = []
    for r in range(PUT_ROUNDS):
        key = f"hot-{r}"
        _, size = PUT_SIZES[r % len(PUT_SIZES)]
        bodies = [random_bytes(size(i), 1000 * r + i) for i in range(THREADS)]

        def put(i, key=key, bodies=bodies):
            return clients[i].put_object(Bucket=race_bucket, Key=key, Body=bodies[i])

        results = race([lambda i=i: put(i) for i in range(THREADS)])
        acked = {}
        for body, res in zip(bodies, results):
            if isinstance(res, ClientError):
                problems.append(f"{key}: a PUT failed with {describe(res)}")
                continue
            assert res["ETag"] == f'"{md5_hex(body)}"', "a PUT was answered with a wrong ETag"
            acked[sha256(body)] = res["ETag"]
        acked_by_key[key] = acked
    settle()
    for r, (key, acked) in enumerate(acked_by_key.items()):
        p = check_object(clients[0], race_bucket, key, acked)
        if p:
            problems.append(f"({PUT_SIZES[r % len(PUT_SIZES)][0]}) {p}")
    assert not problems, (
        f"{len(problems)} of {PUT_ROUNDS} keys are broken after concurrent PUTs:\n"
        + "\n".join(problems)
    )


# ---------------------------------------------------------------- multipart

MPU_ROUNDS = 60


def _upload(c, bucket, key, parts):
    """Starts a multipart upload of `key` with `parts` (bytes, or the name of
    an object of this bucket to copy server-side); returns (upload id,
    [(part number, ETag)], [part bytes])."""
    up = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    listed, data = [], []
    for n, p in enumerate(parts, 1):
        if isinstance(p, tuple):
            name, body = p
            e = c.upload_part_copy(
                Bucket=bucket, Key=key, UploadId=up, PartNumber=n,
                CopySource={"Bucket": bucket, "Key": name},
            )["CopyPartResult"]["ETag"]
        else:
            body = p
            e = c.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=n, Body=p)["ETag"]
        listed.append((n, e))
        data.append(body)
    return up, listed, data


def test_concurrent_completes_and_puts_of_one_key_leave_a_whole_acknowledged_object(
    race_node, race_bucket
):
    """Per round, on a fresh key, several writes of the key start at the same
    moment: in even rounds three CompleteMultipartUploads (one upload of two
    parts, 5 MiB + 100 KB, two of one 200 KB part) and five plain PUTs of
    ~200 KB; in odd rounds six completes of different uploads (one of two
    parts, five of one) and no PUT. Every acknowledged write has the right
    ETag (MD5, or MD5 of the part MD5s + "-N"), and the key then reads back
    whole, GET and HEAD, as one of them, also after the collector and the
    block GC ran."""
    _, _, clients = race_node
    c = clients[0]
    big = random_bytes(5 * MiB, 7)
    c.put_object(Bucket=race_bucket, Key="big-part", Body=big)
    acked_by_key: dict[str, dict[str, str]] = {}
    problems = []
    for r in range(MPU_ROUNDS):
        key = f"mpu-{r}"
        seed = 100_000 + 100 * r
        n_single, n_puts = (2, 5) if r % 2 == 0 else (5, 0)
        uploads = [_upload(c, race_bucket, key, [("big-part", big), random_bytes(100 * KiB + r, seed)])]
        for j in range(n_single):
            uploads.append(_upload(c, race_bucket, key, [random_bytes(200 * KiB + 11 * j, seed + 1 + j)]))
        puts = [random_bytes(200 * KiB + 13 * j, seed + 50 + j) for j in range(n_puts)]

        fns = []
        for i, (up, listed, _) in enumerate(uploads):
            fns.append(
                lambda i=i, up=up, listed=listed, key=key: clients[i].complete_multipart_upload(
                    Bucket=race_bucket,
                    Key=key,
                    UploadId=up,
                    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in listed]},
                )
            )
        for j, body in enumerate(puts):
            fns.append(
                lambda j=j, body=body, key=key: clients[len(uploads) + j].put_object(
                    Bucket=race_bucket, Key=key, Body=body
                )
            )
        results = race(fns)

        acked = {}
        writes = [(b"".join(p), multipart_etag(p)) for _, _, p in uploads]
        writes += [(b, f'"{md5_hex(b)}"') for b in puts]
        for (body, etag), res in zip(writes, results):
            if isinstance(res, ClientError):
                problems.append(f"{key}: a write failed with {describe(res)}")
                continue
            assert res["ETag"] == etag, "a write was answered with a wrong ETag"
            acked[sha256(body)] = etag
        acked_by_key[key] = acked
    settle()
    for r, (key, acked) in enumerate(acked_by_key.items()):
        p = check_object(c, race_bucket, key, acked)
        if p:
            kind = "completes and PUTs" if r % 2 == 0 else "completes only"
            problems.append(f"({kind}) {p}")
    assert not problems, (
        f"{len(problems)} problems in {MPU_ROUNDS} rounds of racing completes and PUTs:\n"
        + "\n".join(problems)
    )


# ---------------------------------------------------------------- copy


class Armed:
    """A signed request sent to the node but for its last byte, so that many
    of them can be released within a fraction of a millisecond."""

    def __init__(self, node: Node, key: Key, method: str, path: str, headers: dict, body: bytes = b""):
        host = f"127.0.0.1:{node.s3_port}"
        headers = {**headers, "content-length": str(len(body))}
        signed = sign_v4(method, host, path, [], headers, sha256(body), key)
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in signed.headers.items()
        )
        raw = head.encode() + b"\r\n" + body
        self.sock = socket.create_connection(("127.0.0.1", node.s3_port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(raw[:-1])
        self.last = raw[-1:]

    def fire(self) -> None:
        self.sock.sendall(self.last)

    def response(self) -> tuple[int, bytes]:
        resp = http.client.HTTPResponse(self.sock)
        try:
            resp.begin()
            return resp.status, resp.read()
        finally:
            resp.close()
            self.sock.close()


def fire_in_order(armed: list[Armed], spacing_secs: float) -> None:
    for i, a in enumerate(armed):
        if i:
            until = time.perf_counter() + spacing_secs
            while time.perf_counter() < until:
                pass
        a.fire()


COPY_ROUNDS = 60
COPIERS = 10
ACTIONS = ("delete", "small-put", "delete", "copy-over", "delete", "big-put")


def test_copy_racing_an_overwrite_or_delete_of_its_source_copies_all_or_fails(
    race_node, race_bucket
):
    """Per round, ten CopyObjects of a fresh 4-block source (3 MiB + 17) and
    one change of that source (a DELETE, a 4 KiB PUT, a server-side copy of a
    3-block object over it, or a 2 MiB PUT) are released a fraction of a
    millisecond apart, the change among the first five. Each copy either
    succeeds, and its destination reads back whole, GET and HEAD, as the
    source version whose ETag the copy answered (also after the collector and
    the block GC ran); or fails with a clean 4xx S3 error (NoSuchKey), never
    with a 500, and never publishes an object that holds fewer bytes than its
    size."""
    n, key, clients = race_node
    c = clients[0]
    v1 = random_bytes(3 * MiB + 17, 71)
    v2 = random_bytes(2 * MiB + 5, 72)
    small = random_bytes(4 * KiB, 73)
    c.put_object(Bucket=race_bucket, Key="master-1", Body=v1)
    c.put_object(Bucket=race_bucket, Key="master-2", Body=v2)
    by_etag = {f'"{md5_hex(v)}"': sha256(v) for v in (v1, v2, small)}
    src_path = object_path(race_bucket, "src")

    def change(action) -> Armed:
        if action == "delete":
            return Armed(n, key, "DELETE", src_path, {})
        if action == "copy-over":
            return Armed(n, key, "PUT", src_path, {"x-amz-copy-source": f"{race_bucket}/master-2"})
        return Armed(n, key, "PUT", src_path, {}, small if action == "small-put" else v2)

    rng = random.Random(5)
    copied: dict[str, str] = {}  # destination → ETag the copy answered
    problems = []
    outcomes = {"copied": 0, "NoSuchKey": 0}
    for r in range(COPY_ROUNDS):
        # A new version of the source, sharing master-1's blocks.
        c.copy_object(Bucket=race_bucket, Key="src", CopySource={"Bucket": race_bucket, "Key": "master-1"})
        action = ACTIONS[r % len(ACTIONS)]
        dsts = [f"dst-{r}-{i}" for i in range(COPIERS)]
        copies = [
            Armed(n, key, "PUT", object_path(race_bucket, d), {"x-amz-copy-source": f"{race_bucket}/src"})
            for d in dsts
        ]
        changer = change(action)
        order = list(copies)
        order.insert(rng.randrange(COPIERS // 2), changer)
        fire_in_order(order, rng.uniform(0, 0.0004))
        status, body = changer.response()
        if status not in (200, 204):
            problems.append(f"round {r}: the {action} of the source got {status} {xml_error(body)}")
        for dst, armed in zip(dsts, copies):
            status, body = armed.response()
            if status != 200:
                # A clean refusal (NoSuchKey, or another 4xx S3 error) is fine.
                code, msg = xml_error(body)
                if 400 <= status < 500 and code:
                    outcomes[code] = outcomes.get(code, 0) + 1
                else:
                    problems.append(f"round {r} ({action}): the copy failed with {status} {code}: {msg}")
                continue
            outcomes["copied"] += 1
            m = re.search(rb"<ETag>(.*?)</ETag>", body)
            etag = html.unescape(m.group(1).decode()) if m else None
            if etag not in by_etag:
                problems.append(f"round {r} ({action}): the copy answered ETag {etag}, of no source version")
                continue
            copied[dst] = etag
            p = check_object(c, race_bucket, dst, {by_etag[etag]: etag})
            if p:
                problems.append(f"round {r} ({action}): {p}")
    settle()
    # Again after the GC, the first copy of each round.
    for dst, etag in copied.items():
        if dst.endswith("-0"):
            p = check_object(c, race_bucket, dst, {by_etag[etag]: etag})
            if p:
                problems.append(f"after GC: {p}")
    broken_rounds = len({p.split(" ")[1] for p in problems if p.startswith("round ")})
    assert not problems, (
        f"{len(problems)} problems in {broken_rounds} of {COPY_ROUNDS} rounds of {COPIERS} copies "
        f"racing a change of their source ({outcomes}):\n" + "\n".join(problems)
    )


# ---------------------------------------------------------------- If-None-Match

INM_ROUNDS = 12


def test_concurrent_if_none_match_puts_have_exactly_one_winner(race_node, race_bucket):
    """A dozen clients PUT with If-None-Match: * to a fresh key at once (body
    sizes in PUT_SIZES): one gets 200, the others 412 PreconditionFailed, and
    the key reads back as the winner's body (also after the collector and the
    block GC ran)."""
    _, _, clients = race_node
    winners: dict[str, dict[str, str]] = {}
    problems = []
    for r in range(INM_ROUNDS):
        key = f"once-{r}"
        _, size = PUT_SIZES[r % len(PUT_SIZES)]
        bodies = [random_bytes(size(i) + 3, 50_000 + 100 * r + i) for i in range(THREADS)]
        results = race(
            [
                lambda i=i, key=key, bodies=bodies: clients[i].put_object(
                    Bucket=race_bucket, Key=key, Body=bodies[i], IfNoneMatch="*"
                )
                for i in range(THREADS)
            ]
        )
        ok = [(b, res) for b, res in zip(bodies, results) if not isinstance(res, ClientError)]
        refused = [res for res in results if isinstance(res, ClientError)]
        wrong = [
            describe(e)
            for e in refused
            if e.response["ResponseMetadata"]["HTTPStatusCode"] != 412
            or e.response["Error"]["Code"] != "PreconditionFailed"
        ]
        if len(ok) != 1 or wrong:
            problems.append(f"{key}: {len(ok)} PUTs succeeded; refusals other than 412: {wrong}")
        for body, res in ok:
            assert res["ETag"] == f'"{md5_hex(body)}"', "a PUT was answered with a wrong ETag"
        winners[key] = {sha256(body): res["ETag"] for body, res in ok}
        p = check_object(clients[0], race_bucket, key, winners[key])
        if p:
            problems.append(p)
    settle()
    for key, acked in winners.items():
        p = check_object(clients[0], race_bucket, key, acked)
        if p:
            problems.append(f"after GC: {p}")
    assert not problems, "\n".join(problems)
