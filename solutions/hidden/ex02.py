"""Hidden checks for exercise 2: a refused attempt must not wipe the holder's record."""

from __future__ import annotations

import codecs
import locale
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex02.forking import FOREIGN
from labkit.grading.exercises.ex02.holding import HARNESS, lock_path
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
        # The lock kept from the first flock on: one let go to lock a file opened again
        # with 'w' (to write the pid) lets another process in, whose pid that 'w' erases.
        gap = ns.harness(HARNESS + "probe_between_two_flocks", str(path))
    expect(
        gap["between"] != "free",
        _(
            "the lock held from your first flock to the end of the block: another process "
            "trying it between your two flocks is refused"
        ),
        _("another process (pid {pid}) took the lock there; then your attempt: {answer}, "
          "and the file read {file}").format(
            pid=gap["holder"], answer=repr(gap["answer"]), file=repr(gap["file"][:80])
        ),
        _(
            "take the lock once, on the file you opened without truncating it, and write "
            "the pid through that file: closing it to open the path again with 'w' lets "
            "the lock go, and that 'w' erases the pid of whoever took it meanwhile"
        ),
    )


@CHECKS.add(1, "the file records the holder's pid while it holds the lock")
def file_names_the_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_while_holding", str(path))
        text = run.get("file_while_held", "")
    expect(
        str(run["pid"]) in text,
        _("the holder's own pid, {pid}, in the lock file").format(pid=run["pid"]),
        repr(text),
        _(
            "write os.getpid() when you take the lock, not a pid read once at import: the "
            "process that holds the lock may be another one than the process that loaded "
            "your code"
        ),
    )
    # A worker forked after the code was loaded has its own pid: one read once at import
    # (a module-level PID = os.getpid()) names the parent, which may be long gone.
    with lock_path(ns) as path:
        forked = ns.harness(HARNESS + "file_while_a_forked_worker_holds", str(path))
    expect(
        forked["file"].strip() == str(forked["pid"]),
        _("the forked worker's own pid, {pid}, in the lock file while it holds the lock").format(
            pid=forked["pid"]
        ),
        repr(forked["file"][:80]),
        _(
            "write os.getpid() when you take the lock, not a pid read once at import: a "
            "worker forked later has its own"
        ),
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
    with lock_path(ns) as path:
        denied = ns.harness(HARNESS + "attempt_when_opening_is_refused", str(path))
    expect(
        not denied.startswith("refused"),
        "the error itself (PermissionError), not AlreadyRunning, for a lock file this user "
        "may not open",
        denied,
    )
    with lock_path(ns) as path:
        failed = ns.harness(HARNESS + "attempt_when_locking_fails", str(path))
    expect(
        not failed.startswith("refused"),
        _(
            "the error itself (OSError: No locks available), not AlreadyRunning, when flock "
            "fails with ENOLCK (a lock folder on NFS without its lock daemon) and nobody "
            "holds the lock"
        ),
        failed,
        _(
            "catch BlockingIOError alone around flock (or check errno for EWOULDBLOCK): an "
            "`except OSError` turns every error of the file system into 'already running', "
            "and every run is skipped without anyone seeing why"
        ),
    )


@CHECKS.add(
    2,
    "never run the job without the lock: when the lock file cannot be opened, or flock "
    "fails with another error than 'would block', let the error come out; a job that "
    "carries on unlocked (a warning, a fallback) runs beside every other copy",
    timeout=20.0,
    severe=True,
)
def no_run_without_the_lock(ns: Namespace) -> None:
    with lock_path(ns) as path:
        denied = ns.harness(HARNESS + "attempt_when_opening_is_refused", str(path))
    expect(
        denied != "acquired",
        _(
            "the error itself (PermissionError) for a lock file this user may not open, not a "
            "with block run without the lock"
        ),
        _("the with block ran, though no lock was taken"),
        _(
            "let the error of open come out: a job that runs without its lock runs beside any "
            "other copy"
        ),
    )
    with lock_path(ns) as path:
        failed = ns.harness(HARNESS + "attempt_when_locking_fails", str(path))
    expect(
        failed != "acquired",
        _(
            "the error itself (OSError: No locks available) when flock fails with ENOLCK (a "
            "lock folder on NFS without its lock daemon), not a with block run without the lock"
        ),
        _("the with block ran, though flock had failed and no lock was taken"),
        _(
            "catch BlockingIOError alone around flock and let any other OSError come out: "
            "'locks not supported here, run anyway' lets every copy run at once"
        ),
    )


@CHECKS.add(
    1,
    "refuse another thread of the holder's own process too, at once: flock belongs to the "
    "open file, so a thread that opens the file itself is refused like a second process; "
    "a module-level threading.Lock or RLock that makes the threads take turns keeps it "
    "waiting, and it runs the job again once the holder leaves",
    timeout=20.0,
    severe=True,
)
def a_thread_of_the_holders_process_is_refused(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_from_a_thread_while_holding", str(path), 1.0)
    expect("error" not in run, _("the with block to run and end"), run.get("error", ""))
    answer = str(run["answer"])
    # What counts is that the thread never got in, at once: a lock that installs a
    # signal handler meets "signal only works in main thread" in a thread, and that
    # error keeps the job from running twice as well as AlreadyRunning does.
    expect(
        bool(run["while_held"]) and not answer.startswith("acquired"),
        _(
            "AlreadyRunning at once (within 1 s) for another thread of the holder's process, "
            "while the holder is still inside its with block"
        ),
        repr(answer)
        if run["while_held"]
        else _("no answer while the holder ran; once it let go, {answer}").format(
            answer=repr(answer)
        ),
        _(
            "take the lock with flock alone, on a file each attempt opens itself: a threading "
            "lock around it makes a second thread wait for the holder instead of refusing it"
        ),
    )
    # A wait with a timeout (acquire(timeout=0.5), a sleep and a retry) answers in time,
    # unless the holder leaves meanwhile: then the thread gets the lock and runs the job
    # right after it. The holder here leaves the moment the thread is found waiting.
    with lock_path(ns) as path:
        left = ns.harness(HARNESS + "attempt_from_a_thread_as_the_holder_leaves", str(path), 5.0)
    expect("error" not in left, _("the with block to run and end"), left.get("error", ""))
    answer = str(left["answer"])
    expect(
        not answer.startswith("acquired"),
        _(
            "AlreadyRunning for another thread of the holder's process, though the holder "
            "left while that thread was waiting (a refusal does not wait, even briefly)"
        ),
        _("it waited, and got {answer} once the holder left").format(answer=repr(answer))
        if left["waited"]
        else repr(answer),
        _(
            "take a threading lock without waiting, if at all (acquire(blocking=False)), and "
            "raise AlreadyRunning at once: a thread that waits a moment for the holder runs the "
            "job again right after it"
        ),
    )


#: Holders that are alive though their file says otherwise: ``[text in the file, age in s]``.
PLAIN_HOLDERS: list[list[Any]] = [
    ["", 0.0],
    ["4194304", 0.0],
    ["1", 3 * 3600.0],
    ["1", 40 * 86_400.0],
]


def _who(case: int) -> str:
    return [
        _("a holder that has not written its pid yet (the file is empty)"),
        _(
            "a holder whose pid this process cannot see (pid 4194304: a worker in another "
            "container sharing the folder)"
        ),
        _(
            "a holder that took the lock 3 hours ago and still runs (a long job: the file is "
            "3 h old)"
        ),
        _(
            "a holder whose file was last written 40 days ago and still runs (a daemon, or a "
            "clock set back: no age makes a held lock stale)"
        ),
        _("a holder whose file reads {text}, no bare pid (another version of the job)").format(
            text=repr(NOT_A_PID)
        ),
        _(
            "a holder whose file is dated a day ahead (written by a host whose clock runs "
            "ahead, on a shared folder)"
        ),
        _(
            "a holder whose file is dated 50 years back (an image built with its dates reset, "
            "as reproducible builds do)"
        ),
    ][case]


@CHECKS.add(
    2,
    "a held flock is the only truth: never call a busy lock stale because its file is "
    "empty, old, or names a pid you cannot see (another container, a pid namespace): "
    "deleting it and locking a new file lets a second copy run beside the holder",
    timeout=20.0,
    severe=True,
)
def a_held_lock_is_never_stale(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        runs = ns.harness(
            HARNESS + "attempts_beside_a_plain_holder", tmp, PLAIN_HOLDERS + ODD_HOLDERS
        )
    for case, run in enumerate(runs):
        took = "acquired" in (run["answer"], run["again"]) or not run["same_file"]
        expect(
            not took,
            _("no lock for two attempts while {who} holds it, and its file left in place").format(
                who=_who(case)
            ),
            _("the attempts got {answer} and {again}; the holder's file {file}").format(
                answer=repr(run["answer"]),
                again=repr(run["again"]),
                file=_("still in place") if run["same_file"] else _("deleted or replaced"),
            ),
        )
    # A scheduler that lives for months tries every minute: however many times in a row it
    # was refused, the holder still runs. A count of refusals that makes the lock "stuck"
    # (delete it, take over) lets this copy, or the next process, run beside it.
    with lock_path(ns) as path:
        row = ns.harness(HARNESS + "refused_while_a_child_holds", str(path), REFUSALS_IN_A_ROW)
    answers = [*row["refusals"], row["second_process"]]
    expect(
        all(a.startswith("refused") for a in answers),
        _(
            "AlreadyRunning for each of {n} attempts in a row by one process, and for another "
            "process after them, while the same holder still runs (no number of refusals "
            "makes a held lock stale)"
        ).format(n=REFUSALS_IN_A_ROW),
        _("the attempts got {answers}").format(answers=", ".join(repr(a[:60]) for a in answers)),
        _(
            "refuse every time flock finds the lock busy: a count of refusals (or of minutes) "
            "says nothing about whether the holder still runs"
        ),
    )
    # The same scheduler for weeks, trying every minute while one job runs on: neither a
    # longer count of refusals (an hour's, a day's) nor the time it has been refused
    # (since its first refusal, by any clock) makes the held lock stale.
    with lock_path(ns) as path:
        weeks = ns.harness(HARNESS + "refusals_while_time_flies", str(path), REFUSALS_FOR_WEEKS)
    expect(
        weeks["refused"] == REFUSALS_FOR_WEEKS and weeks["same_file"],
        _(
            "AlreadyRunning for each of {n} attempts a minute apart by one process, over {days} "
            "days of its clocks, while the same holder still runs, and its file left in place"
        ).format(n=REFUSALS_FOR_WEEKS, days=weeks["days"]),
        _("{refused} refused; the others got {others}; the holder's file {file}").format(
            refused=weeks["refused"],
            others=", ".join(repr(a) for a in weeks["others"]) or _("no answer"),
            file=_("still in place") if weeks["same_file"] else _("deleted or replaced"),
        ),
        _(
            "refuse every time flock finds the lock busy: no count of refusals, and no time "
            "spent refused, says the holder is stuck; a job that runs for days still holds it"
        ),
    )


#: What a holder of another version of the job writes in the file: no bare pid.
NOT_A_PID = "pid=4194304 (nightly report)"


#: More holders alive whatever their file says: text that is no pid, a date in the future,
#: one decades old (a stale rule by age needs only one age past its limit).
ODD_HOLDERS: list[list[Any]] = [
    [NOT_A_PID, 0.0],
    ["1", -86_400.0],
    ["1", 50 * 365 * 86_400.0],
]

#: What yet another version of the job writes in its lock file: a '%' and braces.
ODD_TEXT = "nightly {report} 100% done"


def _accented_text() -> list[str]:
    """What a holder whose job is named in Portuguese writes: an accent among ASCII. Only
    where text files are UTF-8, as Python writes them by default (elsewhere a right
    solution that decodes UTF-8 itself could not read what the holder wrote)."""
    try:
        utf8 = codecs.lookup(locale.getpreferredencoding(False)).name == "utf-8"
    except LookupError:
        utf8 = False
    return ["relatório 4194304"] if utf8 else []


#: A holder's text with an accent, where text files are UTF-8; nothing elsewhere.
_ACCENTED = _accented_text()

#: Refusals in a row by one long-lived process (a scheduler trying every minute).
REFUSALS_IN_A_ROW = 10
#: Refusals a minute apart by one process whose clocks leap at each sleep: over a day's
#: worth of minutes, over two weeks of its clocks.
REFUSALS_FOR_WEEKS = 1500


def _not_a_pid() -> str:
    return _("a holder whose file reads {text}, no bare pid (another version of the job)").format(
        text=repr(NOT_A_PID)
    )


@CHECKS.add(
    1,
    "refuse with AlreadyRunning whatever the file says: empty, or something that is not a "
    "pid, the message then names the holder as unknown (a ValueError from int() is not "
    "the error the caller catches)",
    timeout=20.0,
)
def refusal_when_the_file_names_nobody(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        runs = ns.harness(
            HARNESS + "attempts_beside_a_plain_holder", tmp, [*PLAIN_HOLDERS[:2], [NOT_A_PID, 0.0]]
        )
    for case, run in enumerate(runs):
        who = _who(case) if case < 2 else _not_a_pid()
        expect(
            run["answer"].startswith("refused") and run["again"].startswith("refused"),
            _("AlreadyRunning, twice, while {who} holds the lock").format(who=who),
            _("{answer}, then {again}").format(
                answer=repr(run["answer"]), again=repr(run["again"])
            ),
        )
    # A refused attempt leaves the file as it is: one that wrote its own pid into the empty
    # file before its flock (so the file "never names nobody") names itself, the process
    # refused, as the holder, to its own refusals and to everyone else's.
    empty = runs[0]
    own = re.compile(rf"(?<!\d){empty['pid']}(?!\d)")
    said = (empty["answer"] + " " + empty["again"]).replace(tmp, "")
    expect(
        empty["file"] == "" and not own.search(said),
        _(
            "the lock file still empty after two refused attempts while {who} holds the lock, "
            "and no refusal naming the refused process's own pid, {pid}"
        ).format(who=_who(0), pid=empty["pid"]),
        _("the file then read {file}; the refusals said {answer}, then {again}").format(
            file=repr(empty["file"][:80]), answer=repr(empty["answer"]), again=repr(empty["again"])
        ),
        _(
            "write your pid only once flock gave you the lock: a refused attempt writes "
            "nothing, or the file names the process refused as the holder"
        ),
    )
    # An empty file names nobody: a refusal that makes up a number for it ("pid 0", "pid
    # -1") sends the operator after a process that does not exist.
    made_up = re.search(r"pid\W{0,3}-?\d+", said)
    expect(
        made_up is None,
        _(
            "no pid in the refusals while {who} holds the lock: the file names nobody, so the "
            "message says the holder is unknown"
        ).format(who=_who(0)),
        _("the refusals said {answer}, then {again}").format(
            answer=repr(empty["answer"]), again=repr(empty["again"])
        ),
        _(
            "name the holder as unknown when the file holds no pid: a made-up number (0, -1) "
            "names a process that does not exist"
        ),
    )
    # Pids run to 4194304 on a 64-bit Linux (pid_max): all seven digits are the holder's.
    pid = PLAIN_HOLDERS[1][0]
    expect(
        pid in runs[1]["answer"],
        _(
            "a message naming the holder's pid {pid}, all of its digits, while {who} holds the lock"
        ).format(pid=pid, who=_who(1)),
        runs[1]["answer"],
        _(
            "read the whole file (fh.seek(0); fh.read().strip()): a pid can have seven digits "
            "(up to 4194304 on a 64-bit Linux)"
        ),
    )
    # A pid not alive here, or text that is no pid, is no reason to touch the file: the
    # holder runs (in another container, or an older version of the job), and what it
    # wrote is what the operator reads there.
    for case, text in ((1, pid), (2, NOT_A_PID)):
        expect(
            runs[case]["file"] == text,
            _(
                "the lock file still reading {text} after two refused attempts while {who} "
                "holds the lock"
            ).format(text=repr(text), who=_who(case) if case < 2 else _not_a_pid()),
            repr(runs[case]["file"][:80]),
            _(
                "a refused attempt leaves the file as it is, whatever it says: do not empty "
                "or rewrite a pid you cannot see, or text that is no pid; its holder still runs"
            ),
        )
    # Holders one after another on one file, as a scheduler that lives for months sees them:
    # one that wrote its pid, then one that has just taken the lock and not written yet,
    # then another version of the job whose text holds a '%' and braces. The empty file
    # names nobody, whatever an earlier refusal read there; and the text is the holder's,
    # not a format for the message (pasted in, then formatted with % or .format).
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        turns = ns.harness(
            HARNESS + "refusals_under_holders_in_turn",
            str(Path(tmp) / "report.lock"),
            [LONG_GONE, "", ODD_TEXT, *_ACCENTED],
        )
    after_a_pid, odd = turns[1], turns[2]
    expect(
        after_a_pid.startswith("refused") and re.search(r"pid\W{0,3}-?\d+", after_a_pid) is None,
        _(
            "AlreadyRunning naming no pid while a new holder of the lock has not written its "
            "pid yet (the file is empty), after an earlier refusal in this process read pid "
            "{pid} there"
        ).format(pid=LONG_GONE),
        after_a_pid,
        _(
            "read the file at each refusal and name the holder as unknown when it is empty: a "
            "pid kept from an earlier refusal names a holder that has left"
        ),
    )
    expect(
        odd.startswith("refused"),
        _("AlreadyRunning while a holder whose file reads {text} holds the lock").format(
            text=repr(ODD_TEXT)
        ),
        odd,
        _(
            "put the holder's text into the message in one step (an f-string): a text "
            "formatted with % or .format after the holder's text was pasted in reads its "
            "'%' or braces as placeholders"
        ),
    )
    # Text is not always ASCII: the file read as ASCII (encoding="ascii", .decode("ascii"))
    # raises UnicodeDecodeError instead of the refusal the caller catches.
    for text, said in zip(_ACCENTED, turns[3:], strict=True):
        expect(
            said.startswith("refused"),
            _("AlreadyRunning while a holder whose file reads {text} holds the lock").format(
                text=repr(text)
            ),
            said,
            _(
                "read the file as text files are read by default (UTF-8), not as ASCII: a "
                "holder's text may have accents, and a decoding error is not the refusal "
                "the caller catches"
            ),
        )


@CHECKS.add(
    2,
    "keep each lock's open file in the with block's own variable: a file kept in a global "
    "(or a class attribute) is replaced when the same process takes a second lock, the "
    "first file is closed and its lock silently released",
    timeout=20.0,
    severe=True,
)
def a_second_lock_keeps_the_first(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        run = ns.harness(
            HARNESS + "second_lock_in_one_process",
            str(Path(tmp) / "report.lock"),
            str(Path(tmp) / "billing.lock"),
        )
    expect("error" not in run, "both with blocks to run and end", run.get("error", ""))
    expect(
        run["first_again"].startswith("refused"),
        "AlreadyRunning for report.lock while this process holds it and also holds "
        "billing.lock (two jobs' locks in one scheduler process)",
        run["first_again"],
    )


@CHECKS.add(
    1,
    "refuse only the lock that is held: another job's lock, on another file, is free to "
    "another thread while this one is held; one module-level threading lock for every path "
    "refuses it, and that job does not run for as long as the other one does",
    timeout=20.0,
    severe=True,
)
def another_jobs_lock_is_free_to_another_thread(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        run = ns.harness(
            HARNESS + "other_lock_from_a_thread_while_holding",
            str(Path(tmp) / "report.lock"),
            str(Path(tmp) / "billing.lock"),
            2.0,
        )
    expect("error" not in run, _("the with block to run and end"), run.get("error", ""))
    answer = str(run["answer"])
    # What counts is that the thread was not turned away nor kept waiting: a lock that
    # installs a signal handler meets "signal only works in main thread" in a thread,
    # whatever else holds a lock.
    expect(
        bool(run["while_held"]) and not answer.startswith("refused"),
        _(
            "billing.lock taken at once (within 2 s) by another thread of this process while "
            "it holds report.lock (two jobs of one scheduler, on threads of their own): "
            "nobody holds billing.lock"
        ),
        repr(answer)
        if run["while_held"]
        else _("no answer while report.lock was held; once it was let go, {answer}").format(
            answer=repr(answer)
        ),
        _(
            "let flock decide, per file: a threading lock, if any, belongs to one path (a "
            "dict of them by path), not one for the whole module"
        ),
    )


@CHECKS.add(
    1,
    "let go of the lock on every way out of your own code too: when writing the pid fails "
    "(a full disk), close the file before the error goes on (the try/finally starts right "
    "after the open); a run that never started, whose error the scheduler keeps, must not "
    "keep the lock and refuse every later run",
    timeout=20.0,
    severe=True,
)
def a_failed_start_lets_go_of_the_lock(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_after_a_failed_start", str(path))
    expect(
        run["answer"] == "acquired",
        _(
            "the lock free for another process once a run whose pid could not be written "
            "(a full disk: it got {child}) had ended, though that run's process lives on and "
            "keeps its error, as a scheduler does"
        ).format(child=repr(run["child"][:120])),
        run["answer"],
        _(
            "close the file in a finally that begins right after you open it (or close it "
            "in an except BaseException before raising again): an error between the flock "
            "and the yield leaves the lock held as long as the file is open"
        ),
    )


@CHECKS.add(
    1,
    "close a descriptor once: the number os.close frees is the next file another thread "
    "opens (another job's lock); a second os.close of it (in the refusal, then again in a "
    "finally, its error ignored) closes that job's file and lets go of its lock while it runs",
    timeout=20.0,
    severe=True,
)
def a_closed_descriptor_is_closed_once(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(
            HARNESS + "attempts_as_another_lock_reuses_a_closed_descriptor",
            str(path),
            str(path.with_name("billing.lock")),
        )
    for when, answer, kept in zip(
        (_("a refused attempt"), _("an attempt that took the lock and left")),
        run["answers"],
        run["kept"],
        strict=True,
    ):
        expect(
            kept,
            _(
                "billing.lock, another job's, still held by the thread that opened it right "
                "after {when} closed its descriptor (the same number came back to that open)"
            ).format(when=when),
            _("it was closed again by {when} ({answer}): that job's lock was let go").format(
                when=when, answer=repr(answer[:100])
            ),
            _(
                "close each descriptor exactly once (os.close in a finally, nowhere else, or a "
                "file object, whose close is safe to repeat): ignoring the error of a second "
                "close hides that it closed someone else's file"
            ),
        )


#: Runs of a scheduler that keeps one process for months: each leaks what it leaves open.
LOCK_USES = 50


@CHECKS.add(
    1,
    "close the lock file when the block ends, and when you refuse (fh.close() in the "
    "finally, os.close(fd) for os.open): LOCK_UN alone keeps the file open, and a "
    "scheduler that takes the lock at every run dies of 'Too many open files'",
    timeout=20.0,
)
def no_file_left_open_after_a_run(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "open_files_after_uses", str(path), LOCK_USES)
    expect("error" not in run, "every with block to run and end", run.get("error", ""))
    if run.get("waited"):
        return  # a refusal that waits for the lock: second_holder_is_refused says so
    expect(
        # A few either way are the process's own (a thread's pipe): a leak is one or two
        # files a run, 50 or more.
        run["after"] - run["before"] < LOCK_USES // 2,
        _(
            "no file left open by {uses} runs (each holding the lock and refused once "
            "inside): {before} files open in the process before them"
        ).format(uses=LOCK_USES, before=run["before"]),
        _("{after} open after the runs, {before} before").format(
            after=run["after"], before=run["before"]
        ),
    )


@CHECKS.add(
    1,
    "read the holder's pid from the file at every refusal: a pid kept from an earlier "
    "refusal (in a module-level dict) names a holder long gone, and the operator who "
    "reads the message kills the wrong process",
    timeout=20.0,
)
def refusal_names_the_current_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "refused_by_holders_in_turn", str(path))
    before, now = (text.strip() for text in run["files"])
    said = run["refusals"][1]
    if before == now or not now:
        return  # the file names no new holder: file_names_the_holder judges what it says
    expect(
        now in said,
        _(
            "a refusal naming pid {now}, the pid in the lock file now, after an earlier "
            "refusal in this process named pid {before}, a holder since killed"
        ).format(now=now, before=before),
        said,
    )


@CHECKS.add(
    2,
    "release the lock by closing your file (fh.close() in the finally), never with "
    "flock(LOCK_UN): a worker forked inside the with block shares the open file, and "
    "its LOCK_UN as it leaves the block releases the lock while the parent still runs",
    timeout=20.0,
    severe=True,
)
def a_forked_worker_leaving_keeps_the_lock(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_after_a_forked_worker_left", str(path))
    expect("error" not in run, _("the with block to run and end"), run.get("error", ""))
    expect(
        run["again"].startswith("refused"),
        _(
            "AlreadyRunning for a second attempt while this process still holds the lock, "
            "after a worker it forked inside the with block left the block and exited"
        ),
        run["again"],
    )
    # A worker whose job failed, or that Ctrl-C stopped (SIGINT reaches every process of
    # the group), leaves by an exception: code that lets go (LOCK_UN) on an error lets go
    # of the parent's lock just the same.
    for leaving, how in (
        ("failure", _("failed there (a RuntimeError left the block)")),
        ("interrupt", _("was stopped there by Ctrl-C (a KeyboardInterrupt left the block)")),
    ):
        with lock_path(ns) as path:
            left = ns.harness(HARNESS + "attempt_after_a_forked_worker_left", str(path), leaving)
        expect("error" not in left, _("the with block to run and end"), left.get("error", ""))
        expect(
            left["again"].startswith("refused"),
            _(
                "AlreadyRunning for a second attempt while this process still holds the lock, "
                "after a worker it forked inside the with block {how} and exited"
            ).format(how=how),
            left["again"],
            _(
                "let closing the file release the lock, on an error too: no flock(LOCK_UN) in "
                "an except clause, which a forked worker's failure runs on the parent's lock"
            ),
        )


@CHECKS.add(
    1,
    "open the lock file in one call that creates it if needed and never truncates ('a+', "
    "or os.open with O_RDWR | O_CREAT): 'r+', then 'w' when the file was missing, lets a "
    "second run that also found no file empty the pid the first one just wrote",
    timeout=20.0,
)
def a_late_starter_leaves_the_holders_pid(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "staggered_start", str(path))
    holder = run["holder"]
    if holder is None:
        return  # nobody took the lock: two_instances_started_together judges the start
    # Only a wiped pid is this mistake; a wrong one is file_names_the_holder's.
    expect(
        run["file"].strip() != "",
        _(
            "the lock file naming pid {pid}, the process holding the lock, after a second "
            "process started with it also found no lock file"
        ).format(pid=holder),
        _("{file}; the processes got {outcomes}").format(
            file=repr(run["file"][:80]), outcomes=run["outcomes"]
        ),
    )


@CHECKS.add(
    2,
    "hold the lock for the whole with block: no watchdog (a timer, a thread, signal.alarm) "
    "that lets go of it, closes or deletes the file while the job still runs; a job that "
    "hangs is for the scheduler to kill, and the kernel frees a dead holder's lock",
    timeout=20.0,
    severe=True,
)
def the_lock_lasts_the_whole_block(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_while_time_flies", str(path))
    if not run["held"]:
        return  # the job was ended, the block with it: the kernel freed the lock
    expect(
        run["answer"].startswith("refused"),
        _(
            "AlreadyRunning for a second process while the holder is still inside its with "
            "block, hours after it took the lock (time flies for the lock's own timers and "
            "threads)"
        ),
        _("it got {answer}: the lock was let go while the job still ran").format(
            answer=repr(run["answer"])
        ),
    )


@CHECKS.add(
    2,
    "lock the file at the path you are given, itself: a lock taken on a file named after "
    "it elsewhere (the same name in /tmp, a name made from hash(path)) is not seen by a "
    "holder of the path, and makes two jobs whose files share a name block each other",
    timeout=20.0,
    severe=True,
)
def the_lock_is_the_file_at_the_path_given(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        # Capitals too: a path changed on the way (lower()) names a file that is not there.
        (Path(tmp) / "Billing").mkdir()
        (Path(tmp) / "Report").mkdir()
        both = ns.harness(
            HARNESS + "second_lock_in_one_process",
            str(Path(tmp) / "Billing" / "job.lock"),
            str(Path(tmp) / "Report" / "job.lock"),
        )
        expect(
            "error" not in both,
            _(
                "both locks held at once: Billing/job.lock and Report/job.lock are two jobs' "
                "locks, though their files share a name"
            ),
            both.get("error", ""),
            _("open and flock the file at `path` itself, not one named after it elsewhere"),
        )
        # A holder of the path itself, alive (pid 1 is), that did not come through your code.
        # Its name is a pidfile's, no '.lock': a path "completed" on the way (a '.lock'
        # added, or put in place of its suffix) names a file the holder does not hold.
        runs = ns.harness(
            HARNESS + "attempts_beside_a_plain_holder", tmp, [["1", 0.0]], _PIDFILE_NAME
        )
    expect(
        runs[0]["answer"].startswith("refused") and runs[0]["again"].startswith("refused"),
        _(
            "AlreadyRunning while another process holds a flock on the file at the path given "
            "({path})"
        ).format(path=repr(f"case-0/{_PIDFILE_NAME}")),
        _("{answer}, then {again}").format(
            answer=repr(runs[0]["answer"]), again=repr(runs[0]["again"])
        ),
        _(
            "open and flock the file at `path` itself, not one named after it elsewhere, nor "
            "with a suffix of your own ('.lock' added or put in place of its own)"
        ),
    )
    # A path as people name things: spaces and accents. One made "safe" on the way
    # (spaces to '_', accents dropped or ASCII-ized) names a file nobody holds.
    folder, name = _HUMAN_PATH
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        (Path(tmp) / folder).mkdir()
        human = ns.harness(
            HARNESS + "attempts_beside_a_plain_holder",
            str(Path(tmp) / folder),
            [["1", 0.0]],
            name,
        )[0]
    expect(
        human["answer"].startswith("refused") and human["again"].startswith("refused"),
        _(
            "AlreadyRunning while another process holds a flock on {path}, a path with "
            "spaces and accents"
        ).format(path=repr(f"{folder}/case-0/{name}")),
        _("{answer}, then {again}").format(
            answer=repr(human["answer"]), again=repr(human["again"])
        ),
        _(
            "open the path exactly as given: replacing its spaces or accents names another "
            "file, one the holder does not hold"
        ),
    )
    # A relative path, given in the folder the process is in when it calls you (a
    # cron job's): the file there is held. One joined to the folder your cells ran in
    # (os.getcwd() read at import) is another file.
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        answers = ns.harness(HARNESS + "attempts_by_a_relative_path", tmp)
    expect(
        all(a.startswith("refused") for a in answers),
        _(
            "AlreadyRunning for the relative path 'report.lock' while another process holds "
            "that file in the folder the caller is in"
        ),
        _("{answer}, then {again}").format(answer=repr(answers[0]), again=repr(answers[1])),
        _(
            "open the path as given: a relative path names a file in the folder the process "
            "is in at that moment, not the one your code started in, nor the one a first "
            "call was made from (an absolute path kept from then)"
        ),
    )


#: A lock file named as a pidfile often is: its suffix is not '.lock'.
_PIDFILE_NAME = "report.pid"


def _human_path() -> tuple[str, str]:
    """A folder and a file name with spaces and accents, ASCII ones where file names are
    not UTF-8 (the accents could not be written there at all)."""
    folder, name = "Relatórios diários", "relatório mensal.lock"
    try:
        os.fsencode(folder + name)
    except UnicodeEncodeError:
        return "Daily reports", "monthly report.lock"
    return folder, name


#: Where a job's lock may well live: spaces and accents in its folder and its name.
_HUMAN_PATH = _human_path()


#: What a run killed long ago left in the lock file: a pid no process has here.
LONG_GONE = "4194304"


@CHECKS.add(
    1,
    "read the holder's pid from the file after flock refused you, not before: a pid read "
    "first (to have it ready) names whoever was in the file then, a run long gone when "
    "the holder took the lock between your read and your flock",
    timeout=20.0,
)
def the_pid_is_read_after_the_refusal(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "refused_as_a_holder_arrives", str(path), LONG_GONE)
    answer = str(run["answer"])
    if not run["held_back"] or not answer.startswith("refused"):
        return  # no flock through fcntl, or not refused: other checks judge the lock itself
    expect(
        str(run["holder"]) in answer,
        _(
            "a message naming the holder's pid {pid}, which took the lock and wrote its pid "
            "just before your flock (until then the file read {left}, left by a run long "
            "gone)"
        ).format(pid=run["holder"], left=LONG_GONE),
        answer,
        _(
            "read the pid once flock raised BlockingIOError (fh.seek(0); fh.read()): the file "
            "names the holder only once the holder has the lock"
        ),
    )


@CHECKS.add(
    1,
    "refuse with the AlreadyRunning the first cell imports (labkit.errors): a class of "
    "the same name written again in the notebook is not what a worker's except "
    "AlreadyRunning catches",
)
def refusal_is_labkits_exception(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "attempt_while_holding", str(path))
    second = str(run.get("second", ""))
    if not second.startswith("refused"):
        return  # no refusal at all: the lock's own checks judge it
    expect(
        FOREIGN not in second,
        _("labkit.errors.AlreadyRunning for a second attempt while the lock is held"),
        _("an AlreadyRunning of another family: {said}").format(said=second[:160]),
        _(
            "use the AlreadyRunning the first cell imports (from labkit.errors import "
            "AlreadyRunning); a class defined again in the notebook has the same name, but "
            "an `except AlreadyRunning` in the worker does not catch it"
        ),
    )


#: Lock files nobody holds, as runs gone (or a deploy) left them: ``[text, age in s]``.
NOBODYS_FILES: list[list[Any]] = [
    ["", 0.0],
    ["", 3 * 3600.0],
    ["1", 0.0],
    [NOT_A_PID, 0.0],
    [LONG_GONE, 40 * 86_400.0],
]


def _left(case: int) -> str:
    return [
        _(
            "an empty lock file (created by the deploy, or left by a run killed before it "
            "wrote its pid)"
        ),
        _("an empty lock file 3 hours old"),
        _(
            "a lock file naming pid 1, a process alive here (the init of a container) that "
            "holds no lock"
        ),
        _("a lock file reading {text}, no bare pid").format(text=repr(NOT_A_PID)),
        _("a lock file naming pid {pid}, last written 40 days ago").format(pid=LONG_GONE),
    ][case]


@CHECKS.add(
    2,
    "a lock nobody holds is yours, whatever its file says: empty (a run 'still starting'?), "
    "a pid that is alive (pid 1 always is), text that is no pid, an old date; only flock "
    "says whether someone holds it, and refusing a free lock refuses every later run too",
    timeout=20.0,
    severe=True,
)
def a_free_lock_is_taken_whatever_its_file_says(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        for case, (text, age_s) in enumerate(NOBODYS_FILES):
            path = Path(tmp) / f"case-{case}" / "report.lock"
            path.parent.mkdir()
            path.write_text(text)
            then = time.time() - age_s
            os.utime(path, (then, then))
            answer = ns.harness(HARNESS + "attempt_once", str(path))
            expect(
                answer == "acquired",
                _("the lock taken on {left}: nobody holds it").format(left=_left(case)),
                answer,
                _(
                    "take the flock and trust it alone: what the file says (or that it is "
                    "empty) names who last held the lock, not whether anyone holds it now"
                ),
            )


def _what_the_owner_may_not(mode: int) -> str:
    if mode & 0o400:
        return _("write")
    return _("read") if mode & 0o200 else _("read or write")


#: The owner's read and write bits: a lock file without them cannot be opened by the next run.
_OWNER_RW = 0o600


@CHECKS.add(
    2,
    "leave the lock file readable and writable by its owner: os.open's mode is octal "
    "(0o644; a decimal 644 is 0o1204, write-only), and no chmod to read-only: the next run, "
    "under a user that is not root, cannot open the file and never runs again",
    timeout=20.0,
    severe=True,
)
def the_next_run_can_open_the_lock_file(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        for case, existing in enumerate((None, 0o644)):
            path = Path(tmp) / f"case-{case}" / "report.lock"
            path.parent.mkdir()
            if existing is not None:
                path.write_text("")
                path.chmod(existing)
            answer = ns.harness(HARNESS + "attempt_once", str(path))
            if answer != "acquired" or not path.exists():
                continue  # not taken, or not kept: the lock's own checks judge that
            mode = path.stat().st_mode & 0o7777
            where = (
                _("created by the run")
                if existing is None
                else _("found with mode {mode}").format(mode=oct(existing))
            )
            expect(
                mode & _OWNER_RW == _OWNER_RW,
                _(
                    "the lock file ({where}) readable and writable by its owner once the run "
                    "ended, so that the next run can open it"
                ).format(where=where),
                _("mode {mode}: its owner may not {what} it").format(
                    mode=oct(mode), what=_what_the_owner_may_not(mode)
                ),
                _(
                    "write os.open's mode in octal (0o644, not 644, which is 0o1204) or open "
                    "with 'a+', and change no mode: root opens anything, but a job that runs "
                    "as a user gets PermissionError at every later run"
                ),
            )


@CHECKS.add(
    1,
    "leave the process as you found it: no os.chdir to the lock's folder (and no "
    "os.umask, no signal handler) that stays after you took or were refused the lock; the "
    "job in the with block, and all the process runs after it, read relative paths from "
    "that folder, create files with that umask and end as that handler says",
    timeout=20.0,
)
def the_process_is_left_as_it_was(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "process_state_around_a_run", str(path))
    expect("error" not in run, _("the with block to run and end"), run.get("error", ""))
    before = run["before"]
    for moment, when in (
        ("inside", _("inside the with block")),
        ("after_refusal", _("after a refused attempt")),
        ("after", _("after the with block")),
        ("after_error", _("after a with block that raised")),
    ):
        state = run.get(moment, before)
        expect(
            state["cwd"] == before["cwd"],
            _("the process still in its folder {where}, {cwd}").format(
                where=when, cwd=repr(before["cwd"])
            ),
            _("it was moved to {cwd}").format(cwd=repr(state["cwd"])),
            _(
                "open the path as given (a relative one is relative to the caller's folder "
                "already); an os.chdir changes the folder of the whole process, for good"
            ),
        )
        expect(
            state["umask"] == before["umask"],
            _("the process's umask still {mask} {where}").format(
                mask=oct(before["umask"]), where=when
            ),
            _("it was set to {mask}").format(mask=oct(state["umask"])),
            _(
                "give os.open a mode (0o644) instead of changing the umask: os.umask "
                "changes it for the whole process, and every file the job creates after"
            ),
        )
    # What the process does when it is stopped is its own: a handler the lock set for the
    # block (a SIGTERM that raises SystemExit, so the finally runs) is put back as it was
    # when the block ends, by an error too. Left behind, it replaces the program's own
    # (its graceful stop) for good, and ends the process with the status it chose.
    for moment, when in (
        ("after", _("after the with block")),
        ("after_error", _("after a with block that raised")),
    ):
        state = run.get(moment, before)
        for name, handler in before["signals"].items():
            now = state["signals"][name]
            expect(
                state["signal_ids"][name] == before["signal_ids"][name],
                _("the process's {signal} handler still {handler} {where}").format(
                    signal=name, handler=handler, where=when
                ),
                _("it was replaced by {handler}").format(handler=now),
                _(
                    "put back the handler you replaced (old = signal.signal(...) before the "
                    "yield, signal.signal(signum, old) in the finally), or set none: the "
                    "kernel releases the lock of a process that a signal ends"
                ),
            )
    # A mask or an alarm set for the block (Ctrl-C held back while the pid is written, a
    # watchdog alarm for a hung job) is the process's too: undone after the yield only, a
    # job that raises leaves the process deaf to SIGTERM, or killed by SIGALRM an hour on.
    for moment, when in (
        ("after", _("after the with block")),
        ("after_error", _("after a with block that raised")),
    ):
        state = run.get(moment, before)
        expect(
            state.get("blocked") == before.get("blocked"),
            _("the process's blocked signals still {blocked} {where}").format(
                blocked=before.get("blocked") or _("none"), where=when
            ),
            _("it blocks {blocked}").format(blocked=", ".join(state.get("blocked") or [])),
            _(
                "unblock in the finally what you blocked (old = signal.pthread_sigmask(...) "
                "before, signal.pthread_sigmask(signal.SIG_SETMASK, old) in the finally): a "
                "blocked SIGTERM never stops the process again"
            ),
        )
        expect(
            state.get("alarm") == before.get("alarm"),
            _("no alarm left set {where}").format(where=when),
            _("an alarm is still set: SIGALRM will end the process later"),
            _(
                "cancel an alarm you set (signal.alarm(0)) in the finally, so that a job that "
                "raises cancels it too"
            ),
        )
