"""The admin endpoint: Prometheus metrics that move with traffic, health, and
the metrics token."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from hangar_testlib import Node, random_bytes


def get(port: int, path: str, token: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_metrics_follow_traffic(node, s3, bucket):
    status, before = get(node.admin_port, "/metrics")
    assert status == 200
    s3.put_object(Bucket=bucket, Key="m", Body=random_bytes(2 << 20, 1))
    s3.get_object(Bucket=bucket, Key="m")["Body"].read()
    _, after = get(node.admin_port, "/metrics")
    put_label = '{op="PutObject"}'
    assert metric(after, "hangar_s3_requests_total", put_label) >= metric(before, "hangar_s3_requests_total", put_label) + 1
    assert metric(after, "hangar_block_written_total") >= metric(before, "hangar_block_written_total") + 2
    assert metric(after, "hangar_db_commit_writes_total") > metric(before, "hangar_db_commit_writes_total")
    assert "hangar_rpc_peer_up" in after or "# TYPE hangar_rpc_calls_total counter" in after  # the mesh registers its metrics too


def test_health(node):
    status, body = get(node.admin_port, "/health")
    v = json.loads(body)
    assert status == 200 and v["status"] == "healthy", body
    assert v["reason"] == "no layout applied: this node serves alone (replication_factor 1)"


def test_hangar_health_command(tmp_path):
    """`hangar health` (the container health check): one line and exit 0
    while the node runs, exit 1 with the reason when it does not."""
    n = Node(tmp_path / "health")
    n.start()
    try:
        res = n.cli("health")
        assert res.stdout.startswith("ok: node ") and res.stdout.count("\n") == 1, res.stdout
        assert f"admin http://127.0.0.1:{n.admin_port}" in res.stdout
        assert json.loads(n.cli("health", "--json").stdout)["status"] == "healthy"
    finally:
        n.stop()
    res = n.cli("health", check=False)
    assert res.returncode == 1 and "/health: cannot connect" in res.stderr, res
    n.config.write_text(n.config.read_text().split("[admin]")[0])
    res = n.cli("health", check=False)
    assert res.returncode == 1 and "no [admin] api_bind_addr" in res.stderr, res


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("guarded"))
    n.config.write_text(n.config.read_text() + 'metrics_token = "let-me-in"\n')
    n.start()
    yield n
    n.stop()


def test_metrics_token_is_required_when_set(guarded):
    assert get(guarded.admin_port, "/metrics")[0] == 401
    assert get(guarded.admin_port, "/metrics", "wrong")[0] == 403
    assert get(guarded.admin_port, "/metrics", "let-me-in")[0] == 200
    # The metrics token opens nothing else; with no admin token the API is off.
    assert get(guarded.admin_port, "/v2/ListKeys", "let-me-in")[0] == 403
