"""The operator CLI on a real node (doc/cli.md): shell completions loaded
by a real bash and driven through its completion function, the man page
rendered by man/groff without warnings, `hangar stats` matching a workload,
`--json` on every command that talks to a node, the documented exit codes
and error messages, and the progress of long operations both piped (plain
lines) and on a terminal (a pty: a redrawn bar)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import botocore.exceptions
import pytest

from admin_api_lib import ADMIN_TOKEN, READ_TOKEN, admin_url, with_tokens
from hangar_testlib import HANGAR_BIN, Key, Node, bucket_name, free_port, random_bytes, s3_client

# doc/cli.md, "Exit codes".
EXIT = {"failed": 1, "usage": 2, "not_found": 3, "conflict": 4, "unavailable": 5,
        "unreachable": 6, "refused": 7}


def hangar(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(HANGAR_BIN), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def top_level_commands() -> list[str]:
    """The subcommands `hangar --help` lists."""
    out = hangar("--help").stdout
    section = out.split("Commands:")[1].split("Options:")[0]
    names = [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()]
    assert "status" in names and "stats" in names and "completions" in names, names
    return names


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    n = with_tokens(Node(tmp_path_factory.mktemp("cli")))
    n.start()
    yield n
    n.stop()


# ---------------------------------------------------------------- completions and man


def test_bash_completion_loads_and_completes_subcommands():
    script = hangar("completions", "bash").stdout
    assert script.startswith("_hangar()"), script[:200]
    res = subprocess.run(["bash", "-c", 'source <("$0" completions bash) && complete -p hangar', HANGAR_BIN],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and re.search(r"complete .*-F _hangar .*hangar$", res.stdout.strip()), res

    def complete(*words: str) -> list[str]:
        # What bash does on <TAB>: the words so far, the one being
        # completed last, then the completion function; COMPREPLY is the answer.
        line = " ".join(words)
        prog = f'''
source <("$0" completions bash)
COMP_WORDS=({" ".join(repr(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={line!r}
COMP_POINT=${{#COMP_LINE}}
_hangar hangar {words[-1]!r} {words[-2]!r}
printf '%s\\n' "${{COMPREPLY[@]}}"
'''
        r = subprocess.run(["bash", "-c", prog, HANGAR_BIN], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r
        return r.stdout.split()

    assert set(complete("hangar", "sta")) == {"status", "stats"}
    assert {"create", "list", "info", "delete", "allow", "deny"} <= set(complete("hangar", "bucket", ""))
    assert {"bash", "zsh", "fish"} <= set(complete("hangar", "completions", ""))
    assert "--wait" in complete("hangar", "layout", "apply", "--")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completions_name_every_subcommand(shell):
    res = hangar("completions", shell)
    assert res.returncode == 0 and res.stdout.strip(), res
    for name in top_level_commands():
        assert name in res.stdout, (shell, name)
    # The shell parses the script (script/install-test-deps installs zsh;
    # fish is checked where it is installed).
    exe = shutil.which(shell)
    if shell == "zsh":
        assert exe, "zsh is not installed: run script/install-test-deps"
    if exe:
        check = [exe, "-n"] if shell == "zsh" else [exe, "--no-execute"]
        r = subprocess.run(check, input=res.stdout, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r


def test_man_page_renders_without_warnings_and_lists_every_command(tmp_path):
    page = tmp_path / "hangar.1"
    res = hangar("man")
    assert res.returncode == 0 and res.stdout.startswith(".ie") or res.stdout.startswith(".TH"), res.stdout[:200]
    page.write_text(res.stdout)
    man = shutil.which("man")
    assert man, "man is not installed: script/install-test-deps installs man-db"
    r = subprocess.run([man, "--warnings", "-l", str(page)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "MANWIDTH": "100"})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # Without a terminal, bold and underline are overstrikes (c BS c).
    text = re.sub(r".\x08", "", r.stdout)
    words = " ".join(text.split())
    assert "SUBCOMMANDS" in text and "Exit codes: 0 ok" in words, text
    # The examples stay one per line (no-fill), as `--help` shows them.
    assert re.search(r"^ +hangar stats --json +buckets, disks, tables and blocks, as JSON$", text, re.M), text
    for name in top_level_commands():
        if name != "help":
            assert f"hangar-{name}(1)" in text, name
    # groff itself, strictest warnings, on every page of `man --dir`.
    pages = tmp_path / "pages"
    assert hangar("man", "--dir", str(pages)).returncode == 0
    files = sorted(pages.glob("*.1"))
    assert {"hangar.1", "hangar-stats.1", "hangar-layout-apply.1"} <= {f.name for f in files}
    for f in files:
        g = subprocess.run(["groff", "-k", "-man", "-Tutf8", "-ww", "-z", str(f)],
                           capture_output=True, text=True, timeout=60)
        assert g.returncode == 0 and g.stderr == "", (f.name, g.stderr)


@pytest.mark.parametrize("args", [["status"], ["layout", "show"], ["worker", "list"], ["stats"]])
def test_output_into_a_closed_pipe_ends_quietly(api, args):
    """`hangar … | head` closes the pipe early: the CLI ends as Unix tools
    do (killed by SIGPIPE, nothing on stderr), not with a panic about a
    broken pipe (doc/chaos.md saw it on `block info | head`)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(HANGAR_BIN), "-c", str(api.config), *args], stdout=w,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
    finally:
        os.close(w)
    assert p.stderr == b"", p.stderr.decode()
    assert p.returncode == -13, p.returncode


