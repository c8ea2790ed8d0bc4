"""Hostile submissions graded by ``labkit grade`` for real: none of them can move a score.

One class, exercise ex01, graded once (``--jobs 2``). ``ana`` hands in the reference
solution; every other student hands in a notebook with an attack appended as a last
cell: on top of the untouched exercise when the attack tries to forge a score (its
honest part earns 0), on top of the reference when it tries to hurt others (its honest
part earns what ``ana`` earns). Each test checks the score, the reason in the feedback,
that other students' files and the instructor's files hash the same before and after,
and that nothing rewrites the gradebook after the grader has exited.

The attacks that need the grader to run as another user than the student's code (kill
the grader, write the instructor's files) are left out of the class, and their tests
skipped with the reason, on a machine that has neither root nor bubblewrap: run there,
they would do what they attempt. As root without a working confinement ``labkit grade``
refuses to start (tested here) and the module's class is not graded at all: the killer
would kill every process on the machine. CI runs as root with bubblewrap installed
(``.ci/run``).
"""

from __future__ import annotations

import csv
import hashlib
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from gradingkit import EXERCISES, ROOT, SEED, SOLUTIONS, notebook_for

from labkit.grading.isolation.confine import Confinement

pytestmark = pytest.mark.slow

CONFINEMENT = Confinement.detect()
ISOLATED = pytest.mark.skipif(
    not CONFINEMENT.isolated,
    reason="needs root (own uid per student) or bubblewrap: " + CONFINEMENT.describe(),
)
#: Attacks that only a confinement stops: graded only where there is one.
NEEDS_ISOLATION = {"reader", "vandal", "killer", "ghost", "forker", "filler", "tmpfiller", "crowd"}
REFUSED = CONFINEMENT.refusal()
#: Exercise 1's public checks and harness: the vandal tries to rewrite and add to them.
CHECKS_DIR = ROOT / "labkit" / "grading" / "exercises" / "ex01"
DELAY = 3  # seconds the detached process waits before it rewrites the gradebook


