"""Hidden checks for exercise 2: a refused attempt must not wipe the holder's record."""

from __future__ import annotations

from labkit.grading.exercises.ex02.checks import HARNESS, lock_path
from labkit.grading.checks import Checks, Namespace, expect
from labkit.lang import _

CHECKS = Checks("ex02", hidden=True)


@CHECKS.add(
    1,
    "open the file without truncating it ('a+' or os.open with O_RDWR | O_CREAT) "
    "and truncate only once you hold the lock: a refused attempt opened with 'w' "
    "erases the holder's pid",
    timeout=20.0,
)
def refused_attempt_keeps_the_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "refused_while_a_child_holds", str(path), 2)
        pid, again = run["holder"], run["refusals"][-1]
        expect(
            str(pid) in again,
            _("the second refusal still naming the holder, pid {pid}").format(pid=pid),
            again,
        )


@CHECKS.add(1, "the file records the holder's pid while it holds the lock")
def file_names_the_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_while_holding", str(path))
        text = run.get("file_while_held", "")
    expect(
        str(run["pid"]) in text,
        _("pid {pid} in the lock file").format(pid=run["pid"]),
        repr(text),
    )
