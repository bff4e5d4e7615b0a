"""Fixtures of a node or a cluster with two keys, for tests of who may do
what: `one` (one node), `three` (a laid-out 3-node cluster) and `cluster`
(each test run on both). Each yields (nodes, owner, other): "owner" may
create buckets, "other" has no permission at all. Module-scoped: a test
module that imports them gets its own node and cluster. Used by
test_bucket_policy.py and test_acl.py; it holds no tests itself."""

from __future__ import annotations

import pytest

from cluster_testlib import key_of, laid_out_cluster
from hangar_testlib import Node


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("pol1"))
    n.start()
    key = n.create_key("owner", create_bucket=True)
    other = n.create_key("other")
    yield [n], key, other
    n.stop()


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "pol3")
    first = nodes[0]
    key = key_of(first.cli_json("key", "create", "owner"), "owner")
    first.cli("key", "allow", key.id, "--create-bucket")
    other = key_of(first.cli_json("key", "create", "other"), "other")
    yield nodes, key, other
    for n in nodes:
        n.stop()


@pytest.fixture(params=["one", "three"])
def cluster(request):
    """`one` and then `three`: the test module must import both as well."""
    return request.getfixturevalue(request.param)
