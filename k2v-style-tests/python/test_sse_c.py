"""SSE-C: server-side encryption with customer-provided keys (boto3's
SSECustomerAlgorithm / SSECustomerKey) on PUT, GET, HEAD, ranges, copies
and multipart uploads, on one node and through every node of a 3-node
cluster; and on disk, no block file or metadata store holds the plaintext."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
import zstandard
from botocore.exceptions import ClientError

from hangar_testlib import (
    MiB,
    Node,
    block_sizes,
    bucket_name,
    error_code,
    http_status,
    md5_hex,
    random_bytes,
    s3_client,
    signed_request,
)
from cluster_testlib import key_of, laid_out_cluster, wait_for
from post_form_testlib import basic, post

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))


def sse(key: bytes) -> dict:
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def copy_sse(key: bytes) -> dict:
    return {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": key}


def key_md5(key: bytes) -> str:
    return base64.b64encode(hashlib.md5(key).digest()).decode()


def own_bytes(n: int, seed: int) -> bytes:
    """Random bytes no other module writes: the node is shared by the whole
    session, and other modules store `random_bytes(n, seed)` in plain text
    (the same seed gives the same leading bytes whatever `n`), which the
    on-disk checks below would take for a leak."""
    return random_bytes(n, 0x55EC_0000 + seed)


def marked(n: int, marker: bytes) -> bytes:
    """A compressible body made of a recognisable marker."""
    return (marker * (n // len(marker) + 1))[:n]


def stored_bytes(roots: list[Path]) -> list[bytes]:
    """Every file under `roots`, block files decompressed when zstd."""
    out = []
    for root in roots:
        for p in root.rglob("*"):
            if not p.is_file():
                continue
            b = p.read_bytes()
            if p.name.endswith(".zst"):
                b = zstandard.ZstdDecompressor().decompress(b, max_output_size=64 * MiB)
            out.append(b)
    return out


def assert_not_on_disk(roots: list[Path], needles: list[bytes]) -> None:
    files = stored_bytes(roots)
    assert files, "nothing stored at all"
    for needle in needles:
        assert not any(needle in f for f in files), f"plaintext {needle[:24]!r}… found on disk"


def echoed(resp: dict, key: bytes) -> None:
    assert resp["SSECustomerAlgorithm"] == "AES256"
    assert resp["SSECustomerKeyMD5"] == key_md5(key)


def fails(code: str, status: int, fn, **kw) -> None:
    """`fn(**kw)` fails with S3 error `code` and HTTP `status`."""
    with pytest.raises(ClientError) as e:
        fn(**kw)
    assert (http_status(e.value), error_code(e.value)) == (status, code), e.value.response


# ---------------------------------------------------------------- one node


def test_an_encrypted_put_stores_no_plaintext(tmp_path):
    # A private node, stopped before its files are read: the metadata store
    # is then on disk in full (a running node may hold pages in memory).
    node = Node(tmp_path / "node")
    node.start()
    try:
        key = node.create_key("k", create_bucket=True)
        s3 = s3_client(node, key)
        s3.create_bucket(Bucket="sse-disk")
        small = marked(1000, b"SSEC-INLINE-MARKER ")
        text = marked(2 * MiB + 77, b"SSEC-COMPRESSIBLE-MARKER ")
        noise = own_bytes(MiB + 500, 4242)
        bodies = {"small": small, "text": text, "noise": noise}
        answers = {k: s3.put_object(Bucket="sse-disk", Key=k, Body=b, **sse(KEY_A)) for k, b in bodies.items()}
        # A plain object as a witness that the search finds what is there.
        s3.put_object(Bucket="sse-disk", Key="witness", Body=marked(900, b"PLAIN-WITNESS "))
    finally:
        node.stop()
    files = stored_bytes([node.data, node.meta])
    assert any(b"PLAIN-WITNESS " * 3 in f for f in files), "the search misses inline data"
    # The data and the metadata directories hold none of the encrypted ones.
    assert_not_on_disk([node.data, node.meta], [small[:60], text[:60], noise[1000:1064], noise[-64:]])
    for k, r in answers.items():
        echoed(r, KEY_A)
        assert r["ETag"].strip('"') != md5_hex(bodies[k]), "an SSE-C ETag is not the MD5 of the plaintext"
    node.start()
    try:
        s3 = s3_client(node, key)
        for k, body in bodies.items():
            r = s3.get_object(Bucket="sse-disk", Key=k, **sse(KEY_A))
            echoed(r, KEY_A)
            assert r["Body"].read() == body
    finally:
        node.stop()


def test_equal_plaintexts_under_two_keys_are_two_blocks(node, s3, bucket):
    body = own_bytes(MiB, 77)
    before = {p for p in node.data.rglob("*") if p.is_file()}
    s3.put_object(Bucket=bucket, Key="a", Body=body, **sse(KEY_A))
    s3.put_object(Bucket=bucket, Key="b", Body=body, **sse(KEY_B))
    s3.put_object(Bucket=bucket, Key="c", Body=body, **sse(KEY_B))
    after = {p for p in node.data.rglob("*") if p.is_file()}
    assert len(after - before) == 3, "no deduplication of encrypted blocks, even under one key"
    assert s3.get_object(Bucket=bucket, Key="c", **sse(KEY_B))["Body"].read() == body


def test_head_and_ranges_need_the_key(s3, bucket):
    body = own_bytes(2 * MiB + 10, 5)
    s3.put_object(Bucket=bucket, Key="o", Body=body, ContentType="text/x-test", **sse(KEY_A))
    h = s3.head_object(Bucket=bucket, Key="o", **sse(KEY_A))
    echoed(h, KEY_A)
    assert h["ContentLength"] == len(body) and h["ContentType"] == "text/x-test"
    for first, last in [(0, 0), (MiB - 5, MiB + 5), (10, 2 * MiB + 9), (2 * MiB, 2 * MiB + 9)]:
        r = s3.get_object(Bucket=bucket, Key="o", Range=f"bytes={first}-{last}", **sse(KEY_A))
        assert r["Body"].read() == body[first : last + 1]
    # A HEAD answer has no body: boto3 names the error by its status.
    fails("400", 400, s3.head_object, Bucket=bucket, Key="o")
    fails("403", 403, s3.head_object, Bucket=bucket, Key="o", **sse(KEY_B))


def test_wrong_missing_and_unexpected_keys_get_s3_errors(s3, bucket):
    s3.put_object(Bucket=bucket, Key="enc", Body=b"secret" * 2000, **sse(KEY_A))
    s3.put_object(Bucket=bucket, Key="inline", Body=b"tiny secret", **sse(KEY_A))
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain")
    for k in ["enc", "inline"]:
        fails("InvalidRequest", 400, s3.get_object, Bucket=bucket, Key=k)
        fails("AccessDenied", 403, s3.get_object, Bucket=bucket, Key=k, **sse(KEY_B))
    fails("InvalidRequest", 400, s3.get_object, Bucket=bucket, Key="plain", **sse(KEY_A))


def test_versions_and_checksums_of_encrypted_objects(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    one, two = own_bytes(MiB + 7, 51), b"second, small"
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=one, ChecksumAlgorithm="CRC32", **sse(KEY_A))
    v2 = s3.put_object(Bucket=bucket, Key="v", Body=two, **sse(KEY_B))
    got = s3.get_object(Bucket=bucket, Key="v", VersionId=v1["VersionId"], ChecksumMode="ENABLED", **sse(KEY_A))
    assert got["Body"].read() == one and got["ChecksumCRC32"] == v1["ChecksumCRC32"]
    fails("AccessDenied", 403, s3.get_object, Bucket=bucket, Key="v", VersionId=v1["VersionId"], **sse(KEY_B))
    assert s3.get_object(Bucket=bucket, Key="v", **sse(KEY_B))["Body"].read() == two
    by_id = s3.get_object(Bucket=bucket, Key="v", VersionId=v2["VersionId"], **sse(KEY_B))
    assert by_id["VersionId"] == v2["VersionId"]
    # Conditional reads work with the (random) ETag.
    etag = s3.head_object(Bucket=bucket, Key="v", **sse(KEY_B))["ETag"]
    assert s3.get_object(Bucket=bucket, Key="v", IfMatch=etag, **sse(KEY_B))["Body"].read() == two


def test_a_browser_form_upload_with_sse_c_fields(node, admin_key, s3, bucket):
    fields, conditions = basic(bucket, "form/o", **{
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": base64.b64encode(KEY_A).decode(),
        "x-amz-server-side-encryption-customer-key-MD5": key_md5(KEY_A),
    })
    data = b"posted secret " * 500
    r = post(node, admin_key, bucket, fields, conditions, data)
    assert r.status_code == 204, r.content
    fails("InvalidRequest", 400, s3.get_object, Bucket=bucket, Key="form/o")
    assert s3.get_object(Bucket=bucket, Key="form/o", **sse(KEY_A))["Body"].read() == data


def raw_put(node, key, bucket, obj, headers):
    return signed_request(node, key, "PUT", bucket, obj, body=b"x", headers=headers)


def test_malformed_headers_are_refused(node, admin_key, bucket):
    k = base64.b64encode(KEY_A).decode()
    good = {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": k,
        "x-amz-server-side-encryption-customer-key-MD5": key_md5(KEY_A),
    }
    r = raw_put(node, admin_key, bucket, "ok", good)
    assert r.status == 200, r.body
    assert r.header("x-amz-server-side-encryption-customer-algorithm") == "AES256"
    assert r.header("x-amz-server-side-encryption-customer-key-MD5") == key_md5(KEY_A)
    short = base64.b64encode(KEY_A[:16]).decode()
    cases = [
        {**good, "x-amz-server-side-encryption-customer-algorithm": "AES128"},
        {**good, "x-amz-server-side-encryption-customer-key": short,
         "x-amz-server-side-encryption-customer-key-MD5": key_md5(KEY_A[:16])},
        {**good, "x-amz-server-side-encryption-customer-key-MD5": key_md5(KEY_B)},
        {**good, "x-amz-server-side-encryption-customer-key": "not base64!"},
        {k2: v for k2, v in good.items() if not k2.endswith("-key")},
        {k2: v for k2, v in good.items() if not k2.endswith("-MD5")},
        {k2: v for k2, v in good.items() if not k2.endswith("-algorithm")},
    ]
    for h in cases:
        r = raw_put(node, admin_key, bucket, "bad", h)
        assert (r.status, r.code) == (400, "InvalidArgument"), (h, r.body)


def test_a_node_may_require_https_for_sse_c(tmp_path):
    # `[s3_api] sse_c_require_https`: SSE-C only through a TLS proxy that
    # says so (X-Forwarded-Proto), as AWS refuses SSE-C over HTTP.
    node = Node(tmp_path / "node")
    node.config.write_text(node.config.read_text().replace("[s3_api]\n", "[s3_api]\nsse_c_require_https = true\n"))
    node.start()
    try:
        key = node.create_key("k", create_bucket=True)
        s3_client(node, key).create_bucket(Bucket="sse-https")
        headers = {
            "x-amz-server-side-encryption-customer-algorithm": "AES256",
            "x-amz-server-side-encryption-customer-key": base64.b64encode(KEY_A).decode(),
            "x-amz-server-side-encryption-customer-key-MD5": key_md5(KEY_A),
        }
        r = raw_put(node, key, "sse-https", "o", headers)
        assert (r.status, r.code) == (400, "InvalidRequest"), r.body
        assert "secure connection" in r.message
        r = raw_put(node, key, "sse-https", "o", {**headers, "x-forwarded-proto": "https"})
        assert r.status == 200, r.body
        assert raw_put(node, key, "sse-https", "plain", {}).status == 200
    finally:
        node.stop()


def test_copies_between_plain_and_encrypted(s3, bucket):
    body = own_bytes(MiB + 300, 9)
    s3.put_object(Bucket=bucket, Key="plain", Body=body)
    r = s3.copy_object(Bucket=bucket, Key="enc-a", CopySource={"Bucket": bucket, "Key": "plain"}, **sse(KEY_A))
    echoed(r, KEY_A)
    assert s3.get_object(Bucket=bucket, Key="enc-a", **sse(KEY_A))["Body"].read() == body
    fails("InvalidRequest", 400, s3.get_object, Bucket=bucket, Key="enc-a")
    # Encrypted source without its key.
    fails("InvalidRequest", 400, s3.copy_object, Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "enc-a"})
    fails("AccessDenied", 403, s3.copy_object, Bucket=bucket, Key="x",
          CopySource={"Bucket": bucket, "Key": "enc-a"}, **copy_sse(KEY_B))
    # Encrypted to encrypted under a new key (rotation), and back to plain.
    s3.copy_object(Bucket=bucket, Key="enc-b", CopySource={"Bucket": bucket, "Key": "enc-a"},
                   **copy_sse(KEY_A), **sse(KEY_B))
    assert s3.get_object(Bucket=bucket, Key="enc-b", **sse(KEY_B))["Body"].read() == body
    fails("AccessDenied", 403, s3.get_object, Bucket=bucket, Key="enc-b", **sse(KEY_A))
    s3.copy_object(Bucket=bucket, Key="back", CopySource={"Bucket": bucket, "Key": "enc-b"}, **copy_sse(KEY_B))
    got = s3.get_object(Bucket=bucket, Key="back")
    assert got["Body"].read() == body and got["ETag"].strip('"') == md5_hex(body)
    assert "SSECustomerAlgorithm" not in got
    # Rewriting an object onto itself with a new key.
    s3.copy_object(Bucket=bucket, Key="enc-b", CopySource={"Bucket": bucket, "Key": "enc-b"},
                   **copy_sse(KEY_B), **sse(KEY_A))
    assert s3.get_object(Bucket=bucket, Key="enc-b", **sse(KEY_A))["Body"].read() == body


def multipart(s3, bucket, key, parts: list[bytes], enc: dict) -> dict:
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, **enc)
    if enc:
        echoed(up, enc["SSECustomerKey"])
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=i, Body=p, **enc)
        if enc:
            echoed(r, enc["SSECustomerKey"])
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": done})


def test_multipart_with_sse_c(node, s3, bucket):
    parts = [own_bytes(5 * MiB, 11), marked(MiB + 3, b"SSEC-MULTIPART-MARKER ")]
    body = b"".join(parts)
    # CompleteMultipartUpload's answer has no SSE-C fields (as on AWS).
    multipart(s3, bucket, "mp", parts, sse(KEY_A))
    got = s3.get_object(Bucket=bucket, Key="mp", **sse(KEY_A))
    assert got["Body"].read() == body
    r = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={5 * MiB - 3}-{5 * MiB + 3}", **sse(KEY_A))
    assert r["Body"].read() == body[5 * MiB - 3 : 5 * MiB + 4]
    fails("AccessDenied", 403, s3.get_object, Bucket=bucket, Key="mp", **sse(KEY_B))
    assert_not_on_disk([node.data, node.meta], [parts[0][4096:4160], parts[1][:60]])


def test_parts_need_the_uploads_key(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="k", **sse(KEY_A))
    kw = dict(Bucket=bucket, Key="k", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 100)
    fails("InvalidRequest", 400, s3.upload_part, **kw)
    # Another key than the upload's: S3's 400, not the 403 of a read.
    fails("InvalidRequest", 400, s3.upload_part, **kw, **sse(KEY_B))
    plain = s3.create_multipart_upload(Bucket=bucket, Key="p")
    fails("InvalidRequest", 400, s3.upload_part, Bucket=bucket, Key="p", UploadId=plain["UploadId"],
          PartNumber=1, Body=b"p", **sse(KEY_A))


def test_upload_part_copy_decrypts_the_source_and_encrypts_the_part(s3, bucket):
    src = own_bytes(6 * MiB, 12)
    s3.put_object(Bucket=bucket, Key="src", Body=src, **sse(KEY_A))
    up = s3.create_multipart_upload(Bucket=bucket, Key="dst", **sse(KEY_B))
    base = dict(Bucket=bucket, Key="dst", UploadId=up["UploadId"])
    fails("InvalidRequest", 400, s3.upload_part_copy, **base, PartNumber=1,
          CopySource={"Bucket": bucket, "Key": "src"}, **sse(KEY_B))
    p1 = s3.upload_part_copy(**base, PartNumber=1, CopySource={"Bucket": bucket, "Key": "src"},
                             CopySourceRange=f"bytes=0-{5 * MiB - 1}", **copy_sse(KEY_A), **sse(KEY_B))
    p2 = s3.upload_part_copy(**base, PartNumber=2, CopySource={"Bucket": bucket, "Key": "src"},
                             CopySourceRange=f"bytes={5 * MiB}-{6 * MiB - 1}", **copy_sse(KEY_A), **sse(KEY_B))
    s3.complete_multipart_upload(**base, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst", **sse(KEY_B))["Body"].read() == src


def test_aws_cli_sse_c(node, admin_key, bucket, tmp_path):
    from clients import AwsCli

    cli = AwsCli(node, admin_key, tmp_path)
    src = tmp_path / "in.bin"
    src.write_bytes(own_bytes(3 * MiB + 1, 21))
    keyfile = tmp_path / "k"
    keyfile.write_bytes(KEY_A)
    sse_c = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{keyfile}"]
    cli.run("s3", "cp", str(src), f"s3://{bucket}/cli", *sse_c)
    out = tmp_path / "out.bin"
    cli.run("s3", "cp", f"s3://{bucket}/cli", str(out), *sse_c)
    assert out.read_bytes() == src.read_bytes()
    assert cli.run("s3", "cp", f"s3://{bucket}/cli", str(out), check=False).returncode != 0


# ---------------------------------------------------------------- cluster


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "ssec")
    key = key_of(nodes[0].cli_json("key", "create", "ssec"), "ssec")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_a_corrupt_sealed_block_is_replaced_from_a_replica(three):
    # Sealed blocks replicate, verify and resync as stored: a copy changed
    # on one node is skipped on read, quarantined and fetched again.
    nodes, key = three
    b = bucket_name("ssec-scrub")
    s3_client(nodes[0], key).create_bucket(Bucket=b)
    before = set(block_sizes(nodes[1]))
    body = own_bytes(2 * MiB + 100, 41)
    s3_client(nodes[0], key).put_object(Bucket=b, Key="o", Body=body, **sse(KEY_A))
    wait_for(lambda: all(len(set(block_sizes(n)) - before) == 3 for n in nodes), 30, "3 sealed blocks everywhere")
    victim = sorted(set(block_sizes(nodes[1])) - before)[0]
    assert not victim.endswith(".zst")
    path = next(p for p in nodes[1].data.rglob(victim) if "quarantine" not in p.parts)
    good = next(nodes[0].data.rglob(victim)).read_bytes()
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    c1 = s3_client(nodes[1], key)
    assert c1.get_object(Bucket=b, Key="o", **sse(KEY_A))["Body"].read() == body
    wait_for(lambda: path.exists() and path.read_bytes() == good, 30, "the sealed copy fetched again")
    assert c1.get_object(Bucket=b, Key="o", Range="bytes=0-9", **sse(KEY_A))["Body"].read() == body[:10]


def test_sse_c_through_every_node_of_a_cluster(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-ssec")
    clients[0].create_bucket(Bucket=b)
    noise = own_bytes(2 * MiB + 5, 31)
    small = marked(700, b"SSEC-CLUSTER-INLINE ")
    text = marked(MiB + 9, b"SSEC-CLUSTER-TEXT ")
    clients[0].put_object(Bucket=b, Key="noise", Body=noise, **sse(KEY_A))
    clients[1].put_object(Bucket=b, Key="small", Body=small, **sse(KEY_A))
    parts = [own_bytes(5 * MiB, 32), text]
    up = clients[2].create_multipart_upload(Bucket=b, Key="mp", **sse(KEY_B))
    done = []
    for i, p in enumerate(parts, 1):
        r = clients[i - 1].upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=i, Body=p, **sse(KEY_B))
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    clients[1].complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"],
                                         MultipartUpload={"Parts": done}, **sse(KEY_B))
    for c in clients:
        assert c.get_object(Bucket=b, Key="noise", **sse(KEY_A))["Body"].read() == noise
        assert c.get_object(Bucket=b, Key="small", **sse(KEY_A))["Body"].read() == small
        r = c.get_object(Bucket=b, Key="noise", Range="bytes=1048570-1048590", **sse(KEY_A))
        assert r["Body"].read() == noise[1048570:1048591]
        assert c.get_object(Bucket=b, Key="mp", **sse(KEY_B))["Body"].read() == b"".join(parts)
        echoed(c.head_object(Bucket=b, Key="mp", **sse(KEY_B)), KEY_B)
        fails("AccessDenied", 403, c.get_object, Bucket=b, Key="noise", **sse(KEY_B))
        fails("InvalidRequest", 400, c.get_object, Bucket=b, Key="small")
    clients[2].copy_object(Bucket=b, Key="rotated", CopySource={"Bucket": b, "Key": "noise"},
                           **copy_sse(KEY_A), **sse(KEY_B))
    assert clients[0].get_object(Bucket=b, Key="rotated", **sse(KEY_B))["Body"].read() == noise
    clients[0].put_object(Bucket=b, Key="witness", Body=marked(900, b"PLAIN-WITNESS "))
    # Stopped, so that every node's metadata store is on disk in full.
    for n in nodes:
        n.stop()
    roots = [p for n in nodes for p in (n.data, n.meta)]
    for n in nodes:
        assert any(b"PLAIN-WITNESS " * 3 in f for f in stored_bytes([n.meta])), "the search misses inline data"
    assert_not_on_disk(roots, [noise[5000:5064], small[:60], text[:60], parts[0][9000:9064]])


def test_no_key_material_in_the_logs(three):
    nodes, _ = three
    b64 = [base64.b64encode(k).decode() for k in (KEY_A, KEY_B)]
    for n in nodes:
        log = n.log.read_text(errors="replace")
        assert not any(k in log for k in b64)
