"""Helpers for the admin HTTP API tests: a node with admin tokens, and one
call of the API over a real HTTP connection."""

from __future__ import annotations

import http.client
import json
import os
from urllib.parse import urlencode

import yaml

from hangar_testlib import REPO, Node

ADMIN_TOKEN = "adm-" + "7" * 28
READ_TOKEN = "ro-" + "5" * 29
METRICS_TOKEN = "met-" + "3" * 28
DOC = REPO / "doc" / "admin-api.yaml"


def with_tokens(node: Node, admin: bool = True, read: bool = True, metrics: bool = True,
                file_mode: int = 0o600) -> Node:
    """Adds the test tokens to the node's `[admin]` section; the admin token
    comes from a file of mode `file_mode`, as operators are told to keep it."""
    lines = []
    if admin:
        f = node.root / "admin.token"
        f.write_text(ADMIN_TOKEN + "\n")
        os.chmod(f, file_mode)
        lines.append(f'admin_token_file = "{f}"')
    if read:
        lines.append(f'admin_read_token = "{READ_TOKEN}"')
    if metrics:
        lines.append(f'metrics_token = "{METRICS_TOKEN}"')
    node.config.write_text(node.config.read_text() + "\n".join(lines) + "\n")
    return node


def call(node: Node, method: str, path: str, token: str | None = ADMIN_TOKEN,
         body=None, query: dict | None = None, raw: bytes | None = None):
    """(status, headers, body bytes) of one request to the node's admin API."""
    conn = http.client.HTTPConnection("127.0.0.1", node.admin_port, timeout=30)
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if query:
        path = f"{path}?{urlencode(query)}"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    out = (r.status, dict(r.getheaders()), r.read())
    conn.close()
    return out


def ok(node: Node, method: str, path: str, body=None, query=None, token: str = ADMIN_TOKEN):
    """The JSON answer of a call that must succeed."""
    status, _, data = call(node, method, path, token, body, query)
    assert status == 200, (method, path, status, data)
    return json.loads(data)


def documented_routes() -> list[tuple[str, str, dict]]:
    """(METHOD, path, operation) of every route in doc/admin-api.yaml."""
    doc = yaml.safe_load(DOC.read_text())
    return [(m.upper(), p, op) for p, item in doc["paths"].items() for m, op in item.items()]


def admin_url(node: Node) -> str:
    return f"http://127.0.0.1:{node.admin_port}"


def meshed_nodes(tmp_path_factory, prefix: str) -> tuple[list[Node], list[str]]:
    """Three started nodes with the test tokens, joined through the first one,
    each seeing the other two up; returns them and their node ids. No layout."""
    import secrets

    from cluster_testlib import make_node, wait_for

    secret = secrets.token_hex(32)
    first = with_tokens(make_node(tmp_path_factory, f"{prefix}1", secret, []))
    first.start()
    addr = ok(first, "GET", "/v2/GetNodeId")["node"]
    ns = [first] + [with_tokens(make_node(tmp_path_factory, f"{prefix}{i}", secret, [addr])) for i in (2, 3)]
    for n in ns[1:]:
        n.start()
    ids = [ok(n, "GET", "/v2/GetNodeId")["node"].split("@")[0] for n in ns]
    for n in ns:
        wait_for(lambda: sum(p["is_up"] for p in ok(n, "GET", "/v2/GetClusterStatus")["peers"]) == 3,
                 20, "full mesh")
    return ns, ids
