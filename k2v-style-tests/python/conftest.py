"""Fixtures: one real `hangar server` per test session (plus private nodes for
tests that kill or misconfigure the server), an admin key with the
create-bucket right, boto3 clients and fresh buckets."""

from __future__ import annotations

import pytest

import shutil

from hangar_testlib import HANGAR_BIN, SESSION_DIRS, Node, bucket_name, s3_client, session_dir, tail


def pytest_sessionstart(session):
    if not HANGAR_BIN.exists():
        raise pytest.UsageError(
            f"{HANGAR_BIN} does not exist: run `cargo build -p hangar` first (script/test does)"
        )


@pytest.fixture(scope="module", autouse=True)
def module_dirs_removed(request, tmp_path_factory):
    """Removes the temporary directories a test module made (its nodes'
    data and metadata) once the module is done, unless one of its tests
    failed: kept to the end, the whole suite's reached 10 GB, enough to
    fill a CI machine's disk before the fuzz and packaging stages. So the
    suite needs the disk of its largest module, not of all of them.
    Directories of session-scoped fixtures (`session_dir`) stay."""
    base = tmp_path_factory.getbasetemp()
    before = set(base.iterdir())
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        return
    for d in set(base.iterdir()) - before - SESSION_DIRS:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    n = Node(session_dir(tmp_path_factory, "node"))
    n.start()
    yield n
    n.stop()


@pytest.fixture(scope="session")
def admin_key(node):
    return node.create_key("admin", create_bucket=True)


@pytest.fixture(scope="session")
def s3(node, admin_key):
    return s3_client(node, admin_key)


@pytest.fixture
def new_bucket(s3, request):
    """Factory: create a fresh bucket owned by the admin key and return its name."""

    def make(hint: str | None = None) -> str:
        name = bucket_name(hint or request.node.name)
        s3.create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture
def bucket(new_bucket):
    return new_bucket()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of the server log to failing tests."""
    report = yield
    if report.failed and "node" in getattr(item, "funcargs", {}):
        report.sections.append(("hangar server log (tail)", tail(item.funcargs["node"].log, 20)))
    return report
