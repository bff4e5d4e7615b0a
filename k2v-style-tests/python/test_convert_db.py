"""`hangar convert-db`: a stopped node's metadata moves from sled to redb and
the node serves the same keys, buckets and objects on the new engine."""

from __future__ import annotations

import subprocess

from hangar_testlib import HANGAR_BIN, Node, random_bytes, s3_client


def convert(frm: str, to: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(HANGAR_BIN), "convert-db", "--from", frm, "--to", to],
        capture_output=True, text=True, timeout=120,
    )


def test_sled_to_redb_keeps_everything(tmp_path):
    n = Node(tmp_path / "node")
    n.config.write_text(n.config.read_text().replace('db_engine = "redb"', 'db_engine = "sled"'))
    n.start()
    key = n.create_key("conv", create_bucket=True)
    s3 = s3_client(n, key)
    s3.create_bucket(Bucket="conv")
    objects = {"small": b"inline bytes", "big": random_bytes(3 * 1024 * 1024 + 7, 5)}
    for k, v in objects.items():
        s3.put_object(Bucket="conv", Key=k, Body=v)
    assert n.stop() == 0

    sled, redb = n.meta / "db.sled", n.meta / "db.redb"
    r = convert(f"sled:{sled}", f"redb:{redb}")
    assert r.returncode == 0, r.stderr
    assert "Converted" in r.stdout
    again = convert(f"sled:{sled}", f"redb:{redb}")
    assert again.returncode != 0 and "not empty" in again.stderr

    n.config.write_text(n.config.read_text().replace('db_engine = "sled"', 'db_engine = "redb"'))
    n.start()
    try:
        s3 = s3_client(n, key)
        for k, v in objects.items():
            assert s3.get_object(Bucket="conv", Key=k)["Body"].read() == v
        assert n.cli_json("bucket", "info", "conv")["objects"] == 2
    finally:
        n.stop()
