"""A real Prometheus server (Debian's `prometheus` package) scrapes real
hangar nodes: the target is up and the values it stored match the workload
that produced them; `promtool check metrics` accepts the exposition of a
single node and of a 3-node cluster's nodes (with peers and resync
activity); every family has HELP and TYPE and bounded labels; and every
metric the Grafana dashboard (doc/grafana/hangar.json) queries exists in a
live exposition, and every one of its queries is valid PromQL that
Prometheus evaluates.

Skipped only when prometheus is not installed (script/install-test-deps
installs it); under CI it is required and its absence fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from hangar_testlib import REGION, Node, bucket_name, die_with_parent, free_port, random_bytes, s3_client, tail
from cluster_testlib import key_of, laid_out_cluster, node_id, wait_for

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "doc" / "grafana" / "hangar.json"


@pytest.fixture(scope="module")
def tools():
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not (prometheus and promtool):
        why = "prometheus/promtool not installed (Debian's prometheus package; script/install-test-deps installs it)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return prometheus, promtool


class Prometheus:
    """A Prometheus server scraping `targets` every second."""

    def __init__(self, binary: str, root: Path, targets: list[str]):
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log = root / "prometheus.log"
        cfg = root / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: hangar\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={cfg}", f"--storage.tsdb.path={root / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            )
        wait_for(self.ready, 30, f"prometheus ready (log: {tail(self.log, 5)})")

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {tail(self.log)}")
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def api(self, expr: str) -> dict:
        q = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/query?{q}", timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def query(self, expr: str) -> list[dict]:
        r = self.api(expr)
        assert r["status"] == "success", (expr, r)
        return r["data"]["result"]

    def value(self, expr: str) -> float:
        """The sum of the instant vector `expr` (0 when empty)."""
        return sum(float(s["value"][1]) for s in self.query(expr))

    def scraped_after(self, t: float, targets: int = 1) -> None:
        """Waits until every target was scraped after time `t`."""
        wait_for(lambda: len([s for s in self.query('timestamp(up{job="hangar"})') if float(s["value"][1]) > t])
                 >= targets, 30, "a scrape after the workload")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def plain_body_client(n: Node, key) -> "boto3.client":
    """A boto3 client that adds no checksum (so no aws-chunked framing):
    the request body on the wire is the object, byte for byte."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=n.endpoint, region_name=REGION, aws_access_key_id=key.id,
        aws_secret_access_key=key.secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"max_attempts": 1, "mode": "standard"},
                      request_checksum_calculation="when_required"),
    )


def exposition(n: Node) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{n.admin_port}/metrics", timeout=10) as r:
        return r.read().decode()


def promtool_check(promtool: str, text: str) -> None:
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), (r.returncode, r.stdout, r.stderr)


