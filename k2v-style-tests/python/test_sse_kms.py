"""SSE-KMS: `x-amz-server-side-encryption: aws:kms` under keys the operator
creates, rotates, disables and enables (`hangar kms`, the admin API's
CreateKmsKey / ListKmsKeys / GetKmsKeyInfo / UpdateKmsKey), on one node
and through every node of a 3-node cluster.

References: AWS S3 API reference, PutObject and GetObject
(`x-amz-server-side-encryption-aws-kms-key-id` in the request and the
response), PutBucketEncryption (`KMSMasterKeyID`); S3 user guide,
"Specifying server-side encryption with AWS KMS (SSE-KMS)" (without a key
id, the AWS managed key `aws/s3`; the ETag is not the MD5 of the content)
and "Troubleshooting" (`KMS.DisabledException`, `KMS.NotFoundException`
as `400`)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import MiB, bucket_name, error_code, http_status, md5_hex, random_bytes, s3_client
from cluster_testlib import key_of, laid_out_cluster
from test_sse_c import assert_not_on_disk, marked


def kms(key_id: str | None = None) -> dict:
    args = {"ServerSideEncryption": "aws:kms"}
    if key_id:
        args["SSEKMSKeyId"] = key_id
    return args


def fails(code: str, status: int, fn, **kw) -> None:
    with pytest.raises(ClientError) as e:
        fn(**kw)
    assert (http_status(e.value), error_code(e.value)) == (status, code), e.value.response


def test_an_object_under_a_kms_key_names_it_and_opens_while_it_is_enabled(node, s3, bucket):
    k = node.cli_json("kms", "create", "--description", "one node")
    assert (k["enabled"], k["versions"], k["description"]) == (True, 1, "one node")
    body = random_bytes(2 * MiB + 3, 0x6B_0001)
    r = s3.put_object(Bucket=bucket, Key="o", Body=body, **kms(k["id"]))
    assert (r["ServerSideEncryption"], r["SSEKMSKeyId"]) == ("aws:kms", k["id"])
    assert r["ETag"].strip('"') != md5_hex(body), "an SSE-KMS ETag is not the MD5 of the content"
    g = s3.get_object(Bucket=bucket, Key="o")
    assert (g["ServerSideEncryption"], g["SSEKMSKeyId"], g["Body"].read()) == ("aws:kms", k["id"], body)
    assert s3.get_object(Bucket=bucket, Key="o", Range="bytes=5-9")["Body"].read() == body[5:10]
    # An ARN names the key too.
    arn = f"arn:aws:kms:garage:000000000000:key/{k['id']}"
    assert s3.put_object(Bucket=bucket, Key="arn", Body=b"x", **kms(arn))["SSEKMSKeyId"] == k["id"]

    node.cli("kms", "disable", k["id"])
    fails("KMS.DisabledException", 400, s3.get_object, Bucket=bucket, Key="o")
    fails("KMS.DisabledException", 400, s3.put_object, Bucket=bucket, Key="p", Body=b"x", **kms(k["id"]))
    fails("KMS.DisabledException", 400, s3.copy_object, Bucket=bucket, Key="c", CopySource={"Bucket": bucket, "Key": "o"})
    # HEAD needs no key material: it still answers.
    assert s3.head_object(Bucket=bucket, Key="o")["SSEKMSKeyId"] == k["id"]
    node.cli("kms", "enable", k["id"])
    assert s3.get_object(Bucket=bucket, Key="o")["Body"].read() == body


def test_rotation_seals_new_data_with_new_material_and_keeps_the_old_readable(node, s3, bucket):
    k = node.cli_json("kms", "create")
    s3.put_object(Bucket=bucket, Key="before", Body=b"old material", **kms(k["id"]))
    r = node.cli_json("kms", "rotate", k["id"])
    assert r["versions"] == 2 and r["current_version_msec"] >= k["current_version_msec"]
    s3.put_object(Bucket=bucket, Key="after", Body=b"new material", **kms(k["id"]))
    assert s3.get_object(Bucket=bucket, Key="before")["Body"].read() == b"old material"
    assert s3.get_object(Bucket=bucket, Key="after")["Body"].read() == b"new material"
    listed = {x["id"]: x for x in node.cli_json("kms", "list")}
    assert listed[k["id"]]["versions"] == 2


def test_the_default_key_unknown_keys_and_bucket_defaults(node, s3, bucket):
    r = s3.put_object(Bucket=bucket, Key="d", Body=b"default key", **kms())
    assert (r["ServerSideEncryption"], r["SSEKMSKeyId"]) == ("aws:kms", "aws/s3")
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"default key"
    fails("KMS.NotFoundException", 400, s3.put_object, Bucket=bucket, Key="x", Body=b"x",
          **kms("00000000-0000-0000-0000-000000000000"))
    fails("NotImplemented", 501, s3.put_object, Bucket=bucket, Key="x", Body=b"x", ServerSideEncryption="aws:kms:dsse")
    k = node.cli_json("kms", "create")
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": k["id"]}}]})
    rule = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": k["id"]}
    assert s3.put_object(Bucket=bucket, Key="by-default", Body=b"x")["SSEKMSKeyId"] == k["id"]
    # A request's own choice wins over the default.
    assert s3.put_object(Bucket=bucket, Key="s3", Body=b"x", ServerSideEncryption="AES256")["ServerSideEncryption"] == "AES256"
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")
    assert up["SSEKMSKeyId"] == k["id"]
    part = random_bytes(5 * MiB, 0x6B_0002)
    p1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=part)
    assert p1["SSEKMSKeyId"] == k["id"]
    node.cli("kms", "disable", k["id"])
    fails("KMS.DisabledException", 400, s3.upload_part, Bucket=bucket, Key="mp", UploadId=up["UploadId"],
          PartNumber=2, Body=b"x")
    node.cli("kms", "enable", k["id"])
    done = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up["UploadId"],
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]})
    assert done["SSEKMSKeyId"] == k["id"]
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == part


def test_the_cli_and_admin_api_answer_unknown_keys_as_not_found(node):
    r = node.cli("kms", "info", "no-such-key", check=False)
    assert r.returncode == 3, r.stderr
    assert "hangar kms list" in r.stderr


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "kms")
    key = key_of(nodes[0].cli_json("key", "create", "kms"), "kms")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_kms_keys_through_every_node_of_a_cluster(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-kms")
    clients[0].create_bucket(Bucket=b)
    k = nodes[1].cli_json("kms", "create", "--description", "cluster")
    body = marked(MiB + 11, b"SSE-KMS-CLUSTER ")
    small = marked(600, b"SSE-KMS-CLUSTER-INLINE ")
    clients[2].put_object(Bucket=b, Key="big", Body=body, **kms(k["id"]))
    clients[0].put_object(Bucket=b, Key="small", Body=small, **kms(k["id"]))
    for c in clients:
        assert c.get_object(Bucket=b, Key="big")["Body"].read() == body
        assert c.get_object(Bucket=b, Key="small")["Body"].read() == small
    # Disabled through one node: refused through every node.
    nodes[2].cli("kms", "disable", k["id"])
    for c in clients:
        fails("KMS.DisabledException", 400, c.get_object, Bucket=b, Key="big")
    nodes[0].cli("kms", "enable", k["id"])
    assert [n.cli_json("kms", "info", k["id"])["enabled"] for n in nodes] == [True] * 3
    for n in nodes:
        n.stop()
    roots = [p for n in nodes for p in (n.data, n.meta)]
    assert_not_on_disk(roots, [body[:60], small[:60]])
