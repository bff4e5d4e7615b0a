"""Tags and CORS in a 3-node cluster (replication factor 3): set through one
node, seen through every other at once — object tags live in the object
rows of the bucket's partition, bucket tags and CORS rules in the bucket
row every node holds; a preflight is answered by any node."""

from __future__ import annotations

import json

import pytest

from clients import AwsCli
from hangar_testlib import bucket_name, s3_client, send, signed_request
from cluster_testlib import key_of, laid_out_cluster


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "tc")
    key = key_of(nodes[0].cli_json("key", "create", "tags"), "tags")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def tags_of(s3, bucket, key) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]}


def test_object_tags_set_through_one_node_are_seen_through_the_others(three):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-tags")
    clients[0].create_bucket(Bucket=b)
    clients[0].put_object(Bucket=b, Key="o", Body=b"x" * 5000, Tagging="set=at-put")
    for c in clients:
        assert tags_of(c, b, "o") == {"set": "at-put"}
        assert c.get_object(Bucket=b, Key="o")["TagCount"] == 1
    for i, writer in enumerate(clients):
        writer.put_object_tagging(Bucket=b, Key="o", Tagging={"TagSet": [{"Key": "via", "Value": str(i)}]})
        for reader in clients:
            assert tags_of(reader, b, "o") == {"via": str(i)}
            head = reader.head_object(Bucket=b, Key="o")
            assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "1"
    clients[1].delete_object_tagging(Bucket=b, Key="o")
    for c in clients:
        assert tags_of(c, b, "o") == {}
        assert "TagCount" not in c.get_object(Bucket=b, Key="o")
    # Conditional PUTs go through the coordinator of the bucket's partition
    # (for two of the three writers another node): the tags go with the row.
    for i, writer in enumerate(clients):
        writer.put_object(Bucket=b, Key=f"cond{i}", Body=b"c", IfNoneMatch="*", Tagging=f"cond={i}")
        for reader in clients:
            assert tags_of(reader, b, f"cond{i}") == {"cond": str(i)}
    # Multipart and copy through different nodes.
    up = clients[2].create_multipart_upload(Bucket=b, Key="mp", Tagging="mp=1")
    part = clients[0].upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p" * 2000)
    clients[1].complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"],
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    clients[2].copy_object(Bucket=b, Key="cp", CopySource={"Bucket": b, "Key": "mp"})
    for c in clients:
        assert tags_of(c, b, "mp") == {"mp": "1"}
        assert tags_of(c, b, "cp") == {"mp": "1"}


def test_bucket_tags_and_cors_set_through_one_node_apply_on_every_node(three, tmp_path):
    nodes, key = three
    clients = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-cors")
    clients[1].create_bucket(Bucket=b)
    clients[1].put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "cost", "Value": "web"}]})
    # The CORS rules through aws-cli on the third node.
    aws = AwsCli(nodes[2], key, tmp_path)
    cfg = {"CORSRules": [{"AllowedOrigins": ["https://ui.test"], "AllowedMethods": ["GET", "PUT"],
                          "AllowedHeaders": ["content-type"], "ExposeHeaders": ["ETag"]}]}
    aws.run("s3api", "put-bucket-cors", "--bucket", b, "--cors-configuration", json.dumps(cfg))
    clients[0].put_object(Bucket=b, Key="k", Body=b"hello")
    for n, c in zip(nodes, clients):
        assert c.get_bucket_tagging(Bucket=b)["TagSet"] == [{"Key": "cost", "Value": "web"}]
        assert c.get_bucket_cors(Bucket=b)["CORSRules"] == cfg["CORSRules"]
        r = send(n, "OPTIONS", f"/{b}/k", headers={
            "Host": f"127.0.0.1:{n.s3_port}", "Origin": "https://ui.test",
            "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "Content-Type"})
        assert r.status == 200, (n.root, r.body)
        assert r.header("access-control-allow-origin") == "https://ui.test"
        assert r.header("access-control-allow-headers") == "content-type"
        r = signed_request(n, key, "GET", b, "k", headers={"Origin": "https://ui.test"})
        assert r.status == 200 and r.header("access-control-expose-headers") == "ETag"
    # Removed through the first node: gone on all.
    clients[0].delete_bucket_cors(Bucket=b)
    clients[0].delete_bucket_tagging(Bucket=b)
    for n, c in zip(nodes, clients):
        r = send(n, "OPTIONS", f"/{b}/k", headers={
            "Host": f"127.0.0.1:{n.s3_port}", "Origin": "https://ui.test", "Access-Control-Request-Method": "GET"})
        assert (r.status, r.code) == (403, "AccessForbidden"), n.root
        got = aws.run("s3api", "get-bucket-tagging", "--bucket", b, check=False)
        assert got.returncode != 0 and "NoSuchTagSet" in got.stderr
