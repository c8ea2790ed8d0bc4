"""Hidden checks for exercise 2: a refused attempt must not wipe the holder's record."""

from __future__ import annotations

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex02.checks import HARNESS, lock_path
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
        expect(
            run["file"].strip() == str(pid),
            _(
                "the lock file still reading only the holder's pid, {pid}, after two refused "
                "attempts and a refused third process (a refused attempt writes nothing)"
            ).format(pid=pid),
            repr(run["file"][:80]),
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


@CHECKS.add(
    1,
    "catch only BlockingIOError around flock: a lock file that cannot be opened (its "
    "folder is missing, no permission) must raise its own error, not AlreadyRunning, "
    "or every run is skipped as 'already running' and nobody sees why",
)
def a_broken_lock_path_is_not_already_running(ns: Namespace) -> None:
    with lock_path(ns) as path:
        got = ns.harness(HARNESS + "attempt_once", str(path.parent / "missing" / "report.lock"))
    # Creating the folder is fine too; saying "already running" is not.
    expect(
        not got.startswith("refused"),
        "the error itself (FileNotFoundError), not AlreadyRunning, for a lock file in a "
        "folder that does not exist",
        got,
    )
