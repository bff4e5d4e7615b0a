"""The web console (doc/console.md) end to end in headless Chromium, driven
by selenium through chromedriver, on a real 3-node cluster: a wrong token
refused and the right one let in, the layout's staged roles and partition
moves previewed and applied, a key and a bucket created and the key given
permissions, a file of random bytes uploaded through the browser's file
input, listed, downloaded byte for byte (Chromium's download directory)
and fetched through its presigned link, and a stopped node marked down.
Screenshots of each step are kept in the directory the test prints
($HANGAR_TEST_ARTIFACTS/console when set, else under pytest's tmp_path).

Also, without a browser: the console's security headers, and that nothing
but the static shell answers without the token."""

from __future__ import annotations

import http.client
import json
import secrets
import time
import urllib.request

import pytest

from admin_api_lib import ADMIN_TOKEN, READ_TOKEN, call, meshed_nodes, ok
from hangar_testlib import random_bytes
from cluster_testlib import wait_for
from browser_lib import artifacts_dir, browser, needs_chromium  # noqa: F401 (browser: a fixture)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nodes with the test's admin tokens, a full mesh, one zone each
    staged (not applied: the console applies it)."""
    ns, ids = meshed_nodes(tmp_path_factory, "con")
    first = ns[0]
    for i, zone in zip(ids, ["dc1", "dc2", "dc3"]):
        ok(first, "POST", "/v2/AssignClusterLayoutRoles", {"nodes": [i], "zone": zone, "capacity": 10**9})
    yield ns, ids
    for n in ns:
        n.stop()


def console_url(n) -> str:
    return f"http://127.0.0.1:{n.admin_port}/console/"


def test_console_headers_and_nothing_without_the_token(cluster):
    ns, _ = cluster
    n = ns[0]
    status, headers, body = call(n, "GET", "/console/", token=None)
    assert status == 200 and b"<form id=\"login-form\">" in body
    h = {k.lower(): v for k, v in headers.items()}
    csp = h["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp, csp
    assert h["x-frame-options"] == "DENY" and h["x-content-type-options"] == "nosniff"
    assert h["cache-control"] == "no-store" and h["content-type"].startswith("text/html")
    status, headers, _ = call(n, "GET", "/console", token=None)
    assert status == 308 and dict((k.lower(), v) for k, v in headers.items())["location"] == "/console/"
    for f in ["app.js", "ui.js", "pages.js", "objects.js"]:
        status, headers, _ = call(n, "GET", f"/console/{f}", token=None)
        assert status == 200 and "javascript" in {k.lower(): v for k, v in headers.items()}["content-type"]
    assert call(n, "GET", "/console/secret.txt", token=None)[0] == 404
    # The data is behind the token: the API, the presigner and the S3 proxy.
    assert call(n, "GET", "/v2/ListBuckets", token=None)[0] == 401
    assert call(n, "GET", "/v2/ListBuckets", token="wrong")[0] == 403
    st, headers, _ = call(n, "GET", "/v2/ListBuckets")
    assert st == 200 and {k.lower(): v for k, v in headers.items()}["cache-control"] == "no-store"
    body = {"bucket": "nobucket", "key": "x", "action": "list"}
    assert call(n, "POST", "/v2/PresignObject", body=body, token=None)[0] == 401
    assert call(n, "POST", "/v2/PresignObject", body=body, token=READ_TOKEN)[0] == 403
    for token, want in [(None, 401), ("wrong", 403), (READ_TOKEN, 403)]:
        status, headers, _ = call(n, "GET", "/console/s3/nobucket?list-type=2", token=token)
        assert status == want, (token, status)
        assert "sandbox" in {k.lower(): v for k, v in headers.items()}["content-security-policy"]


def test_presign_refuses_what_it_cannot_sign(cluster):
    ns, _ = cluster
    n = ns[0]
    key = ok(n, "POST", "/v2/CreateKey", {"name": "presign-refusals"})
    ok(n, "POST", "/v2/CreateBucket", {"name": "presign-refusals"})
    for fields, status in [
        ({"bucket": "presign-refusals", "key": "nokey", "action": "list"}, 404),
        ({"bucket": "no-such-bucket", "key": key["access_key_id"], "action": "list"}, 404),
        ({"bucket": "presign-refusals", "key": key["access_key_id"], "action": "get"}, 400),
        ({"bucket": "presign-refusals", "key": key["access_key_id"], "action": "post", "object": "a"}, 400),
        ({"bucket": "presign-refusals", "key": key["access_key_id"], "action": "get", "object": "a",
          "expires_secs": 604801}, 400),
        ({"bucket": "presign-refusals", "key": key["access_key_id"], "action": "get", "object": "a" * 1025}, 400),
        ({"bucket": "presign-refusals", "key": key["access_key_id"], "action": "get", "object": "a",
          "endpoint": "ftp://x"}, 400),
    ]:
        got, _, data = call(n, "POST", "/v2/PresignObject", body=fields)
        assert got == status, (fields, got, data)
    # A URL for a key without permission on the bucket is signed, and S3
    # refuses it: the signature grants nothing the key does not have.
    pre = ok(n, "POST", "/v2/PresignObject",
             {"bucket": "presign-refusals", "key": key["access_key_id"], "action": "list"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(pre["url"], timeout=10)
    assert e.value.code == 403


@needs_chromium
def test_console_end_to_end(cluster, browser, tmp_path):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    ns, ids = cluster
    d = browser
    shots = artifacts_dir(tmp_path)
    step = iter(range(1, 100))
    # Pages that follow live state are redrawn every few seconds, so an
    # element found may be gone by the time it is read: look again.
    redrawn = [NoSuchElementException, StaleElementReferenceException]
    wait = WebDriverWait(d, 20, poll_frequency=0.02, ignored_exceptions=redrawn)

    def click(by, sel) -> None:
        wait.until(lambda _: d.find_element(by, sel).click() or True)

    def shot(name: str) -> None:
        """Keeps a screenshot, and checks the page's controls are named."""
        d.save_screenshot(str(shots / f"{next(step):02d}-{name}.png"))
        unnamed = d.execute_script("""
            return [...document.querySelectorAll('input, select, button, a')]
              .filter((e) => e.offsetParent !== null)
              .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                             && !e.textContent.trim())
              .map((e) => e.outerHTML);""")
        assert not unnamed, (name, unnamed)

    def text_of(css: str) -> str:
        return wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css))).text

    def go(hash_: str, title: str) -> None:
        """Navigates and waits for the page drawn anew (not the one before)."""
        t = time.monotonic()
        d.execute_script("document.querySelector('#view h1')?.setAttribute('data-old', '');"
                         "location.hash = arguments[0]", hash_)
        wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1:not([data-old])").text.startswith(title))
        print(f"{hash_} drawn in {time.monotonic() - t:.3f} s")

    def login(token: str, by_keyboard: bool = False) -> None:
        box = wait.until(EC.element_to_be_clickable((By.ID, "token")))
        box.clear()
        box.send_keys(token)
        if by_keyboard:
            box.send_keys(Keys.ENTER)
        else:
            d.find_element(By.ID, "login").click()

    t0 = time.monotonic()
    d.get(console_url(ns[0]))
    wait.until(EC.visibility_of_element_located((By.ID, "login-form")))
    print(f"login form shown {time.monotonic() - t0:.3f} s after navigation")
    shot("login")

    # A wrong token: refused, said so, and still on the login form.
    login("not-the-token")
    wait.until(lambda _: "refused" in d.find_element(By.ID, "login-error").text)
    assert d.find_element(By.ID, "nav").get_attribute("hidden") is not None
    assert d.execute_script("return sessionStorage.getItem('hangar-console-token')") is None
    shot("wrong-token")

    # The right one, from the keyboard; the page's heading takes the focus.
    login(ADMIN_TOKEN, by_keyboard=True)
    wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1").text == "Cluster")
    assert d.switch_to.active_element.text == "Cluster"
    wait.until(lambda _: d.find_element(By.ID, "nodes-up").text == "3 of 3")
    assert "staged changes" in d.find_element(By.ID, "view").text
    shot("cluster")

    # The layout: the three staged roles, the preview of the moves, applied.
    go("#layout", "Layout")
    moves = text_of("#moves")
    assert "Version 1 would move 768 partition replicas" in moves, moves
    assert len(d.find_elements(By.CSS_SELECTOR, "table caption")) >= 2
    shot("layout-staged")
    d.find_element(By.XPATH, "//button[text()='Apply version 1']").click()
    wait.until(lambda _: ok(ns[0], "GET", "/v2/GetClusterLayout")["current"]["version"] == 1)
    wait.until(lambda _: "nothing staged" in d.find_element(By.ID, "view").text)
    shot("layout-applied")
    for n in ns:
        wait_for(lambda: ok(n, "GET", "/v2/GetClusterLayout")["current"]["version"] == 1, 20, "version 1 everywhere")
        wait_for(lambda: call(n, "GET", "/health", token=None)[0] == 200, 30, "healthy")

    # A key and a bucket, and the key's permissions on it.
    go("#keys", "Keys")
    d.find_element(By.ID, "new-key").send_keys("console-e2e")
    d.find_element(By.XPATH, "//button[text()='Create key']").click()
    wait.until(lambda _: "console-e2e" in d.find_element(By.ID, "view").text)
    key = ok(ns[0], "GET", "/v2/GetKeyInfo", query={"key": "console-e2e"})
    bucket = "console-e2e-" + secrets.token_hex(3)
    go("#buckets", "Buckets")
    d.find_element(By.ID, "new-bucket").send_keys(bucket)
    d.find_element(By.XPATH, "//button[text()='Create bucket']").click()
    link = wait.until(EC.element_to_be_clickable((By.LINK_TEXT, bucket)))
    shot("buckets")
    link.click()
    wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1").text == f"Bucket {bucket}")
    form = d.find_element(By.CSS_SELECTOR, "form[aria-label='Bucket permission']")
    Select(form.find_element(By.TAG_NAME, "select")).select_by_value(key["access_key_id"])
    for label in ["Read", "Write"]:
        form.find_element(By.XPATH, f".//label[normalize-space()='{label}']/input").click()
    form.find_element(By.XPATH, ".//button[text()='Set permission']").click()
    wait.until(lambda _: "read, write" in d.find_element(By.ID, "view").text)
    info = ok(ns[0], "GET", "/v2/GetBucketInfo", query={"name": bucket})
    assert [(k["access_key_id"], k["read"], k["write"], k["owner"]) for k in info["keys"]] == \
        [(key["access_key_id"], True, True, False)]
    shot("bucket-permissions")

    # Quotas and website settings on the bucket's page; its aliases.
    assert text_of("#bucket-aliases") == "none"
    assert text_of("#bucket-quotas") == "no size limit, no object limit"
    form = d.find_element(By.CSS_SELECTOR, "form[aria-label='Quotas']")
    form.find_element(By.ID, "quota-size").send_keys("10G")
    form.find_element(By.ID, "quota-objects").send_keys("1000")
    form.find_element(By.XPATH, ".//button[text()='Set quotas']").click()
    wait.until(lambda _: d.find_element(By.ID, "bucket-quotas").text == "at most 10.0 GB, at most 1000 objects")
    assert ok(ns[0], "GET", "/v2/GetBucketInfo", query={"name": bucket})["quotas"] == \
        {"max_size": 10_000_000_000, "max_objects": 1000}
    # A bad size is said under the form, and nothing changes.
    form = d.find_element(By.CSS_SELECTOR, "form[aria-label='Quotas']")
    box = form.find_element(By.ID, "quota-size")
    box.clear()
    box.send_keys("lots")
    form.find_element(By.XPATH, ".//button[text()='Set quotas']").click()
    wait.until(lambda _: "not a size" in form.find_element(By.CSS_SELECTOR, "p.error").text)
    shot("bucket-quotas")
    assert text_of("#bucket-website") == "no"
    form = d.find_element(By.CSS_SELECTOR, "form[aria-label='Website']")
    form.find_element(By.ID, "website-allow").click()
    box = form.find_element(By.ID, "website-index")
    box.clear()
    box.send_keys("home.html")
    form.find_element(By.ID, "website-error").send_keys("404.html")
    form.find_element(By.XPATH, ".//button[text()='Save website settings']").click()
    wait.until(lambda _: d.find_element(By.ID, "bucket-website").text
               == "yes: index home.html, error document 404.html")
    web = ok(ns[0], "GET", "/v2/GetBucketInfo", query={"name": bucket})["website"]
    assert (web["index_document"], web["error_document"]) == ("home.html", "404.html"), web
    shot("bucket-website")
    # And off again: the form shows the bucket's settings, unchecked is deny.
    form = d.find_element(By.CSS_SELECTOR, "form[aria-label='Website']")
    assert form.find_element(By.ID, "website-allow").is_selected()
    form.find_element(By.ID, "website-allow").click()
    form.find_element(By.XPATH, ".//button[text()='Save website settings']").click()
    wait.until(lambda _: d.find_element(By.ID, "bucket-website").text == "no")
    assert ok(ns[0], "GET", "/v2/GetBucketInfo", query={"name": bucket})["website"] is None

    # Deleting: a second bucket and a second key, each by its row's button.
    doomed = "console-doomed-" + secrets.token_hex(3)
    ok(ns[0], "POST", "/v2/CreateBucket", {"name": doomed})
    doomed_key = ok(ns[0], "POST", "/v2/CreateKey", {"name": "console-doomed"})["access_key_id"]
    go("#buckets", "Buckets")
    d.find_element(By.CSS_SELECTOR, f"button[aria-label='Delete bucket {doomed}']").click()
    d.switch_to.alert.accept()
    wait.until(lambda _: doomed not in d.find_element(By.ID, "view").text)
    assert doomed not in [b["name"] for b in ok(ns[0], "GET", "/v2/ListBuckets")]
    go("#keys", "Keys")
    d.find_element(By.CSS_SELECTOR, f"button[aria-label='Delete key {doomed_key}']").click()
    d.switch_to.alert.accept()
    wait.until(lambda _: doomed_key not in d.find_element(By.ID, "view").text)
    assert doomed_key not in [k["access_key_id"] for k in ok(ns[0], "GET", "/v2/ListKeys")]

    # Upload a file of random bytes through the file input, into a folder.
    data = random_bytes(300 * 1024 + 17, seed=12)
    src = tmp_path / "upload" / "random blob.bin"
    src.parent.mkdir()
    src.write_bytes(data)
    go(f"#objects/{bucket}", "Objects")
    wait.until(lambda _: "this folder is empty" in d.find_element(By.ID, "view").text)
    # First at the top, then again inside a folder reached by its link.
    d.find_element(By.ID, "upload-files").send_keys(str(src))
    d.find_element(By.ID, "upload").click()
    wait.until(lambda _: "random blob.bin" in d.find_element(By.ID, "listing").text)
    go(f"#objects/{bucket}/docs%2F", "Objects")
    d.find_element(By.ID, "upload-files").send_keys(str(src))
    d.find_element(By.ID, "upload").click()
    wait.until(lambda _: "random blob.bin" in d.find_element(By.ID, "listing").text)
    go(f"#objects/{bucket}", "Objects")
    folder = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "a.folder")))
    assert folder.text == "docs/"
    shot("objects-top")
    folder.click()
    wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "[aria-current=location]").text == "docs")
    names = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".object-name")]
    assert names == ["random blob.bin"], names
    assert "307.2 KB" in d.find_element(By.ID, "listing").text
    shot("objects-folder")

    # Download it: the bytes on disk are the bytes uploaded.
    d.find_element(By.CSS_SELECTOR, "button[aria-label='Download docs/random blob.bin']").click()
    target = browser.downloads / "random blob.bin"
    wait_for(lambda: target.exists() and not list(browser.downloads.glob("*.crdownload")), 20, "the download")
    assert target.read_bytes() == data

    # The presigned link works outside the console, without the token.
    d.find_element(By.CSS_SELECTOR, "button[aria-label='Presigned link to docs/random blob.bin']").click()
    wait.until(lambda _: d.find_element(By.ID, "link-url").get_attribute("value").startswith("http://"))
    url = d.find_element(By.ID, "link-url").get_attribute("value")
    assert url.startswith(f"http://127.0.0.1:{ns[0].s3_port}/{bucket}/docs/random%20blob.bin?"), url
    assert "X-Amz-Expires=900" in url and key["secret_access_key"] not in url
    assert urllib.request.urlopen(url, timeout=10).read() == data
    shot("presigned-link")

    # An uploaded page never runs as the console: the proxy serves it
    # sandboxed, and the console saves it as bytes.
    evil = b"<!doctype html><script>window.opener && (window.opener.pwned = 1); document.title = 'pwned'</script>"
    page = tmp_path / "upload" / "evil.html"
    page.write_bytes(evil)
    d.find_element(By.ID, "upload-files").send_keys(str(page))
    d.find_element(By.ID, "upload").click()
    click(By.CSS_SELECTOR, "button[aria-label='Download docs/evil.html']")
    saved = browser.downloads / "evil.html"
    wait_for(lambda: saved.exists() and not list(browser.downloads.glob("*.crdownload")), 20, "the page's download")
    assert saved.read_bytes() == evil
    assert d.title.endswith("Hangar console") and d.current_url.startswith(console_url(ns[0]))
    pre = ok(ns[0], "POST", "/v2/PresignObject",
             {"bucket": bucket, "key": key["access_key_id"], "action": "get", "object": "docs/evil.html"})
    path = "/console/s3" + pre["path_and_query"]
    conn = http.client.HTTPConnection("127.0.0.1", ns[0].admin_port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "X-Hangar-S3-Host": pre["host"]})
    r = conn.getresponse()
    assert r.status == 200 and r.read() == evil
    assert r.getheader("Content-Security-Policy").startswith("sandbox") and r.getheader("X-Content-Type-Options") == "nosniff"
    conn.close()
    # Opened directly in the browser, without the bearer header: refused.
    d.execute_script("window.open(arguments[0])", f"http://127.0.0.1:{ns[0].admin_port}{path}")
    d.switch_to.window(d.window_handles[-1])
    wait.until(lambda _: d.find_element(By.TAG_NAME, "body").text != "")
    assert "pwned" not in d.title and "evil" not in d.find_element(By.TAG_NAME, "body").text
    d.close()
    d.switch_to.window(d.window_handles[0])
    assert d.execute_script("return window.pwned") is None

    # The console's S3 requests count in the node's S3 metrics like any:
    # three uploads, and at least their bytes received.
    def metric(name: str, op: str) -> float:
        text = call(ns[0], "GET", "/metrics")[2].decode()
        want = f'{name}{{op="{op}"}} '
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(want))
    assert metric("hangar_s3_requests_total", "PutObject") == 3
    assert metric("hangar_s3_received_bytes_total", "PutObject") >= 2 * len(data) + len(evil)
    assert metric("hangar_s3_requests_total", "ListObjectsV2") >= 4

    # Delete the top-level copy.
    go(f"#objects/{bucket}", "Objects")
    d.find_element(By.CSS_SELECTOR, "button[aria-label='Delete random blob.bin']").click()
    d.switch_to.alert.accept()
    wait.until(lambda _: not d.find_elements(By.CSS_SELECTOR, ".object-name"))
    listed = ok(ns[0], "POST", "/v2/PresignObject", {"bucket": bucket, "key": key["access_key_id"], "action": "list"})
    listing = urllib.request.urlopen(listed["url"], timeout=10).read().decode()
    assert "<Key>docs/random blob.bin</Key>" in listing and "<Key>random blob.bin</Key>" not in listing

    # The workers page shows the node's workers.
    go("#workers", "Workers")
    assert "block-resync" in d.find_element(By.ID, "view").text
    shot("workers")
    click(By.LINK_TEXT, "block-scrub")
    wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1").text == "Worker block-scrub")
    assert "scrub-tranquility" in d.find_element(By.ID, "view").text
    shot("worker-scrub")

    # A stopped node is marked down on the cluster page.
    ns[2].stop()
    go("#cluster", "Cluster")
    row = f"//span[@title='{ids[2]}']/ancestor::tr"
    WebDriverWait(d, 40, ignored_exceptions=redrawn).until(
        lambda _: d.find_element(By.XPATH, f"{row}//span[contains(@class,'badge')]").text == "down")
    wait.until(lambda _: d.find_element(
        By.XPATH, f"//span[@title='{ids[0]}']/ancestor::tr//span[contains(@class,'badge')]").text == "up")
    wait.until(lambda _: d.find_element(By.ID, "nodes-up").text == "2 of 3")
    shot("node-down")

    # No script error and no CSP violation in the whole session (the 403 of
    # the wrong login is the one failed load expected).
    logs = d.get_log("browser")
    bad = [e for e in logs if e["level"] == "SEVERE" and "status of 403" not in e["message"]]
    assert not bad, json.dumps(bad, indent=1)

    # Logging out forgets the token.
    d.find_element(By.ID, "logout").click()
    wait.until(EC.visibility_of_element_located((By.ID, "login-form")))
    assert d.execute_script("return sessionStorage.getItem('hangar-console-token')") is None

    # The read-only token looks but cannot change: a refused change is said
    # in its form, and the console stays logged in.
    login(READ_TOKEN)
    wait.until(lambda _: d.find_element(By.CSS_SELECTOR, "#view h1").text == "Cluster")
    go("#buckets", "Buckets")
    d.find_element(By.ID, "new-bucket").send_keys("console-read-only")
    d.find_element(By.XPATH, "//button[text()='Create bucket']").click()
    wait.until(lambda _: "refused" in d.find_element(By.CSS_SELECTOR, "form[aria-label='Create a bucket'] .error").text)
    go(f"#objects/{bucket}", "Objects")
    wait.until(lambda _: "refused" in d.find_element(By.ID, "view").text)
    assert not d.find_element(By.ID, "nav").get_attribute("hidden")
    assert "console-read-only" not in [b["name"] for b in ok(ns[0], "GET", "/v2/ListBuckets")]
    shot("read-only")
