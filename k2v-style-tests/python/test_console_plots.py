"""The console's plots (doc/console.md, "Plots") on a real 3-node cluster
under real S3 traffic: the history API's answers (GetClusterHistory,
GetBucketHistory) and their bounds, then in headless Chromium the cluster
page's five plots drawn and moving, the bucket page's usage with its quota
lines, the workers page's progress bar of a scrub pass, and a node stopped
with kill -9 named down in the plots within one refresh.

Screenshots go to $HANGAR_CONSOLE_SCREENSHOTS when set (doc/console holds
the ones the docs show, taken with HANGAR_CONSOLE_WARMUP=240 so that the
plots hold a few minutes of traffic), else beside the other console
screenshots."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from admin_api_lib import ADMIN_TOKEN, call, ok, with_tokens
from browser_lib import artifacts_dir, browser, needs_chromium  # noqa: F401 (browser: a fixture)
from cluster_testlib import laid_out_cluster, node_id, wait_for
from hangar_testlib import bucket_name, random_bytes, s3_client

#: The cluster page's refresh (pages.js) and the wait for a node's answer
#: (history/rpc.rs): a node that stops is drawn down by the next refresh.
REFRESH_SECS = 5
ANSWER_WAIT_SECS = 2
OBJECTS = 40
SCRUB_BLOCKS = 320


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    nodes = laid_out_cluster(tmp_path_factory, "plot", configure=with_tokens)
    key = nodes[0].create_key("plots", create_bucket=True)
    bucket = bucket_name("plots")
    s3 = s3_client(nodes[0], key)
    s3.create_bucket(Bucket=bucket)
    for i in range(OBJECTS):
        s3.put_object(Bucket=bucket, Key=f"o{i:03}", Body=random_bytes(48 * 1024, i))
    # Blocks for a scrub pass long enough to watch: the scrub's state moves
    # a page of 64 blocks at a time.
    s3.create_bucket(Bucket=f"{bucket}-scrub")
    for i in range(SCRUB_BLOCKS):
        s3.put_object(Bucket=f"{bucket}-scrub", Key=f"b{i:03}", Body=random_bytes(8 * 1024, 1000 + i))
    stop = threading.Event()
    clients = [s3_client(n, key) for n in nodes]

    def traffic() -> None:
        """GETs through every node, and a missing key now and then (an error
        answer), until the module's tests are done."""
        i = 0
        while not stop.is_set():
            c = clients[i % 3]
            try:
                if i % 7 == 0:
                    c.get_object(Bucket=bucket, Key="missing")
                else:
                    c.get_object(Bucket=bucket, Key=f"o{i % OBJECTS:03}")["Body"].read()
            except Exception:  # noqa: BLE001 (a stopped node refuses; the load goes on)
                pass
            i += 1
            time.sleep(0.01)

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    yield nodes, key, bucket
    stop.set()
    t.join(10)
    for n in nodes:
        n.stop()


