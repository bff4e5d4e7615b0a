"""Oversized and hostile input a client controls: each gets a clear S3 error
(or, for a request head too large to parse, hyper's 431), memory stays
bounded, and nothing stored changes.

One node of its own (so its RSS is this module's doing), a bucket with a
known object and an open multipart upload. After every attack the bucket
lists exactly what it held and the known object reads back byte for byte,
and the node's RSS (from /proc) has not grown past a bound."""

from __future__ import annotations

import hashlib
import socket
import threading
import time

import pytest

from hangar_testlib import (
    MiB,
    Node,
    canonical_query,
    random_bytes,
    s3_client,
    send,
    sign_v4,
    signed_request,
)

KNOWN = random_bytes(300 * 1024, seed=10)
# Growth of the node's RSS an attack may cause, in MiB: an XML body of up to
# 20 MiB is held while it is parsed, and the allocator keeps some of that
# (measured: 26 MiB at most, for the 18 MiB CompleteMultipartUpload).
RSS_BOUND_MIB = 80


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("hostile"))
    n.start()
    key = n.create_key("hostile", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="hostile")
    s3.put_object(Bucket="hostile", Key="known", Body=KNOWN)
    upload_id = s3.create_multipart_upload(Bucket="hostile", Key="mpu")["UploadId"]
    part = s3.upload_part(
        Bucket="hostile", Key="mpu", UploadId=upload_id, PartNumber=1, Body=b"p" * 1024
    )
    yield n, key, s3, upload_id, part["ETag"]
    n.stop()


def rss_mib(node: Node) -> float:
    for line in open(f"/proc/{node.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def assert_intact(s3, upload_id: str) -> None:
    listed = s3.list_objects_v2(Bucket="hostile")
    assert [o["Key"] for o in listed.get("Contents", [])] == ["known"]
    assert s3.get_object(Bucket="hostile", Key="known")["Body"].read() == KNOWN
    parts = s3.list_parts(Bucket="hostile", Key="mpu", UploadId=upload_id)
    assert [p["PartNumber"] for p in parts["Parts"]] == [1]


@pytest.fixture
def guarded(hostile):
    """The node, checked after the test: unchanged data, bounded RSS, alive."""
    n, key, s3, upload_id, etag = hostile
    before = rss_mib(n)
    yield n, key, upload_id, etag
    assert n.proc.poll() is None, "the node died"
    assert_intact(s3, upload_id)
    grown = rss_mib(n) - before
    assert grown < RSS_BOUND_MIB, f"RSS grew by {grown:.0f} MiB"


def signed_head(node: Node, key, method: str, path: str, query: list, headers: dict) -> bytes:
    """A request head signed with UNSIGNED-PAYLOAD, as bytes."""
    host = f"127.0.0.1:{node.s3_port}"
    s = sign_v4(method, host, path, query, headers, "UNSIGNED-PAYLOAD", key)
    url = path + ("?" + canonical_query(query) if query else "")
    lines = [f"{method} {url} HTTP/1.1"] + [f"{k}: {v}" for k, v in s.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Answer:
    """What a raw exchange got back: status, S3 error code, body."""

    def __init__(self, raw: bytes):
        self.raw = raw
        head, _, self.body = raw.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1]) if head else None
        self.code = None
        if b"<Code>" in self.body:
            self.code = self.body.split(b"<Code>", 1)[1].split(b"</Code>", 1)[0].decode()


def unsigned_payload(node, key, method, path, query=(), headers=None, body=b""):
    """A request signed with UNSIGNED-PAYLOAD (no need to hash a huge body),
    sent from a thread while the answer is read: a server that answers
    before it has read a huge body (as it should) is heard."""
    hdrs = dict(headers or {})
    hdrs["content-length"] = str(len(body))
    head = signed_head(node, key, method, path, list(query), hdrs)
    return Answer(raw_exchange(node.s3_port, head, body=body, timeout=60))


# ---------------------------------------------------------------- XML bodies


def delete_xml(keys) -> bytes:
    return (
        b"<Delete>"
        + b"".join(b"<Object><Key>" + k.encode() + b"</Key></Object>" for k in keys)
        + b"</Delete>"
    )


def test_delete_objects_million_keys(guarded):
    n, key, _, _ = guarded
    body = delete_xml(["known"] + [f"k{i}" for i in range(1_000_000)])
    assert len(body) > 20 * MiB
    t0 = time.monotonic()
    r = unsigned_payload(n, key, "POST", "/hostile", [("delete", "")], body=body)
    assert (r.status, r.code) == (400, "MaxMessageLengthExceeded"), r.body[:300]
    assert time.monotonic() - t0 < 30


