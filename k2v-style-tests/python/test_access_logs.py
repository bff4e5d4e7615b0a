"""Server access logs (PutBucketLogging, GetBucketLogging): every request
to a bucket with logging on, refused or not, becomes a line in AWS's
format, written in batches as objects of the target bucket, read back here
with GoAccess's AWSS3 log format (a real parser) and field by field.

References: AWS S3 API reference, PutBucketLogging (`LoggingEnabled`,
`TargetBucket`, `TargetPrefix`) and GetBucketLogging; S3 user guide,
"Amazon S3 server access log format" (the fields and their order) and
"Logging requests with server access logging" (log object keys
`TargetPrefixYYYY-mm-DD-HH-MM-SS-UniqueString`), and `PartitionedPrefix`."""

from __future__ import annotations

import http.client
import json
import re
import shlex
import subprocess
import time

import pytest
import requests
from botocore.exceptions import ClientError

from admin_api_lib import ADMIN_TOKEN, ok, with_tokens
from hangar_testlib import REGION, Node, error_code, http_status, metric, s3_client

KEY_NAME = re.compile(r"^access/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$")


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    node = Node(tmp_path_factory.mktemp("access-logs"))
    node.config.write_text("s3_access_log_flush_secs = 1\n" + node.config.read_text())
    node.start()
    key = node.create_key("logger", create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="site")
    s3.create_bucket(Bucket="site-logs")
    yield node, key, s3
    node.stop()


def log_lines(s3, want: int, timeout: float = 20) -> list[str]:
    """The lines of every log object in site-logs, once there are `want`."""
    deadline = time.monotonic() + timeout
    while True:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="site-logs", Prefix="access/").get("Contents", [])]
        lines = [ln for k in sorted(keys)
                 for ln in s3.get_object(Bucket="site-logs", Key=k)["Body"].read().decode().splitlines()]
        if len(lines) >= want or time.monotonic() > deadline:
            assert all(KEY_NAME.match(k) for k in keys), keys
            return lines
        time.sleep(0.3)


def test_every_request_is_logged_in_aws_format_and_goaccess_reads_it(logged, tmp_path):
    node, key, s3 = logged
    s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={
        "LoggingEnabled": {"TargetBucket": "site-logs", "TargetPrefix": "access/"}})
    got = s3.get_bucket_logging(Bucket="site")["LoggingEnabled"]
    assert (got["TargetBucket"], got["TargetPrefix"]) == ("site-logs", "access/")
    s3.put_object(Bucket="site", Key="a b.txt", Body=b"0123456789")
    assert s3.get_object(Bucket="site", Key="a b.txt")["Body"].read() == b"0123456789"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="site", Key="missing")
    assert error_code(e.value) == "NoSuchKey"
    s3.list_objects_v2(Bucket="site")
    # Anonymous and refused: logged too, with no requester.
    anon = requests.get(f"{node.endpoint}/site/a%20b.txt", headers={"User-Agent": "anon-agent"}, timeout=10)
    assert anon.status_code == 403

    # GetBucketLogging is the first request logged (the Put that turned
    # logging on was checked before it was on).
    lines = log_lines(s3, 6)
    assert len(lines) == 6, lines
    fields = [shlex.split(ln.replace("[", '"[').replace("]", ']"')) for ln in lines]
    for f in fields:
        assert len(f) == 26, f
        assert (f[0], f[1]) == (key.canonical_id, "site")

    def one(op: str, status: str) -> list[str]:
        (f,) = [f for f in fields if f[6] == op and f[9] == status]
        return f

    assert one("REST.GET.LOGGING_STATUS", "200")[7] == "-"
    put = one("REST.PUT.OBJECT", "200")
    assert (put[7], put[12], put[4], put[19], put[21]) == ("a%20b.txt", "10", key.canonical_id, "SigV4", "AuthHeader")
    assert one("REST.GET.OBJECT", "200")[11] == "10"
    assert one("REST.GET.OBJECT", "404")[10] == "NoSuchKey"
    assert one("REST.GET.BUCKET", "200")[7] == "-"
    anonymous = one("REST.GET.OBJECT", "403")
    assert (anonymous[4], anonymous[10], anonymous[16], anonymous[19]) == ("-", "AccessDenied", "anon-agent", "-")
    assert anonymous[8] == "GET /site/a%20b.txt HTTP/1.1"
    assert all(re.fullmatch(r"[0-9A-F]{16}", f[5]) for f in fields), [f[5] for f in fields]

    # The flusher reports as a worker (`hangar worker list`).
    w = {w["name"]: w for w in node.cli_json("worker", "list")}["access-logs"]
    assert "lines written" in w["progress"], w

    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run(["goaccess", str(log), "--log-format=AWSS3", "-o", "json"],
                         capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(out.stdout)
    assert report["general"]["valid_requests"] == 6 and report["general"]["failed_requests"] == 0, report["general"]
    codes = {c["data"]: c["hits"]["count"] for c in report["status_codes"]["data"]}
    assert codes == {"2xx Success": 4, "4xx Client Errors": 2}, codes


def test_logging_turned_off_writes_no_more_and_refuses_bad_targets(logged):
    node, key, s3 = logged
    s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={
        "LoggingEnabled": {"TargetBucket": "site-logs", "TargetPrefix": "access/"}})

    def count(op: str) -> int:
        return sum(f" {op} " in ln for ln in log_lines(s3, 0, timeout=0))

    def wait_count(op: str, n: int) -> None:
        deadline = time.monotonic() + 20
        while count(op) < n and time.monotonic() < deadline:
            time.sleep(0.3)
        assert count(op) == n, op

    s3.head_object(Bucket="site", Key="a b.txt")
    wait_count("REST.HEAD.OBJECT", 1)
    s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={})
    assert "LoggingEnabled" not in s3.get_bucket_logging(Bucket="site")
    s3.head_object(Bucket="site", Key="a b.txt")
    # The PutBucketLogging that turned it off was itself logged (as the one
    # before it, logging being on then); nothing after it.
    wait_count("REST.PUT.LOGGING_STATUS", 2)
    time.sleep(2.5)
    assert count("REST.HEAD.OBJECT") == 1
    with pytest.raises(ClientError) as e:
        s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={
            "LoggingEnabled": {"TargetBucket": "no-such-bucket", "TargetPrefix": "x/"}})
    assert (http_status(e.value), error_code(e.value)) == (400, "InvalidTargetBucketForLogging")
    # A key that may not write into the target may not make it a target.
    other = node.create_key("other", create_bucket=True)
    o = s3_client(node, other)
    o.create_bucket(Bucket="other-site")
    with pytest.raises(ClientError) as e:
        o.put_bucket_logging(Bucket="other-site", BucketLoggingStatus={
            "LoggingEnabled": {"TargetBucket": "site-logs", "TargetPrefix": "x/"}})
    assert error_code(e.value) == "InvalidTargetBucketForLogging"