def test_history_api_answers_every_node_and_the_bucket(setup):
    nodes, key, bucket = setup
    n = nodes[0]
    # Two points (10 s) make a rate; the traffic makes it above zero.
    def busy() -> bool:
        h = ok(n, "GET", "/v2/GetClusterHistory", query={"window_secs": 60})
        return len(h["nodes"]) == 3 and all(
            x["history"] and any(p["requests"] > 0 for p in x["history"]["points"]) for x in h["nodes"])
    wait_for(busy, 30, "every node's history shows requests")
    h = ok(n, "GET", "/v2/GetClusterHistory", query={"window_secs": 60})
    assert h["window_secs"] == 60
    assert sorted(x["id"] for x in h["nodes"]) == sorted(node_id(m) for m in nodes)
    assert [x["is_self"] for x in h["nodes"]].count(True) == 1
    for x in h["nodes"]:
        pts = x["history"]["points"]
        assert x["is_up"] and x["error"] is None and x["history"]["interval_secs"] == 5
        assert 1 <= len(pts) <= 13, len(pts)
        assert all(p["t"] % 5 == 0 for p in pts) and [p["t"] for p in pts] == sorted(p["t"] for p in pts)
        last = pts[-1]
        assert last["data_total"] >= last["data_avail"] > 0, last
        assert any(lat["op"] == "GetObject" and lat["p99_secs"] >= lat["p50_secs"] > 0
                   for p in pts for lat in p["latency"]), pts
    # The window is bounded by the ring's hour; none is refused.
    assert ok(n, "GET", "/v2/GetClusterHistory", query={"window_secs": 10**9})["window_secs"] == 3600
    assert call(n, "GET", "/v2/GetClusterHistory", query={"window_secs": 0})[0] == 400
    assert call(n, "GET", "/v2/GetClusterHistory", query={"window_secs": "x"})[0] == 400

    ok(n, "POST", "/v2/UpdateBucketQuotas", {"bucket": bucket, "max_size": 10**7, "max_objects": 100})
    # The usage is sampled every 30 s.
    wait_for(lambda: any(p["objects"] == OBJECTS for p in
                         ok(n, "GET", "/v2/GetBucketHistory", query={"name": bucket})["points"]),
             70, "the bucket's usage recorded")
    b = ok(nodes[1], "GET", "/v2/GetBucketHistory", query={"name": bucket})
    assert b["bucket"] == bucket and b["interval_secs"] == 30
    assert (b["max_size"], b["max_objects"]) == (10**7, 100)
    assert b["points"][-1]["objects"] == OBJECTS and b["points"][-1]["bytes"] >= OBJECTS * 48 * 1024 * 0.9
    assert call(n, "GET", "/v2/GetBucketHistory", query={"name": "no-such-bucket"})[0] == 404


