"""The alerting rules in ``ops/alerts.yml``, judged by Prometheus's own rule engine.

``promtool check rules`` parses them; ``promtool test rules`` replays the sample series of
``alerts_test.yml`` and says which alerts fire when: pending inside ``for:`` versus
firing, rates over a new series, and the false ticket a counter that falls after a
cleanup raises. ``promtool`` ships in Debian's ``prometheus`` package (``.ci/run``
installs it); without it these tests skip, saying so, unless ``LABKIT_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "alerts.yml"
TESTS = ROOT / "ops" / "alerts_test.yml"


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    message = "promtool is not installed: apt-get install prometheus (it ships promtool)"
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (LABKIT_REQUIRE_SERVICES=1 makes this a failure)")
    pytest.skip(message)


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_rules_parse(promtool: str) -> None:
    done = _run([promtool, "check", "rules", str(RULES)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def test_every_rule_fires_when_its_tests_say(promtool: str) -> None:
    done = _run([promtool, "test", "rules", str(TESTS)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_test() -> None:
    import yaml

    rules = yaml.safe_load(RULES.read_text())
    alerts = {r["alert"] for group in rules["groups"] for r in group["rules"]}
    tests = yaml.safe_load(TESTS.read_text())["tests"]
    tested = {t["alertname"] for test in tests for t in test.get("alert_rule_test", [])}
    assert alerts == tested
    firing = {
        t["alertname"]
        for test in tests
        for t in test.get("alert_rule_test", [])
        if t.get("exp_alerts")
    }
    assert firing == alerts, "each alert has a test where it fires"


def test_a_broken_rule_fails_its_tests(promtool: str, tmp_path: Path) -> None:
    """The tests can fail: the oldest-job alert without its ``for:`` fires a minute early."""
    (tmp_path / "ops").mkdir()
    text = RULES.read_text()
    assert "for: 5m" in text
    (tmp_path / "ops" / "alerts.yml").write_text(text.replace("for: 5m", "for: 1m"))
    shutil.copyfile(TESTS, tmp_path / "ops" / TESTS.name)
    done = _run([promtool, "test", "rules", str(tmp_path / "ops" / TESTS.name)])
    assert done.returncode != 0
    assert "the oldest ready job is pending for 5 minutes, then fires" in done.stdout + done.stderr
