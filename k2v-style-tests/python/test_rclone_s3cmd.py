"""rclone and s3cmd copying a directory tree up and back."""

import pytest

from clients import TREE, Rclone, S3cmd, assert_same_tree, write_tree


@pytest.fixture
def rclone(node, admin_key):
    return Rclone(node, admin_key)


@pytest.fixture
def s3cmd(node, admin_key, tmp_path):
    return S3cmd(node, admin_key, tmp_path)


def _keys(s3, bucket):
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_rclone_copy_check_and_back(rclone, s3, bucket, tmp_path):
    src = write_tree(tmp_path / "src")
    rclone.run("copy", str(src), f"hg:{bucket}/tree")
    assert _keys(s3, bucket) == sorted(f"tree/{k}" for k in TREE)
    # rclone check compares sizes and MD5 (ETag) of every file
    rclone.run("check", str(src), f"hg:{bucket}/tree")
    dst = tmp_path / "dst"
    rclone.run("copy", f"hg:{bucket}/tree", str(dst))
    assert_same_tree(src, dst)
    out = rclone.run("lsf", "-R", f"hg:{bucket}/tree").stdout
    assert "dir/sub/text ü.txt" in out.splitlines()


def test_rclone_sync_detects_change_and_deletes(rclone, s3, bucket, tmp_path):
    src = write_tree(tmp_path / "src")
    rclone.run("sync", str(src), f"hg:{bucket}")
    (src / "small.txt").write_bytes(b"changed content")
    (src / "one.bin").unlink()
    rclone.run("sync", str(src), f"hg:{bucket}")
    rclone.run("check", str(src), f"hg:{bucket}")
    assert "one.bin" not in _keys(s3, bucket)
    assert s3.get_object(Bucket=bucket, Key="small.txt")["Body"].read() == b"changed content"
    # a tampered object is detected by rclone check
    s3.put_object(Bucket=bucket, Key="small.txt", Body=b"changed contenX")
    res = rclone.run("check", str(src), f"hg:{bucket}", check=False)
    assert res.returncode != 0


def test_rclone_mkdir_purge(rclone, s3, tmp_path):
    from hangar_testlib import bucket_name

    name = bucket_name("rclone-mkdir")
    rclone.run("mkdir", f"hg:{name}")
    s3.head_bucket(Bucket=name)
    src = write_tree(tmp_path / "src", {"a/b": b"x", "c": b""})
    rclone.run("copy", str(src), f"hg:{name}")
    rclone.run("purge", f"hg:{name}")
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_s3cmd_put_get_tree(s3cmd, s3, bucket, tmp_path):
    src = write_tree(tmp_path / "src")
    s3cmd.run("put", "--recursive", "--disable-multipart", str(src) + "/", f"s3://{bucket}/tree/")
    assert _keys(s3, bucket) == sorted(f"tree/{k}" for k in TREE)
    dst = tmp_path / "dst"
    dst.mkdir()
    s3cmd.run("get", "--recursive", f"s3://{bucket}/tree/", str(dst) + "/")
    assert_same_tree(src, dst)


def test_s3cmd_sync_ls_del(s3cmd, s3, bucket, tmp_path):
    src = write_tree(tmp_path / "src")
    s3cmd.run("sync", "--disable-multipart", str(src) + "/", f"s3://{bucket}/")
    assert _keys(s3, bucket) == sorted(TREE)
    out = s3cmd.run("ls", "--recursive", f"s3://{bucket}/").stdout
    assert f"s3://{bucket}/deep/a/b/c/d/leaf.bin" in out
    out = s3cmd.run("sync", "--disable-multipart", str(src) + "/", f"s3://{bucket}/").stdout
    assert "upload:" not in out
    dst = tmp_path / "dst"
    dst.mkdir()
    s3cmd.run("sync", f"s3://{bucket}/", str(dst) + "/")
    assert_same_tree(src, dst)
    s3cmd.run("del", f"s3://{bucket}/small.txt")
    s3cmd.run("del", "--recursive", "--force", f"s3://{bucket}/dir/")
    assert _keys(s3, bucket) == sorted(k for k in TREE if k != "small.txt" and not k.startswith("dir/"))


def test_s3cmd_buckets(s3cmd, s3):
    from hangar_testlib import bucket_name

    name = bucket_name("s3cmd-mb")
    s3cmd.run("mb", f"s3://{name}")
    assert f"s3://{name}" in s3cmd.run("ls").stdout
    s3cmd.run("rb", f"s3://{name}")
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
