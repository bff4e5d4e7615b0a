"""Bucket versioning in a 3-node cluster (replication factor 3): the
versioning state lives in the bucket row every node holds, each version is
a row of the bucket's partition, so a version written through one node is
listed, read, deleted and restored through any other; concurrent PUTs of
one key through all three nodes are each kept; conditional writes of a
versioned key go through the partition's coordinator."""

from __future__ import annotations

import concurrent.futures

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import bucket_name, enable, random_bytes, s3_client, versions_of
from cluster_testlib import key_of, laid_out_cluster


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "tv")
    key = key_of(nodes[0].cli_json("key", "create", "vers"), "vers")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    yield nodes, key
    for n in nodes:
        n.stop()


def test_the_story_through_three_nodes(three):
    nodes, key = three
    c = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-versions")
    c[0].create_bucket(Bucket=b)
    c[0].put_object(Bucket=b, Key="doc", Body=b"null")
    enable(c[1], b)
    for x in c:
        assert x.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    ids = [c[i].put_object(Bucket=b, Key="doc", Body=f"v{i}".encode() * 3000)["VersionId"] for i in range(3)]
    for x in c:
        assert [v["VersionId"] for _, v in versions_of(x, b)] == ids[::-1] + ["null"]
        assert x.get_object(Bucket=b, Key="doc", VersionId=ids[0])["Body"].read() == b"v0" * 3000
    marker = c[2].delete_object(Bucket=b, Key="doc")["VersionId"]
    for x in c:
        with pytest.raises(ClientError) as e:
            x.get_object(Bucket=b, Key="doc")
        assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    c[0].copy_object(Bucket=b, Key="doc", CopySource={"Bucket": b, "Key": "doc", "VersionId": ids[1]})
    for x in c:
        assert x.get_object(Bucket=b, Key="doc")["Body"].read() == b"v1" * 3000
    c[1].delete_object(Bucket=b, Key="doc", VersionId=ids[0])
    for x in c:
        listed = [v["VersionId"] for _, v in versions_of(x, b)]
        assert ids[0] not in listed and marker in listed and len(listed) == 5
    enable(c[2], b, "Suspended")
    assert c[0].put_object(Bucket=b, Key="doc", Body=b"n")["VersionId"] == "null"
    for x in c:
        assert x.get_object(Bucket=b, Key="doc", VersionId="null")["Body"].read() == b"n"


def test_concurrent_puts_through_every_node_are_each_kept(three):
    nodes, key = three
    c = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-hot")
    c[0].create_bucket(Bucket=b)
    enable(c[0], b)
    bodies = {i: random_bytes(2000 + i, seed=i) for i in range(36)}

    def put(i):
        return i, c[i % 3].put_object(Bucket=b, Key="hot", Body=bodies[i])["VersionId"]

    with concurrent.futures.ThreadPoolExecutor(9) as ex:
        acked = dict(ex.map(put, bodies))
    for x in c:
        assert sorted(v["VersionId"] for _, v in versions_of(x, b)) == sorted(acked.values())
    for i, vid in acked.items():
        assert c[(i + 1) % 3].get_object(Bucket=b, Key="hot", VersionId=vid)["Body"].read() == bodies[i]


def test_conditional_writes_of_a_versioned_key(three):
    nodes, key = three
    c = [s3_client(n, key) for n in nodes]
    b = bucket_name("cluster-cond")
    c[0].create_bucket(Bucket=b)
    enable(c[0], b)

    def create(i):
        try:
            c[i % 3].put_object(Bucket=b, Key="once", Body=str(i).encode(), IfNoneMatch="*")
            return True
        except ClientError as e:
            assert e.response["Error"]["Code"] == "PreconditionFailed"
            return False

    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        won = list(ex.map(create, range(12)))
    assert won.count(True) == 1
    assert len(versions_of(c[1], b)) == 1
