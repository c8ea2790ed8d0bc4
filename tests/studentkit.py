"""The student kit as a student receives it: built once per run, installed by its own Makefile.

The ``kit`` fixture (tests/conftest.py) is ``labkit release --bundle`` into a temporary
folder, then the kit's own ``make venv`` on a fresh virtual environment: pip takes the
packages from the same wheel cache as the repository's ``.venv``, never from that venv,
so a package the kit forgets to install is missing here exactly as it would be on a
student's machine. xdist workers share one build (a file lock: whoever holds it builds,
the controller's background ``start_building`` or the first worker, and the others wait
and reuse it); a failed build fails every test that needs it with the build's own output.

Also here: ``make_check_runs`` (the kit's ``make check`` on one edition of the lessons); for
the tests that drive a kit's JupyterLab: ``free_port``, what a running
kernel adds to a notebook before JupyterLab saves it, and ``git_status``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from labkit.grading.bundle import bundle
from labkit.integrations.celery.proctree import kill_tree

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
#: The repository's venv: kept off the kit's PATH, so the kit's Makefile finds the
#: machine's Python the way it does on a student's machine.
REPO_BIN = str(ROOT / ".venv" / "bin")


def kit_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a student's terminal would have: no repository venv in it."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != REPO_BIN)
    env.pop("PYTEST_ADDOPTS", None)  # the repository's options are not the kit's
    env.pop("PYTEST_XDIST_WORKER", None)
    env["LABKIT_LANG"] = "en"  # the English edition unless a test asks for the other
    return {**env, **(extra or {})}


def run_in_kit(kit: Path, argv: list[str], timeout: float,
               env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in the kit as a student's terminal would; kill its whole tree after.

    Kernels started by nbval and servers started by a lesson are descendants of the
    command even in sessions of their own, so ``kill_tree`` reaches them too.
    """
    proc = subprocess.Popen(argv, cwd=kit, env=kit_env(env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, _ = proc.communicate()
        out += f"\n[killed after {timeout:.0f}s]"
    finally:
        kill_tree(proc.pid)  # what it left behind, if anything
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


def language_make_picks(kit: Path, env: Mapping[str, str]) -> list[str]:
    """What the kit's Makefile chooses under ``env``: ``[LABKIT_LANG, LESSONS]``, read from
    make itself (``-s --no-print-directory``: as a sub-make of ``make test`` it would
    otherwise print the directories it enters)."""
    probe = "said: ; @echo $(LABKIT_LANG) $(LESSONS)"
    done = run_in_kit(kit, ["make", "-s", "--no-print-directory", "--eval", probe, "said"],
                      timeout=60, env=env)
    assert done.returncode == 0, done.stdout
    return done.stdout.split()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (free once its probe socket closes)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_a_kernel_leaves_it(notebook: dict[str, Any]) -> None:
    """Add to ``notebook`` (nbformat JSON) what JupyterLab adds once a kernel has run it:
    the kernel's ``language_info`` and trusted cells. Saving must drop both."""
    notebook["metadata"]["language_info"] = {
        "name": "python", "version": "3.11.99", "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
    }
    for cell in notebook["cells"]:
        cell["metadata"]["trusted"] = True


@contextlib.contextmanager
def saves_held_off(kit: Path) -> Iterator[None]:
    """Hold the kit's save lock: the test that saves every notebook through the kit's
    JupyterLab holds it while it saves, a test that reads ``git status`` in the kit while
    it reads, so no status is read in the middle of a save. The lock file lives in the
    kit's .git, where git itself never looks."""
    with open(kit / ".git" / "labkit-saves.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def git_status(folder: Path) -> str:
    """``git status --porcelain`` in ``folder``: empty when nothing changed or appeared."""
    return subprocess.run(["git", "status", "--porcelain"], cwd=folder, text=True,
                          capture_output=True, check=True).stdout


def _shared_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent  # one folder for all workers


def kit_python(kit: Path) -> str:
    """The kit's own interpreter, in the .venv its ``make venv`` made."""
    return str(kit / ".venv" / "bin" / "python")


def build_into(shared: Path) -> Path:
    """Bundle the kit into ``shared/student-kit`` and run its ``make venv``, once.

    Whoever holds ``shared/student-kit.lock`` builds; the others wait, then find it
    ready. A failed build leaves ``student-kit.failed`` with its output, and raises.
    """
    out, failed = shared / "student-kit", shared / "student-kit.failed"
    with open(shared / "student-kit.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            raise KitBuildFailed(failed.read_text())
        if not (out / ".venv" / ".installed-lab").exists():
            shutil.rmtree(out, ignore_errors=True)  # a build an interrupted run left
            bundle(ROOT, SOLUTIONS, out)
            done = run_in_kit(out, ["make", "venv"], timeout=600)
            if done.returncode != 0:
                failed.write_text(f"the kit's `make venv` failed:\n{done.stdout[-4000:]}")
                raise KitBuildFailed(failed.read_text())
    return out


class KitBuildFailed(RuntimeError):
    """The kit could not be bundled or installed; the message holds the build's output."""


def build_kit(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The kit for this run (built here unless ``start_building`` already did or does)."""
    try:
        return build_into(_shared_folder(tmp_path_factory, worker_id))
    except KitBuildFailed as exc:
        pytest.fail(str(exc))


def start_building(shared: Path) -> subprocess.Popen[bytes]:
    """Build the kit in the background while the first tests run (the xdist controller)."""
    shared.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, __file__, str(shared)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


#: Grades notebooks with the kit's own labkit; its last line is JSON.
GRADE_IN_KIT = Path(__file__).resolve().parent / "kit" / "grade_in_kit.py"


def grade_in_kit(kit: Path, notebooks: list[Path], folder: Path) -> dict[str, Any]:
    """Grade copies of ``notebooks`` (one folder each, in ``folder``) with the kit's Python.

    What each says: the notes on cells that broke, points earned and possible, and the
    statuses of its public checks, by notebook name.
    """
    copies = []
    for notebook in notebooks:
        (folder / notebook.stem).mkdir()
        copies.append(str(shutil.copy(notebook, folder / notebook.stem / notebook.name)))
    done = run_in_kit(kit, [kit_python(kit), str(GRADE_IN_KIT), *copies], timeout=600)
    assert done.returncode == 0, done.stdout[-4000:]
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(said) == sorted(n.name for n in notebooks), sorted(said)
    return said


def result_of(graded: dict[str, Any], exercise: str) -> tuple[str, dict[str, Any]]:
    """The notebook name and what ``grade_in_kit`` said of ``exercise``'s one notebook."""
    [(name, result)] = [(n, r) for n, r in graded.items() if n.startswith(f"{exercise}_")]
    assert result["notes"] == [], (name, result["notes"])  # every cell ran
    return name, result


if __name__ == "__main__":  # start_building's background process
    try:
        build_into(Path(sys.argv[1]))
    except KitBuildFailed:
        sys.exit(1)  # the failure is in student-kit.failed, for the tests to report


def every_other_lesson(kit: Path, first: int) -> list[str]:
    """The English lessons ``first``, ``first + 2``, ... (half of them, for one worker)."""
    lessons = sorted(p.name for p in (kit / "notebooks").glob("[0-9]*.ipynb"))
    assert len(lessons) >= 17, lessons
    return lessons[first::2]


def make_check_runs(kit: Path, folder: str, lessons: list[str], env: dict[str, str],
                    every: bool = True) -> None:
    """The kit's ``make check`` under ``env`` runs exactly ``lessons`` of ``folder``, all pass,
    and what running them wrote (scratch folders, databases) is all ignored by git. With
    ``every=False``, ``make check-one NB="..."`` runs those ``lessons`` only."""
    if every:
        argv = ["make", "check"]
    else:
        argv = ["make", "check-one", "NB=" + " ".join(Path(name).stem for name in lessons)]
    done = run_in_kit(kit, argv, timeout=900, env=env)
    ran = set(re.findall(rf"^{folder}/(\S+\.ipynb) ", done.stdout, re.MULTILINE))
    assert ran == set(lessons), f"make check ran {sorted(ran)}"
    # Every lesson passed (the kernels listen on Unix sockets of their own, so no other
    # process can take their ports: labkit.notebook.nbval_kernels).
    assert done.returncode == 0, done.stdout[-12000:]
    assert re.search(r"\d+ passed", done.stdout) and " failed" not in done.stdout
    # The kit's JupyterLab test (test_kit_lessons.py) saves every lesson and exercise of
    # both editions through the server meanwhile, on another worker: Jupyter copies each
    # notebook to a ".~name" file beside it, then writes the save into the notebook
    # itself. Read mid-save, the notebook looks changed; so the status is read while that
    # test is not saving (``saves_held_off``), and a ".~name" file left by a save is never
    # something a lesson wrote (nbval saves nothing).
    with saves_held_off(kit):
        status = "".join(line for line in git_status(kit).splitlines(keepends=True)
                         if not Path(line[3:].strip().strip('"')).name.startswith(".~"))
    assert status == "", f"running the lessons left files git would show a student:\n{status}"
