"""labkit.notebook.dead_letters and fault_panel: widgets built headless, driven by clicks.

Every assertion reads the database (or the world's file) after the click, not only
what the screen says.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.explore import replay
from labkit.notebook.dead_letters import (
    NothingSelected,
    dead_letter_screen,
    dead_rows,
    plan_redrive,
    redrive_selected,
)
from labkit.notebook.fault_panel import fault_panel, run_fault
from labkit.world import World

CHARGE_KEY = "billing:42:charge:v1"  # the key of labkit.explore.matrix's default job


def bury(store, kind, key, error):
    """Enqueue one job and fail it until it is dead; return its id."""
    job, _ = store.enqueue(kind, {"key": key}, key=key, max_attempts=2)
    while store.get(job.id).state != "dead":
        store.clock.advance(3600)  # past any backoff
        store.fail(store.claim("w1"), error)
    return job.id


@pytest.fixture
def dead(store, clock):
    """Three dead jobs: two permanent (two kinds), one out of transient attempts."""
    ids = {
        "order": bury(store, "erp.order", "shop:1:order", PermanentError("400 unknown sku")),
        "stock": bury(store, "erp.stock", "shop:1:stock", TransientError("503 down")),
        "order2": bury(store, "erp.order", "shop:2:order", PermanentError("400 unknown sku")),
    }
    clock.advance(8 * 3600)
    return ids


def snapshot(store):
    return [(j.id, j.key, str(j.state), j.attempt, j.redrives) for j in store.jobs()]


def text(widget):
    return html.unescape(widget.value)


def test_dead_rows_show_id_kind_key_reason_class_attempts_age_and_filter(store, dead):
    rows = dead_rows(store)
    assert [r["id"] for r in rows] == [dead["order"], dead["stock"], dead["order2"]]
    first = rows[0]
    assert (first["kind"], first["key"], first["error_class"], first["attempts"]) == (
        "erp.order", "shop:1:order", "PermanentError", 1)
    assert "400 unknown sku" in first["reason"] and first["age"].endswith("h")
    assert [r["id"] for r in dead_rows(store, kind="erp.stock")] == [dead["stock"]]
    assert [r["id"] for r in dead_rows(store, error_class="PermanentError")] == [
        dead["order"], dead["order2"]]


def test_redrive_button_with_nothing_selected_changes_nothing(store, dead):
    screen = dead_letter_screen(store)
    before = snapshot(store)
    screen.redrive_button.click()
    assert snapshot(store) == before
    assert "Nothing is selected" in text(screen.message) and "Nothing is selected" in screen.text
    with pytest.raises(NothingSelected):
        redrive_selected(store, [])


def test_redrive_selected_sends_back_only_the_ticked_job_with_its_key(store, dead):
    screen = dead_letter_screen(store)
    assert set(screen.checkboxes) == set(dead.values())
    screen.checkboxes[dead["stock"]].value = True
    screen.note.value = "stock API back"
    screen.redrive_button.click()
    job = store.get(dead["stock"])
    assert (str(job.state), job.key, job.redrives, job.attempt) == ("pending", "shop:1:stock", 1, 0)
    assert [str(store.get(i).state) for i in (dead["order"], dead["order2"])] == ["dead", "dead"]
    assert set(screen.checkboxes) == {dead["order"], dead["order2"]}  # table refreshed
    shown = screen.text  # the plain text; the screen shows the same as HTML tables
    assert "redrove 1 job(s)" in shown and "shop:1:stock" in shown
    page = screen.message.value
    assert "redrove 1 job(s)" in page and page.count("<table") == 2  # the jobs, the counts
    assert store.counts()["pending"] == 1 and "pending" in shown  # counts after the redrive
    notes = store.conn.execute(
        "SELECT note FROM redrives WHERE job_id = :id", {"id": dead["stock"]}).fetchall()
    assert [n[0] for n in notes] == ["stock API back"]  # the why is stored with the redrive


def test_refresh_keeps_the_ticks_of_rows_still_shown(store, dead):
    screen = dead_letter_screen(store)
    screen.checkboxes[dead["order"]].value = True
    screen.checkboxes[dead["stock"]].value = True
    store.redrive(dead["stock"], note="from the CLI")  # leaves the dead-letter queue
    screen.refresh_button.click()
    assert set(screen.checkboxes) == {dead["order"], dead["order2"]}
    assert screen.selected() == [dead["order"]]  # the tick survived; order2 was never ticked


def test_a_refresh_showing_the_same_rows_keeps_their_widgets_and_a_late_tick(store, dead):
    screen = dead_letter_screen(store)
    screen.kind.value = "erp.order"
    boxes = dict(screen.checkboxes)
    # The browser echoes the filter change back: a second refresh of the same rows. A
    # tick sent before it arrives lands on the box the browser shows, so that box stays.
    screen.refresh()
    assert screen.checkboxes == boxes
    assert all(a is b for a, b in zip(screen.checkboxes.values(), boxes.values(), strict=True))
    boxes[dead["order"]].value = True
    screen.refresh_button.click()
    assert screen.selected() == [dead["order"]]
    # New rows (another kind) are new widgets.
    screen.kind.value = "erp.stock"
    assert set(screen.checkboxes) == {dead["stock"]}


def test_dry_run_lists_the_selection_and_changes_nothing(store, dead):
    screen = dead_letter_screen(store)
    screen.checkboxes[dead["order"]].value = True
    before = snapshot(store)
    screen.dry_run_button.click()
    assert snapshot(store) == before
    shown = screen.text
    assert "would redrive 1 job(s)" in text(screen.message)
    assert "would redrive 1 job(s)" in shown and "shop:1:order" in shown
    assert "shop:2:order" not in shown
    assert screen.checkboxes[dead["order"]].value  # the tick survives a dry run


def test_a_job_redriven_elsewhere_is_refused_clearly_and_the_rest_still_go(store, dead):
    screen = dead_letter_screen(store)
    screen.checkboxes[dead["order"]].value = True
    screen.checkboxes[dead["order2"]].value = True
    store.redrive(dead["order"], note="someone else, from the CLI")  # the screen is now stale
    assert plan_redrive(store, [dead["order"]]).refused[0][1].startswith("it is pending now")
    screen.redrive_button.click()
    shown = screen.text
    assert f"refused job {dead['order']}" in text(screen.message)
    assert f"refused job {dead['order']}" in shown and "not dead" in shown
    assert store.get(dead["order"]).redrives == 1  # not redriven a second time
    assert store.get(dead["order2"]).redrives == 1 and str(store.get(dead["order2"]).state) == (
        "pending")


def test_unknown_job_is_refused_by_the_dry_run_and_the_redrive(store, dead):
    assert "does not exist" in plan_redrive(store, [999]).refused[0][1]
    report = redrive_selected(store, [999, dead["stock"]])
    assert [j.id for j in report.jobs] == [dead["stock"]] and report.refused[0][0] == 999


def test_filters_narrow_the_rows_and_only_shown_rows_are_selected(store, dead):
    screen = dead_letter_screen(store)
    assert list(screen.kind.options) == ["(all)", "erp.order", "erp.stock"]
    screen.checkboxes[dead["stock"]].value = True
    screen.kind.value = "erp.order"
    assert set(screen.checkboxes) == {dead["order"], dead["order2"]}
    screen.redrive_button.click()  # the stock tick is hidden now: not a selection
    assert store.get(dead["stock"]).state == "dead"
    assert "Nothing is selected" in text(screen.message)
    screen.kind.value = "(all)"
    screen.error_class.value = "TransientError"
    assert set(screen.checkboxes) == {dead["stock"]}


def test_empty_queue_shows_no_dead_letters(store):
    screen = dead_letter_screen(store)
    assert screen.checkboxes == {} and "no dead letters" in text(screen.table.children[0])


def test_fault_panel_run_shows_duplicate_and_the_world_holds_two_charges(tmp_path: Path):
    panel = fault_panel(workdir=tmp_path)
    panel.strategy.value = "ack_late"
    panel.point.value = "after_effect"
    panel.seed.value = 3
    panel.run_button.click()
    row = panel.last
    assert row is not None and row.fired == ("crash at after_effect n=1",)  # the fault fired
    with World(tmp_path / "fault-run" / "world.db", FakeClock()) as world:
        assert world.count(CHARGE_KEY, "payments") == 2 == row.effects
    shown = text(panel.result)
    assert "verdict : duplicate" in shown and "seed    : 3" in shown
    assert "replay  : ack_late | seed=3; after_effect:crash nth=1" in shown
    assert replay(row.replay).outcome == "duplicate"


def test_fault_panel_correct_strategy_is_ok_under_a_lost_response(tmp_path: Path):
    panel = fault_panel(strategies=["idempotency_key"], workdir=tmp_path)
    panel.point.value = "lost_response"
    panel.run_button.click()
    assert panel.last is not None  # the reply really was lost, not a crash at that point:
    assert panel.last.fired == ("lose_response at lost_response n=1",)
    assert "lost_response:lose_response nth=1" in panel.last.replay
    with World(tmp_path / "fault-run" / "world.db", FakeClock()) as world:
        assert world.count(CHARGE_KEY) == 1
    assert "verdict : ok" in text(panel.result)


def test_a_point_the_run_never_reaches_shows_a_dash():
    row = run_fault("same_transaction", "lost_response", seed=0)  # no outside call to lose
    assert row.fired == ()
    panel = fault_panel(strategies=["same_transaction"])
    panel.point.value = "lost_response"
    panel.run_button.click()
    assert "verdict : - (the run never reached this point)" in text(panel.result)


def test_bad_point_or_strategy_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ValueError, match="unknown crash point 'after_lunch'"):
        run_fault("ack_late", "after_lunch")
    panel = fault_panel(workdir=tmp_path)
    panel.strategy.options = [("nope", "nope")]
    panel.run_button.click()
    assert panel.last is None and "not run: unknown strategy 'nope'" in text(panel.result)
