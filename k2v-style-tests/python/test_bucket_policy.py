"""Bucket policies and public access blocks: Put/Get/DeleteBucketPolicy with
S3's MalformedPolicy, GetBucketPolicyStatus, Put/Get/DeletePublicAccessBlock;
anonymous (unsigned) requests allowed exactly where a policy grants, an
explicit Deny winning over every grant, aws:SourceIp, s3:prefix, and a key
without permissions getting access through a policy naming it. On one node
and on three (a policy set through the first node applies on the third)."""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from hangar_testlib import anonymous, bucket_name, eventually, policy, s3_client, send, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)


def stmt(effect="Allow", principal="*", action="s3:GetObject", resource=None, **extra):
    s = {"Effect": effect, "Principal": principal, "Action": action, "Resource": resource}
    s.update(extra)
    return s


def setup_bucket(cluster, hint: str):
    nodes, key, other = cluster
    first = s3_client(nodes[0], key)
    b = bucket_name(hint)
    first.create_bucket(Bucket=b)
    first.put_object(Bucket=b, Key="public/a", Body=b"open")
    first.put_object(Bucket=b, Key="private/b", Body=b"closed")
    return nodes, key, other, first, b


def test_put_get_delete_policy_and_status(cluster):
    nodes, key, _, first, b = setup_bucket(cluster, "pol-crud")
    last = s3_client(nodes[-1], key)
    assert status(lambda: last.get_bucket_policy(Bucket=b)) == (404, "NoSuchBucketPolicy")
    assert status(lambda: last.get_bucket_policy_status(Bucket=b)) == (404, "NoSuchBucketPolicy")
    doc = policy(stmt(resource=f"arn:aws:s3:::{b}/public/*"))
    first.put_bucket_policy(Bucket=b, Policy=doc)

    def seen():
        try:
            return last.get_bucket_policy(Bucket=b)["Policy"] == doc
        except ClientError:
            return False

    eventually(seen, what="the policy on the last node")
    assert last.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is True
    private = policy(stmt(principal={"AWS": [key.id]}, resource=f"arn:aws:s3:::{b}/*"))
    first.put_bucket_policy(Bucket=b, Policy=private)
    eventually(lambda: last.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False,
               what="private policy status")
    first.delete_bucket_policy(Bucket=b)
    eventually(lambda: status(lambda: last.get_bucket_policy(Bucket=b)) == (404, "NoSuchBucketPolicy"),
               what="policy deleted on the last node")


def test_malformed_policies(one):
    nodes, key, _, s3, b = setup_bucket(one, "pol-bad")
    bad = [
        "not json",
        "[]",
        json.dumps({"Version": "2012-10-17"}),
        json.dumps({"Version": "1999-01-01", "Statement": []}),
        policy(stmt(effect="Perhaps", resource="*")),
        policy(stmt(principal="someone", resource="*")),
        policy(stmt(principal={"AWS": ["not-a-key"]}, resource="*")),
        policy(stmt(action="ec2:RunInstances", resource="*")),
        policy(stmt(resource="arn:aws:s3:::another-bucket/*")),
        policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject"}),
        policy(stmt(resource="*", Condition={"IpAddress": {"aws:SourceIp": "300.1.1.1/8"}})),
        policy(stmt(resource="*", Condition={"NoSuchOperator": {"aws:SourceIp": "1.1.1.1"}})),
        json.dumps({"Statement": [], "Id": "x" * (21 * 1024)}),
    ]
    for doc in bad:
        assert status(lambda: s3.put_bucket_policy(Bucket=b, Policy=doc)) == (400, "MalformedPolicy"), doc[:80]
    # Valid in AWS's language, but not evaluated by Hangar: refused, not ignored.
    unsupported = policy(stmt(effect="Deny", resource="*",
                              Condition={"StringEquals": {"s3:ExistingObjectTag/team": "a"}}))
    assert status(lambda: s3.put_bucket_policy(Bucket=b, Policy=unsupported)) == (501, "NotImplemented")
    assert status(lambda: s3.get_bucket_policy(Bucket=b)) == (404, "NoSuchBucketPolicy")
    # Only the bucket's owners manage its policy.
    other = s3_client(nodes[0], one[2])
    assert status(lambda: other.put_bucket_policy(Bucket=b, Policy=policy(stmt(resource="*")))) == (403, "AccessDenied")


