"""Bucket aliases (`hangar bucket alias|unalias`, Garage's global aliases) on
a 3-node cluster (replication factor 3): an object PUT through an alias is
read through the bucket's name and the other way round, through every
node, with boto3 and aws-cli; a key is authorised through an alias exactly
as through the name (its grants, the bucket policy); a bucket cannot be
created under an alias's name until the alias is removed; deleting a
bucket removes its aliases; ListBuckets lists aliases as buckets; a local
alias is one key's name of a bucket, hiding any other bucket of the name
from that key only;
multipart uploads, copies and Object Lock's owner bypass work across the
two names; of a creation and an alias of one name racing through different
nodes exactly one wins."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from botocore.exceptions import ClientError

from clients import AwsCli
from hangar_testlib import Key, anonymous, bucket_name, error_code, eventually, http_status, policy, s3_client, status
from cluster_testlib import laid_out_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "alias")
    yield nodes
    for n in nodes:
        n.stop()


def new_key(node, name: str, create_bucket: bool = False) -> Key:
    info = node.cli_json("key", "create", name)
    if create_bucket:
        node.cli("key", "allow", info["access_key_id"], "--create-bucket")
    return Key(info["access_key_id"], info["secret_access_key"], name)


def aliased(cluster, hint: str, key: Key, *perm: str) -> tuple[str, str]:
    """A new bucket made by the operator through node 1, `key` allowed on it
    with `perm`, and an alias of it made through node 2."""
    b, a = bucket_name(hint), bucket_name(hint + "-alias")
    cluster[0].cli("bucket", "create", b)
    cluster[0].cli("bucket", "allow", b, "--key", key.id, *perm)
    info = cluster[1].cli_json("bucket", "alias", b, a)
    assert info["name"] == b and info["aliases"] == [a], info
    return b, a


def test_objects_go_through_the_alias_and_the_name_on_every_node(cluster, tmp_path):
    key = new_key(cluster[0], "through")
    b, a = aliased(cluster, "through", key, "--read", "--write", "--owner")
    c = [s3_client(n, key) for n in cluster]
    c[2].put_object(Bucket=a, Key="via-alias", Body=b"one")
    assert c[0].get_object(Bucket=b, Key="via-alias")["Body"].read() == b"one"
    c[1].put_object(Bucket=b, Key="via-name", Body=b"two")
    assert c[2].get_object(Bucket=a, Key="via-name")["Body"].read() == b"two"
    for client in c:
        for name in (a, b):
            assert client.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
            got = {o["Key"] for o in client.list_objects_v2(Bucket=name).get("Contents", [])}
            assert got == {"via-alias", "via-name"}, (name, got)
    # aws-cli, through the third node's alias and the first node's name.
    src = tmp_path / "f.txt"
    src.write_bytes(b"from aws-cli")
    AwsCli(cluster[2], key, tmp_path).run("s3", "cp", str(src), f"s3://{a}/cli.txt")
    out = tmp_path / "back.txt"
    AwsCli(cluster[0], key, tmp_path).run("s3", "cp", f"s3://{b}/cli.txt", str(out))
    assert out.read_bytes() == b"from aws-cli"
    # Configuration set through the alias is the bucket's.
    c[0].put_bucket_tagging(Bucket=a, Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    assert c[1].get_bucket_tagging(Bucket=b)["TagSet"] == [{"Key": "k", "Value": "v"}]
    # bucket info, on any node and through the alias too, shows the aliases.
    for n in cluster:
        info = n.cli_json("bucket", "info", a)
        assert (info["name"], info["aliases"], info["objects"]) == (b, [a], 3), info
    text = cluster[2].cli("bucket", "info", b).stdout
    assert f"Aliases: {a}" in text, text
    listed = {x["name"]: x["aliases"] for x in cluster[1].cli_json("bucket", "list")}
    assert listed[b] == [a] and a not in listed


def test_a_key_is_authorised_through_an_alias_as_through_the_name(cluster):
    owner, reader, stranger = (new_key(cluster[0], n) for n in ("owner", "reader", "stranger"))
    b, a = aliased(cluster, "auth", owner, "--read", "--write", "--owner")
    # A grant given through the alias is a grant on the bucket.
    cluster[2].cli("bucket", "allow", a, "--key", reader.id, "--read")
    granted = cluster[0].cli_json("key", "info", reader.id)["buckets"]
    assert [g["bucket"] for g in granted] == [b], granted
    s3_client(cluster[0], owner).put_object(Bucket=a, Key="k", Body=b"x")
    for n in cluster:
        r, s = s3_client(n, reader), s3_client(n, stranger)
        for name in (a, b):
            assert status(lambda: r.get_object(Bucket=name, Key="k")) == (200, "")
            assert status(lambda: r.put_object(Bucket=name, Key="w", Body=b"y")) == (403, "AccessDenied")
            assert status(lambda: s.get_object(Bucket=name, Key="k")) == (403, "AccessDenied")
            assert status(lambda: s.list_objects_v2(Bucket=name)) == (403, "AccessDenied")
    # A bucket policy put through the alias names the bucket by its name,
    # and applies through either name.
    own = s3_client(cluster[1], owner)
    doc = policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                  "Resource": f"arn:aws:s3:::{b}/*"})
    own.put_bucket_policy(Bucket=a, Policy=doc)
    assert json.loads(own.get_bucket_policy(Bucket=b)["Policy"]) == json.loads(doc)
    for n in cluster:
        anon = anonymous(n)
        eventually(lambda: status(lambda: anon.get_object(Bucket=a, Key="k"))[0] == 200, what="anonymous via alias")
        assert status(lambda: anon.get_object(Bucket=b, Key="k"))[0] == 200
        assert status(lambda: anon.put_object(Bucket=a, Key="z", Body=b"z")) == (403, "AccessDenied")
    # A key's listing shows the alias beside the name, and only to keys
    # with rights on the bucket.
    for n in cluster:
        names = {x["Name"] for x in s3_client(n, reader).list_buckets()["Buckets"]}
        assert {a, b} <= names, names
        names = {x["Name"] for x in s3_client(n, stranger).list_buckets()["Buckets"]}
        assert not {a, b} & names, names


def test_a_bucket_and_an_alias_never_share_a_name(cluster):
    key = new_key(cluster[0], "creator", create_bucket=True)
    b, a = aliased(cluster, "names", key, "--read", "--write", "--owner")
    c = [s3_client(n, key) for n in cluster]
    for client in c:
        with pytest.raises(ClientError) as e:
            client.create_bucket(Bucket=a)
        assert (http_status(e.value), error_code(e.value)) == (409, "BucketAlreadyExists")
    other = bucket_name("names-other")
    cluster[2].cli("bucket", "create", other)
    for name in (b, a):
        r = cluster[1].cli("bucket", "alias", other, name, check=False)
        assert r.returncode == 4 and "already exists" in r.stderr, (r.returncode, r.stderr)
    r = cluster[0].cli("bucket", "unalias", b, b, check=False)
    assert r.returncode == 2 and "own name" in r.stderr, r.stderr
    # Unalias through another node: the bucket stays, the name is free.
    c[0].put_object(Bucket=a, Key="kept", Body=b"k")
    info = cluster[2].cli_json("bucket", "unalias", b, a)
    assert info["aliases"] == [] and info["name"] == b
    for client in c:
        assert status(lambda: client.head_bucket(Bucket=a))[0] == 404
        assert client.get_object(Bucket=b, Key="kept")["Body"].read() == b"k"
    r = cluster[0].cli("bucket", "unalias", a, check=False)
    assert r.returncode == 3, r.stderr
    c[2].create_bucket(Bucket=a)
    assert c[0].list_objects_v2(Bucket=a).get("KeyCount") == 0
    # Now a bucket: no alias may take its name.
    r = cluster[0].cli("bucket", "alias", b, a, check=False)
    assert r.returncode == 4, r.stderr


def test_deleting_a_bucket_removes_its_aliases(cluster):
    key = new_key(cluster[0], "deleter")
    b, a = aliased(cluster, "gone", key, "--read", "--write", "--owner")
    second = bucket_name("gone-second")
    cluster[2].cli("bucket", "alias", a, second)
    assert sorted(cluster[0].cli_json("bucket", "info", b)["aliases"]) == sorted([a, second])
    c = [s3_client(n, key) for n in cluster]
    c[0].put_object(Bucket=a, Key="x", Body=b"x")
    c[1].delete_object(Bucket=second, Key="x")
    # Deleted through an alias, as through its name.
    c[2].delete_bucket(Bucket=second)
    for client in c:
        for name in (a, b, second):
            assert status(lambda: client.head_bucket(Bucket=name))[0] == 404, name
    for n in cluster:
        listed = [x["name"] for x in n.cli_json("bucket", "list")]
        assert b not in listed
    r = cluster[1].cli("bucket", "alias", b, bucket_name("gone-third"), check=False)
    assert r.returncode == 3, r.stderr
    # The names are free again; a new bucket of the old name has no alias.
    cluster[0].cli("bucket", "create", b)
    assert cluster[1].cli_json("bucket", "info", b)["aliases"] == []
    assert status(lambda: c[2].head_bucket(Bucket=a))[0] == 404
    cluster[2].cli("bucket", "create", a)


def test_a_local_alias_is_one_key_s_name_of_a_bucket(cluster, tmp_path):
    key, other = new_key(cluster[0], "local", create_bucket=True), new_key(cluster[0], "local-other")
    b, _ = aliased(cluster, "local", key, "--read", "--write")
    cluster[0].cli("bucket", "allow", b, "--key", other.id, "--read", "--write")
    mine, shadow = bucket_name("local-mine"), bucket_name("local-shadow")
    # A bucket of its own name, which the local alias then hides from `key`.
    cluster[2].cli("bucket", "create", shadow)
    cluster[2].cli("bucket", "allow", shadow, "--key", other.id, "--read", "--write")
    out = cluster[1].cli("bucket", "alias", b, mine, "--local", key.name).stdout
    assert f"Local alias {mine} of key {key.id} now names bucket {b}." in out, out
    info = cluster[2].cli_json("bucket", "alias", b, shadow, "--local", key.id)
    assert info["local_aliases"] == [{"access_key_id": key.id, "alias": n} for n in sorted([mine, shadow])], info
    assert info["aliases"] != [] and mine not in info["aliases"]
    text = cluster[0].cli("bucket", "info", b).stdout
    assert f"Local aliases: {mine} (key {key.id})" in text, text
    for n in cluster:
        c, o = s3_client(n, key), s3_client(n, other)
        c.put_object(Bucket=mine, Key=f"mine-{n.s3_port}", Body=b"m")
        assert o.get_object(Bucket=b, Key=f"mine-{n.s3_port}")["Body"].read() == b"m"
        # Only `key` has these names.
        assert status(lambda: o.head_bucket(Bucket=mine))[0] == 404
        c.put_object(Bucket=shadow, Key="hidden", Body=b"h")
        assert status(lambda: o.get_object(Bucket=shadow, Key="hidden")) == (404, "NoSuchKey")
        assert o.get_object(Bucket=b, Key="hidden")["Body"].read() == b"h"
        names = {x["Name"] for x in c.list_buckets()["Buckets"]}
        assert {mine, shadow, b} <= names, names
        assert mine not in {x["Name"] for x in o.list_buckets()["Buckets"]}
    AwsCli(cluster[2], key, tmp_path).run("s3", "ls", f"s3://{mine}/")
    # The key cannot create a bucket under its own alias; another key can.
    assert status(lambda: s3_client(cluster[1], key).create_bucket(Bucket=mine)) == (409, "BucketAlreadyExists")
    third = bucket_name("local-third")
    cluster[0].cli("bucket", "create", third)
    r = cluster[0].cli("bucket", "alias", third, mine, "--local", key.id, check=False)
    assert r.returncode == 4, r.stderr
    # For a local alias the bucket is named as the key names it: here, b.
    info = cluster[0].cli_json("bucket", "alias", shadow, mine, "--local", key.id)
    assert info["name"] == b, info
    info = cluster[1].cli_json("bucket", "unalias", mine, "--local", key.id)
    assert info["name"] == b and [x["alias"] for x in info["local_aliases"]] == [shadow]
    for n in cluster:
        assert status(lambda: s3_client(n, key).head_bucket(Bucket=mine))[0] == 404
    r = cluster[2].cli("bucket", "unalias", b, mine, "--local", key.id, check=False)
    assert r.returncode == 3, r.stderr


def test_uploads_copies_and_object_lock_through_an_alias(cluster):
    key = new_key(cluster[0], "locker", create_bucket=True)
    c = [s3_client(n, key) for n in cluster]
    b, a = bucket_name("locked"), bucket_name("locked-alias")
    c[0].create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    cluster[1].cli("bucket", "alias", b, a)
    # A multipart upload started through the alias, completed through the name.
    up = c[1].create_multipart_upload(Bucket=a, Key="mpu")["UploadId"]
    etag = c[2].upload_part(Bucket=b, Key="mpu", UploadId=up, PartNumber=1, Body=b"p" * 10)["ETag"]
    c[0].complete_multipart_upload(Bucket=b, Key="mpu", UploadId=up,
                                   MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert c[2].get_object(Bucket=a, Key="mpu")["Body"].read() == b"p" * 10
    # A copy onto itself through two names of the bucket is a copy onto itself.
    with pytest.raises(ClientError) as e:
        c[0].copy_object(Bucket=a, Key="mpu", CopySource={"Bucket": b, "Key": "mpu"})
    assert (http_status(e.value), error_code(e.value)) == (400, "InvalidRequest")
    c[1].copy_object(Bucket=a, Key="copy", CopySource={"Bucket": b, "Key": "mpu"})
    assert c[2].get_object(Bucket=b, Key="copy")["Body"].read() == b"p" * 10
    # The bucket's owner may bypass GOVERNANCE retention through the alias.
    until = datetime.now(timezone.utc) + timedelta(hours=1)
    v = c[0].put_object(Bucket=a, Key="held", Body=b"h", ObjectLockMode="GOVERNANCE",
                        ObjectLockRetainUntilDate=until)["VersionId"]
    assert status(lambda: c[1].delete_object(Bucket=a, Key="held", VersionId=v)) == (403, "AccessDenied")
    c[2].delete_object(Bucket=a, Key="held", VersionId=v, BypassGovernanceRetention=True)
    assert status(lambda: c[0].head_object(Bucket=b, Key="held", VersionId=v))[0] == 404


def test_racing_creations_and_aliases_of_one_name_give_one_winner(cluster):
    """CreateBucket of a name through two nodes and an alias of that name
    through the third, at the same moment: the name's coordinator decides
    them one at a time, so exactly one wins and every node agrees which."""
    key = new_key(cluster[0], "racer", create_bucket=True)
    target = bucket_name("race-target")
    cluster[0].cli("bucket", "create", target)
    clients = [s3_client(n, key) for n in cluster]
    failures, winners = [], set()
    for r in range(10):
        name = bucket_name(f"race-{r}")
        results: dict = {}
        barrier = threading.Barrier(3)
        # Either side starts a lag after the other, in turn (the CLI
        # starts a process first; how long that takes depends on the
        # machine's load), so that each reaches the coordinator first in
        # some rounds and both start at once in others.
        lag = (0, 0.02, 0.05, 0.15, 0.5)[r // 2]
        create_lag, alias_lag = (lag, 0) if r % 2 == 0 else (0, lag)

        def create(i):
            barrier.wait()
            time.sleep(create_lag)
            results[i] = status(lambda: clients[i].create_bucket(Bucket=name))

        def alias():
            barrier.wait()
            time.sleep(alias_lag)
            results["alias"] = cluster[2].cli("bucket", "alias", target, name, check=False).returncode

        threads = [threading.Thread(target=create, args=(i,)) for i in (0, 1)] + [threading.Thread(target=alias)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        created = [i for i in (0, 1) if results[i] == (200, "")]
        aliased_ok = results["alias"] == 0
        winners.add("alias" if aliased_ok else "bucket")
        if len(created) + int(aliased_ok) != 1:
            failures.append((name, results))
            continue
        for i in (0, 1):
            if i not in created:
                assert results[i][0] == 409, results
        if not aliased_ok:
            assert results["alias"] == 4, results
        for n in cluster:
            info = n.cli_json("bucket", "info", name)
            assert info["name"] == (target if aliased_ok else name), (n, info)
    assert not failures, failures
    assert winners == {"alias", "bucket"}, "every round was won by the same side"
