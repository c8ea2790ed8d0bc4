"""Exercise 2's checks of a newcomer stopped between its file and lock calls, one
call after another, while the holder releases the lock or is killed: exactly one of the
newcomer and a third process may hold it (the harness's ``newcomer_race``)."""

from __future__ import annotations

import tempfile

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex02.holding import CHECKS, HARNESS
from labkit.lang import _

#: A newcomer is stopped after each of its first file or lock calls, in turn.
RACE_STOPS = list(range(1, 7))


#: The same for a holder stopped with SIGTERM: its first calls, where a newcomer opens.
TERMINATED_STOPS = [1, 2]


def _one_holder(
    ns: Namespace, event: str, want: str, hint: str, stops: list[int] = RACE_STOPS
) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        runs = ns.harness(HARNESS + "newcomer_race", tmp, event, stops)
    for run in runs:
        expect(run["holder"] == "held", "the first process to take the lock", run["holder"])
        got = [run["newcomer"], run["third"]]
        held = got.count("held")
        where = (
            _("stopped after its file call {call}").format(call=run["stop"])
            if run["paused"]
            else _("which finished before its file call {call}").format(call=str(run["stop"]))
        )
        expect(
            held == 1 and all(g == "held" or g.startswith("refused") for g in got),
            _(
                "{want}: exactly one of a newcomer ({where}) and a third process holding the lock"
            ).format(want=want, where=where),
            _("the newcomer got {newcomer}, the third process {third}").format(
                newcomer=repr(run["newcomer"]), third=repr(run["third"])
            ),
            hint,
        )
        expect(
            not run.get("let_go"),
            _(
                "{want}: the holder, still running 2 s after the signal, still holding the lock"
            ).format(want=want),
            _("the lock was free while the holder ran on: another run took it"),
            _(
                "a signal handler that lets go of the lock (LOCK_UN, or closing the file, even "
                "to reopen it a moment later) and returns leaves the job running beside the "
                "next run: let the signal end the "
                "process (or raise SystemExit in the handler), and the kernel releases the lock"
            ),
        )


@CHECKS.add(
    3,
    "release by closing the file, never by deleting it: a newcomer that opened the "
    "file just before the holder deleted it locks the deleted file, while the next "
    "run creates a new one and locks that: two holders",
    timeout=30.0,
    severe=True,
)
def release_keeps_the_lock_file(ns: Namespace) -> None:
    _one_holder(
        ns,
        "released",
        _("after the holder released the lock while a newcomer was taking it"),
        _("release by closing the file (the with block's end): do not unlink it"),
    )
    # A job stopped with SIGTERM: a handler that deletes the lock file on its way out is
    # the same mistake (the newcomer's first file calls are where it falls in).
    _one_holder(
        ns,
        "terminated",
        _("after the holder was stopped with SIGTERM while a newcomer was taking the lock"),
        _(
            "let the kernel release the lock when the process ends: no SIGTERM handler (nor "
            "atexit) that unlinks the lock file"
        ),
        TERMINATED_STOPS,
    )
    # A job that fails, or is stopped by Ctrl-C or by its terminal closing: an except
    # clause or a handler that deletes the lock file on the way out is the same mistake.
    _one_holder(
        ns,
        "raised",
        _(
            "after the holder's job raised an error inside the with block while a newcomer was "
            "taking the lock"
        ),
        _(
            "let the error go on and close the file in the finally: no except clause that "
            "unlinks the lock file"
        ),
        TERMINATED_STOPS,
    )
    for event, want in (
        (
            "interrupted",
            _(
                "after the holder was stopped with Ctrl-C (SIGINT) while a newcomer was taking "
                "the lock"
            ),
        ),
        (
            "hung up",
            _(
                "after the holder's terminal was closed (SIGHUP) while a newcomer was taking the "
                "lock"
            ),
        ),
    ):
        _one_holder(
            ns,
            event,
            want,
            _(
                "let the process end and the kernel release the lock: no signal handler (SIGINT, "
                "SIGHUP, SIGTERM), nor except KeyboardInterrupt, that unlinks the lock file"
            ),
            TERMINATED_STOPS,
        )


@CHECKS.add(
    3,
    "taking over a dead holder's pidfile in steps (read the pid, see it is dead, "
    "delete, create) lets two newcomers both do it, one deleting the other's fresh "
    "file; flock needs no takeover: the kernel dropped the dead holder's lock",
    timeout=30.0,
    severe=True,
)
def takeover_after_kill_admits_one(ns: Namespace) -> None:
    _one_holder(
        ns,
        "killed",
        _("after the holder was killed with SIGKILL"),
        _("fcntl.flock on the open file: the kernel releases a dead holder's lock in one step"),
    )
