"""Hidden checks for exercise 12: a schedule whose name prefixes another, and 'latest' in tick."""

from __future__ import annotations

from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.ex12.checks import HOUR, T0, _keys, _tick
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.labdb import add_job
from labkit.patterns.schedule import slot_key as reference_key

CHECKS = Checks("ex12", hidden=True)


@CHECKS.add(
    2,
    "the last slot of 'report' is read from keys starting with 'schedule:report:' "
    "(colon included): 'schedule:reports:...' belongs to another schedule",
    severe=True,
)
def another_schedule_with_a_longer_name(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, reference_key("reports", T0 + 5 * HOUR), kind="reports")
        add_job(conn, reference_key("report", T0), kind="report")
        created = _tick(ns, path, T0 + 2 * HOUR + 1, schedule="report")
        want = [reference_key("report", T0 + HOUR), reference_key("report", T0 + 2 * HOUR)]
        expect(created == want, f"'report' to catch up with {want}", created)


@CHECKS.add(1, "after downtime, catch_up='latest' enqueues only the newest missed slot")
def tick_catches_up_with_the_latest_slot(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _tick(ns, path, T0 + 10, catch_up="latest")
        created = _tick(ns, path, T0 + 7 * HOUR + 10, catch_up="latest")
        want = [reference_key("nightly", T0 + 7 * HOUR)]
        expect(created == want, f"{want} after seven hours away", created)
        expect(len(_keys(conn)) == 2, "2 jobs in the table", _keys(conn))
