"""`hangar single-node --dir DIR`: the README's quickstart on 127.0.0.1:3900."""

import re
import signal
import socket
import subprocess
import time

import json
import urllib.request

import boto3
import pytest
from botocore.config import Config

from browser_lib import browser, needs_chromium  # noqa: F401 (browser: a fixture)
from hangar_testlib import HANGAR_BIN


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _start(tmp_path, log_name):
    log = tmp_path / log_name
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            [str(HANGAR_BIN), "single-node", "--dir", str(tmp_path / "dev")],
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    return proc, log


def _wait_output(proc, log, pattern, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if re.search(pattern, text):
            return text
        if proc.poll() is not None:
            pytest.fail(f"single-node exited {proc.returncode}:\n{text}")
        time.sleep(0.2)
    pytest.fail(f"single-node printed no {pattern!r} within {timeout}s:\n{log.read_text()}")


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        pytest.fail("single-node did not stop on SIGTERM")


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read()


@needs_chromium
def test_single_node_quickstart(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for port in (3900, 3901, 3903):
        if not _port_free(port):
            pytest.skip(f"port {port} is taken on this machine; single-node uses it by design")
    proc, log = _start(tmp_path, "first.log")
    try:
        text = _wait_output(proc, log, r"admin token")
        key_id = re.search(r"\bGK[0-9a-f]{24}\b", text).group(0)
        # The log also prints the node id (64 hex): take the value labelled as the secret.
        secret = re.search(r"secret key\s+([0-9a-f]{64})\b", text).group(1)
        assert "127.0.0.1:3900" in text or "localhost:3900" in text
        assert (tmp_path / "dev" / "hangar.toml").exists()
        c = boto3.client(
            "s3",
            endpoint_url="http://127.0.0.1:3900",
            region_name="garage",
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        assert "hangar" in [b["Name"] for b in c.list_buckets()["Buckets"]]
        c.put_object(Bucket="hangar", Key="hello", Body=b"world")
        # The printed console link and token work: the API, /metrics, and
        # a browser logging in and seeing the bucket.
        console = re.search(r"console\s+(http://\S+/console/)", text).group(1)
        token = re.search(r"admin token\s+(\S+)", text).group(1)
        assert console == "http://127.0.0.1:3903/console/", console
        status, body = _get(console.replace("/console/", "/v2/ListBuckets"), token)
        assert status == 200 and "hangar" in json.dumps(json.loads(body))
        status, body = _get(re.search(r"metrics\s+(http://\S+)", text).group(1))
        assert status == 200 and b"hangar_" in body
        browser.get(console)
        wait = WebDriverWait(browser, 20)
        wait.until(lambda d: d.find_element(By.ID, "token")).send_keys(token)
        browser.find_element(By.ID, "login").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#view h1").text.startswith("Cluster"))
        browser.execute_script("location.hash = '#buckets'")
        wait.until(lambda d: "hangar" in d.find_element(By.ID, "view").text)
    finally:
        rc = _stop(proc)
    assert rc == 0
    # second start: same directory, same data, no second key
    proc, log = _start(tmp_path, "second.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", 3900), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                time.sleep(0.2)
        assert c.get_object(Bucket="hangar", Key="hello")["Body"].read() == b"world"
        keys = subprocess.run(
            [str(HANGAR_BIN), "-c", str(tmp_path / "dev" / "hangar.toml"), "key", "list", "--json"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
        assert keys.count("GK") == 1, keys
    finally:
        _stop(proc)
