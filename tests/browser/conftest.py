"""What the browser tests share: Chromium found (or a clear skip), launched with the lab's
flags by Playwright, and whether the test failed (to keep a screenshot)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.labkit_failed = report.failed  # type: ignore[attr-defined]


def _missing(what: str, how: str) -> None:
    message = f"{what} is not available, so the browser test cannot run: {how}"
    if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{message} (LABKIT_REQUIRE_BROWSER=1 makes this a failure)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The distribution's Chromium (or LABKIT_CHROMIUM), with Playwright importable."""
    path = os.environ.get("LABKIT_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    if not path:
        _missing("Chromium", "install it (Debian/Ubuntu: sudo apt-get install -y chromium), "
                 "or point LABKIT_CHROMIUM at a Chromium binary")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("Playwright for Python", "pip install -e '.[dev]' (make venv-test)")
    return str(path)


@pytest.fixture(scope="module")
def launched(chromium: str) -> Iterator[Any]:
    """A headless Chromium driven by Playwright, closed after the module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=chromium, headless=True,
                                      args=CHROMIUM_FLAGS)
        try:
            yield instance
        finally:
            instance.close()
