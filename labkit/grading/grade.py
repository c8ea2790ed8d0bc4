"""``labkit grade SUBMISSIONS``: grade a class with one command, student code kept apart.

SUBMISSIONS holds one folder per student with their ``exNN_*.ipynb`` files. For each
notebook the grader

1. copies it alone into a fresh folder owned by the grading process's own student uid;
2. starts a confined student process there (``confine``: own uid as root, bubblewrap on
   Linux, limits on memory, processes, files, CPU and output) that runs the code cells
   (check lines removed) and reports cells that broke or hung (``sandbox``);
3. runs the public **and** hidden checks from the instructor's labkit and
   ``solutions/hidden/`` here, in the trusted process, each through a fresh fork of the
   student's process and a data-only channel (``remote``). A hung check kills the student
   process, which is started again for the next check (``lanes``: this step, in one
   process or, for exercises that declare lanes, several at once).

A notebook that is missing, unreadable, broken, hanging or hostile scores what its
honest part earned, with the reason, and never stops the batch. A whole class is graded
as jobs on the lab's own job store by ``labkit.classroom`` (its ``grade_folder`` writes
``OUT/RUN_ID/``: ``grades.csv``, ``totals.csv``, ``outcomes.json``, ``feedback/`` and
``index.html``), calling ``grade_notebook`` once per notebook: this module knows
notebooks and checks, never jobs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

from labkit.clock import Clock
from labkit.grading import catalog
from labkit.grading.course import hidden_of
from labkit.grading.gradebook import Graded, NotebookStatus
from labkit.grading.isolation import disk
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.services import REDIS_SOCKET, SOCKET_PATH_MAX
from labkit.grading.lanes import Settings, check_timeout_for, not_graded, run_notebook
from labkit.grading.release import exercise_of
from labkit.grading.seeds import use_grading_seed
from labkit.lang import _

#: Re-exported: the grading settings and their timeout rule live with the runner.
__all__ = ["Settings", "check_timeout_for", "grade_notebook"]

#: A submitted file for exercise NN: ``ex03_claim.ipynb``, ``ex03_claim (1).ipynb``,
#: ``ex03_claim-final.ipynb``, ``ex03 copy.ipynb``...
SUBMITTED_NAME = re.compile(r"^(ex\d\d)(?:[ _\-.(].*)?\.ipynb$", re.IGNORECASE)


#: Student code runs in one of these per run (chosen by the seed), west and east of UTC
#: and with odd offsets: a time read from the machine's zone (a naive ``.timestamp()``,
#: ``datetime.now()``) shows up where ``check()`` on a UTC laptop hid it.
TIME_ZONES = (
    "America/Sao_Paulo",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "Pacific/Auckland",
    "Pacific/Kiritimati",
)


def seeded_environment(seed: int) -> dict[str, str]:
    """What a run's seed fixes beside its inputs: the time zone student code runs in, and
    the str-hash salt of the check processes (Hypothesis walks alphabets in hash order)."""
    return {"TZ": random.Random(seed).choice(TIME_ZONES), "PYTHONHASHSEED": str(seed % 2**32)}


_warmed: list[bool] = []


def warm_up() -> None:
    """Build the checks' one-time caches before any check's timeout starts (once per process).

    Hypothesis computes its Unicode tables the first time a text strategy draws (seconds
    on a loaded machine: longer than a check's timeout) and caches them under its home
    folder, by default ``.hypothesis`` in the working directory. Grading keeps that cache
    in the system's temporary folder, so it is computed once per machine, and draws one
    string here, so no check pays for it.
    """
    if _warmed:
        return
    _warmed.append(True)
    from hypothesis import configuration, find, settings
    from hypothesis import strategies as st

    home = Path(tempfile.gettempdir()) / "labkit-hypothesis"  # where the checks keep it too
    configuration.set_hypothesis_home_dir(home)
    find(st.text(min_size=1), lambda _: True, settings=settings(database=None, max_examples=5))


def grade_notebook(
    student: str,
    exercise: str,
    notebook: Path | None,
    settings: Settings,
) -> Graded:
    """Grade one notebook (or its absence); never raises for anything the student did."""
    warm_up()
    use_grading_seed(settings.seed)
    hidden_dir = hidden_of(settings.solutions.resolve())
    checks = catalog.all_checks(exercise, hidden_dir)
    public = catalog.public(exercise)
    result = Graded(student, exercise, public.title, sum(c.points for c in checks))
    if public.network and not settings.confinement.network:
        # Services on 127.0.0.1, or a server the check calls: share the network.
        settings = dataclasses.replace(
            settings, confinement=dataclasses.replace(settings.confinement, network=True)
        )

    def zero(status: NotebookStatus, reason: str) -> Graded:
        result.notes.append(reason)
        result.outcomes = not_graded(checks)
        result.status = status
        return result

    if notebook is None:
        return zero(
            NotebookStatus.MISSING,
            _("no notebook for {exercise}: expected a file named {exercise}_*.ipynb").format(
                exercise=exercise
            ),
        )
    result.notebook = notebook.name
    try:
        cells = code_cells(notebook)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the student's to fix
        return zero(
            NotebookStatus.CRASHED,
            _("{name} is not a readable notebook ({error}); save it again from Jupyter").format(
                name=notebook.name, error=f"{type(exc).__name__}: {str(exc)[:120]}"
            ),
        )
    # A folder per lane (``Checks.lanes``): each lane's copy of the process has its own.
    bases: list[Path] = []
    try:
        for _lane in range(max(1, min(public.lanes, len(checks)))):
            bases.append(_scratch_base())
        workdirs = [
            _fresh_folder(base, notebook, dataclasses.replace(settings.confinement, lane=n))
            for n, base in enumerate(bases)
        ]
        run_notebook(result, checks, cells, workdirs, settings)
    finally:
        for base in bases:
            disk.unmount(base / "student" / "work")
            shutil.rmtree(base, ignore_errors=True)
    return result


def _scratch_base() -> Path:
    """A notebook's scratch folder, ``labkit-grade-<pid>-*``, with its owner's pid file."""
    # The owner is in the folder's name from the moment it exists: a grader killed
    # between making the folder and writing its pid file left a folder naming nobody,
    # which no later grader cleaned (seen once in a test that kills a grader halfway).
    base = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=scratch_root()))
    (base / SCRATCH_OWNER).write_text(str(os.getpid()))
    return base


#: A notebook's scratch folder (``TMPDIR/labkit-grade-*``) and the file in it naming the
#: grading process that uses it, so a later grader can clean up after one that was killed.
SCRATCH_PREFIX = "labkit-grade-"
SCRATCH_OWNER = "grader.pid"


#: The deepest unix socket a check makes in a student's folder, below the scratch root
#: (a pid of up to 7 digits, the highest pid_max Linux allows, in the folder's name).
_DEEPEST_SOCKET = len(f"/{SCRATCH_PREFIX}4194304-xxxxxxxx/student/work/{REDIS_SOCKET}")


def scratch_root(configured: Path | None = None) -> Path:
    """Where notebooks' scratch folders go: the temporary folder (``TMPDIR``, or
    ``configured``), unless its path is so long that a socket in a student's folder would
    not fit in a unix socket address; then ``/tmp``. (A private Redis whose socket path is
    too long cannot bind: every check of exercise 9 would fail for a reason that is not
    the student's.)"""
    configured = Path(configured or tempfile.gettempdir())
    if len(os.fsencode(configured)) + _DEEPEST_SOCKET <= SOCKET_PATH_MAX:
        return configured
    return Path("/tmp")


def sweep_abandoned(folder: Path | None = None) -> int:
    """Clean up the scratch folders of grading processes that died (a SIGKILL runs no
    ``finally``): unmount each one's tmpfs and remove it. The owner is in the folder's
    name (``labkit-grade-<pid>-...``), or in its pid file for a folder made before the
    name held it. Folders of live processes, and ones that name no process, are left
    alone. How many were cleaned."""
    cleaned = 0
    for base in Path(folder or scratch_root()).glob(f"{SCRATCH_PREFIX}*"):
        named = re.fullmatch(rf"{SCRATCH_PREFIX}(\d+)-\w+", base.name)
        try:
            pid = int(named[1]) if named else int((base / SCRATCH_OWNER).read_text())
        except (OSError, ValueError):
            continue
        if pid == os.getpid() or process_alive(pid):
            continue
        disk.unmount(base / "student" / "work")
        shutil.rmtree(base, ignore_errors=True)
        cleaned += 1
    return cleaned


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (this user may not signal it: still true).

    A zombie is dead: it has closed its files and will run nothing more, but stays until
    its parent reaps it, and a killed grader's orphans may wait long for that.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc to ask: it exists
    return state != "Z"


def code_cells(path: Path) -> list[tuple[int, str]]:
    """The code cells of a notebook file, as (cell index, source).

    A version 4 notebook (what Jupyter has saved since 2015) is read as the JSON it is;
    only an older one goes through nbformat, whose import (two seconds, for its JSON
    schema checks) every grading process would otherwise pay.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("nbformat") != 4:
        import nbformat

        nb = nbformat.reads(json.dumps(data), as_version=4)  # type: ignore[no-untyped-call]
        return [(i, str(c.source)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise ValueError("its 'cells' is not a list")
    found = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ValueError(f"cell {i} is not an object")
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(line, str) for line in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise ValueError(f"cell {i}'s source is not text")
            found.append((i, source))
    return found


def _fresh_folder(base: Path, notebook: Path, confinement: Confinement) -> Path:
    """``base/student/work``: only the student's notebook, owned by the student's uid."""
    os.chmod(base, 0o711)  # the student's uid may pass through, not list
    own = base / "student"
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir(mode=0o711)
    workdir = own / "work"
    workdir.mkdir(mode=0o700)
    disk.mount(workdir, confinement.limits.disk)  # as root: a folder of capped size
    shutil.copyfile(notebook, workdir / notebook.name)
    confinement.hand_over(workdir)
    return workdir


def exercise_of_submission(path: Path) -> str | None:
    """The exercise a submitted file is for, accepting copy and suffix markers."""
    match = SUBMITTED_NAME.match(path.name)
    return match.group(1).lower() if match else None


def find_notebooks(folder: Path, exercises: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """Map each exercise to the student's notebook for it; a note per exercise with several.

    The release's own name wins (``ex03_claim.ipynb``); else the newest of the renamed
    copies (``ex03_claim (1).ipynb``, ``ex03_claim-final.ipynb``).
    """
    by_exercise: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        exercise = exercise_of_submission(path)
        if exercise in exercises:
            by_exercise.setdefault(exercise, []).append(path)
    found: dict[str, Path] = {}
    notes: dict[str, str] = {}
    for exercise, paths in by_exercise.items():
        paths.sort(key=lambda p: (exercise_of(p) is None, -p.stat().st_mtime, p.name))
        found[exercise] = paths[0]
        if len(paths) > 1:
            ignored = ", ".join(p.name for p in paths[1:])
            notes[exercise] = f"graded {paths[0].name} and ignored {ignored}"
    return found, notes


def run_id(clock: Clock) -> str:
    """A folder name for one grading run, from the clock (UTC, to the second)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock.now()))
