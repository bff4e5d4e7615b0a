"""SSE-S3: server-side encryption with keys the cluster manages
(`x-amz-server-side-encryption: AES256`) on PUT, GET, HEAD, ranges, copies,
multipart uploads and browser forms, a bucket's default encryption
(Put/Get/DeleteBucketEncryption), the errors S3 gives, the master key a node
derives or is given, and through every node of a 3-node cluster; on disk, no
block file or metadata store holds the plaintext.

References: AWS S3 API reference, PutObject, GetObject, HeadObject,
CopyObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload
(`ServerSideEncryption` in each response), PutBucketEncryption,
GetBucketEncryption (`ServerSideEncryptionConfigurationNotFoundError`),
DeleteBucketEncryption; S3 user guide, "Using server-side encryption with
Amazon S3 managed keys" (the ETag of an SSE-S3 object is the MD5 of its
content) and "Using dual-layer server-side encryption" (DSSE-KMS, which this node
answers `501 NotImplemented`). SSE-KMS is test_sse_kms.py's."""

from __future__ import annotations

import json
import re
import secrets

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, Node, bucket_name, error_code, http_status, md5_hex, random_bytes, s3_client
from cluster_testlib import key_of, laid_out_cluster
from post_form_testlib import basic, post
from test_sse_c import assert_not_on_disk, marked, sse, stored_bytes

AES = {"ServerSideEncryption": "AES256"}
KEY_A = bytes(range(32))


def own_bytes(n: int, seed: int) -> bytes:
    """Random bytes no other module writes (the on-disk checks would take
    another module's plain copy for a leak)."""
    return random_bytes(n, 0x55E5_0000 + seed)


def fails(code: str, status: int, fn, **kw) -> None:
    with pytest.raises(ClientError) as e:
        fn(**kw)
    assert (http_status(e.value), error_code(e.value)) == (status, code), e.value.response


def test_an_sse_s3_put_is_sealed_on_disk_and_read_back_plain(tmp_path):
    node = Node(tmp_path / "node")
    node.start()
    try:
        key = node.create_key("k", create_bucket=True)
        s3 = s3_client(node, key)
        s3.create_bucket(Bucket="sse-s3-disk")
        bodies = {
            "small": marked(1000, b"SSE-S3-INLINE-MARKER "),
            "text": marked(2 * MiB + 77, b"SSE-S3-COMPRESSIBLE-MARKER "),
            "noise": own_bytes(MiB + 500, 1),
        }
        answers = {k: s3.put_object(Bucket="sse-s3-disk", Key=k, Body=b, **AES) for k, b in bodies.items()}
        s3.put_object(Bucket="sse-s3-disk", Key="witness", Body=marked(900, b"PLAIN-WITNESS "))
    finally:
        node.stop()
    files = stored_bytes([node.data, node.meta])
    assert any(b"PLAIN-WITNESS " * 3 in f for f in files), "the search misses inline data"
    b = bodies
    assert_not_on_disk([node.data, node.meta], [b["small"][:60], b["text"][:60], b["noise"][1000:1064]])
    for k, r in answers.items():
        assert r["ServerSideEncryption"] == "AES256"
        assert r["ETag"].strip('"') == md5_hex(bodies[k]), "an SSE-S3 ETag is the MD5 of the content"
    node.start()
    try:
        s3 = s3_client(node, key)
        for k, body in bodies.items():
            r = s3.get_object(Bucket="sse-s3-disk", Key=k)
            assert r["ServerSideEncryption"] == "AES256"
            assert r["Body"].read() == body
            assert s3.head_object(Bucket="sse-s3-disk", Key=k)["ServerSideEncryption"] == "AES256"
        r = s3.get_object(Bucket="sse-s3-disk", Key="noise", Range="bytes=1048570-1048600")
        assert r["Body"].read() == bodies["noise"][1048570:1048601]
        assert "ServerSideEncryption" not in s3.head_object(Bucket="sse-s3-disk", Key="witness")
    finally:
        node.stop()