def test_anonymous_get_denied_allowed_then_denied_again(cluster):
    nodes, key, _, first, b = setup_bucket(cluster, "pol-anon")
    anon_last = anonymous(nodes[-1])
    get = lambda k: status(lambda: anon_last.get_object(Bucket=b, Key=k)["Body"].read())  # noqa: E731
    assert get("public/a") == (403, "AccessDenied")

    allow = stmt(resource=f"arn:aws:s3:::{b}/public/*")
    first.put_bucket_policy(Bucket=b, Policy=policy(allow))
    eventually(lambda: get("public/a") == (200, ""), what="anonymous read allowed on the last node")
    assert anon_last.get_object(Bucket=b, Key="public/a")["Body"].read() == b"open"
    assert get("private/b") == (403, "AccessDenied")
    assert status(lambda: anon_last.put_object(Bucket=b, Key="public/new", Body=b"x")) == (403, "AccessDenied")
    assert status(lambda: anon_last.list_objects_v2(Bucket=b)) == (403, "AccessDenied")

    # An explicit Deny wins over the Allow, and over the owner's own rights.
    deny = stmt(effect="Deny", action="s3:GetObject", resource=f"arn:aws:s3:::{b}/public/a")
    first.put_bucket_policy(Bucket=b, Policy=policy(allow, deny))
    eventually(lambda: get("public/a") == (403, "AccessDenied"), what="the Deny on the last node")
    assert status(lambda: first.get_object(Bucket=b, Key="public/a")) == (403, "AccessDenied")
    first.put_object(Bucket=b, Key="public/c", Body=b"other")
    assert get("public/c") == (200, "")

    # RestrictPublicBuckets: the public policy grants anonymous requests nothing.
    first.put_bucket_policy(Bucket=b, Policy=policy(allow))
    eventually(lambda: get("public/a") == (200, ""), what="allowed again")
    first.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={"RestrictPublicBuckets": True})
    eventually(lambda: get("public/a") == (403, "AccessDenied"), what="RestrictPublicBuckets on the last node")
    got = s3_client(nodes[-1], key).get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
    assert got == {"BlockPublicAcls": False, "IgnorePublicAcls": False,
                   "BlockPublicPolicy": False, "RestrictPublicBuckets": True}
    assert first.get_object(Bucket=b, Key="public/a")["Body"].read() == b"open"

    # BlockPublicPolicy: a public policy is refused; a private one is not.
    first.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={"BlockPublicPolicy": True})
    assert status(lambda: first.put_bucket_policy(Bucket=b, Policy=policy(allow))) == (403, "AccessDenied")
    first.put_bucket_policy(Bucket=b, Policy=policy(stmt(principal={"AWS": key.id}, resource="*")))
    first.delete_public_access_block(Bucket=b)
    assert status(lambda: first.get_public_access_block(Bucket=b)) == (404, "NoSuchPublicAccessBlockConfiguration")
    eventually(lambda: get("public/a") == (403, "AccessDenied"), what="the private policy")


def test_anonymous_put_through_a_policy(cluster):
    nodes, key, _, first, b = setup_bucket(cluster, "pol-anon-put")
    anon = anonymous(nodes[-1])
    first.put_bucket_policy(Bucket=b, Policy=policy(
        stmt(action=["s3:PutObject", "s3:GetObject"], resource=f"arn:aws:s3:::{b}/drop/*")))
    eventually(lambda: status(lambda: anon.put_object(Bucket=b, Key="drop/x", Body=b"from anyone")) == (200, ""),
               what="anonymous PUT")
    assert first.get_object(Bucket=b, Key="drop/x")["Body"].read() == b"from anyone"
    assert status(lambda: anon.put_object(Bucket=b, Key="elsewhere", Body=b"x")) == (403, "AccessDenied")
    assert status(lambda: anon.delete_object(Bucket=b, Key="drop/x")) == (403, "AccessDenied")