def _attacks(class_root: Path) -> dict[str, tuple[str, str]]:
    """student -> (base notebook: "stub" or "reference", the attacking cell)."""
    out = class_root / "out" / "run"
    hidden = class_root / "solutions" / "hidden" / "ex01.py"
    other = class_root / "submissions" / "ana" / "ex01_keys.ipynb"
    return {
        # forged score: replace the machinery that scores, in the student's own process
        "forger": (
            "stub",
            """
            import labkit.grading.checks as core
            from labkit.grading.checks import Outcome
            def passed(check, ns, timeout=None):
                return Outcome(check.name, check.points, check.points, "passed")
            core.run_check = passed
            core.run_checks = lambda checks, *a, **k: [passed(c, None) for c in checks]
            core.score = lambda outcomes: (14, 14)
            """,
        ),
        # forged output line and frame walking for a nonce or a verdict to overwrite
        "printer": (
            "stub",
            """
            import gc, json, sys
            for frame in sys._current_frames().values():
                while frame is not None:
                    for name, value in list(frame.f_locals.items()):
                        if isinstance(value, str) and len(value) == 32:
                            print(value + json.dumps({"outcomes": [], "notes": []}))
                    frame = frame.f_back
            for obj in gc.get_objects():
                if isinstance(obj, dict) and "nonce" in obj:
                    print(obj["nonce"] + '{"outcomes": []}')
            print("score: 14/14")
            print('{"value": true}')
            """,
        ),
        # read the instructor's solutions and hidden checks
        "reader": (
            "reference",
            f"""
            found = []
            for path in [{str(SOLUTIONS / "hidden" / "ex01.py")!r}, {str(hidden)!r},
                         {str(notebook_for(SOLUTIONS, "ex01"))!r}]:
                try:
                    open(path).read()
                    found.append(path)
                except OSError:
                    pass
            if found:
                raise RuntimeError("READ-SOLUTIONS " + " ".join(found))
            raise FileNotFoundError("solutions are not reachable")
            """,
        ),
        # write another student's notebook, the instructor's hidden checks, labkit's checks
        "vandal": (
            "reference",
            f"""
            import glob, os
            done = []
            targets = [{str(other)!r}, {str(hidden)!r}, {str(CHECKS_DIR / "checks.py")!r}]
            targets += glob.glob("/tmp/labkit-grade-*/student/work/*.ipynb")
            for path in targets:
                if path.startswith(os.getcwd()):
                    continue
                try:
                    with open(path, "a") as fh:
                        fh.write("\\n# vandalised\\n")
                    done.append(path)
                except OSError:
                    pass
            for path in [{str(CHECKS_DIR / "ex99.py")!r}]:
                try:
                    open(path, "w").write("CHECKS = None\\n")
                    done.append(path)
                except OSError:
                    pass
            if done:
                raise RuntimeError("WROTE " + " ".join(done))
            raise PermissionError("nothing outside my folder is writable")
            """,
        ),
        # kill the grader
        "killer": (
            "reference",
            """
            import os, signal
            for target in (os.getppid(), 1):
                for kill in (os.kill, os.killpg):
                    try:
                        kill(target, signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
            raise PermissionError("KILL-ATTEMPTED and the grader is still there")
            """,
        ),
        # a detached process that outlives grading and rewrites the gradebook later
        "ghost": (
            "reference",
            f"""
            import os, sys
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv(sys.executable, [sys.executable, "-c", {_ghost(class_root, out)!r}])
                os._exit(0)
            raise RuntimeError("GHOST-STARTED")
            """,
        ),
        # a gigabyte of output
        "shouter": (
            "reference",
            """
            import sys
            line = "x" * (1 << 20)
            for _ in range(1024):
                sys.stdout.write(line)
            """,
        ),
        # two gigabytes of memory
        "hog": ("reference", "hog = bytearray(2 << 30)"),
        # fill the disk: files in its own folder until the disk limit, then tidy up
        "filler": (
            "reference",
            """
            import os
            made = []
            try:
                for i in range(40):  # 2.4 GB, past the 512 MiB a notebook may write
                    made.append(f"fill-{i}.bin")
                    with open(made[-1], "wb") as fh:
                        fh.write(b"x" * (60 << 20))
            finally:
                for name in made:
                    if os.path.exists(name):
                        os.remove(name)
            """,
        ),
        # fill the RAM-backed /tmp past the notebook's memory
        "tmpfiller": (
            "reference",
            """
            import os
            for i in range(50):  # 3 GB, in files under the 64 MiB a file may have
                with open(f"/tmp/fill-{i}.bin", "wb") as fh:
                    fh.write(b"x" * (60 << 20))
            """,
        ),
        # three processes of 900 MiB: each under the per-process limit, 2.7 GB together
        "crowd": (
            "reference",
            """
            import subprocess, sys
            hog = "import time; b = b'x' * (900 << 20); time.sleep(20)"
            crowd = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
            codes = [p.wait() for p in crowd]
            """,
        ),
        # many processes
        "forker": (
            "reference",
            """
            import os, time
            for _ in range(2000):
                if os.fork() == 0:
                    time.sleep(120)
                    os._exit(0)
            """,
        ),
    }


def _ghost(class_root: Path, out: Path) -> str:
    """The detached process: waits for the gradebook, then rewrites it."""
    return textwrap.dedent(
        f"""
        import os, time
        for _ in range(3000):  # until the grader has written the gradebook
            time.sleep(0.1)
            if os.path.exists(os.path.join({str(out)!r}, "totals.csv")):
                break
        time.sleep(1)
        for name in ("grades.csv", "totals.csv"):
            try:
                with open(os.path.join({str(out)!r}, name), "w") as fh:
                    fh.write("student,exercise,score,max\\nghost,ex01,999,14\\n")
            except OSError:
                pass
        # {_ghost_marker(class_root)}
        """
    )