def test_partitioned_prefixes_name_objects_by_owner_region_bucket_and_day(logged):
    """`TargetObjectKeyFormat.PartitionedPrefix`: log objects named
    `<prefix><owner>/<region>/<bucket>/<YYYY>/<MM>/<DD>/<time>-<unique>`,
    one object per source bucket; `EventTime` names the requests' day at
    00:00:00 (S3 API reference, `PartitionedPrefix`), `DeliveryTime` the
    time of writing."""
    node, key, s3 = logged
    s3.create_bucket(Bucket="shop")
    for bucket, source in (("site", "EventTime"), ("shop", "DeliveryTime")):
        s3.put_bucket_logging(Bucket=bucket, BucketLoggingStatus={"LoggingEnabled": {
            "TargetBucket": "site-logs", "TargetPrefix": "parts/",
            "TargetObjectKeyFormat": {"PartitionedPrefix": {"PartitionDateSource": source}}}})
        got = s3.get_bucket_logging(Bucket=bucket)["LoggingEnabled"]
        assert got["TargetObjectKeyFormat"] == {"PartitionedPrefix": {"PartitionDateSource": source}}, got
    s3.put_object(Bucket="site", Key="p.txt", Body=b"x")
    s3.put_object(Bucket="shop", Key="q.txt", Body=b"y")
    day = time.strftime("%Y/%m/%d", time.gmtime())
    named = {
        "site": re.compile(rf"^parts/{key.canonical_id}/{REGION}/site/{day}/{day.replace('/', '-')}-00-00-00-[0-9A-F]{{16}}$"),
        "shop": re.compile(rf"^parts/{key.canonical_id}/{REGION}/shop/{day}/{day.replace('/', '-')}-\d{{2}}-\d{{2}}-\d{{2}}-[0-9A-F]{{16}}$"),
    }
    deadline = time.monotonic() + 20
    while True:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="site-logs", Prefix="parts/").get("Contents", [])]
        lines = {b: [ln for k in keys if f"/{b}/" in k
                     for ln in s3.get_object(Bucket="site-logs", Key=k)["Body"].read().decode().splitlines()]
                 for b in named}
        if all(any(" REST.PUT.OBJECT " in ln for ln in lines[b]) for b in named) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    for k in keys:
        assert any(r.match(k) for r in named.values()), k
    # Each bucket's lines are in its own objects.
    for b in named:
        assert lines[b] and all(ln.split(" ")[1] == b for ln in lines[b]), lines
        assert any(" REST.PUT.OBJECT " in ln for ln in lines[b]), lines[b]
    # Back to the simple prefix: GetBucketLogging shows no key format.
    s3.put_bucket_logging(Bucket="shop", BucketLoggingStatus={
        "LoggingEnabled": {"TargetBucket": "site-logs", "TargetPrefix": "parts/"}})
    assert "TargetObjectKeyFormat" not in s3.get_bucket_logging(Bucket="shop")["LoggingEnabled"]
    for bad in ({"PartitionedPrefix": {"PartitionDateSource": "Tomorrow"}},
                {"PartitionedPrefix": {}, "SimplePrefix": {}}):
        with pytest.raises(ClientError) as e:
            s3.put_bucket_logging(Bucket="shop", BucketLoggingStatus={"LoggingEnabled": {
                "TargetBucket": "site-logs", "TargetPrefix": "parts/", "TargetObjectKeyFormat": bad}})
        assert (http_status(e.value), error_code(e.value)) == (400, "InvalidArgument"), bad
    for b in ("site", "shop"):
        s3.put_bucket_logging(Bucket=b, BucketLoggingStatus={})