def test_source_ip_conditions(cluster):
    nodes, key, _, first, b = setup_bucket(cluster, "pol-ip")
    anon = anonymous(nodes[-1])
    get = lambda: status(lambda: anon.get_object(Bucket=b, Key="public/a")["Body"].read())  # noqa: E731
    res = f"arn:aws:s3:::{b}/*"
    first.put_bucket_policy(Bucket=b, Policy=policy(
        stmt(resource=res, Condition={"IpAddress": {"aws:SourceIp": "127.0.0.1/32"}})))
    eventually(lambda: get() == (200, ""), what="allowed from 127.0.0.1")
    assert first.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"] is False
    first.put_bucket_policy(Bucket=b, Policy=policy(
        stmt(resource=res, Condition={"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}})))
    eventually(lambda: get() == (403, "AccessDenied"), what="denied from elsewhere")
    # A Deny for everyone not in 10/8: the owner's key is refused too, but
    # may still remove the policy.
    first.put_bucket_policy(Bucket=b, Policy=policy(
        stmt(effect="Deny", action="s3:*", resource=[f"arn:aws:s3:::{b}", res],
             Condition={"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}})))
    last = s3_client(nodes[-1], key)
    eventually(lambda: status(lambda: last.list_objects_v2(Bucket=b)) == (403, "AccessDenied"),
               what="the owner denied by address")
    assert status(lambda: last.get_object(Bucket=b, Key="public/a")) == (403, "AccessDenied")
    last.delete_bucket_policy(Bucket=b)
    eventually(lambda: status(lambda: first.list_objects_v2(Bucket=b)) == (200, ""), what="the owner back")


def test_second_key_through_a_policy_and_s3_prefix(cluster):
    nodes, key, other, first, b = setup_bucket(cluster, "pol-key")
    second = s3_client(nodes[-1], other)
    assert status(lambda: second.get_object(Bucket=b, Key="public/a")) == (403, "AccessDenied")
    first.put_bucket_policy(Bucket=b, Policy=policy(
        stmt(principal={"AWS": [other.id]}, action=["s3:Get*", "s3:PutObject", "s3:DeleteObject"],
             resource=f"arn:aws:s3:::{b}/public/*"),
        stmt(principal={"AWS": other.id}, action="s3:ListBucket", resource=f"arn:aws:s3:::{b}",
             Condition={"StringLike": {"s3:prefix": "public/*"}}),
    ))
    eventually(lambda: status(lambda: second.get_object(Bucket=b, Key="public/a")) == (200, ""),
               what="the second key reads")
    assert status(lambda: second.get_object(Bucket=b, Key="private/b")) == (403, "AccessDenied")
    second.put_object(Bucket=b, Key="public/by-other", Body=b"y")
    assert first.get_object(Bucket=b, Key="public/by-other")["Body"].read() == b"y"
    # s3:prefix: listing under public/ only.
    got = second.list_objects_v2(Bucket=b, Prefix="public/")
    assert sorted(o["Key"] for o in got["Contents"]) == ["public/a", "public/by-other"]
    assert status(lambda: second.list_objects_v2(Bucket=b)) == (403, "AccessDenied")
    assert status(lambda: second.list_objects(Bucket=b, Prefix="private/")) == (403, "AccessDenied")
    # DeleteObjects: each key decided on its own.
    r = second.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "public/by-other"}, {"Key": "private/b"}]})
    assert [e["Key"] for e in r.get("Errors", [])] == ["private/b"]
    assert r["Errors"][0]["Code"] == "AccessDenied"
    assert [d["Key"] for d in r.get("Deleted", [])] == ["public/by-other"]
    assert first.get_object(Bucket=b, Key="private/b")["Body"].read() == b"closed"
    # A copy reads its source under the source bucket's policy.
    second.copy_object(Bucket=b, Key="public/copy", CopySource={"Bucket": b, "Key": "public/a"})
    assert status(lambda: second.copy_object(Bucket=b, Key="public/copy2",
                                             CopySource={"Bucket": b, "Key": "private/b"})) == (403, "AccessDenied")
    # Bucket configuration stays the owners'.
    assert status(lambda: second.get_bucket_policy(Bucket=b)) == (403, "AccessDenied")


def test_raw_anonymous_request_answers_xml(one):
    nodes, key, _, first, b = setup_bucket(one, "pol-raw")
    node = nodes[0]
    host = {"host": f"127.0.0.1:{node.s3_port}"}
    r = send(node, "GET", f"/{b}/public/a", headers=host)
    assert r.status == 403 and r.code == "AccessDenied"
    first.put_bucket_policy(Bucket=b, Policy=policy(stmt(resource=f"arn:aws:s3:::{b}/public/*")))
    r = send(node, "GET", f"/{b}/public/a", headers=host)
    assert r.status == 200 and r.body == b"open"
    r = send(node, "HEAD", f"/{b}/public/a", headers=host)
    assert r.status == 200
    # Anonymous requests never list buckets nor create them.
    assert send(node, "GET", "/", headers=host).status == 403
    assert send(node, "PUT", f"/{bucket_name('anon-create')}", headers=host).status == 403
