"""A program a check starts warm (forked from the notebook's zygote) is the program it
would have started plainly: same folder, environment, descriptors, hash salt and time
zone, its own return code, and killed with everything it started.

Real confined student processes and real zygotes (``labkit.grading.isolation.warm``);
they need root and control groups, as ``labkit grade`` does (CI has both).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradingkit import HIDING, alive, confined_student, hidden_grandchild, in_a_check, wait_for

from labkit.grading.checks import Namespace
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.limits import Limits
from labkit.grading.isolation.warm import WarmProcess

CONFINED = Confinement.detect(Limits(cpu_seconds=60, memory_total=512 << 20))
pytestmark = pytest.mark.skipif(
    CONFINED.groups is None, reason="needs root and control groups (cgroup v1 or v2)"
)

#: A module the zygote imports and a plain interpreter does not: seeing it already loaded
#: is the proof that a program was forked warm.
PRELOADED = "decimal"

#: Prints what the program was given, as JSON, to stdout.
SHOW = f"""
import json, os, signal, sys, time
warm = {PRELOADED!r} in sys.modules
# How the program starts out handling signals: a new interpreter ignores SIGPIPE (a
# write to a closed socket raises, instead of killing it) and raises KeyboardInterrupt.
handlers = {{name: str(signal.getsignal(getattr(signal, name)))
            for name in ("SIGPIPE", "SIGINT", "SIGTERM", "SIGCHLD")}}
