"""`hangar -c bad.toml server` refuses bad configs at start, naming the key."""

import subprocess

import pytest

from hangar_testlib import HANGAR_BIN, free_port, wait_port

GOOD = """metadata_dir = "{d}/meta"
data_dir = "{d}/data"
db_engine = "sled"
replication_factor = 1
rpc_secret = "4425f5c26c5e11581d3223904324dcb5b5d5dfb14e5e7f35e38c595424f5f1e6"
rpc_bind_addr = "127.0.0.1:{rpc}"

[s3_api]
api_bind_addr = "127.0.0.1:{s3}"
s3_region = "garage"
"""


def _run_server(tmp_path, text):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text.format(d=tmp_path, rpc=free_port(), s3=free_port()))
    try:
        res = subprocess.run(
            [str(HANGAR_BIN), "-c", str(cfg), "server"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the server started with a bad config instead of refusing it")
    return res


CASES = {
    "unknown top-level key": (GOOD + "", "bogus_option", lambda g: g.replace("db_engine", 'bogus_option = 3\ndb_engine')),
    "unknown key in [s3_api]": (GOOD, "api_bind_adress", lambda g: g + 'api_bind_adress = "127.0.0.1:1"\n'),
    "unknown section": (GOOD, "s3_apii", lambda g: g + '[s3_apii]\ns3_region = "x"\n'),
    "missing metadata_dir": (GOOD, "metadata_dir", lambda g: "\n".join(l for l in g.splitlines() if not l.startswith("metadata_dir"))),
    "missing replication_factor": (GOOD, "replication_factor", lambda g: g.replace("replication_factor = 1\n", "")),
    "missing rpc_secret": (GOOD, "rpc_secret", lambda g: "\n".join(l for l in g.splitlines() if not l.startswith("rpc_secret"))),
    "missing s3_region": (GOOD, "s3_region", lambda g: g.replace('s3_region = "garage"\n', "")),
    "malformed block_size": (GOOD, "block_size", lambda g: g.replace("db_engine", 'block_size = "lots"\ndb_engine')),
    "malformed replication_factor": (GOOD, "replication_factor", lambda g: g.replace("replication_factor = 1", 'replication_factor = "one"')),
    "malformed rpc_bind_addr": (GOOD, "rpc_bind_addr", lambda g: g.replace('rpc_bind_addr = "127.0.0.1:{rpc}"', 'rpc_bind_addr = "not an address"')),
    "malformed api_bind_addr": (GOOD, "api_bind_addr", lambda g: g.replace('api_bind_addr = "127.0.0.1:{s3}"', "api_bind_addr = 3900")),
    "malformed compression_level": (GOOD, "compression_level", lambda g: g.replace("db_engine", 'compression_level = "max"\ndb_engine')),
    "malformed rpc_secret": (GOOD, "rpc_secret", lambda g: g.replace("4425f5c26c5e", "zz25f5c26c5e")),
    "unknown db_engine": (GOOD, "db_engine", lambda g: g.replace('db_engine = "sled"', 'db_engine = "lmdb"')),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_config_refused(tmp_path, case):
    good, key, mutate = CASES[case]
    res = _run_server(tmp_path, mutate(good))
    assert res.returncode != 0, f"accepted: {res.stdout}{res.stderr}"
    assert key in res.stderr + res.stdout, f"message does not name {key!r}:\n{res.stderr}"


def test_toml_syntax_error_refused(tmp_path):
    res = _run_server(tmp_path, GOOD + "\nthis is = = not toml\n")
    assert res.returncode != 0


def test_missing_config_file(tmp_path):
    res = subprocess.run(
        [str(HANGAR_BIN), "-c", str(tmp_path / "nope.toml"), "server"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert res.returncode != 0
    assert "nope.toml" in res.stderr


def test_good_config_starts(tmp_path):
    # the baseline of the cases above is itself valid
    s3 = free_port()
    cfg = tmp_path / "good.toml"
    cfg.write_text(GOOD.format(d=tmp_path, rpc=free_port(), s3=s3))
    log = tmp_path / "server.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [str(HANGAR_BIN), "-c", str(cfg), "server"],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_port(s3, proc, 60, log)
    finally:
        proc.terminate()
        proc.wait(20)
