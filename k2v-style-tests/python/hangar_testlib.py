"""Shared helpers for the real-client test suite: a running `hangar` node,
SigV4 signing for hand-made requests, checksums and test data, and generic
S3 helpers (an anonymous client, a call's outcome, bucket policies,
versioning, block files on disk, polling until a condition holds).

Everything here talks to a real `hangar` process over loopback sockets."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import http.client
import json
import os
import itertools
import random
import re
import secrets
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

REPO = Path(__file__).resolve().parents[2]
HANGAR_BIN = Path(os.environ.get("HANGAR_BIN", REPO / "target" / "debug" / "hangar"))
# The delay line of the network test bed (netlab.py), built beside hangar.
NETDELAY_BIN = Path(os.environ.get("HANGAR_NETDELAY", HANGAR_BIN.parent / "hangar-netdelay"))
REGION = "garage"
ROOT_DOMAIN = ".s3.localhost"
KiB = 1024
MiB = 1024 * 1024

# ---------------------------------------------------------------- node


_GIVEN_PORTS: set[int] = set()


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, for TCP and UDP, and
    never handed out before by this process: the kernel may give a port just
    released to the next caller, and two nodes of one test sharing a port
    make the second one exit while the first answers on it."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port in _GIVEN_PORTS:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("127.0.0.1", port))
        except OSError:
            continue
        _GIVEN_PORTS.add(port)
        return port


def wait_port(port: int, proc: subprocess.Popen | None, timeout: float, log: Path | None = None) -> None:
    """Wait until 127.0.0.1:port accepts TCP connections; fail early if proc dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"hangar exited with {proc.returncode} before listening on {port}:\n{tail(log)}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"hangar did not listen on {port} within {timeout}s:\n{tail(log)}")


def tail(path: Path | None, lines: int = 60) -> str:
    """The last lines of a log file (for failure messages)."""
    if path is None or not path.exists():
        return ""
    text = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(errors="replace"))
    return "\n".join(text.splitlines()[-lines:])