extra = os.fdopen(int(os.environ["EXTRA_FD"]), "w")
extra.write("through the extra descriptor")
extra.close()
print(json.dumps({{
    "warm": warm, "argv": sys.argv[1:], "cwd": os.getcwd(), "mine": os.environ.get("MINE"),
    "hash": hash("salted"), "zone": time.strftime("%z", time.localtime(0)),
    "main": __name__, "path0": sys.path[0], "signals": handlers,
}}))
sys.exit(int(os.environ.get("CODE", "0")))
"""



@pytest.fixture
def student(tmp_path: Path) -> Iterator[StudentProcess]:
    with confined_student(tmp_path, CONFINED) as proc:
        (proc.workdir / "show.py").write_text(SHOW)
        (proc.workdir / "hiding.py").write_text(HIDING)
        (proc.workdir / "suicide.py").write_text(
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
        )
        (proc.workdir / "parricide.py").write_text(
            "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
        )
        yield proc


def _run_show(
    ns: Namespace, warm: tuple[str, ...], env: dict[str, str]
) -> tuple[dict[str, object], str, object]:
    log = Path(ns.workdir) / f"show-{len(env)}-{bool(warm)}.log"
    extra_r, extra_w = os.pipe()
    with log.open("wb") as out:
        proc = ns.spawn(
            [sys.executable, "-m", "show", "one", "two"],
            warm=warm,
            env={**os.environ, **env, "EXTRA_FD": str(extra_w)},
            pass_fds=(extra_w,),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    os.close(extra_w)
    through = os.read(extra_r, 100).decode()
    os.close(extra_r)
    code = proc.wait(30)
    shown = json.loads(log.read_text().strip().splitlines()[-1])
    return {**shown, "code": code}, through, proc


def test_a_warm_start_is_forked_and_gets_what_a_plain_start_gets(student: StudentProcess) -> None:
    env = {"MINE": "given", "PYTHONHASHSEED": "1234", "TZ": "Asia/Kolkata", "CODE": "3"}

    def body(ns: Namespace) -> tuple[object, ...]:
        warm, through, proc = _run_show(ns, (PRELOADED,), env)
        plain, _through, _proc = _run_show(ns, (), env)
        return warm, through, plain, isinstance(proc, WarmProcess)

    warm, through, plain, forked = in_a_check(student, body)  # type: ignore[misc]
    assert forked, "the warm start was not forked from a zygote"
    assert warm["warm"] is True and plain["warm"] is False
    assert through == "through the extra descriptor"
    for key in ("argv", "cwd", "mine", "hash", "zone", "main", "path0", "code", "signals"):
        assert warm[key] == plain[key], (key, warm[key], plain[key])
    assert warm["zone"] == "+0530" and warm["code"] == 3 and warm["main"] == "__main__"


def test_each_hash_salt_gets_its_own_zygote(student: StudentProcess) -> None:
    def body(ns: Namespace) -> list[object]:
        return [
            _run_show(ns, (PRELOADED,), {"PYTHONHASHSEED": seed})[0]["hash"]
            for seed in ("11", "22", "11")
        ]

    first, second, again = in_a_check(student, body)  # type: ignore[misc]
    assert first == again and first != second


def test_a_warm_program_that_kills_itself_reads_as_killed(student: StudentProcess) -> None:
    def body(ns: Namespace) -> tuple[object, object]:
        proc = ns.spawn([sys.executable, "-m", "suicide"], warm=(PRELOADED,))
        return isinstance(proc, WarmProcess), proc.wait(30)

    forked, code = in_a_check(student, body)  # type: ignore[misc]
    assert forked and code == -signal.SIGKILL


def test_a_killed_warm_program_takes_its_hidden_grandchild_with_it(
    student: StudentProcess,
) -> None:
    work = student.workdir

    def body(ns: Namespace) -> int:
        proc = ns.spawn([sys.executable, "-m", "hiding"], warm=(PRELOADED,))
        assert isinstance(proc, WarmProcess)
        assert wait_for(work / "started", 30), "the grandchild never started"
        grandchild = hidden_grandchild(work)
        assert alive(grandchild)
        ns.kill(proc)
        assert proc.poll() == -signal.SIGKILL
        return grandchild

    grandchild = in_a_check(student, body)
    assert isinstance(grandchild, int)
    assert not alive(grandchild)
    assert not wait_for(work / "finished", 6.0), "the killed program's job ran to its end"


def test_a_program_that_kills_its_zygote_costs_only_the_warmth(student: StudentProcess) -> None:
    def body(ns: Namespace) -> list[object]:
        killer = ns.spawn([sys.executable, "-m", "parricide"], warm=(PRELOADED,))
        killer.wait(30)
        after, _through, proc = _run_show(ns, (PRELOADED,), {})
        return [after["warm"], after["code"], isinstance(proc, WarmProcess)]

    warm, code, forked = in_a_check(student, body)  # type: ignore[misc]
    assert code == 0 and warm is True and forked  # a new zygote forked it


def test_nothing_of_a_warm_start_outlives_the_notebook(student: StudentProcess) -> None:
    def body(ns: Namespace) -> int:
        proc = ns.spawn([sys.executable, "-m", "hiding"], warm=(PRELOADED,))
        assert wait_for(student.workdir / "started", 30)
        return proc.pid

    in_a_check(student, body)
    assert student.group is not None
    assert [p for p in student.group.pids()], "the zygote should live as long as the notebook"
    group = student.group
    student.stop()
    assert not group.paths or not any(p.exists() for p in group.paths.values())




def test_a_warm_script_with_pipes_reads_like_a_plain_one(student: StudentProcess) -> None:
    (student.workdir / "talk.py").write_text(
        f"import os, sys\nprint({PRELOADED!r} in sys.modules, sys.argv[1:], sys.path[0])\n"
        "sys.stdout.write('y' * (6 << 20))\nsys.stderr.write('done')\nsys.exit(4)\n"
    )

    def body(ns: Namespace) -> list[object]:
        found = []
        for warm in ((PRELOADED,), ()):
            proc = ns.spawn(
                [sys.executable, "talk.py", "arg"],
                warm=warm,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            out, err = proc.communicate(timeout=30)
            shown = out.splitlines()[0]
            found.append((isinstance(proc, WarmProcess), shown, len(out), err, proc.returncode))
        return found

    (forked, first, size, err, code), plain = in_a_check(student, body)  # type: ignore[misc]
    assert forked and not plain[0]
    assert first.startswith("True") and plain[1].startswith("False")
    assert first[4:] == plain[1][5:]  # the same arguments and the script's folder first
    assert size == plain[2] == CONFINED.limits.output  # capped the same way
    assert (err, code) == (plain[3], plain[4]) == ("done", 4)


def test_a_zygote_that_cannot_start_leaves_plain_starts(student: StudentProcess) -> None:
    def body(ns: Namespace) -> list[object]:
        found = []
        for _ in range(2):
            shown, _through, proc = _run_show(ns, ("no_such_module_anywhere",), {})
            found.append((isinstance(proc, WarmProcess), shown["warm"], shown["code"]))
        return found

    assert in_a_check(student, body) == [(False, False, 0), (False, False, 0)]
    log = (student.workdir / ".labkit-zygote.log").read_text()
    assert log.count("No module named 'no_such_module_anywhere'") == 1  # tried once only