def test_delete_objects_chunked_without_length(guarded):
    n, key, _, _ = guarded
    body = delete_xml(["known"] + [f"k{i}" for i in range(1_000_000)])
    head = signed_head(n, key, "POST", "/hostile", [("delete", "")], {"transfer-encoding": "chunked"})
    framed = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + MiB]), body[i : i + MiB]) for i in range(0, len(body), MiB)
    ) + b"0\r\n\r\n"
    r = Answer(raw_exchange(n.s3_port, head, body=framed, timeout=60))
    assert (r.status, r.code) == (411, "MissingContentLength"), r.raw[:300]


def test_delete_objects_over_1000_keys(guarded):
    n, key, _, _ = guarded
    # Just under the body limit: parsed, then refused by count.
    body = delete_xml(["known"] + [f"k{i}" for i in range(600_000)])
    assert len(body) < 20 * MiB
    r = unsigned_payload(n, key, "POST", "/hostile", [("delete", "")], body=body)
    assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]
    r = unsigned_payload(
        n, key, "POST", "/hostile", [("delete", "")], body=delete_xml(["known"] * 1001)
    )
    assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]


def complete_xml(parts) -> bytes:
    return (
        b"<CompleteMultipartUpload>"
        + b"".join(
            b"<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (num, etag.encode())
            for num, etag in parts
        )
        + b"</CompleteMultipartUpload>"
    )


def test_complete_multipart_huge(guarded):
    n, key, upload_id, etag = guarded
    path = "/hostile/mpu"
    q = [("uploadId", upload_id)]
    body = complete_xml((1, etag) for _ in range(1_000_000))
    assert len(body) > 20 * MiB
    r = unsigned_payload(n, key, "POST", path, q, body=body)
    assert (r.status, r.code) == (400, "MaxMessageLengthExceeded"), r.body[:300]

    # Under the body limit, but more parts than an upload can have.
    body = complete_xml((i % 10_000 + 1, etag) for i in range(200_000))
    assert len(body) < 20 * MiB
    t0 = time.monotonic()
    r = unsigned_payload(n, key, "POST", path, q, body=body)
    assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]
    assert time.monotonic() - t0 < 30
    r = unsigned_payload(n, key, "POST", path, q, body=complete_xml([(10_001, etag)]))
    assert (r.status, r.code) == (400, "InvalidPart"), r.body[:300]


def test_deeply_nested_xml(guarded):
    n, key, upload_id, _ = guarded
    depth = 200_000
    inner = b"<a>" * depth + b"</a>" * depth
    for path, q, body in [
        ("/hostile", [("delete", "")], b"<Delete>" + inner + b"</Delete>"),
        ("/hostile", [("delete", "")], b"<Delete><Object><Key>" + inner + b"</Key></Object></Delete>"),
        ("/hostile/mpu", [("uploadId", upload_id)], b"<CompleteMultipartUpload>" + inner + b"</CompleteMultipartUpload>"),
    ]:
        r = unsigned_payload(n, key, "POST", path, q, body=body)
        assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]


def test_xml_entities_billion_laughs(guarded):
    n, key, _, _ = guarded
    lol = (
        b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n<!ENTITY lol "lol">\n'
        + b"".join(
            b'<!ENTITY lol%d "%s">\n' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
            for i in range(1, 10)
        )
        + b"]>\n<Delete><Object><Key>&lol9;</Key></Object><Object><Key>known</Key></Object></Delete>"
    )
    r = unsigned_payload(n, key, "POST", "/hostile", [("delete", "")], body=lol)
    assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]
    # An external entity (XXE) is not fetched either.
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<Delete><Object><Key>&x;</Key></Object></Delete>"
    )
    r = unsigned_payload(n, key, "POST", "/hostile", [("delete", "")], body=xxe)
    assert (r.status, r.code) == (400, "MalformedXML"), r.body[:300]


# ---------------------------------------------------------------- headers, lengths, query strings


