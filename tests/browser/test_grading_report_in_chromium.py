"""A grading run's page in a real browser: ``index.html`` opened from ``file://`` in Chromium.

The run is a small class built from ``Graded`` rows (tests/gradedclass.py: every notebook
status, student names and check output that are HTML and JavaScript), written as
``labkit grade`` writes a run. The test types in the filter, toggles "needs attention
only", counts the rows left, follows student links to their feedback pages, and fails
if any dialog opened (a hostile name that ran) or the page's own script raised. A copy
of the page with markup injected raw, as an escaping bug would leave it, shows the
Content-Security-Policy stops it while the page's own script still runs.

Playwright drives the distribution's Chromium, as tests/browser/test_lab_in_chromium.py
does; without Chromium or Playwright it skips, and ``LABKIT_REQUIRE_BROWSER=1`` (CI)
makes that a failure. The browser's processes are checked gone after the module.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gradedclass import HOSTILE_NAME, ODD_NAME, QUOTE_NAME, SCRIPT_TAG, hostile_class, write_run

from labkit.integrations.celery.proctree import argv_of, descendants_of, kill_tree

ALL = ["ana", "bob", HOSTILE_NAME, QUOTE_NAME, ODD_NAME]
FLAGGED = ["bob", HOSTILE_NAME, QUOTE_NAME]  # limit hit; missing, crashed; timed out

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def no_stray_processes() -> Iterator[None]:
    """Set up before the browser and checked after it closed: nothing of it is left."""
    before = set(descendants_of(os.getpid()))
    try:
        yield
    finally:
        # Playwright's driver and the browser it started must be gone with it.
        deadline, left = time.monotonic() + 10, []
        while time.monotonic() < deadline:
            left = [p for p in descendants_of(os.getpid()) if p not in before and argv_of(p)]
            if not left:
                break
            time.sleep(0.1)
        stray = [argv_of(p)[:1] for p in left]
        for pid in left:
            kill_tree(pid)
        assert left == [], f"the browser left processes behind: {stray}"


@pytest.fixture(scope="module")
def browser(no_stray_processes: None, launched: Any) -> Any:
    return launched


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, list[str], list[str]]]:
    """A page, the messages of the dialogs it opened, and what its scripts raised."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    dialogs: list[str] = []
    errors: list[str] = []

    def dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page, dialogs, errors
    finally:
        context.close()


def _shown(page: Any) -> list[str]:
    """The student names of the rows the filter left visible."""
    rows = page.locator("#students tbody tr:visible td:first-child a")
    return sorted(rows.all_inner_texts())


def test_filter_toggle_and_links_work_and_hostile_names_stay_text(
    page: tuple[Any, list[str], list[str]], tmp_path: Path
) -> None:
    tab, dialogs, errors = page
    index = write_run(hostile_class(), tmp_path / "out" / "monday")
    tab.goto(index.as_uri())
    assert _shown(tab) == sorted(ALL)
    assert tab.locator("#shown").inner_text() == "5 of 5 shown"
    assert tab.locator("#overview svg").count() == 2  # a histogram per exercise

    tab.fill("#filter", "BOB")  # case does not matter
    assert _shown(tab) == ["bob"]
    tab.fill("#filter", "crashed")  # statuses are searchable too
    assert _shown(tab) == [HOSTILE_NAME]
    tab.fill("#filter", "")
    tab.check("#attention")
    assert _shown(tab) == sorted(FLAGGED)
    tab.fill("#filter", "ana")  # ana needs no attention: nothing matches both
    assert _shown(tab) == []
    assert tab.locator("#none").is_visible()
    assert tab.locator("#shown").inner_text() == "0 of 5 shown"
    tab.fill("#filter", "")
    tab.uncheck("#attention")
    assert _shown(tab) == sorted(ALL)

    for name in (ODD_NAME, HOSTILE_NAME, QUOTE_NAME):
        tab.get_by_role("link", name=name, exact=True).click()
        tab.wait_for_url("**/feedback/*.html")
        assert tab.locator("h1").inner_text() == f"Feedback for {name}"
        tab.go_back()
        tab.wait_for_url(index.as_uri())
    tab.get_by_role("link", name=HOSTILE_NAME, exact=True).click()
    assert f"died: {SCRIPT_TAG}" in tab.locator("#ex02").inner_text()
    tab.get_by_role("link", name="the whole class").click()
    tab.wait_for_url(index.as_uri())
    assert dialogs == [], f"student text ran as script: {dialogs}"
    assert errors == []


def test_the_policy_stops_markup_that_escaping_missed(
    page: tuple[Any, list[str], list[str]], tmp_path: Path
) -> None:
    tab, dialogs, errors = page
    index = write_run(hostile_class(), tmp_path / "out" / "monday")
    # As if a field had gone out unescaped: an inline script, a handler, an outside script.
    raw = "<script>alert('inline')</script><img src=x onerror=\"alert('handler')\">"
    raw += "<script src='https://example.com/x.js'></script>"
    tampered = index.with_name("tampered.html")
    tampered.write_text(index.read_text().replace("<h2>Students</h2>", raw + "<h2>Students</h2>"))
    refused: list[str] = []
    tab.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    tab.goto(tampered.as_uri())
    tab.fill("#filter", "bob")  # the page's own script, named by its hash, still runs
    assert _shown(tab) == ["bob"]
    assert dialogs == [], f"the policy let injected script run: {dialogs}"
    assert refused, "the browser reported no Content-Security-Policy refusal"
    assert errors == []
