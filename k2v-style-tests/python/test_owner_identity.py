"""Who a key is to S3 clients: its canonical user id and display name.

AWS shows a bucket's owner, in ListBuckets, listings, ACLs and the
multipart listings, as a canonical user id (API reference, `Owner`: "ID —
Container for the ID of the owner"; `Grantee`: "ID — The canonical user ID
of the grantee"), never as an access key id, and an ACL grant or
`x-amz-expected-bucket-owner` names the owner by that id. Hangar derives a
64-hex canonical id from each key (the access key id appears in no answer)
and lets the operator set one, and a display name, with `hangar key
set-identity` or the admin API's SetKeyIdentity. On one node and on three
(set through the first node, seen through the last)."""

from __future__ import annotations

import json
import re

import blake3

from admin_api_lib import call, ok, with_tokens
from hangar_testlib import Node, bucket_name, eventually, s3_client, status
from owner_fixtures import cluster, one, three  # noqa: F401 (fixtures)


def owners_seen(s3, b: str) -> list[dict]:
    """Every Owner / Initiator S3 answers about bucket `b` and its contents
    (it holds an object, a version of it and an upload)."""
    seen = [s3.get_bucket_acl(Bucket=b)["Owner"], s3.list_buckets()["Owner"]]
    seen += [o["Owner"] for o in s3.list_objects(Bucket=b)["Contents"]]
    seen += [o["Owner"] for o in s3.list_objects_v2(Bucket=b, FetchOwner=True)["Contents"]]
    seen += [v["Owner"] for v in s3.list_object_versions(Bucket=b)["Versions"]]
    for u in s3.list_multipart_uploads(Bucket=b)["Uploads"]:
        seen += [u["Owner"], u["Initiator"]]
        parts = s3.list_parts(Bucket=b, Key=u["Key"], UploadId=u["UploadId"])
        seen += [parts["Owner"], parts["Initiator"]]
    acl = s3.get_object_acl(Bucket=b, Key="o")
    seen.append(acl["Owner"])
    seen += [g["Grantee"] for g in acl["Grants"] if g["Grantee"]["Type"] == "CanonicalUser"]
    return [{k: v for k, v in o.items() if k != "Type"} for o in seen]


def test_owners_are_canonical_ids_the_operator_may_set(cluster):
    nodes, key, other = cluster
    first, last = s3_client(nodes[0], key), s3_client(nodes[-1], key)
    b = bucket_name("identity")
    first.create_bucket(Bucket=b)
    first.put_object(Bucket=b, Key="o", Body=b"x")
    first.create_multipart_upload(Bucket=b, Key="up")

    # The derived id: 64 hex digits, not the access key id, in every answer.
    derived = key.canonical_id
    assert re.fullmatch(r"[0-9a-f]{64}", derived), derived
    # As doc/table-rows.md "Format 18" derives it, by another implementation.
    context = "hangar 2026-12-07 canonical user id of an access key"
    assert derived == blake3.blake3(key.id.encode(), derive_key_context=context).hexdigest()
    assert other.canonical_id != derived
    assert all(o == {"ID": derived} for o in owners_seen(last, b)), owners_seen(last, b)
    assert key.id not in str(owners_seen(last, b))

    # Set through the first node, seen through the last.
    info = nodes[0].cli_json("key", "set-identity", key.id, "--canonical-id", "team-7",
                             "--display-name", "Team Seven")
    assert (info["canonical_id"], info["display_name"]) == ("team-7", "Team Seven")
    want = {"ID": "team-7", "DisplayName": "Team Seven"}
    eventually(lambda: all(o == want for o in owners_seen(last, b)), what="the new identity everywhere")
    # x-amz-expected-bucket-owner names the owner by its canonical id.
    assert last.get_object(Bucket=b, Key="o", ExpectedBucketOwner="team-7")["Body"].read() == b"x"
    assert status(lambda: last.get_object(Bucket=b, Key="o", ExpectedBucketOwner=derived)) == (403, "AccessDenied")
    assert status(lambda: last.get_object(Bucket=b, Key="o", ExpectedBucketOwner=key.id)) == (403, "AccessDenied")
    # An ACL body grants the owner by its canonical id; the id it had
    # before is no one's now (API_PutBucketAcl: an unknown canonical ID is
    # InvalidArgument).
    full = lambda cid: {"Grantee": {"Type": "CanonicalUser", "ID": cid}, "Permission": "FULL_CONTROL"}  # noqa: E731
    acp = {"Grants": [full("team-7")], "Owner": want}
    last.put_bucket_acl(Bucket=b, AccessControlPolicy=acp)
    acp = {"Grants": [full(derived)], "Owner": want}
    assert status(lambda: last.put_bucket_acl(Bucket=b, AccessControlPolicy=acp)) == (400, "InvalidArgument")

    # Bad values are refused and change nothing.
    for bad in (["--canonical-id", "has space"], ["--display-name", "tab\there"], ["--canonical-id", "x" * 129]):
        r = nodes[0].cli("key", "set-identity", key.id, *bad, check=False)
        assert r.returncode != 0 and "must be" in r.stderr, (bad, r.stderr)
    assert nodes[0].cli("key", "set-identity", key.id, check=False).returncode != 0

    # Cleared: the derived id again, and no display name.
    nodes[0].cli("key", "set-identity", key.id, "--canonical-id", "", "--display-name", "")
    eventually(lambda: all(o == {"ID": derived} for o in owners_seen(last, b)), what="the derived identity back")
    assert nodes[-1].cli_json("key", "info", key.id)["canonical_id"] == derived


def test_set_identity_over_the_admin_http_api(tmp_path):
    n = with_tokens(Node(tmp_path / "n"))
    n.start()
    try:
        key = n.create_key("api-identity", create_bucket=True)
        got = ok(n, "POST", "/v2/SetKeyIdentity", {"key": "api-identity", "display_name": "Ann"})
        assert (got["canonical_id"], got["display_name"]) == (key.canonical_id, "Ann")
        got = ok(n, "GET", "/v2/GetKeyInfo", query={"key": key.id})
        assert (got["canonical_id"], got["display_name"]) == (key.canonical_id, "Ann")
        st, _, _ = call(n, "POST", "/v2/SetKeyIdentity", body={"key": key.id, "canonical_id": "a b"})
        assert st == 400
        s3 = s3_client(n, key)
        assert s3.list_buckets()["Owner"] == {"ID": key.canonical_id, "DisplayName": "Ann"}
    finally:
        n.stop()


def test_a_policy_names_a_user_by_canonical_id(cluster):
    # Bucket policy elements, Principal: `{"CanonicalUser": "<id>"}` names
    # every key of that canonical user id (AWS S3 user guide, "Principals").
    nodes, key, other = cluster
    s3, them = s3_client(nodes[0], key), s3_client(nodes[-1], other)
    b = bucket_name("identity-policy")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="o", Body=b"x")
    assert status(lambda: them.get_object(Bucket=b, Key="o")) == (403, "AccessDenied")
    s3.put_bucket_policy(Bucket=b, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"CanonicalUser": other.canonical_id},
        "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{b}/*"}]}))
    eventually(lambda: status(lambda: them.get_object(Bucket=b, Key="o"))[0] == 200, what="the policy's grant")
    assert status(lambda: them.put_object(Bucket=b, Key="n", Body=b"n")) == (403, "AccessDenied")
    bad = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"CanonicalUser": "a b"},
                                                   "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{b}/*"}]}
    assert status(lambda: s3.put_bucket_policy(Bucket=b, Policy=json.dumps(bad))) == (400, "MalformedPolicy")