def test_main_commands_have_examples_in_their_help():
    for cmd in (["--help"], ["key", "--help"], ["bucket", "--help"], ["layout", "--help"],
                ["status", "--help"], ["stats", "--help"], ["repair", "--help"]):
        out = hangar(*cmd).stdout
        assert "Examples:" in out and "hangar " in out.split("Examples:")[1], cmd


# ---------------------------------------------------------------- stats


def test_stats_match_a_workload_on_one_node(tmp_path):
    # A node of its own: its block files are exactly this test's.
    api = Node(tmp_path / "stats")
    api.start()
    try:
        stats_match_a_workload(api)
    finally:
        api.stop()


def stats_match_a_workload(api):
    key = api.create_key("stats", create_bucket=True)
    s3 = s3_client(api, key)
    b1, b2 = bucket_name("stats-a"), bucket_name("stats-b")
    s3.create_bucket(Bucket=b1)
    s3.create_bucket(Bucket=b2)
    # Inline (<= 3072 B), one block, several blocks (block_size 1 MiB);
    # random bytes, so each block is stored plain (its file is its bytes).
    sizes = [100, 3072, 5000, 200_000, 1_500_000, 2 * 1024 * 1024]
    for i, n in enumerate(sizes):
        s3.put_object(Bucket=b1, Key=f"obj-{i}", Body=random_bytes(n, seed=1000 + i))
    s3.put_object(Bucket=b2, Key="only", Body=random_bytes(10_000, seed=99))
    # A deleted object does not count (inline, so it has no block file).
    s3.put_object(Bucket=b2, Key="gone", Body=random_bytes(2_000, seed=98))
    s3.delete_object(Bucket=b2, Key="gone")

    v = api.cli_json("stats")
    rows = {b["name"]: b for b in v["buckets"]}
    assert (rows[b1]["objects"], rows[b1]["bytes"]) == (len(sizes), sum(sizes))
    assert (rows[b2]["objects"], rows[b2]["bytes"]) == (1, 10_000)
    assert v["totals"]["objects"] == sum(b["objects"] for b in v["buckets"])
    assert v["totals"]["bytes"] == sum(b["bytes"] for b in v["buckets"])
    assert v["totals"]["buckets"] == len(v["buckets"])
    [me] = v["nodes"]
    assert me["is_up"] and me["is_self"] and me["report_error"] is None
    r = me["report"]
    assert 0 < r["data_disk"]["avail"] <= r["data_disk"]["total"]
    assert 0 < r["metadata_disk"]["avail"] <= r["metadata_disk"]["total"]
    assert r["tables"]["bucket"] == len(v["buckets"]) and r["tables"]["key"] >= 1
    objects_stored = sum(b["objects"] for b in v["buckets"])
    # The object table also holds the tombstone of the deleted object.
    assert r["tables"]["object"] == objects_stored + 1, r["tables"]
    # Block files: exactly what this test wrote: one per started MiB of
    # each object past 3072 bytes.
    blocks = sum(-(-n // (1024 * 1024)) for n in sizes if n > 3072) + 1
    block_bytes = sum(n for n in sizes if n > 3072) + 10_000
    assert (r["blocks"]["count"], r["blocks"]["bytes"]) == (blocks, block_bytes), r["blocks"]
    # The table form says the same.
    text = api.cli("stats").stdout
    line = next(x for x in text.splitlines() if x.startswith(b1))
    assert line.split()[1:] == [str(len(sizes)), *line.split()[2:4], str(sum(sizes))], line
    assert "==== TABLE ROWS PER NODE ====" in text and "object" in text


# ---------------------------------------------------------------- --json and exit codes


def test_every_command_that_reads_answers_json(api):
    api.cli("bucket", "create", "json-bucket")
    api.cli("key", "create", "json-key")
    cmds = [("key", "list"), ("key", "info", "json-key"), ("bucket", "list"), ("bucket", "info", "json-bucket"),
            ("status",), ("stats",), ("layout", "show"), ("layout", "history"), ("worker", "list"),
            ("worker", "info", "block-resync"), ("worker", "info", "block-scrub"),
            ("worker", "set", "resync-tranquility", "0"), ("table", "status"), ("block", "list-errors"),
            ("block", "retry-now"), ("node", "id"), ("repair", "tables"), ("repair", "blocks"),
            ("health",), ("key", "allow", "json-key", "--create-bucket"),
            ("bucket", "allow", "json-bucket", "--key", "json-key", "--read")]
    for args in cmds:
        res = api.cli(*args, "--json")
        v = json.loads(res.stdout)
        assert isinstance(v, (dict, list)), args
    status = api.cli_json("status")
    me = status["peers"][0]
    assert set(me["report"]) == {"layout_version", "data_disk", "metadata_disk", "resync", "scrub",
                                 "tables", "blocks"}
    assert me["layout_sync"]["state"] in ("synced", "syncing", "no data")
    # Created things answer JSON too, and the secret only where it is new.
    made = api.cli_json("key", "create", "json-key-2")
    assert made["secret_access_key"] and made["access_key_id"].startswith("GK")
    assert "secret_access_key" not in api.cli_json("key", "info", "json-key-2")
    assert api.cli_json("bucket", "delete", "json-bucket", "--yes") == {"deleted": "json-bucket"}


def error_of(res: subprocess.CompletedProcess) -> dict:
    """The `--json` error object on stderr (its last line: the log may precede it)."""
    return json.loads(res.stderr.strip().splitlines()[-1])["error"]


def test_exit_codes_and_messages_say_what_to_do(api, tmp_path):
    api.cli("bucket", "create", "exit-bucket")
    cases = [
        (("bucket", "info", "no-such-bucket"), "not_found", "hangar bucket list"),
        (("key", "info", "no-such-key"), "not_found", "hangar key list"),
        (("worker", "info", "no-such-worker"), "not_found", "hangar worker list"),
        (("bucket", "create", "exit-bucket"), "conflict", "exit-bucket"),
        (("bucket", "delete", "exit-bucket"), "usage", "--yes"),
        (("bucket", "allow", "exit-bucket", "--key", "nobody"), "usage", "--read"),
        (("layout", "apply", "--version", "7"), "usage", "version"),
        (("no-such-command",), "usage", "unrecognized subcommand"),
    ]
    for args, kind, hint in cases:
        res = api.cli(*args, check=False)
        assert res.returncode == EXIT[kind], (args, res)
        assert hint in res.stderr, (args, res.stderr)
        e = error_of(api.cli(*args, "--json", check=False))
        assert e["exit_code"] == EXIT[kind] and hint in e["message"], (args, e)
    # The command line's own errors answer the JSON object too, with --json
    # anywhere on the line, and clap's text without it.
    for args, hint in [(("--json", "bucket", "info"), "<NAME>"),
                       (("bucket", "list", "--no-such-flag", "--json"), "--no-such-flag"),
                       (("repair", "scrub", "sideways", "--json"), "sideways")]:
        res = api.cli(*args, check=False)
        assert res.returncode == EXIT["usage"], (args, res)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1, (args, res.stderr)
        e = json.loads(lines[0])["error"]
        assert e["kind"] == "Usage" and e["exit_code"] == EXIT["usage"] and hint in e["message"], (args, e)
    res = api.cli("bucket", "list", "--no-such-flag", check=False)
    assert res.returncode == EXIT["usage"] and res.stderr.startswith("error: "), res
    res = api.cli("--json", "--help")
    assert res.returncode == 0 and "Usage:" in res.stdout, res
    # No node behind the socket, no config, a closed port, a wrong token.
    stopped = Node(tmp_path / "stopped")
    res = hangar("-c", str(stopped.config), "status")
    assert res.returncode == EXIT["unreachable"] and "is `hangar server` running" in res.stderr, res
    res = hangar("-c", str(tmp_path / "none.toml"), "status")
    assert res.returncode == EXIT["usage"] and "-c or HANGAR_CONFIG_FILE" in res.stderr, res
    res = hangar("--admin-url", f"http://127.0.0.1:{free_port()}", "--admin-token", "x", "status")
    assert res.returncode == EXIT["unreachable"] and "is the node running" in res.stderr, res
    url = admin_url(api)
    res = hangar("-c", "/nonexistent.toml", "--admin-url", url, "--admin-token", "wrong", "key", "list")
    assert res.returncode == EXIT["refused"] and "refused the token" in res.stderr, res
    res = hangar("-c", "/nonexistent.toml", "--admin-url", url, "--admin-token", READ_TOKEN,
                 "key", "create", "ro", "--json")
    e = error_of(res)
    assert res.returncode == EXIT["refused"] and e["kind"] == "Refused" and "admin_token" in e["message"], res
    res = hangar("-c", "/nonexistent.toml", "--admin-url", url, "--admin-token", ADMIN_TOKEN,
                 "bucket", "info", "no-such-bucket")
    assert res.returncode == EXIT["not_found"], res


# ---------------------------------------------------------------- progress


@pytest.fixture(scope="module")
def with_blocks(api):
    """The node holds block files, so `repair blocks` has something to queue."""
    key = api.create_key("blocks", create_bucket=True)
    s3 = s3_client(api, key)
    b = bucket_name("blocks")
    s3.create_bucket(Bucket=b)
    for i in range(3):
        s3.put_object(Bucket=b, Key=f"b{i}", Body=random_bytes(1_200_000, seed=70 + i))
    return api


def test_progress_is_plain_lines_when_piped(with_blocks):
    api = with_blocks
    res = api.cli("repair", "blocks", "--wait", "--timeout", "120")
    assert re.match(r"\d+ blocks queued\.", res.stdout), res
    lines = res.stderr.strip().splitlines()
    assert lines[-1] == "Block resync done: the queue is empty.", res.stderr
    assert any(re.match(r"block resync: \d+ queued, \d+ in flight, .* \(\d+/\d+, \d+%\)$", x) for x in lines), lines
    assert "\r" not in res.stderr and "\x1b" not in res.stderr
    res = api.cli("repair", "tables")
    assert re.search(r"anti-entropy pass of every sharded table: done in [\d.]+ s$", res.stderr.strip()), res
    assert "complete: true" in res.stdout, res
    # With --json, stdout is the JSON alone.
    v = json.loads(api.cli("repair", "blocks", "--wait", "--json").stdout)
    assert v["resync"]["failed"] == 0


def test_scrub_wait_shows_the_pass_until_it_is_done(with_blocks):
    api = with_blocks
    api.cli("worker", "set", "scrub-tranquility", "0")
    blocks = api.cli_json("stats")["nodes"][0]["report"]["blocks"]["count"]
    assert blocks >= 3
    res = api.cli("repair", "scrub", "start", "--wait", "--timeout", "120", timeout=150)
    m = re.match(r"Scrub done: (\d+) blocks checked, 0 corrupt\.", res.stdout)
    assert m and int(m.group(1)) >= blocks, res
    lines = res.stderr.strip().splitlines()
    assert re.match(r"scrub: pass done, \d+ blocks checked, 0 corrupt, \d+ bytes read$", lines[-1]), res.stderr
    assert "\r" not in res.stderr and "\x1b" not in res.stderr
    v = json.loads(api.cli("repair", "scrub", "start", "--wait", "--json", timeout=150).stdout)
    assert v["started"]["status"] == "running" and v["scrub"]["status"] == "idle", v
    assert v["scrub"]["last_pass_done_msec"] >= v["started"]["pass_started_msec"], v
    # --wait is for the commands that start a pass.
    res = api.cli("repair", "scrub", "pause", "--wait", check=False)
    assert res.returncode == EXIT["usage"] and "--wait" in res.stderr, res
    code, out = run_in_pty(["-c", str(api.config), "repair", "scrub", "start", "--wait"])
    assert code == 0 and b"\r\x1b[K" in out and b"Scrub done:" in out, out


def run_in_pty(args: list[str], timeout: float = 60) -> tuple[int, bytes]:
    """Runs `hangar args` with its stdout and stderr on a pseudo-terminal;
    returns the exit code and everything written to the terminal."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execv(str(HANGAR_BIN), [str(HANGAR_BIN), *args])
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out


def test_progress_is_a_redrawn_bar_on_a_terminal(with_blocks):
    api = with_blocks
    code, out = run_in_pty(["-c", str(api.config), "repair", "blocks", "--wait"])
    assert code == 0, out
    # The line is redrawn in place (CR, erase line), with a bar and a percentage.
    assert b"\r\x1b[K[" in out and re.search(rb"\] +\d+%  block resync: ", out), out
    assert out.rstrip().endswith(b"Block resync done: the queue is empty."), out
    code, out = run_in_pty(["-c", str(api.config), "repair", "tables"])
    assert code == 0 and b"\r\x1b[K" in out and b"anti-entropy pass of every sharded table: done" in out, out


def test_convert_db_shows_progress_and_answers_json(tmp_path):
    n = Node(tmp_path / "conv")
    n.config.write_text(n.config.read_text().replace('db_engine = "redb"', 'db_engine = "sled"'))
    n.start()
    for i in range(3):
        n.cli("bucket", "create", f"conv-{i}")
    n.stop()
    frm, to = f"sled:{n.meta / 'db.sled'}", f"redb:{n.meta / 'db.redb'}"
    res = hangar("convert-db", "--from", frm, "--to", to, "--json")
    assert res.returncode == 0, res
    v = json.loads(res.stdout)
    assert v["converted_keys"] > 0 and v["from"] == frm and v["to"] == to
    lines = res.stderr.strip().splitlines()
    assert any(re.match(r"tree \S+: \d+ keys copied \(\d+/\d+, \d+%\)$", x) for x in lines), lines
    assert lines[-1] == f"convert-db: {v['converted_keys']} keys copied", lines
    # A second conversion into the same store is refused: the node's failure, exit 1.
    res = hangar("convert-db", "--from", frm, "--to", to)
    assert res.returncode == EXIT["failed"] and "not empty" in res.stderr, res


# ---------------------------------------------------------------- key expiry


def test_an_expired_key_is_refused_with_invalid_access_key_id(api):
    def s3_of(info):
        return s3_client(api, Key(info["access_key_id"], info["secret_access_key"], info["name"]))

    # Expires in 3 s: works now, refused after.
    made = api.cli_json("key", "create", "exp-soon", "--expires-in", "3s")
    now_ms = time.time() * 1000
    assert abs(made["expires_msec"] - (now_ms + 3000)) < 2000 and made["expired"] is False, made
    s3 = s3_of(made)
    s3.list_buckets()
    url = s3.generate_presigned_url("list_buckets", ExpiresIn=600)
    time.sleep(max(0.0, made["expires_msec"] / 1000 - time.time()) + 0.3)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_buckets()
    err = e.value.response
    assert err["ResponseMetadata"]["HTTPStatusCode"] == 403, err
    assert err["Error"]["Code"] == "InvalidAccessKeyId", err
    assert "expired at" in err["Error"]["Message"] and made["access_key_id"] in err["Error"]["Message"], err
    # A presigned URL made while it was valid is refused too.
    with pytest.raises(urllib.error.HTTPError) as h:
        urllib.request.urlopen(url, timeout=30)
    assert h.value.code == 403 and b"<Code>InvalidAccessKeyId</Code>" in h.value.read()

    # The CLI shows it, as a table and as JSON.
    info = api.cli("key", "info", "exp-soon").stdout
    assert "Expires: EXPIRED at " in info, info
    assert api.cli_json("key", "info", "exp-soon")["expired"] is True
    line = next(x for x in api.cli("key", "list").stdout.splitlines() if x.startswith(made["access_key_id"]))
    assert "EXPIRED" in line, line

    # Renewed: it signs again; then never expiring.
    renewed = api.cli_json("key", "set", "exp-soon", "--expires-in", "1h")
    assert renewed["expired"] is False and renewed["expires_msec"] > time.time() * 1000 + 3_500_000
    s3.list_buckets()
    assert "in 59 min" in api.cli("key", "info", "exp-soon").stdout
    assert api.cli_json("key", "set", "exp-soon", "--never-expires")["expires_msec"] is None
    assert "Expires: never" in api.cli("key", "info", "exp-soon").stdout

    # An expiry in the past: refused at once. Bad flags: usage errors.
    past = api.cli_json("key", "create", "exp-past", "--expires", "2020-01-01T00:00:00Z")
    assert past["expired"] is True and past["expires"] == "2020-01-01T00:00:00Z"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3_of(past).list_buckets()
    assert e.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    for bad in (("key", "set", "exp-past"), ("key", "set", "exp-past", "--expires-in", "1d", "--never-expires"),
                ("key", "create", "x", "--expires-in", "soon"), ("key", "create", "x", "--expires", "tomorrow")):
        res = api.cli(*bad, check=False)
        assert res.returncode == EXIT["usage"], (bad, res)
    res = api.cli("key", "set", "no-such-key", "--never-expires", check=False)
    assert res.returncode == EXIT["not_found"] and "hangar key list" in res.stderr, res


# ---------------------------------------------------------------- presign


def test_presign_prints_a_url_that_works_without_credentials(api):
    key = api.create_key("presigner", create_bucket=True)
    s3 = s3_client(api, key)
    b = bucket_name("presign")
    s3.create_bucket(Bucket=b)
    body = random_bytes(50_000, seed=7)
    s3.put_object(Bucket=b, Key="dir/file.bin", Body=body)
    url = api.cli("presign", b, "dir/file.bin", "--key", "presigner").stdout.strip()
    assert url.startswith(api.endpoint) and "X-Amz-Signature=" in url, url
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.read() == body
    # An upload through a URL, then its JSON form, then the errors.
    put = api.cli_json("presign", b, "up.bin", "--key", "presigner", "--action", "put", "--expires-in", "1h")
    assert put["method"] == "PUT" and put["expires_secs"] == 3600, put
    req = urllib.request.Request(put["url"], data=b"uploaded", method="PUT")
    urllib.request.urlopen(req, timeout=30).read()
    assert s3.get_object(Bucket=b, Key="up.bin")["Body"].read() == b"uploaded"
    res = api.cli("presign", "no-such-bucket", "x", "--key", "presigner", check=False)
    assert res.returncode == EXIT["not_found"], res
    res = api.cli("presign", b, "x", "--key", "presigner", "--expires-in", "30d", check=False)
    assert res.returncode == EXIT["usage"], res
