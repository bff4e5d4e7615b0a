"""The chaos suite, short: each scenario of script/chaos once, briefly (one
fault, about 10 s of load), against a fresh 3-node cluster in network
namespaces (chaos_lib.py, doc/chaos.md). Each test fails if any
acknowledged write was lost, corrupt or shadowed, or any check of the
scenario failed; the report is printed either way. Skipped only when
network namespaces cannot be created here (not root)."""

from __future__ import annotations

import os

import pytest

import chaos_lib

USABLE, WHY = chaos_lib.namespaces_usable()
pytestmark = pytest.mark.skipif(not USABLE, reason=f"chaos suite skipped: {WHY}")

SHORT = chaos_lib.Params(
    rounds=1,
    seconds=float(os.environ.get("CHAOS_SHORT_SECONDS", "6")),
    writers=3,
    ping_timeout_msec=2000,
    stop_min=4.0,
    stop_max=6.0,
    seed=int(os.environ.get("CHAOS_SEED", "7")),
)


@pytest.mark.parametrize("name", chaos_lib.SCENARIOS)
def test_chaos_scenario_once(name, tmp_path):
    if name == "clock-skew":
        assert os.path.exists(chaos_lib.FAKETIME_LIB), (
            f"{chaos_lib.FAKETIME_LIB} missing: script/install-test-deps installs libfaketime")
    report = chaos_lib.SCENARIOS[name](SHORT, tmp_path).run()
    text = report.render()
    print(text)
    assert report.verdict is not None and report.verdict.reads > 0, text
    assert report.passed, text
