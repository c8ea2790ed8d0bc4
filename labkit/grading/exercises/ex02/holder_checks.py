"""Exercise 2's checks of one holder at a time: a second holder refused and told who
holds the lock, the lock released when the block ends (or raises), a holder killed with
SIGKILL (the check asserts the kill happened), three processes released at the same
instant, a refused attempt followed by a third process, the pidfile's contents."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex02.holders import NEWCOMER
from labkit.grading.exercises.ex02.holding import CHECKS, HARNESS, _holding, lock_path
from labkit.lang import _

#: A folder named as people name them: a '%' and braces, which formatting reads as
#: placeholders when the path is pasted into the text before it is formatted.
ODD_FOLDER = "100% {daily} 'reports'"


#: A pid no process has here (pid_max on a 64-bit Linux): a holder in another container.
FOREIGN_PID = "4194304"


@CHECKS.add(
    2,
    "open the file and fcntl.flock(fd, LOCK_EX | LOCK_NB); on BlockingIOError raise AlreadyRunning",
    timeout=20.0,
    severe=True,
)
def second_holder_is_refused(ns: Namespace) -> None:
    with lock_path(ns) as path:
        held = _holding(ns, path)
        second = held["second"]
        expect(
            second.startswith("refused"), "AlreadyRunning while another holder has the lock", second
        )
        # A refusal that took seconds waited for the lock (a retry loop): said here, at
        # once, instead of waiting out the loop again in the scenes below.
        expect(
            float(held.get("second_s", 0.0)) < 1.5,
            "AlreadyRunning at once (within 1 s) for a second process while the holder runs",
            _("refused after {seconds:.1f} s: the attempt waited for the lock first").format(
                seconds=float(held.get("second_s", 0.0))
            ),
            _(
                "take the lock with LOCK_EX | LOCK_NB and raise AlreadyRunning on "
                "BlockingIOError: an attempt that waits for the lock runs the job again right "
                "after the holder"
            ),
        )
        # Refused at once: an attempt that waits for the lock (a blocking flock, a retry
        # loop) gets it when the holder ends, and runs the same job again right after it.
        run = ns.harness(HARNESS + "refused_while_held_briefly", str(path), 1.0)
    expect(
        run["while_held"] and str(run.get("answer", "")).startswith("refused"),
        "AlreadyRunning at once (within 1 s) for a second process while the holder runs",
        _("it answered {answer} after the holder let go").format(answer=repr(run.get("answer")))
        if not run["while_held"]
        else repr(run.get("answer")),
        _(
            "take the lock with LOCK_EX | LOCK_NB and raise AlreadyRunning on "
            "BlockingIOError: an attempt that waits for the lock runs the job again right "
            "after the holder"
        ),
    )
    # The holder leaves the moment the newcomer's flock found it busy: an attempt that
    # tries again, even once after a short pause, gets the lock and runs right after it.
    # Its file names it, names a pid not to be seen here (a holder in another container),
    # or is still empty (a holder that has not written its pid yet): none is a reason to
    # try the flock again.
    for text, empty in (("", False), (FOREIGN_PID, False), ("", True)):
        with lock_path(ns) as path:
            left = ns.harness(HARNESS + "refused_as_the_holder_leaves", str(path), text, empty)
        expect(
            str(left["answer"]).startswith("refused"),
            "AlreadyRunning for a second process whose flock found the lock busy, though the "
            "holder let go right after (a refused attempt does not try again)",
            repr(left["answer"]),
            _(
                "raise AlreadyRunning on the first BlockingIOError: no second flock after a "
                "pause, no loop"
            ),
        )


@CHECKS.add(
    1,
    "write your pid into the file after you hold the lock, and read it back for "
    "the AlreadyRunning message: 'already running (pid 4242)'",
)
def message_names_the_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = _holding(ns, path)
        expect(
            str(run["pid"]) in run["second"],
            _("a message naming the holder's pid {pid}").format(pid=run["pid"]),
            run["second"],
        )
    # The holder in another process: the pid to name is the one in the file, not the
    # refused process's own (os.getpid() here names the wrong process).
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "refused_while_a_child_holds", str(path), 1)
        said = run["refusals"][0]
        expect(
            str(run["holder"]) in said,
            _(
                "a message naming the holder's pid {pid}, when the holder is another "
                "process (this one is pid {own})"
            ).format(pid=run["holder"], own=run["own"]),
            said,
            _(
                "read the holder's pid from the file (fh.seek(0); fh.read()): os.getpid() "
                "is the refused process, not the holder"
            ),
        )
    # Folders are named as people name them: a message made by formatting a text the
    # path was pasted into (("lock " + path + " held by pid %s") % pid, or .format)
    # breaks on a '%' or a '{' in the path, and the refusal becomes another error.
    with lock_path(ns) as path:
        odd = path.parent / ODD_FOLDER / path.name
        odd.parent.mkdir()
        run = _holding(ns, odd)
        expect(
            run["second"].startswith("refused") and str(run["pid"]) in run["second"],
            _(
                "AlreadyRunning naming the holder's pid {pid}, for a lock file in a folder "
                "named {folder}"
            ).format(pid=run["pid"], folder=repr(ODD_FOLDER)),
            run["second"],
            _(
                "put the path and the pid into the message in one step (one f-string with "
                "both): a text that already holds the path, formatted with % or .format, reads "
                "a '%' or a brace in the path as a placeholder"
            ),
        )


@CHECKS.add(1, "release the lock when the with block ends", severe=True)
def released_after_exit(ns: Namespace) -> None:
    with lock_path(ns) as path:
        after = _holding(ns, path)["after"]
        expect(after == "acquired", "the lock free after the with block", after)


@CHECKS.add(
    1,
    "release in a finally: an exception inside the with block must free the lock",
    severe=True,
)
def released_on_error(ns: Namespace) -> None:
    with lock_path(ns) as path:
        after = _holding(ns, path, raise_inside=True)["after"]
        expect(after == "acquired", "the lock free after an error inside the block", after)


@CHECKS.add(
    3,
    "a lock must not depend on the file existing (a pidfile created with O_EXCL "
    "stays behind after kill -9 and blocks every later run); flock is released "
    "by the kernel when the process dies",
    timeout=20.0,
    severe=True,
)
def survives_holder_kill_9(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "kill_the_holder", str(path))
        expect(
            run["child"] == "held",
            "the child process to take the lock",
            run["child"] or _("no answer"),
        )
        expect(
            run["while_alive"].startswith("refused"),
            "AlreadyRunning while the child holds it",
            run["while_alive"],
        )
        expect(run["killed"], "the child killed by SIGKILL (the fault fired)", _("it was not"))
        expect(
            run["after"] == "acquired",
            "the lock free once its holder was killed with SIGKILL",
            run["after"],
        )


@CHECKS.add(
    3,
    "'does the file exist? then create it' is two steps: two runs started together "
    "both see no file and both run; let the kernel decide in one step "
    "(fcntl.flock with LOCK_NB on the open file)",
    timeout=20.0,
    severe=True,
)
def two_instances_started_together(ns: Namespace) -> None:
    with lock_path(ns) as path:
        got = ns.harness(HARNESS + "start_together", str(path), 3)
        winners = got.count("acquired")
        expect(
            winners == 1 and all(g == "acquired" or g.startswith("refused") for g in got),
            "exactly one of 3 processes started together to hold the lock, the others refused",
            _("{winners} held it at once: {outcomes}").format(winners=winners, outcomes=got),
        )
    # On a folder with no lock file yet, every run finds none: a file made elsewhere and
    # renamed to the path (a temporary file put in place) replaces the one the first run
    # has already locked, and the later run locks the new one.
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "staggered_start", str(path))
    got = run["outcomes"]
    winners = got.count("acquired")
    expect(
        winners == 1 and all(g == "acquired" or g.startswith("refused") for g in got),
        _(
            "exactly one of {n} processes started together on a folder with no lock file yet "
            "to hold the lock, the other refused"
        ).format(n=len(got)),
        _("{winners} held it at once: {outcomes}").format(winners=winners, outcomes=got),
        _(
            "open the path itself in one call that creates it if needed ('a+', or os.open "
            "with O_RDWR | O_CREAT): a file created elsewhere and renamed to the path replaces "
            "the file another run has already locked"
        ),
    )


@CHECKS.add(
    5,
    "a refused attempt must leave the lock alone: never delete (unlink) or replace the "
    "lock file unless you hold the lock, or the next run creates a new file, locks "
    "that one and runs beside the holder",
    timeout=20.0,
    severe=True,
)
def refusal_leaves_the_lock_alone(ns: Namespace) -> None:
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "refused_while_a_child_holds", str(path), 1)
        expect(
            run["child"] == "held",
            "the child process to take the lock",
            run["child"] or _("no answer"),
        )
        expect(
            run["refusals"][0].startswith("refused"),
            "AlreadyRunning while the child holds it",
            run["refusals"][0],
        )
        expect(
            run["second_process"].startswith("refused"),
            "a third process refused too, after a refused attempt (the holder still runs)",
            _("it got {outcome}: the refused attempt let it in").format(
                outcome=repr(run["second_process"])
            ),
        )


#: What a run long gone left in the lock file: longer than any pid, so a pid written
#: over it without truncating (os.write at offset 0) leaves a tail behind.
LEFT_BEHIND = "4194304 (a run killed long ago)\n"


@CHECKS.add(
    2,
    "replace the pid, do not append it nor write it over the old text: truncate the "
    "file once you hold the lock (fh.seek(0); fh.truncate(); fh.write(str(os.getpid()))), "
    "or the file reads '41424343' after a few runs and names nobody",
    timeout=20.0,
)
def pidfile_names_only_the_current_holder(ns: Namespace) -> None:
    with lock_path(ns) as path:
        pids = ns.harness(HARNESS + "holders_in_turn", str(path), 3, LEFT_BEHIND)
        expect(all(p > 0 for p in pids), "3 processes in turn each to take the lock", pids)
        text = path.read_text(errors="replace") if path.exists() else "<no file>"
        # Emptied by the last holder while it still held the lock is fine: nobody holds it.
        expect(
            text.strip() in (str(pids[-1]), ""),
            _(
                "the file to hold only the last holder's pid, {pid} (after pids {pids}, and "
                "{left} left in it by a run long gone)"
            ).format(pid=pids[-1], pids=", ".join(map(str, pids)), left=repr(LEFT_BEHIND)),
            repr(text[:80]),
        )
    # A newcomer takes the lock the moment the holder lets go, and writes its pid.
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "newcomer_as_the_holder_leaves", str(path))
    if run["said"] != "acquired" or not run["newcomer"]:
        return  # the lock was never taken, or never let go: other checks judge that
    expect(
        run["file"].strip() == NEWCOMER,
        _(
            "the file to hold only the newcomer's pid, {text}, after it took the lock the "
            "moment the holder let go (the holder writes nothing once it has let go)"
        ).format(text=repr(NEWCOMER)),
        repr(run["file"][:80]),
        _(
            "touch the file only while you hold the lock: empty it (if you must) before the "
            "with block's file is closed, never after"
        ),
    )
    # What the lock started (a heartbeat that writes the pid every few seconds) must end
    # with the block: a holder that let go writes nothing, hours later neither.
    with lock_path(ns) as path:
        run = ns.harness(HARNESS + "file_after_the_holder_left_while_time_flies", str(path))
    if run["file"] is None:
        return  # the lock was never taken, or never let go: other checks judge that
    expect(
        run["file"].strip() == NEWCOMER,
        _(
            "the file to hold only the newcomer's pid, {text}, hours after it took the lock "
            "the holder had let go (nothing the holder started writes to the file once its "
            "with block ended)"
        ).format(text=repr(NEWCOMER)),
        repr(run["file"][:80]),
        _(
            "stop what writes to the lock file (a heartbeat thread, a timer) before the with "
            "block ends, and wait for it to end: once you let go, the file is the next "
            "holder's"
        ),
    )


@CHECKS.add(
    1,
    "a lock must not hide the job's errors: let every exception raised inside the "
    "with block come out of it as it is (no except around the yield, and no except "
    "OSError that turns the job's own BlockingIOError into AlreadyRunning)",
    severe=True,
)
def error_inside_the_block_comes_out(ns: Namespace) -> None:
    with lock_path(ns) as path:
        got = ns.harness(HARNESS + "error_inside", str(path))
    for name, said in got.items():
        expect(
            said == f"propagated {name}",
            _("the {name} raised inside `with single_instance(path):` to come out of it").format(
                name=name
            ),
            f"{said}" if said != "swallowed" else _("nothing came out: the error was swallowed"),
        )