def logging_site(node: Node, key_name: str):
    """A new key, and its buckets `site` logging into `site-logs` under
    `access/`: (key, its S3 client)."""
    key = node.create_key(key_name, create_bucket=True)
    s3 = s3_client(node, key)
    s3.create_bucket(Bucket="site")
    s3.create_bucket(Bucket="site-logs")
    s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={
        "LoggingEnabled": {"TargetBucket": "site-logs", "TargetPrefix": "access/"}})
    return key, s3


def test_the_last_lines_are_written_when_the_node_stops(tmp_path):
    node = Node(tmp_path / "n")
    node.config.write_text("s3_access_log_flush_secs = 3600\n" + node.config.read_text())
    node.start()
    try:
        key, s3 = logging_site(node, "k")
        s3.put_object(Bucket="site", Key="k", Body=b"x")
        assert log_lines(s3, 0, timeout=0) == []
    finally:
        node.stop()
    node.start()
    try:
        lines = log_lines(s3_client(node, key), 1, timeout=5)
        assert len(lines) == 1 and "REST.PUT.OBJECT k " in lines[0], lines
    finally:
        node.stop()


def test_target_grants_give_the_log_objects_their_acl(tmp_path):
    """`TargetGrants` (S3 API reference, PutBucketLogging and TargetGrant):
    each log object gets the grants, to users by canonical id and to the
    groups a canned ACL expresses; GetBucketLogging answers them; a target
    whose ACLs are disabled takes none."""
    node = Node(tmp_path / "n")
    node.config.write_text("s3_access_log_flush_secs = 1\n" + node.config.read_text())
    node.start()
    try:
        # Grants from the start: every log object is written with them.
        key = node.create_key("tg", create_bucket=True)
        s3 = s3_client(node, key)
        s3.create_bucket(Bucket="site")
        s3.create_bucket(Bucket="site-logs")
        reader = node.create_key("reader")
        grants = [
            {"Grantee": {"Type": "CanonicalUser", "ID": reader.canonical_id}, "Permission": "READ"},
            {"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"},
             "Permission": "READ"},
        ]
        enabled = {"TargetBucket": "site-logs", "TargetPrefix": "access/", "TargetGrants": grants}
        s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={"LoggingEnabled": enabled})
        got = s3.get_bucket_logging(Bucket="site")["LoggingEnabled"]["TargetGrants"]
        assert sorted(json.dumps(g, sort_keys=True) for g in got) == sorted(json.dumps(g, sort_keys=True) for g in grants), got
        s3.put_object(Bucket="site", Key="k", Body=b"x")
        lines = log_lines(s3, 2)
        assert any("REST.PUT.OBJECT k " in ln for ln in lines), lines
        names = [o["Key"] for o in s3.list_objects_v2(Bucket="site-logs", Prefix="access/")["Contents"]]
        assert names
        for name in names:
            acl = s3.get_object_acl(Bucket="site-logs", Key=name)
            assert {(g["Grantee"].get("ID") or g["Grantee"].get("URI"), g["Permission"]) for g in acl["Grants"]} == {
                (key.canonical_id, "FULL_CONTROL"), (reader.canonical_id, "READ"),
                ("http://acs.amazonaws.com/groups/global/AuthenticatedUsers", "READ")}, name
            # The reader has no right on site-logs: the object's grant reads it.
            assert s3_client(node, reader).get_object(Bucket="site-logs", Key=name)["Body"].read()
        for bad, code in (
            ([{"Grantee": {"Type": "CanonicalUser", "ID": "nobody"}, "Permission": "READ"}], "InvalidArgument"),
            ([{"Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": "a@b.c"}, "Permission": "READ"}],
             "UnresolvableGrantByEmailAddress"),
            ([{"Grantee": {"Type": "Group", "URI": "http://example.com/groups/nobody"},
               "Permission": "READ"}], "InvalidArgument"),
        ):
            with pytest.raises(ClientError) as e:
                s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={"LoggingEnabled": {
                    "TargetBucket": "site-logs", "TargetPrefix": "access/", "TargetGrants": bad}})
            assert error_code(e.value) == code, bad
        s3.put_bucket_ownership_controls(Bucket="site-logs", OwnershipControls={
            "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
        with pytest.raises(ClientError) as e:
            s3.put_bucket_logging(Bucket="site", BucketLoggingStatus={"LoggingEnabled": enabled})
        assert (http_status(e.value), error_code(e.value)) == (400, "AccessControlListNotSupported")
    finally:
        node.stop()


def test_a_node_killed_loses_no_line_it_recorded(tmp_path):
    """`kill -9` before a flush: the spooled lines are written after the
    restart, each once (doc/s3-compatibility.md, "Server access logs")."""
    node = Node(tmp_path / "n")
    base = node.config.read_text()
    node.config.write_text("s3_access_log_flush_secs = 3600\n" + base)
    node.start()
    key, s3 = logging_site(node, "k9")
    for i in range(40):
        s3.put_object(Bucket="site", Key=f"k{i}", Body=b"x")
    assert log_lines(s3, 0, timeout=0) == []
    # The last request's line is recorded once its answer's head is ready:
    # a moment after the client has it.
    time.sleep(0.5)
    node.kill9()
    node.config.write_text("s3_access_log_flush_secs = 1\n" + base)
    node.start()
    try:
        lines = log_lines(s3_client(node, key), 40, timeout=20)
        puts = sorted(ln.split(" ")[8] for ln in lines if "REST.PUT.OBJECT" in ln)
        assert puts == sorted(f"k{i}" for i in range(40)), lines
        assert len(lines) == 40, lines
        # Written: the spool keeps no line of them.
        spool = list(node.meta.glob("access-log-spool/spool-*.jsonl"))
        assert spool and all(f.stat().st_size == 0 for f in spool), spool
    finally:
        node.stop()


def test_the_consoles_requests_are_logged_and_the_lines_counted(tmp_path):
    """The console's object browser reaches S3 through the admin port's
    proxy (`/console/s3/...`): its requests are logged like any other, by
    the same flusher, and `/metrics` counts the lines."""
    node = with_tokens(Node(tmp_path / "n"), metrics=False)
    node.config.write_text("s3_access_log_flush_secs = 1\n" + node.config.read_text())
    node.start()
    try:
        key, s3 = logging_site(node, "console-logs")
        s3.put_object(Bucket="site", Key="page.txt", Body=b"hello")
        pre = ok(node, "POST", "/v2/PresignObject",
                 {"bucket": "site", "key": key.id, "action": "get", "object": "page.txt"})
        conn = http.client.HTTPConnection("127.0.0.1", node.admin_port, timeout=10)
        conn.request("GET", "/console/s3" + pre["path_and_query"],
                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "X-Hangar-S3-Host": pre["host"]})
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b"hello"
        conn.close()

        lines = log_lines(s3, 2)
        assert len(lines) == 2, lines
        fields = [shlex.split(ln.replace("[", '"[').replace("]", ']"')) for ln in lines]
        got = sorted((f[6], f[9], f[21]) for f in fields)
        assert got == [("REST.GET.OBJECT", "200", "QueryString"), ("REST.PUT.OBJECT", "200", "AuthHeader")], got
        assert metric(node, "hangar_s3_access_log_lines_written_total") == 2
        assert metric(node, "hangar_s3_access_log_lines_dropped_total") == 0
        assert metric(node, "hangar_s3_access_log_waiting_bytes") == 0
    finally:
        node.stop()