def raw_exchange(port: int, head: bytes, body: bytes = b"", timeout: float = 10) -> bytes:
    """Sends `head` then `body` (from a thread) on a fresh connection;
    returns what the server answered before closing or going quiet."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def write():
        try:
            s.sendall(head + body)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        got = b""
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                got += data
                if b"\r\n\r\n" in got:
                    head_end = got.index(b"\r\n\r\n")
                    length = 0
                    for line in got[:head_end].split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            length = int(v)
                    if len(got) >= head_end + 4 + length:
                        break
        except (ConnectionResetError, socket.timeout):
            pass
        return got
    finally:
        s.close()
        writer.join(5)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_huge_headers(guarded):
    n, _, _, _ = guarded
    one = b"GET /hostile/known HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MiB + b"\r\n\r\n"
    many = (
        b"GET /hostile/known HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(1024))
        + b"\r\n"
    )
    for head in (one, many):
        t0 = time.monotonic()
        answer = raw_exchange(n.s3_port, head)
        assert status_of(answer) == 431, answer[:200]
        assert time.monotonic() - t0 < 5


def test_request_head_bounds(guarded):
    """The node's own bounds on a request head (conn_limits.rs): hundreds of
    short headers within S3's 16 KiB are served, as S3 serves them (hyper's
    default refused more than 100 lines with 431); past 96 KiB the answer is
    431 at once, so a client cannot make the node buffer more of a head."""
    n, key, _, _ = guarded
    many_short = {f"x-junk-{i}": "v" for i in range(300)}
    r = Answer(raw_exchange(n.s3_port, signed_head(n, key, "GET", "/hostile/known", [], many_short)))
    assert r.status == 200, r.raw[:300]
    assert r.body == KNOWN
    for size in (100_000, 300_000):
        head = b"GET /hostile/known HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size + b"\r\n\r\n"
        assert status_of(raw_exchange(n.s3_port, head)) == 431, size
    # The admin endpoint holds heads to the same bound.
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100_000 + b"\r\n\r\n"
    assert status_of(raw_exchange(n.admin_port, head)) == 431


def test_header_section_past_the_bound_gets_an_s3_error(guarded, hostile):
    """Past 16 KiB of headers (below hyper's own limit) the answer is S3's
    400 RequestHeaderSectionTooLarge with its XML, before authentication
    and before the body: nothing is stored."""
    n, key, _, _ = guarded
    s3 = hostile[2]
    head = b"GET /hostile/known HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n"
    r = Answer(raw_exchange(n.s3_port, head))
    assert (r.status, r.code) == (400, "RequestHeaderSectionTooLarge"), r.raw[:300]
    assert b"at most 16384" in r.body
    # A signed upload whose headers are too large: refused, not stored (the
    # guard checks the bucket still lists only what it held).
    big = {"content-disposition": "attachment; filename=" + "d" * 17_000}
    r = unsigned_payload(n, key, "PUT", "/hostile/too-big-head", headers=big, body=b"x" * MiB)
    assert (r.status, r.code) == (400, "RequestHeaderSectionTooLarge"), r.raw[:300]
    # Just under the bound: served, and the header kept.
    fits = "attachment; filename=" + "d" * 12_000
    s3.put_object(Bucket="hostile", Key="big-head", Body=b"ok", ContentDisposition=fits)
    try:
        assert s3.head_object(Bucket="hostile", Key="big-head")["ContentDisposition"] == fits
    finally:
        s3.delete_object(Bucket="hostile", Key="big-head")


def test_user_metadata_past_2_kib_is_refused(guarded, hostile):
    """S3's bound on user metadata: 2 KiB of keys and values (UTF-8 bytes)
    is stored and read back; one byte more is 400 MetadataTooLarge for a
    PUT, a CreateMultipartUpload and a copy that replaces the metadata."""
    s3 = hostile[2]
    fits = {"a": "v" * 1023, "b": "w" * 1023}
    over = {"a": "v" * 1023, "bc": "w" * 1023}
    s3.put_object(Bucket="hostile", Key="meta", Body=b"m", Metadata=fits)
    try:
        assert s3.head_object(Bucket="hostile", Key="meta")["Metadata"] == fits
        calls = {
            "PutObject": lambda: s3.put_object(Bucket="hostile", Key="meta2", Body=b"m" * MiB, Metadata=over),
            "CreateMultipartUpload": lambda: s3.create_multipart_upload(Bucket="hostile", Key="meta2", Metadata=over),
            "CopyObject": lambda: s3.copy_object(
                Bucket="hostile", Key="meta2", CopySource="hostile/meta",
                MetadataDirective="REPLACE", Metadata=over),
        }
        for name, call in calls.items():
            with pytest.raises(s3.exceptions.ClientError) as e:
                call()
            err = e.value.response["Error"]
            assert (e.value.response["ResponseMetadata"]["HTTPStatusCode"], err["Code"]) == (
                400, "MetadataTooLarge"), (name, err)
            assert "2049 bytes" in err["Message"], (name, err)
        # A copy that keeps its source's metadata is not refused for it.
        s3.copy_object(Bucket="hostile", Key="meta3", CopySource="hostile/meta")
        s3.delete_object(Bucket="hostile", Key="meta3")
    finally:
        s3.delete_object(Bucket="hostile", Key="meta")
    assert "Uploads" not in s3.list_multipart_uploads(Bucket="hostile") or all(
        u["Key"] == "mpu" for u in s3.list_multipart_uploads(Bucket="hostile")["Uploads"])


def test_huge_query_string(guarded):
    n, key, _, _ = guarded
    # Past what a request head may hold: refused by hyper before any parsing.
    head = b"GET /hostile?prefix=" + b"p" * MiB + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert status_of(raw_exchange(n.s3_port, head)) in (414, 431)
    # Past hyper's URI limit (64 KiB), within the 96 KiB head: 414.
    q = [(f"x-junk-{i}", "v") for i in range(6_000)] + [("list-type", "2")]
    r = signed_request(n, key, "GET", "hostile", query=q)
    assert r.status == 414, r.body[:300]
    # Within it: three thousand parameters, parsed and answered.
    q = [(f"x-junk-{i}", "v") for i in range(3_000)] + [("list-type", "2")]
    r = signed_request(n, key, "GET", "hostile", query=q)
    assert r.status == 200, r.body[:300]


@pytest.mark.parametrize(
    "max_keys,status,code",
    [
        ("1000000", 200, None),
        ("2147483648", 400, "InvalidArgument"),
        ("99999999999999999999999", 400, "InvalidArgument"),
        ("-1", 400, "InvalidArgument"),
        ("many", 400, "InvalidArgument"),
    ],
)
def test_absurd_max_keys(guarded, max_keys, status, code):
    n, key, _, _ = guarded
    for q in ([("list-type", "2"), ("max-keys", max_keys)], [("max-keys", max_keys)]):
        r = signed_request(n, key, "GET", "hostile", query=q)
        assert (r.status, r.code) == (status, code), r.body[:300]
        if status == 200:
            assert b"<MaxKeys>1000</MaxKeys>" in r.body


@pytest.mark.parametrize("number", ["10001", "0", "-1", "one", "99999999999", ""])
def test_bad_part_number(guarded, number):
    n, key, upload_id, _ = guarded
    r = signed_request(
        n,
        key,
        "PUT",
        "hostile",
        "mpu",
        query=[("partNumber", number), ("uploadId", upload_id)],
        body=b"x" * 100,
    )
    assert (r.status, r.code) == (400, "InvalidArgument"), r.body[:300]


@pytest.mark.parametrize("target", ["object", "part", "aws-chunked"])
def test_6gib_content_length_without_body(guarded, target):
    n, key, upload_id, _ = guarded
    six = str(6 * 1024**3)
    query, headers = [], {"content-length": six}
    if target == "part":
        query = [("partNumber", "2"), ("uploadId", upload_id)]
    if target == "aws-chunked":
        headers = {
            "content-length": str(7 * 1024**3),
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": six,
        }
    path = "/hostile/mpu" if target == "part" else "/hostile/big"
    t0 = time.monotonic()
    answer = raw_exchange(n.s3_port, signed_head(n, key, "PUT", path, query, headers), timeout=10)
    took = time.monotonic() - t0
    assert answer, "no answer within 10 s"
    assert status_of(answer) == 400, answer[:300]
    assert b"<Code>EntityTooLarge</Code>" in answer, answer[:300]
    assert took < 2, f"answered after {took:.1f} s"


def test_wrong_payload_hash_on_xml_bodies(guarded):
    """Found by the s3_request fuzz target: s3s answered 500 for these."""
    n, key, upload_id, etag = guarded
    wrong = hashlib.sha256(b"not the body").hexdigest()
    for method, bucket, obj, query, body in [
        ("PUT", "hostile-new", None, [], b""),
        ("PUT", "hostile-new", None, [], b"<CreateBucketConfiguration/>"),
        ("POST", "hostile", None, [("delete", "")], delete_xml(["known"])),
        ("POST", "hostile", "mpu", [("uploadId", upload_id)], complete_xml([(1, etag)])),
    ]:
        r = signed_request(n, key, method, bucket, obj, query=query, body=body, payload_hash=wrong)
        assert (r.status, r.code) == (400, "XAmzContentSHA256Mismatch"), (method, bucket, r.body[:300])
    r = signed_request(n, key, "HEAD", "hostile-new")
    assert r.status == 404


def test_server_still_serves_after_everything(hostile):
    n, key, s3, upload_id, _ = hostile
    s3.put_object(Bucket="hostile", Key="after", Body=b"fine")
    assert s3.get_object(Bucket="hostile", Key="after")["Body"].read() == b"fine"
    s3.delete_object(Bucket="hostile", Key="after")
    assert_intact(s3, upload_id)
    assert hashlib.md5(KNOWN).hexdigest() in s3.head_object(Bucket="hostile", Key="known")["ETag"]