def test_a_bucket_default_encrypts_writes_that_ask_for_nothing(s3, bucket):
    fails("ServerSideEncryptionConfigurationNotFoundError", 404, s3.get_bucket_encryption, Bucket=bucket)
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]})
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules == [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]
    body = own_bytes(3000, 2)
    assert s3.put_object(Bucket=bucket, Key="d", Body=body)["ServerSideEncryption"] == "AES256"
    r = s3.get_object(Bucket=bucket, Key="d")
    assert (r["ServerSideEncryption"], r["Body"].read()) == ("AES256", body)
    # SSE-C wins over the bucket's default.
    r = s3.put_object(Bucket=bucket, Key="c", Body=body, **sse(KEY_A))
    assert "ServerSideEncryption" not in r and r["SSECustomerAlgorithm"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="c", **sse(KEY_A))["Body"].read() == body
    up = s3.create_multipart_upload(Bucket=bucket, Key="m")
    assert up["ServerSideEncryption"] == "AES256"
    s3.abort_multipart_upload(Bucket=bucket, Key="m", UploadId=up["UploadId"])
    assert s3.delete_bucket_encryption(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 204
    fails("ServerSideEncryptionConfigurationNotFoundError", 404, s3.get_bucket_encryption, Bucket=bucket)
    assert "ServerSideEncryption" not in s3.put_object(Bucket=bucket, Key="p", Body=body)
    # What was written under the default stays readable.
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == body


def test_what_s3_refuses_is_refused(s3, bucket):
    put = s3.put_object
    fails("InvalidArgument", 400, put, Bucket=bucket, Key="x", Body=b"x", **AES, **sse(KEY_A))
    fails("InvalidArgument", 400, put, Bucket=bucket, Key="x", Body=b"x", **AES, SSEKMSKeyId="k")
    # DSSE-KMS is not built: refused, never stored in the clear.
    fails("NotImplemented", 501, put, Bucket=bucket, Key="x", Body=b"x", ServerSideEncryption="aws:kms:dsse")
    fails("NotImplemented", 501, s3.put_bucket_encryption, Bucket=bucket,
          ServerSideEncryptionConfiguration={"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms:dsse"}}]})
    fails("MalformedXML", 400, s3.put_bucket_encryption, Bucket=bucket,
          ServerSideEncryptionConfiguration={"Rules": [{"BucketKeyEnabled": True}]})
    fails("NoSuchKey", 404, s3.get_object, Bucket=bucket, Key="x")
    s3.put_object(Bucket=bucket, Key="s3", Body=b"sealed", **AES)
    # Customer keys for a managed object are not applicable.
    fails("InvalidRequest", 400, s3.get_object, Bucket=bucket, Key="s3", **sse(KEY_A))


def test_an_unknown_algorithm_is_an_invalid_argument(node, admin_key, bucket):
    from hangar_testlib import signed_request

    r = signed_request(node, admin_key, "PUT", bucket, "x", headers={"x-amz-server-side-encryption": "AES128"},
                       body=b"x")
    assert (r.status, r.code) == (400, "InvalidArgument"), r.body


def test_multipart_and_copies_under_sse_s3(s3, bucket):
    parts = [own_bytes(5 * MiB, 3), marked(MiB + 3, b"SSE-S3-PART ")]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", **AES)
    assert up["ServerSideEncryption"] == "AES256"
    done = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=i, Body=p)
        assert r["ServerSideEncryption"] == "AES256"
        assert r["ETag"].strip('"') == md5_hex(p)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    r = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": done})
    assert r["ServerSideEncryption"] == "AES256"
    whole = b"".join(parts)
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == whole
    assert s3.get_object(Bucket=bucket, Key="mp", PartNumber=2)["Body"].read() == parts[1]

    # SSE-S3 → plain, plain → SSE-S3, SSE-S3 → SSE-C and back.
    r = s3.copy_object(Bucket=bucket, Key="plain", CopySource={"Bucket": bucket, "Key": "mp"})
    assert "ServerSideEncryption" not in r
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="plain")
    r = s3.copy_object(Bucket=bucket, Key="again", CopySource={"Bucket": bucket, "Key": "plain"}, **AES)
    assert r["ServerSideEncryption"] == "AES256"
    s3.copy_object(Bucket=bucket, Key="customer", CopySource={"Bucket": bucket, "Key": "again"}, **sse(KEY_A))
    assert s3.get_object(Bucket=bucket, Key="customer", **sse(KEY_A))["Body"].read() == whole
    for k in ("plain", "again"):
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == whole
    # A copy onto itself must change something; asking for SSE-S3 does.
    fails("InvalidRequest", 400, s3.copy_object, Bucket=bucket, Key="again",
          CopySource={"Bucket": bucket, "Key": "again"})
    r = s3.copy_object(Bucket=bucket, Key="plain", CopySource={"Bucket": bucket, "Key": "plain"}, **AES)
    assert s3.head_object(Bucket=bucket, Key="plain")["ServerSideEncryption"] == "AES256"
    # A part copied from an SSE-S3 source into a plain upload.
    up = s3.create_multipart_upload(Bucket=bucket, Key="pc")
    r = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=up["UploadId"], PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "again"}, CopySourceRange="bytes=0-5242879")
    s3.complete_multipart_upload(Bucket=bucket, Key="pc", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}]})
    got = s3.get_object(Bucket=bucket, Key="pc")
    assert "ServerSideEncryption" not in got and got["Body"].read() == whole[:5 * MiB]


