"""A grading seed adds scenes to the ones ``check()`` and the zoo tests use, never swaps them.

Checks that draw a scene from a seed (rows, names, an outage, a lease, an order to kill
a job of) draw it under ``labkit grade`` from ``check()``'s seed and from the run's own
(``killsweep.scene_seeds``). Each check below runs on the reference twice, in process,
through a namespace that records every call it makes into the student's code: once as
``check()`` runs it, once under a grading seed. Every call of the first run must be asked
again in the second (a list argument may have grown: ex05 restarts both scenes' invoices
in one go), and the second must ask more. Drawing only the run's own scene, as grading
did before, fails here for each of them but one (its calls carry no scene: the
queue it draws lives in the table).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gradingkit import HIDDEN, SOLUTIONS, namespace_of, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check
from labkit.grading.exercises.killsweep import sweep_seed
from labkit.grading.seeds import use_grading_seed

#: (exercise, check) for every check that draws its scene from a seed.
SCENES = [
    ("ex01", "key_parts_do_not_run_together"),
    ("ex05", "every_invoice_is_charged_once"),
    ("ex05", "charge_is_the_same_after_a_restart"),
    ("ex11", "relay_marks_only_the_rows_it_published"),
    ("ex11", "relay_publishes_every_pending_row_oldest_first"),
    ("ex12", "due_slots_on_generated_schedules"),
    ("ex12", "tick_reads_what_fired_in_every_time_zone"),
    ("ex12", "names_with_underscores_and_capitals_are_their_own_schedules"),
    ("ex12", "last_fired_is_the_newest_key"),
    ("ex12", "a_long_outage_enqueues_every_missed_slot"),
    ("ex12", "two_schedulers_in_every_order_enqueue_each_slot_once"),
    ("ex13", "lease_lasts_the_lease_s_given"),
    ("ex13", "a_backlog_does_not_hide_another_accounts_job"),
    ("ex13", "least_busy_counts_only_live_leases"),
    ("ex13", "serial_head_is_the_smallest_id_whatever_the_keys"),
    ("ex14", "every_effect_once_after_a_kill_under_policy_v2"),
]


def _plain(value: Any) -> Any:
    """``value`` with folder paths (new in every run) written as ``<path>``, and the seed a
    kill or race sweep samples its points with (``with_checks_sample`` adds check()'s
    points to the run's own there, ``test_grading_seed.py``) as ``<sweep seed>``."""
    if isinstance(value, str) and value.startswith("/"):
        return "<path>"
    if isinstance(value, int) and not isinstance(value, bool) and value == sweep_seed():
        return "<sweep seed>"
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Recording(Namespace):
    """A namespace that writes down each call a check makes into the student's code."""

    def __init__(self, values: dict[str, Any], workdir: Path) -> None:
        super().__init__(values, workdir)
        self.calls: list[tuple[str, list[Any]]] = []

    def harness(self, target: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((target, _plain([*args, kwargs])))
        return super().harness(target, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        value = super().__getattr__(name)
        if not callable(value):
            return value

        def call(*args: Any) -> Any:
            self.calls.append((name, _plain(list(args))))
            return value(*args)

        return call


def _asked_again(call: tuple[str, list[Any]], calls: list[tuple[str, list[Any]]]) -> bool:
    """``call`` made again: the same target, each argument equal, or a list holding at
    least the items the first call's list held."""

    def covers(first: Any, again: Any) -> bool:
        if isinstance(first, list) and isinstance(again, list) and len(again) > len(first):
            return all(item in again for item in first)
        return bool(first == again)

    target, args = call
    return any(
        t == target and len(a) == len(args) and all(map(covers, args, a)) for t, a in calls
    )


@pytest.fixture
def seed_reset() -> Iterator[None]:
    yield
    use_grading_seed(None)


@pytest.mark.parametrize(("exercise", "name"), SCENES)
def test_a_grading_run_asks_whatever_check_asks_and_more(
    exercise: str, name: str, seed_reset: None, tmp_path: Path
) -> None:
    [check] = [c for c in catalog.all_checks(exercise, HIDDEN) if c.name == name]
    values, notes = namespace_of(notebook_for(SOLUTIONS, exercise))
    assert not notes, notes

    def recorded() -> list[tuple[str, list[Any]]]:
        ns = Recording(values, tmp_path)
        outcome = run_check(check, ns)
        assert outcome.status == CheckStatus.PASSED, (outcome.expected, outcome.got)
        return ns.calls

    in_check = recorded()
    use_grading_seed(7_919_121)
    in_grading = recorded()
    assert in_check, "the check asked the student's code nothing"
    missing = [call for call in in_check if not _asked_again(call, in_grading)]
    assert not missing, f"grading never asked {missing[:3]}"
    assert len(in_grading) > len(in_check) or in_grading != in_check, "no scene of its own"
