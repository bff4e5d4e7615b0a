"""What an upload leaves in data_dir (issue 2, Storage): blocks of block_size
named by their hash under ab/cd/, zstd-compressed only when that pays,
identical blocks stored once, small objects inline (no block file)."""

import re

import pytest

from hangar_testlib import KiB, MiB, Node, compressible_bytes, random_bytes, s3_client, sha256

BLOCK = re.compile(r"^([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})(\.zst)?$")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("layout"))
    n.start()
    key = n.create_key("layout", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="layout")
    yield n, s3
    n.stop()


def _blocks(node):
    out = {}
    for p in node.data.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(node.data))
            m = BLOCK.match(rel)
            assert m, f"unexpected file in data_dir: {rel}"
            assert m.group(3).startswith(m.group(1) + m.group(2)), rel
            out[rel] = p.stat().st_size
    return out


def test_small_object_is_inline(store):
    node, s3 = store
    before = _blocks(node)
    s3.put_object(Bucket="layout", Key="small", Body=random_bytes(3 * KiB, 1))
    assert _blocks(node) == before
    assert s3.get_object(Bucket="layout", Key="small")["Body"].read() == random_bytes(3 * KiB, 1)


def test_random_blocks_stored_plain_and_deduplicated(store):
    node, s3 = store
    data = random_bytes(2 * MiB, 2)
    before = _blocks(node)
    s3.put_object(Bucket="layout", Key="rand", Body=data)
    added = {k: v for k, v in _blocks(node).items() if k not in before}
    assert len(added) == 2
    assert all(not k.endswith(".zst") and v == MiB for k, v in added.items()), added
    # the same content under another key adds no block
    s3.put_object(Bucket="layout", Key="rand-again", Body=data)
    assert len(_blocks(node)) == len(before) + 2
    assert sha256(s3.get_object(Bucket="layout", Key="rand-again")["Body"].read()) == sha256(data)


def test_compressible_blocks_stored_compressed(store):
    node, s3 = store
    data = compressible_bytes(2 * MiB + 5, 3)
    before = _blocks(node)
    s3.put_object(Bucket="layout", Key="text", Body=data)
    added = {k: v for k, v in _blocks(node).items() if k not in before}
    full = [k for k in added if added[k] > 5]
    assert len(added) == 3, added
    assert len(full) == 2 and all(k.endswith(".zst") and added[k] < MiB * 7 // 8 for k in full), added
    assert s3.get_object(Bucket="layout", Key="text")["Body"].read() == data