def die_with_parent() -> None:
    """Popen preexec_fn: the child gets SIGKILL when the test process dies, so
    a killed pytest run leaves no server behind (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


_BLOCK_FILE = re.compile(r"^[0-9a-f]{64}(\.zst)?$")


def block_files(data: Path) -> set[str]:
    """The names of the block files under a node's data directory (hash,
    with `.zst` when compressed), to see blocks appear and be collected."""
    return {p.name for p in data.rglob("*") if p.is_file() and _BLOCK_FILE.match(p.name)}


def block_sizes(n: Node) -> dict[str, int]:
    """The block files on a node's disk: name (hash, without `.zst`) -> stored
    size. Files being written and the quarantine are left out; a file deleted
    meanwhile (handed over, collected) is skipped."""
    out = {}
    if not n.data.exists():
        return out
    for l1 in n.data.iterdir():
        if l1.name == "quarantine" or not l1.is_dir():
            continue
        for l2 in l1.iterdir():
            for f in l2.iterdir():
                if f.name.startswith("."):  # a file being written
                    continue
                try:
                    out[f.name.removesuffix(".zst")] = f.stat().st_size
                except FileNotFoundError:  # deleted (handed over, collected) meanwhile
                    pass
    return out


def eventually(cond, timeout: float = 10, what: str = "") -> None:
    """Poll `cond()` every 0.2 s until it is true; AssertionError naming
    `what` if it is still false after `timeout` seconds. An exception raised
    by `cond` goes through (cluster_testlib.wait_for instead retries through
    the CLI's RuntimeError and returns the time it took)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.2)


def metric(node, line: str, absent: float | None = None) -> float:
    """The value of the metric line `line ...`; `absent` if there is none
    (by default a missing line fails the test)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{node.admin_port}/metrics", timeout=10).read().decode()
    m = re.search(r'^%s (\S+)$' % re.escape(line), text, re.M)
    if m is None:
        assert absent is not None, f"no {line} in the metrics"
        return absent
    return float(m.group(1))


def rejections(node, reason: str) -> float:
    """How many S3 requests the node refused for `reason` (its
    `hangar_s3_rejections_total` counter)."""
    return metric(node, f'hangar_s3_rejections_total{{reason="{reason}"}}', absent=0.0)


@dataclass
class Key:
    """An access key as printed by `hangar key create --json`."""

    id: str
    secret: str
    name: str = ""
    # The canonical user id S3 shows for the key (`key create --json`).
    canonical_id: str = ""


# The temporary directories of session-scoped fixtures, which conftest.py's
# `module_dirs_removed` leaves alone.
SESSION_DIRS: set[Path] = set()


def session_dir(tmp_path_factory, name: str) -> Path:
    """A temporary directory for a session-scoped fixture: kept until the
    session ends, where a test module's own are removed when it is done."""
    d = tmp_path_factory.mktemp(name)
    SESSION_DIRS.add(d)
    return d


class Node:
    """One real `hangar server` process with its own config, dirs and ports."""

    def __init__(self, root: Path, fsync: bool = False, region: str = REGION):
        self.root = root
        self.region = region
        self.root.mkdir(parents=True, exist_ok=True)
        self.meta = root / "meta"
        self.data = root / "data"
        self.s3_port = free_port()
        self.rpc_port = free_port()
        self.admin_port = free_port()
        self.config = root / "hangar.toml"
        self.log = root / "server.log"
        self.proc: subprocess.Popen | None = None
        self.config.write_text(
            f"""metadata_dir = "{self.meta}"
data_dir = "{self.data}"
db_engine = "redb"
replication_factor = 1
rpc_secret = "{secrets.token_hex(32)}"
rpc_bind_addr = "127.0.0.1:{self.rpc_port}"
metadata_fsync = {"true" if fsync else "false"}
block_size = "1MiB"
compression_level = 1

[s3_api]
api_bind_addr = "127.0.0.1:{self.s3_port}"
s3_region = "{region}"
root_domain = "{ROOT_DOMAIN}"

[admin]
api_bind_addr = "127.0.0.1:{self.admin_port}"
"""
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self, timeout: float = 60) -> None:
        assert self.proc is None or self.proc.poll() is not None
        logf = open(self.log, "ab")
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"
        self.proc = subprocess.Popen(
            [str(HANGAR_BIN), "-c", str(self.config), "server"],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,
        )
        logf.close()
        wait_port(self.s3_port, self.proc, timeout, self.log)
        # The port could be another process's: the node is up once its own
        # admin socket answers while it still runs.
        sock_path = self.meta / "admin.sock"
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hangar exited with {self.proc.returncode} after starting:\n{tail(self.log)}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
                    u.connect(str(sock_path))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"hangar's admin socket did not answer within {timeout}s:\n{tail(self.log)}")
                time.sleep(0.05)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM, then SIGKILL if it does not stop in time. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError(f"hangar did not stop within {timeout}s of SIGTERM")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def cli(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run `hangar -c CFG <args>` against this node."""
        res = subprocess.run(
            [str(HANGAR_BIN), "-c", str(self.config), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise RuntimeError(
                f"hangar {' '.join(args)} exited {res.returncode}\nstdout:{res.stdout}\nstderr:{res.stderr}"
            )
        return res

    def cli_json(self, *args: str):
        return json.loads(self.cli(*args, "--json").stdout)

    def create_key(self, name: str, create_bucket: bool = False, retry_for: float = 15) -> Key:
        """`key create NAME --json` (+ `key allow --create-bucket`). Retries
        briefly because the admin socket may come up just after the S3 port."""
        deadline = time.monotonic() + retry_for
        while True:
            try:
                info = self.cli_json("key", "create", name)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        key = Key(info["access_key_id"], info["secret_access_key"], name, info["canonical_id"])
        if create_bucket:
            self.cli("key", "allow", key.id, "--create-bucket")
        return key


_bucket_seq = itertools.count(1)


def bucket_name(hint: str) -> str:
    """A fresh, valid bucket name that says which test made it."""
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")
    return f"t{next(_bucket_seq):04d}-{slug}"[:63].rstrip("-")


def s3_client(node: Node, key: Key, read_timeout: float = 60, **s3cfg) -> "boto3.client":
    """A boto3 S3 client for this node, path-style unless told otherwise.
    It retries a failed request once: botocore's `max_attempts` counts
    retries, not attempts (`total_max_attempts: 1` would retry none), so a
    test that must see every refusal counts them server-side or uses a
    client of its own (chaos_history.py's)."""
    s3 = {"addressing_style": "path"}
    s3.update(s3cfg)
    return boto3.client(
        "s3",
        endpoint_url=node.endpoint,
        region_name=getattr(node, "region", REGION),
        aws_access_key_id=key.id,
        aws_secret_access_key=key.secret,
        config=Config(
            signature_version="s3v4",
            s3=s3,
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=read_timeout,
        ),
    )


def error_code(exc) -> str:
    return exc.response["Error"]["Code"]


def http_status(exc) -> int:
    return exc.response["ResponseMetadata"]["HTTPStatusCode"]


def status(call) -> tuple[int, str]:
    """Run `call()` (one boto3 request) and return (HTTP status, S3 error
    code): (200, "") when it succeeds, so a test can compare outcomes."""
    try:
        call()
    except ClientError as e:
        return http_status(e), error_code(e)
    return 200, ""


def anonymous(node: Node):
    """An unsigned boto3 S3 client for this node (path-style, no retries):
    an anonymous caller, to see what bucket policies and ACLs grant to all."""
    return boto3.client(
        "s3",
        endpoint_url=node.endpoint,
        region_name=REGION,
        config=Config(
            signature_version=UNSIGNED,
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )


def policy(*statements) -> str:
    """A bucket policy document (JSON text, Version 2012-10-17) holding
    these statements, for PutBucketPolicy."""
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def enable(s3, bucket, status="Enabled"):
    """Set a bucket's versioning with PutBucketVersioning: "Enabled" (by
    default) or "Suspended"."""
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def versions_of(s3, bucket, **kw):
    """Every version and delete marker of a bucket (ListObjectVersions with
    `kw`), following the markers page by page: ("v", version) and ("d",
    delete marker) pairs, each page's versions (in S3's order) before its
    delete markers."""
    out, args = [], dict(kw)
    while True:
        r = s3.list_object_versions(Bucket=bucket, **args)
        items = [("v", v) for v in r.get("Versions", [])] + [("d", d) for d in r.get("DeleteMarkers", [])]
        out.extend(items)
        if not r["IsTruncated"]:
            return out
        args["KeyMarker"] = r["NextKeyMarker"]
        if "NextVersionIdMarker" in r:
            args["VersionIdMarker"] = r["NextVersionIdMarker"]
        else:
            args.pop("VersionIdMarker", None)


# ---------------------------------------------------------------- data


def random_bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def compressible_bytes(n: int, seed: int) -> bytes:
    """Text-like data that zstd compresses well (but is not one repeated byte)."""
    rng = random.Random(seed)
    words = [b"hangar", b"object", b"block", b"bucket", b"garage", b"s3", b"\n", b" ", b"0123"]
    parts = []
    size = 0
    while size < n:
        w = rng.choice(words)
        parts.append(w)
        size += len(w)
    return b"".join(parts)[:n]


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def md5_hex(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def md5_b64(b: bytes) -> str:
    return base64.b64encode(hashlib.md5(b).digest()).decode()


# ---------------------------------------------------------------- checksums


def _crc_table(poly: int, width: int) -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c & ((1 << width) - 1))
    return table


_CRC32C_TABLE = _crc_table(0x82F63B78, 32)
_CRC64NVME_TABLE = _crc_table(0x9A6C9329AC4BC9B5, 64)  # reflected 0xAD93D23594C93659


def _crc_reflected(data: bytes, table: list[int], width: int) -> int:
    mask = (1 << width) - 1
    c = mask
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ mask


def crc32c(data: bytes) -> int:
    return _crc_reflected(data, _CRC32C_TABLE, 32)


def crc64nvme(data: bytes) -> int:
    return _crc_reflected(data, _CRC64NVME_TABLE, 64)


def checksum_b64(algo: str, data: bytes) -> str:
    """The base64 value S3 uses for x-amz-checksum-<algo>."""
    algo = algo.lower()
    if algo == "crc32":
        raw = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "big")
    elif algo == "crc32c":
        raw = crc32c(data).to_bytes(4, "big")
    elif algo == "crc64nvme":
        raw = crc64nvme(data).to_bytes(8, "big")
    elif algo == "sha1":
        raw = hashlib.sha1(data).digest()
    elif algo == "sha256":
        raw = hashlib.sha256(data).digest()
    else:
        raise ValueError(algo)
    return base64.b64encode(raw).decode()


# ---------------------------------------------------------------- SigV4 by hand

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def uri_encode(s: str, keep_slash: bool) -> str:
    return quote(s, safe="/~" if keep_slash else "~")


def object_path(bucket: str | None, key: str | None) -> str:
    """The path-style request path, URI-encoded once (as S3 canonicalises it)."""
    path = "/"
    if bucket:
        path += bucket
        if key is not None:
            path += "/" + uri_encode(key, keep_slash=True)
    return path


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str = REGION, service: str = "s3") -> bytes:
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def canonical_query(query: list[tuple[str, str]]) -> str:
    enc = sorted((uri_encode(k, False), uri_encode(v, False)) for k, v in query)
    return "&".join(f"{k}={v}" for k, v in enc)


@dataclass
class Signed:
    headers: dict[str, str]
    signature: str
    amz_date: str
    scope: str
    signing_key: bytes


def sign_v4(
    method: str,
    host: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    payload_hash: str,
    key: Key,
    now: dt.datetime | None = None,
    region: str = REGION,
) -> Signed:
    """Sign a request with SigV4 in the Authorization header. `headers` must
    hold every header to be signed except host/x-amz-date/x-amz-content-sha256."""
    now = now or dt.datetime.now(dt.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    h = {k.lower(): str(v).strip() for k, v in headers.items()}
    h["host"] = host
    h["x-amz-date"] = amz_date
    h["x-amz-content-sha256"] = payload_hash
    names = sorted(h)
    canonical = "\n".join(
        [
            method,
            path,
            canonical_query(query),
            "".join(f"{n}:{h[n]}\n" for n in names),
            ";".join(names),
            payload_hash,
        ]
    )
    scope = f"{date}/{region}/s3/aws4_request"
    sts = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    skey = signing_key(key.secret, date, region)
    sig = hmac.new(skey, sts.encode(), hashlib.sha256).hexdigest()
    h["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key.id}/{scope}, SignedHeaders={';'.join(names)}, Signature={sig}"
    )
    return Signed(h, sig, amz_date, scope, skey)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def code(self) -> str | None:
        """The <Code> of an S3 XML error body, if any."""
        return xml_error(self.body)[0]

    @property
    def message(self) -> str | None:
        return xml_error(self.body)[1]


def xml_error(body: bytes) -> tuple[str | None, str | None]:
    if not body:
        return None, None
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None, None
    if strip_ns(root.tag) != "Error":
        return None, None
    code = msg = None
    for child in root:
        if strip_ns(child.tag) == "Code":
            code = child.text
        elif strip_ns(child.tag) == "Message":
            msg = child.text
    return code, msg


def strip_ns(tag: str) -> str:
    return tag.split("}", 1)[-1]


def send(
    node: Node,
    method: str,
    path: str,
    query: list[tuple[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    body=b"",
    encode_chunked: bool = False,
    timeout: float = 120,
) -> Response:
    """Send one HTTP request to the node exactly as given (no signing)."""
    conn = http.client.HTTPConnection("127.0.0.1", node.s3_port, timeout=timeout)
    try:
        url = path
        if query:
            url += "?" + canonical_query(query)
        hdrs = dict(headers or {})
        conn.putrequest(method, url, skip_host=True, skip_accept_encoding=True)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        if encode_chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        elif not any(k.lower() == "content-length" for k in hdrs) and (
            body or method in ("PUT", "POST")
        ):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if encode_chunked:
            for piece in body:
                if piece:
                    conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        elif isinstance(body, (bytes, bytearray)):
            if body:
                conn.send(body)
        else:
            for piece in body:
                conn.send(piece)
        resp = conn.getresponse()
        data = resp.read()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


def signed_request(
    node: Node,
    key: Key,
    method: str,
    bucket: str | None = None,
    obj: str | None = None,
    query: list[tuple[str, str]] | None = None,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    payload_hash: str | None = None,
    host: str | None = None,
    path: str | None = None,
    now: dt.datetime | None = None,
) -> Response:
    """A SigV4-signed request with a fully signed payload (unless payload_hash says otherwise)."""
    query = query or []
    host = host or f"127.0.0.1:{node.s3_port}"
    path = path or object_path(bucket, obj)
    if payload_hash is None:
        payload_hash = hashlib.sha256(body).hexdigest()
    s = sign_v4(method, host, path, query, headers or {}, payload_hash, key, now=now)
    return send(node, method, path, query, s.headers, body)


# ---------------------------------------------------------------- aws-chunked bodies


def chunk_pieces(data: bytes, chunk_size: int) -> list[bytes]:
    return [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]


def signed_chunked_body(
    data: bytes, chunk_size: int, seed: Signed, corrupt_chunk: int | None = None
) -> bytes:
    """Encode `data` as STREAMING-AWS4-HMAC-SHA256-PAYLOAD, chaining chunk
    signatures from the seed (header) signature. `corrupt_chunk` (index, the
    final empty chunk is len(pieces)) gets a wrong signature."""
    out = []
    prev = seed.signature
    pieces = chunk_pieces(data, chunk_size) + [b""]
    for i, piece in enumerate(pieces):
        sts = "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                seed.amz_date,
                seed.scope,
                prev,
                EMPTY_SHA256,
                hashlib.sha256(piece).hexdigest(),
            ]
        )
        sig = hmac.new(seed.signing_key, sts.encode(), hashlib.sha256).hexdigest()
        prev = sig
        if i == corrupt_chunk:
            sig = ("0" if sig[0] != "0" else "1") + sig[1:]
        out.append(f"{len(piece):x};chunk-signature={sig}\r\n".encode() + piece + b"\r\n")
    return b"".join(out)


def unsigned_trailer_body(data: bytes, chunk_size: int, trailer_name: str, trailer_value: str) -> bytes:
    """Encode `data` as STREAMING-UNSIGNED-PAYLOAD-TRAILER with one checksum trailer."""
    out = [f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in chunk_pieces(data, chunk_size)]
    out.append(b"0\r\n")
    out.append(f"{trailer_name}:{trailer_value}\r\n".encode())
    out.append(b"\r\n")
    return b"".join(out)