def test_a_browser_form_upload_with_sse_s3(node, admin_key, s3, bucket):
    fields, conditions = basic(bucket, "form", **{"x-amz-server-side-encryption": "AES256"})
    r = post(node, admin_key, bucket, fields, conditions, b"form data")
    assert r.status_code == 204, r.content
    assert r.headers.get("x-amz-server-side-encryption") == "AES256"
    assert s3.head_object(Bucket=bucket, Key="form")["ServerSideEncryption"] == "AES256"
    assert s3.get_object(Bucket=bucket, Key="form")["Body"].read() == b"form data"


def test_a_policy_can_require_encryption(node, admin_key, s3, bucket):
    # The AWS user guide's example: deny PutObject without SSE-S3.
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                       "Resource": f"arn:aws:s3:::{bucket}/*",
                       "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}}]}))
    fails("AccessDenied", 403, s3.put_object, Bucket=bucket, Key="plain", Body=b"x")
    assert s3.put_object(Bucket=bucket, Key="sealed", Body=b"x", **AES)["ServerSideEncryption"] == "AES256"


def test_aws_cli_sse_s3(node, admin_key, bucket, tmp_path):
    from clients import AwsCli

    cli = AwsCli(node, admin_key, tmp_path)
    src = tmp_path / "in.bin"
    src.write_bytes(own_bytes(9 * MiB + 1, 4))
    cli.run("s3", "cp", str(src), f"s3://{bucket}/cli", "--sse", "AES256")
    head = json.loads(cli.run("s3api", "head-object", "--bucket", bucket, "--key", "cli").stdout)
    assert head["ServerSideEncryption"] == "AES256"
    out = tmp_path / "out.bin"
    cli.run("s3", "cp", f"s3://{bucket}/cli", str(out))
    assert out.read_bytes() == src.read_bytes()


def test_the_master_key_is_the_configured_one(tmp_path):
    node = Node(tmp_path / "node")
    master = secrets.token_hex(32)
    base = node.config.read_text()
    node.config.write_text(f'sse_master_key = "{master}"\n' + base)
    node.start()
    try:
        key = node.create_key("k", create_bucket=True)
        s3 = s3_client(node, key)
        s3.create_bucket(Bucket="mkey")
        s3.put_object(Bucket="mkey", Key="o", Body=b"under the configured key", **AES)
    finally:
        node.stop()
    # Another cluster secret does not matter when the master key is set.
    node.config.write_text(f'sse_master_key = "{master}"\n'
                           + re.sub(r'rpc_secret = "[0-9a-f]+"', f'rpc_secret = "{secrets.token_hex(32)}"', base))
    node.start()
    try:
        assert s3_client(node, key).get_object(Bucket="mkey", Key="o")["Body"].read() == b"under the configured key"
    finally:
        node.stop()
    # Another master key opens nothing, and says so rather than serving noise.
    node.config.write_text(f'sse_master_key = "{secrets.token_hex(32)}"\n' + base)
    node.start()
    try:
        fails("InternalError", 500, s3_client(node, key).get_object, Bucket="mkey", Key="o")
        assert "does not open with this node's master key" in node.log.read_text()
    finally:
        node.stop()
    node.config.write_text('sse_master_key = "not hex"\n' + base)
    with pytest.raises(RuntimeError):
        node.start(timeout=20)
    assert "sse_master_key must be 64 hex characters" in node.log.read_text()


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "sses3")
    key = key_of(nodes[0].cli_json("key", "create", "sses3"), "sses3")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_sse_s3_through_every_node_of_a_cluster(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-sse-s3")
    clients[0].create_bucket(Bucket=b)
    clients[1].put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    noise = own_bytes(2 * MiB + 5, 5)
    small = marked(700, b"SSE-S3-CLUSTER-INLINE ")
    assert clients[2].put_object(Bucket=b, Key="noise", Body=noise)["ServerSideEncryption"] == "AES256"
    clients[0].put_object(Bucket=b, Key="small", Body=small, **AES)
    for c in clients:
        for k, body in (("noise", noise), ("small", small)):
            r = c.get_object(Bucket=b, Key=k)
            assert (r["ServerSideEncryption"], r["Body"].read()) == ("AES256", body)
    clients[0].put_object(Bucket=b, Key="witness", Body=marked(900, b"PLAIN-WITNESS "), ServerSideEncryption="AES256")
    for n in nodes:
        n.stop()
    roots = [p for n in nodes for p in (n.data, n.meta)]
    assert_not_on_disk(roots, [noise[5000:5064], small[:60]])