def families(text: str) -> tuple[dict[str, str], set[str], list[tuple[str, dict[str, str]]]]:
    """(family -> type, families with HELP, samples as (name, labels))."""
    types, helps, samples = {}, set(), []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line[7:].split(" ", 1)
            types[name] = kind
        elif line.startswith("# HELP "):
            helps.add(line[7:].split(" ", 1)[0])
        elif line and not line.startswith("#"):
            m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ', line)
            assert m, line
            labels = dict(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            samples.append((m.group(1), labels))
    return types, helps, samples


def family_of(sample: str, types: dict[str, str]) -> str | None:
    if sample in types:
        return sample
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample.removesuffix(suffix)
        if base != sample and types.get(base) == "histogram":
            return base
    return None


def test_prometheus_scrapes_a_node_and_its_values_match_the_workload(tools, tmp_path):
    prometheus, promtool = tools
    n = Node(tmp_path / "node")
    n.start()
    prom = None
    try:
        key = n.create_key("prom", create_bucket=True)
        s3 = plain_body_client(n, key)
        bucket = bucket_name("prom")
        s3.create_bucket(Bucket=bucket)
        prom = Prometheus(prometheus, tmp_path / "prom", [f"127.0.0.1:{n.admin_port}"])
        wait_for(lambda: prom.value('up{job="hangar"}') == 1, 30, "the hangar target up")
        prom.scraped_after(time.time())
        put = 'hangar_s3_requests_total{op="PutObject"}'
        put_count = 'hangar_s3_request_duration_seconds_count{op="PutObject"}'
        bytes_in = 'hangar_s3_received_bytes_total{op="PutObject"}'
        bytes_out = 'hangar_s3_sent_bytes_total{op="GetObject"}'
        no_bucket = 'hangar_s3_errors_total{op="DeleteBucket",code="NoSuchBucket"}'
        before = {q: prom.value(q) for q in (put, put_count, bytes_in, bytes_out, no_bucket)}

        sizes = [1, 100, 4_096, 65_536, 300_000, 1_000_000, 1_048_577, 2_500_000, 17, 0]
        for i, size in enumerate(sizes):
            s3.put_object(Bucket=bucket, Key=f"o{i}", Body=random_bytes(size, i))
        for i, size in enumerate(sizes):
            assert len(s3.get_object(Bucket=bucket, Key=f"o{i}")["Body"].read()) == size
        with pytest.raises(Exception) as e:
            s3.delete_bucket(Bucket=bucket_name("absent"))
        assert "NoSuchBucket" in str(e.value)

        prom.scraped_after(time.time())
        after = {q: prom.value(q) for q in before}
        assert after[put] - before[put] == 10
        assert after[put_count] - before[put_count] == 10
        assert after[bytes_in] - before[bytes_in] == sum(sizes)
        assert after[bytes_out] - before[bytes_out] == sum(sizes)
        assert after[no_bucket] - before[no_bucket] == 1
        # Histogram buckets are cumulative: the +Inf bucket holds every PUT.
        assert prom.value('hangar_s3_request_duration_seconds_bucket{op="PutObject",le="+Inf"}') == after[put]
        assert prom.value("hangar_block_stored_blocks") > 0
        promtool_check(promtool, exposition(n))
    finally:
        if prom:
            prom.stop()
        n.stop()


@pytest.fixture(scope="module")
def busy_cluster(tools, tmp_path_factory):
    """A 3-node cluster with some load, whose third node lost its data
    directory and refilled it by resync."""
    nodes = laid_out_cluster(tmp_path_factory, "pm")
    key = key_of(nodes[0].cli_json("key", "create", "prom"), "prom")
    nodes[0].cli("key", "allow", key.id, "--create-bucket")
    bucket = bucket_name("prom-cluster")
    s3 = s3_client(nodes[0], key)
    s3.create_bucket(Bucket=bucket)
    for i in range(8):
        s3.put_object(Bucket=bucket, Key=f"o{i}", Body=random_bytes(300_000 + i, 77 + i))
    nodes[2].stop()
    shutil.rmtree(nodes[2].data)
    nodes[2].start()
    wait_for(lambda: metric_value(exposition(nodes[2]), "hangar_resync_fetched_blocks_total") >= 8, 120,
             "node 3 fetched its blocks back")
    c2 = s3_client(nodes[1], key)
    for i in range(8):
        c2.get_object(Bucket=bucket, Key=f"o{i}")["Body"].read()
    with pytest.raises(Exception):
        c2.get_object(Bucket=bucket, Key="absent")
    yield nodes
    for n in nodes:
        n.stop()


def metric_value(text: str, sample: str) -> float:
    m = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_promtool_accepts_every_cluster_nodes_exposition(tools, busy_cluster):
    _, promtool = tools
    for n in busy_cluster:
        text = exposition(n)
        promtool_check(promtool, text)
        _, _, samples = families(text)
        peers = {s[1].get("peer") for s in samples if s[0] == "hangar_rpc_calls_total"}
        others = {node_id(m)[:16] for m in busy_cluster if m is not n}
        assert others <= peers, (others, peers)
        up = {s[1]["peer"] for s in samples if s[0] == "hangar_rpc_peer_up"}
        assert others <= up, (others, up)
    assert metric_value(exposition(busy_cluster[2]), "hangar_resync_fetched_bytes_total") > 0


def test_every_family_has_help_type_and_bounded_labels(busy_cluster):
    ids = {node_id(n)[:16] for n in busy_cluster}  # NodeId::short: 8 bytes in hex
    for n in busy_cluster:
        text = exposition(n)
        types, helps, samples = families(text)
        assert set(types) == helps, set(types) ^ helps
        for name, kind in types.items():
            assert name.startswith("hangar_"), name
            assert name.endswith("_total") == (kind == "counter"), name
            assert not re.search(r"_(ms|msec|millis|kb|mb|kib|mib|percent)(_|$)", name), name
        for name, labels in samples:
            assert family_of(name, types), f"sample {name} has no TYPE"
            assert set(labels) <= {"op", "code", "reason", "endpoint", "peer", "kind", "worker", "state", "table",
                                   "queue", "dir", "version", "action", "quota", "le"}, (name, labels)
            if "quota" in labels:
                assert labels["quota"] in ("objects", "size"), labels
            if "peer" in labels:
                assert labels["peer"] in ids, labels
            if "op" in labels:
                assert re.fullmatch(r"[A-Z][A-Za-z0-9]+|unknown", labels["op"]), labels
            if "code" in labels:
                assert re.fullmatch(r"[A-Za-z0-9]{1,64}", labels["code"]), labels
            if "endpoint" in labels:
                assert labels["endpoint"].startswith("hangar/") or labels["endpoint"] == "unknown", labels
        # A few thousand series at most for a small cluster; nothing grows per object or key.
        assert len(samples) < 5000, len(samples)


def dashboard_queries() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            out.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(d["panels"])
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict) and q.get("query"):
            out.append(q["query"])
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names of a PromQL expression: Hangar's all start with
    `hangar_`; label matchers and strings are removed first."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    return set(re.findall(r"\bhangar_[a-z0-9_]+", bare))


def test_every_metric_the_dashboard_queries_exists_and_its_queries_run(tools, busy_cluster, tmp_path):
    prometheus, _ = tools
    queries = dashboard_queries()
    titles = " ".join(p.get("title", "") for p in json.loads(DASHBOARD.read_text())["panels"]).lower()
    for topic in ("throughput", "latency", "errors", "resync", "disk", "peer"):
        assert topic in titles, topic
    # A family exists once it is declared (HELP and TYPE), even before its
    # first sample: a counter of timeouts has none until one happens.
    live: set[str] = set()
    for n in busy_cluster:
        types, _, samples = families(exposition(n))
        live |= {s[0] for s in samples} | set(types)
        live |= {f"{f}{sfx}" for f, k in types.items() if k == "histogram" for sfx in ("_bucket", "_sum", "_count")}
    used = set()
    for q in queries:
        names = metric_names(q)
        assert names, f"no hangar metric in {q}"
        used |= names
    missing = used - live
    assert not missing, f"the dashboard queries metrics no node exposes: {sorted(missing)}"
    prom = Prometheus(prometheus, tmp_path / "prom", [f"127.0.0.1:{n.admin_port}" for n in busy_cluster])
    try:
        prom.scraped_after(time.time(), targets=3)
        for q in queries:
            if q.startswith("label_values("):
                continue
            expr = q.replace("$__rate_interval", "1m").replace("$instance", ".*")
            r = prom.api(expr)
            assert r["status"] == "success", (expr, r)
        assert prom.value('hangar_cluster_nodes{state="up"}') == 9  # 3 nodes, each sees 3 up
    finally:
        prom.stop()
