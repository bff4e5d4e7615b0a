"""aws-cli (`aws s3` and `aws s3api`) as a subprocess with a private config."""

import json
import time

import pytest

from clients import TREE, AwsCli, assert_same_tree, write_tree
from hangar_testlib import MiB, random_bytes, sha256


@pytest.fixture
def aws(node, admin_key, tmp_path):
    return AwsCli(node, admin_key, tmp_path)


def test_s3_ls_buckets(aws, bucket):
    out = aws.run("s3", "ls").stdout
    assert bucket in out


def test_s3_cp_up_and_down(aws, s3, bucket, tmp_path):
    for name, size in (("empty", 0), ("small", 1000), ("fifty", 50 * MiB)):
        src = tmp_path / f"{name}.in"
        data = random_bytes(size, size)
        src.write_bytes(data)
        t0 = time.monotonic()
        aws.run("s3", "cp", str(src), f"s3://{bucket}/cp/{name}", timeout=240)
        assert time.monotonic() - t0 < 180
        assert s3.head_object(Bucket=bucket, Key=f"cp/{name}")["ContentLength"] == size
        dst = tmp_path / f"{name}.out"
        aws.run("s3", "cp", f"s3://{bucket}/cp/{name}", str(dst), timeout=240)
        assert sha256(dst.read_bytes()) == sha256(data)


def test_s3_ls_rm(aws, s3, bucket):
    for k in ("a/1", "a/2", "b"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"12345")
    out = aws.run("s3", "ls", f"s3://{bucket}/").stdout
    assert "PRE a/" in out and " b\n" in out
    out = aws.run("s3", "ls", "--recursive", f"s3://{bucket}/").stdout
    assert sorted(line.split()[-1] for line in out.splitlines()) == ["a/1", "a/2", "b"]
    aws.run("s3", "rm", f"s3://{bucket}/b")
    aws.run("s3", "rm", "--recursive", f"s3://{bucket}/a/")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_s3_sync_tree(aws, s3, bucket, tmp_path):
    src = write_tree(tmp_path / "src")
    t0 = time.monotonic()
    # empty files go through PutObject with Expect: 100-continue: must not stall
    aws.run("s3", "sync", str(src), f"s3://{bucket}/tree", timeout=120)
    assert time.monotonic() - t0 < 90, "aws s3 sync of a small tree took too long"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == sorted(f"tree/{k}" for k in TREE)
    dst = tmp_path / "dst"
    aws.run("s3", "sync", f"s3://{bucket}/tree", str(dst), timeout=120)
    assert_same_tree(src, dst)
    # a second sync uploads nothing
    out = aws.run("s3", "sync", str(src), f"s3://{bucket}/tree", timeout=120).stdout
    assert "upload:" not in out
    # --delete removes what is gone locally
    (src / "small.txt").unlink()
    aws.run("s3", "sync", "--delete", str(src), f"s3://{bucket}/tree", timeout=120)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert "tree/small.txt" not in keys and len(keys) == len(TREE) - 1


def test_s3api_object_ops(aws, bucket, tmp_path):
    body = tmp_path / "body"
    data = random_bytes(123_456, 9)
    body.write_bytes(data)
    put = json.loads(
        aws.run(
            "s3api", "put-object", "--bucket", bucket, "--key", "api/obj",
            "--body", str(body), "--content-type", "text/plain", "--metadata", "k1=v1",
        ).stdout
    )
    assert put["ETag"].startswith('"')
    head = json.loads(aws.run("s3api", "head-object", "--bucket", bucket, "--key", "api/obj").stdout)
    assert head["ContentLength"] == len(data)
    assert head["ContentType"] == "text/plain"
    assert head["Metadata"] == {"k1": "v1"}
    assert head["ETag"] == put["ETag"]
    out = tmp_path / "out"
    got = json.loads(aws.run("s3api", "get-object", "--bucket", bucket, "--key", "api/obj", str(out)).stdout)
    assert got["ContentLength"] == len(data)
    assert out.read_bytes() == data
    part = tmp_path / "part"
    aws.run("s3api", "get-object", "--bucket", bucket, "--key", "api/obj", "--range", "bytes=10-19", str(part))
    assert part.read_bytes() == data[10:20]
    lst = json.loads(aws.run("s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "api/").stdout)
    assert [o["Key"] for o in lst["Contents"]] == ["api/obj"]
    lst1 = json.loads(aws.run("s3api", "list-objects", "--bucket", bucket).stdout)
    assert [o["Key"] for o in lst1["Contents"]] == ["api/obj"]
    aws.run("s3api", "copy-object", "--bucket", bucket, "--key", "api/copy", "--copy-source", f"{bucket}/api/obj")
    aws.run("s3api", "delete-object", "--bucket", bucket, "--key", "api/obj")
    res = aws.run("s3api", "head-object", "--bucket", bucket, "--key", "api/obj", check=False)
    assert res.returncode != 0 and "404" in res.stderr
    dele = json.loads(
        aws.run(
            "s3api", "delete-objects", "--bucket", bucket,
            "--delete", json.dumps({"Objects": [{"Key": "api/copy"}]}),
        ).stdout
    )
    assert [d["Key"] for d in dele["Deleted"]] == ["api/copy"]


def test_s3api_bucket_ops(aws):
    from hangar_testlib import bucket_name

    name = bucket_name("awscli-bucket")
    aws.run("s3api", "create-bucket", "--bucket", name)
    aws.run("s3api", "head-bucket", "--bucket", name)
    names = [b["Name"] for b in json.loads(aws.run("s3api", "list-buckets").stdout)["Buckets"]]
    assert name in names
    loc = json.loads(aws.run("s3api", "get-bucket-location", "--bucket", name).stdout)
    assert loc["LocationConstraint"] == "garage"
    res = aws.run("s3api", "create-bucket", "--bucket", name, check=False)
    assert res.returncode != 0 and "BucketAlreadyOwnedByYou" in res.stderr
    aws.run("s3api", "delete-bucket", "--bucket", name)
    res = aws.run("s3api", "head-bucket", "--bucket", name, check=False)
    assert res.returncode != 0 and "404" in res.stderr


def test_s3_mb_rb(aws):
    from hangar_testlib import bucket_name

    name = bucket_name("awscli-mb")
    aws.run("s3", "mb", f"s3://{name}")
    aws.run("s3", "cp", __file__, f"s3://{name}/file.py")
    aws.run("s3", "rb", "--force", f"s3://{name}")
    assert name not in aws.run("s3", "ls").stdout
