"""Headless Chromium for the console's tests, driven by selenium through
chromedriver (both from Debian's packages; script/install-test-deps)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromium-driver are not installed (script/install-test-deps installs them)",
)


def artifacts_dir(tmp_path: Path) -> Path:
    base = os.environ.get("HANGAR_TEST_ARTIFACTS")
    d = Path(base) / "console" if base else tmp_path / "artifacts"
    d.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots in {d}")
    return d


@pytest.fixture
def browser(tmp_path):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed: run script/install-test-deps")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1000", "--no-first-run", "--disable-extensions"]:
        opts.add_argument(a)
    opts.add_experimental_option("prefs", {
        "download.default_directory": str(downloads),
        "download.prompt_for_download": False,
        "safebrowsing.enabled": False,
    })
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.set_page_load_timeout(30)
    driver.downloads = downloads
    yield driver
    driver.quit()