@needs_chromium
@pytest.mark.timeout(600)
def test_plots_render_move_and_show_a_node_down(setup, browser, tmp_path):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    nodes, key, bucket = setup
    d = browser
    env = os.environ.get("HANGAR_CONSOLE_SCREENSHOTS")
    shots = Path(env) if env else artifacts_dir(tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    redrawn = [NoSuchElementException, StaleElementReferenceException]
    wait = WebDriverWait(d, 30, poll_frequency=0.05, ignored_exceptions=redrawn)

    def js(script: str, *args):
        """Runs `script` on the page; a redraw under it is read again."""
        return wait.until(lambda _: _safe(lambda: d.execute_script(script, *args)))

    def plots() -> dict:
        """Per plot on the page: its last time drawn, and per drawn series
        its points; per legend entry whether it is marked missing."""
        return js("""
            const out = {};
            for (const f of document.querySelectorAll('figure.plot')) {
              out[f.dataset.plot] = {
                last: Number(f.dataset.last),
                series: Object.fromEntries([...f.querySelectorAll('[data-series][data-points]')]
                  .map((p) => [p.dataset.series, Number(p.dataset.points)])),
                missing: [...f.querySelectorAll('li.missing')].map((li) => li.dataset.node),
                limits: [...f.querySelectorAll('line[data-limit]')].length,
              };
            }
            return out;""")

    def go(hash_: str, title: str) -> None:
        d.execute_script("document.querySelector('#view h1')?.setAttribute('data-old', '');"
                         "location.hash = arguments[0]", hash_)
        wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1:not([data-old])").text.startswith(title))

    n1 = nodes[0]
    d.get(f"http://127.0.0.1:{n1.admin_port}/console/#cluster")
    box = wait.until(EC.element_to_be_clickable((By.ID, "token")))
    box.send_keys(ADMIN_TOKEN)
    d.find_element(By.ID, "login").click()
    go("#cluster", "Cluster")
    warmup = float(os.environ.get("HANGAR_CONSOLE_WARMUP", "0"))
    if warmup:
        Select(d.find_element(By.ID, "plot-window")).select_by_value("300")
        time.sleep(warmup)

    # Five plots, each node drawn in the ones per node, with several points.
    want = {"requests", "bytes", "latency", "errors", "disk"}
    wait.until(lambda _: want <= set(plots()) and len(plots()["requests"]["series"]) == 3
               and min(plots()["requests"]["series"].values()) >= 2)
    p = plots()
    assert len(p["bytes"]["series"]) == 6 and len(p["disk"]["series"]) == 6, p
    assert len(p["errors"]["series"]) == 6, p
    assert any(s.startswith("GetObject") for s in p["latency"]["series"]), p
    assert all(not v["missing"] for v in p.values()), p
    # The plots move: a later point is drawn by a refresh.
    before = p["requests"]["last"]
    t = time.monotonic()
    wait.until(lambda _: plots()["requests"]["last"] > before)
    print(f"the plots moved {time.monotonic() - t:.1f} s later")
    assert d.find_element(By.CSS_SELECTOR, "figure[data-plot=requests] svg").size["height"] > 100
    d.set_window_size(1280, 1900)
    d.save_screenshot(str(shots / "cluster-plots.png"))

    # The bucket page: bytes and objects stored, each under its quota line.
    ok(n1, "POST", "/v2/UpdateBucketQuotas", {"bucket": bucket, "max_size": 10**7, "max_objects": 100})
    go(f"#buckets/{bucket}", f"Bucket {bucket}")
    wait.until(lambda _: {"bucket-bytes", "bucket-objects"} <= set(plots()))
    wait.until(lambda _: plots()["bucket-objects"]["series"].get("objects", 0) >= 1)
    p = plots()
    assert p["bucket-bytes"]["limits"] == 1 and p["bucket-objects"]["limits"] == 1, p
    legend = d.find_element(By.CSS_SELECTOR, "figure[data-plot=bucket-objects] .legend").text
    assert f"objects {OBJECTS}" in legend and "quota 100" in legend, legend
    d.find_element(By.CSS_SELECTOR, "#bucket-plots").location_once_scrolled_into_view
    d.save_screenshot(str(shots / "bucket-plots.png"))

    # The workers page: a slow scrub pass (it idles 200 times the time each
    # block took) as a progress bar with a rate and the time left.
    n1.cli("worker", "set", "scrub-tranquility", "200")
    n1.cli("repair", "scrub", "start")
    try:
        go("#workers", "Workers")
        row = "#tasks tbody tr"
        # The pass's state moves a page of blocks at a time, each page here
        # 64 blocks × 200 × a block's check: seconds on an idle machine, a
        # minute or more on a loaded one. Once two pages are seen, the pass
        # has a progress bar, a rate and a time left.
        def scrub_row():
            return next((r for r in d.find_elements(By.CSS_SELECTOR, row) if "scrub" in r.text), None)
        t = time.monotonic()
        WebDriverWait(d, 400, poll_frequency=0.2, ignored_exceptions=redrawn).until(
            lambda _: (r := scrub_row()) is not None and r.find_elements(By.TAG_NAME, "progress")
            and not r.text.endswith("—"))
        print(f"the scrub had a rate {time.monotonic() - t:.1f} s after it started")
        text = wait.until(lambda _: (r := scrub_row()) is not None and r.text)
        assert "% of the pass" in text and "/min" in text and " 0.0 %/min" not in text, text
        print(f"scrub task row: {text}")
        d.save_screenshot(str(shots / "workers-progress.png"))
    finally:
        n1.cli("repair", "scrub", "cancel", check=False)
        n1.cli("worker", "set", "scrub-tranquility", "0")

    # A node killed: named down in every per-node plot within one refresh
    # (the refresh's period, and the wait for its answer).
    go("#cluster", "Cluster")
    wait.until(lambda _: len(plots().get("requests", {}).get("series", {})) == 3)
    victim = nodes[2]
    gone = node_id(victim)
    victim.kill9()
    t = time.monotonic()
    wait.until(lambda _: all(gone in plots()[k]["missing"] for k in ["requests", "bytes", "errors", "disk"]))
    took = time.monotonic() - t
    print(f"the killed node was drawn down {took:.1f} s after kill -9")
    assert took <= REFRESH_SECS + ANSWER_WAIT_SECS + 3, took
    d.save_screenshot(str(shots / "cluster-node-down.png"))
    victim.start()


def _safe(f):
    """`f()`, or None while the page is being redrawn under it."""
    from selenium.common.exceptions import JavascriptException
    try:
        return f()
    except JavascriptException:
        return None
