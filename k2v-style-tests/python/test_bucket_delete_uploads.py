"""DeleteBucket of a bucket that holds no object but has multipart uploads
in progress: as on AWS (general purpose buckets), the deletion succeeds and
ends the uploads, and their parts' blocks are released like those of any
aborted upload (doc/s3-compatibility.md, DeleteBucket; doc/replication.md
§11). Before, the bucket's tombstone was written and the uploads stayed:
their rows, their parts' rows and block references, and the block files,
for ever, since no client could reach them through a deleted bucket.

Shown on one node and on a 3-node cluster (rf 3): the parts' block files
disappear from every node's data dir (a block file goes only once its
reference count is zero), and each node's `mpu`, `mpu_part` and `version`
rows (the parts' block lists; tombstones collected after
`tombstone_gc_delay_secs`) go back to what they were before the uploads."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from hangar_testlib import Key, Node, bucket_name, error_code, random_bytes, s3_client
from cluster_testlib import laid_out_cluster

BLOCK = re.compile(r"^[0-9a-f]{64}(\.zst)?$")
FAST_GC = "block_gc_delay_secs = 1\ntombstone_gc_delay_secs = 1\n"
TABLES = ("mpu", "mpu_part", "version")


def block_files(data: Path) -> set[str]:
    return {p.name for p in data.rglob("*") if p.is_file() and BLOCK.match(p.name)}


def table_rows(n: Node) -> dict[str, int]:
    v = n.cli_json("stats")
    me = next(x for x in v["nodes"] if x["is_self"])
    return {t: me["report"]["tables"].get(t, 0) for t in TABLES}


def wait_until(cond, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.2)


def fast_gc(n: Node) -> Node:
    n.config.write_text(FAST_GC + n.config.read_text())
    return n


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    n = fast_gc(Node(tmp_path_factory.mktemp("delmpu1")))
    n.start()
    key = n.create_key("delmpu", create_bucket=True)
    yield [n], key
    n.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "delmpu", configure=fast_gc)
    info = nodes[0].cli_json("key", "create", "delmpu")
    nodes[0].cli("key", "allow", info["access_key_id"], "--create-bucket")
    key = Key(info["access_key_id"], info["secret_access_key"], "delmpu")
    yield nodes, key
    for n in nodes:
        n.stop()


@pytest.mark.parametrize("where", ["single", "cluster"])
def test_delete_bucket_ends_its_uploads_and_frees_their_blocks(where, request):
    nodes, key = request.getfixturevalue(where)
    s3 = s3_client(nodes[0], key)
    # Through another node than the uploads where there is one.
    deleter = s3_client(nodes[-1], key)
    name = bucket_name("delmpu")
    s3.create_bucket(Bucket=name)
    rows_before = [table_rows(n) for n in nodes]
    before = [block_files(n.data) for n in nodes]

    # Two uploads of two keys, three parts of 2 MiB (two 1 MiB blocks each)
    # between them, never completed; random bytes, so no block is shared.
    uploads = []
    for k, parts in (("big/one", 2), ("two", 1)):
        up = s3.create_multipart_upload(Bucket=name, Key=k)["UploadId"]
        for p in range(1, parts + 1):
            s3.upload_part(Bucket=name, Key=k, UploadId=up, PartNumber=p,
                           Body=random_bytes(2 << 20, hash((where, k, p)) & 0xFFFF))
        uploads.append((k, up))
    listed = s3.list_multipart_uploads(Bucket=name).get("Uploads", [])
    assert sorted((u["Key"], u["UploadId"]) for u in listed) == sorted(uploads)
    # rf = number of nodes: every node holds every block (6 of them), once
    # the copies a part sends after its write quorum answered have landed.
    wait_until(lambda: all(len(block_files(n.data) - b) == 6 for n, b in zip(nodes, before)), 30,
               "every node holding the parts' 6 blocks")
    parts_blocks = [block_files(n.data) - b for n, b in zip(nodes, before)]

    # No object: the deletion succeeds (AWS aborts the uploads with it).
    deleter.delete_bucket(Bucket=name)
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert e.value.response["Error"]["Code"] in ("404", "NoSuchBucket")
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=name, Key="two", UploadId=uploads[1][1], PartNumber=2, Body=b"late")
    assert error_code(e.value) == "NoSuchBucket"

    for n, gone in zip(nodes, parts_blocks):
        wait_until(lambda: not (gone & block_files(n.data)), 30,
                   f"the parts' block files to go from {n.root.name}")
    for n, want in zip(nodes, rows_before):
        wait_until(lambda: table_rows(n) == want, 30,
                   f"{n.root.name}'s upload, part and block list rows to go (now {table_rows(n)}, "
                   f"before the uploads {want})")

    # The name can be used again, and the new bucket has no upload.
    s3.create_bucket(Bucket=name)
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    s3.delete_bucket(Bucket=name)


def test_delete_bucket_with_an_object_and_uploads_keeps_both(single):
    """BucketNotEmpty leaves the uploads alone: they can still complete."""
    [n], key = single
    s3 = s3_client(n, key)
    name = bucket_name("delmpu-full")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="obj", Body=b"x")
    up = s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    etag = s3.upload_part(Bucket=name, Key="k", UploadId=up, PartNumber=1, Body=b"part")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert error_code(e.value) == "BucketNotEmpty"
    s3.complete_multipart_upload(Bucket=name, Key="k", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert s3.get_object(Bucket=name, Key="k")["Body"].read() == b"part"