def _ghost_marker(class_root: Path) -> str:
    """A word in the ghost's command line, unique to this test run."""
    return "labkit-ghost-" + class_root.name


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def _tree_hashes(*roots: Path) -> dict[str, str]:
    return {
        str(p): _sha(p)
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _class_folder(root: Path) -> tuple[Path, Path]:
    """A class with the hidden checks and one exercise: (solutions, submissions)."""
    shutil.copytree(SOLUTIONS / "hidden", root / "solutions" / "hidden")
    shutil.copyfile(notebook_for(SOLUTIONS, "ex01"), root / "solutions" / "ex01_keys.ipynb")
    return root / "solutions", root / "submissions"


def test_grading_as_root_without_confinement_is_refused(tmp_path: Path) -> None:
    solutions, subs = _class_folder(tmp_path)
    (subs / "ana").mkdir(parents=True)
    shutil.copyfile(notebook_for(SOLUTIONS, "ex01"), subs / "ana" / "ex01_keys.ipynb")
    # The confinement a root grader gets when bubblewrap is missing and the uid drop fails.
    code = f"""
import os, sys
import labkit.grading.isolation.confine as confine
os.geteuid = lambda: 0
bare = confine.Confinement(confine.Limits(), None, False, False, "own uid failed a trial run; ")
confine.Confinement.detect = classmethod(lambda cls, *a, **k: bare)
from labkit.cli import main
sys.exit(main(["grade", {str(subs)!r}, "--out", {str(tmp_path / "out")!r},
               "--solutions", {str(solutions)!r}, "--exercise", "ex01"]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to run student code as root with no confinement" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr
    assert "own uid failed a trial run" in done.stderr  # says what was tried
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("grades.csv"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    if REFUSED:
        pytest.skip("labkit grade refuses this machine (install bubblewrap): " + REFUSED)
    root = tmp_path_factory.mktemp("hostile")
    _, subs = _class_folder(root)
    reference, stub = notebook_for(SOLUTIONS, "ex01"), notebook_for(EXERCISES, "ex01")
    (subs / "ana").mkdir(parents=True)
    shutil.copyfile(reference, subs / "ana" / reference.name)
    attacks = _attacks(root)
    if not CONFINEMENT.isolated:  # these would succeed here: leave them out, skip their tests
        attacks = {k: v for k, v in attacks.items() if k not in NEEDS_ISOLATION}
    for student, (base, cell) in attacks.items():
        nb = nbformat.read(reference if base == "reference" else stub, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(cell).strip()))
        (subs / student).mkdir()
        nbformat.write(nb, subs / student / "ex01_keys.ipynb")
    instructor = [root / "solutions", CHECKS_DIR]
    before = _tree_hashes(*instructor) | {str(subs / "ana" / reference.name): _sha(reference)}
    labkit = Path(sys.executable).parent / "labkit"
    argv = [str(labkit), "grade", str(subs), "--out", str(root / "out"), "--run-id", "run"]
    argv += ["--seed", str(SEED)]
    argv += ["--solutions", str(root / "solutions"), "--exercise", "ex01", "--jobs", "2"]
    argv += ["--cell-timeout", "20"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=root)
    run = root / "out" / "run"
    grades_after = _sha(run / "grades.csv")
    time.sleep(DELAY + 3)  # the ghost would have written by now
    rows = list(csv.DictReader((run / "grades.csv").open()))
    return {
        "done": done,
        "rows": {r["student"]: r for r in rows},
        "run": run,
        "students": set(attacks) | {"ana"},
        "before": before,
        "after": _tree_hashes(*instructor) | {str(subs / "ana" / reference.name): _sha(reference)},
        "grades_kept": grades_after == _sha(run / "grades.csv"),
        "checks_dir_names": sorted(p.name for p in CHECKS_DIR.iterdir()),
        "left_running": _running_with(_ghost_marker(root)),
    }


def _feedback(graded, student: str) -> str:  # type: ignore[no-untyped-def]
    text: str = (graded["run"] / "feedback" / f"{student}.md").read_text()
    return text


def _score(graded, student: str) -> int:  # type: ignore[no-untyped-def]
    return int(graded["rows"][student]["score"])


def test_the_batch_finishes_with_a_row_for_every_student(graded) -> None:  # type: ignore[no-untyped-def]
    assert graded["done"].returncode == 0, graded["done"].stderr[-2000:]
    assert set(graded["rows"]) == graded["students"]
    assert _score(graded, "ana") > 0


def test_a_monkeypatched_scorer_in_the_student_process_scores_nothing(graded) -> None:  # type: ignore[no-untyped-def]
    assert _score(graded, "forger") == 0
    assert graded["rows"]["forger"]["status"] == "not started"


def test_printed_answer_lines_and_frame_walking_score_nothing(graded) -> None:  # type: ignore[no-untyped-def]
    assert _score(graded, "printer") == 0
    assert graded["rows"]["printer"]["status"] == "not started"


@ISOLATED
def test_solutions_and_hidden_checks_cannot_be_read(graded) -> None:  # type: ignore[no-untyped-def]
    text = _feedback(graded, "reader")
    assert "READ-SOLUTIONS" not in text
    assert "solutions are not reachable" in text  # the attack ran, and found nothing
    assert _score(graded, "reader") == _score(graded, "ana")


@ISOLATED
def test_other_students_and_the_instructors_files_cannot_be_written(graded) -> None:  # type: ignore[no-untyped-def]
    text = _feedback(graded, "vandal")
    assert "nothing outside my folder is writable" in text  # the attack ran
    assert "WROTE" not in text
    assert graded["after"] == graded["before"]
    assert "ex99.py" not in graded["checks_dir_names"]
    assert _score(graded, "vandal") == _score(graded, "ana")


@ISOLATED
def test_killing_the_grader_fails_and_the_batch_goes_on(graded) -> None:  # type: ignore[no-untyped-def]
    assert graded["done"].returncode == 0
    assert "KILL-ATTEMPTED" in _feedback(graded, "killer")  # the attack ran, and failed
    assert _score(graded, "killer") == _score(graded, "ana")


@ISOLATED
def test_a_detached_process_dies_with_the_grading_and_the_gradebook_stays(graded) -> None:  # type: ignore[no-untyped-def]
    assert "GHOST-STARTED" in _feedback(graded, "ghost")  # the double fork happened
    assert graded["grades_kept"]
    assert "ghost,ex01,999" not in (graded["run"] / "grades.csv").read_text()
    assert _score(graded, "ghost") == _score(graded, "ana")
    assert graded["left_running"] == []


def test_a_gigabyte_of_output_is_cut_and_reported(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["shouter"]
    assert row["status"] == "limit hit"
    assert "limit hit: printed more than 4 MiB" in row["note"]
    assert _score(graded, "shouter") == _score(graded, "ana")


def test_two_gigabytes_of_memory_are_refused_and_reported(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["hog"]
    assert row["status"] == "limit hit"
    assert "limit hit: used more than 1 GiB of memory" in row["note"]
    assert _score(graded, "hog") == _score(graded, "ana")


@ISOLATED
def test_filling_the_disk_is_stopped_at_the_notebooks_share_and_reported(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["filler"]
    assert row["status"] == "limit hit", row
    assert "limit hit: wrote more than 512 MiB of files in its folder" in row["note"]
    assert _score(graded, "filler") == _score(graded, "ana")


@ISOLATED
def test_filling_tmp_counts_in_the_notebooks_memory(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["tmpfiller"]
    assert row["status"] == "limit hit", row
    assert "limit hit: used more than 2 GiB of memory together" in row["note"]
    assert _score(graded, "tmpfiller") <= _score(graded, "ana")


@ISOLATED
def test_many_large_processes_are_limited_together(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["crowd"]
    assert row["status"] == "limit hit", row
    assert "limit hit: used more than 2 GiB of memory together" in row["note"]
    assert _score(graded, "crowd") == _score(graded, "ana")


@ISOLATED
def test_forking_many_processes_is_stopped_and_reported(graded) -> None:  # type: ignore[no-untyped-def]
    row = graded["rows"]["forker"]
    assert row["status"] == "limit hit"
    assert "limit hit: started more than 128 processes" in row["note"]
    assert _score(graded, "forker") == _score(graded, "ana")
