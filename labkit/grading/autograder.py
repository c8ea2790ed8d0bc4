"""``labkit autograder --gradescope OUT.zip``: the lab's grader as a Gradescope autograder.

Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/) wants a zip with
``setup.sh`` (run once, as root, when Gradescope builds the image) and
``run_autograder`` (run for every submission, in ``/autograder``, with the student's
files in ``/autograder/submission``; it must write ``/autograder/results/results.json``)
at its root; the rest of the zip is unpacked beside them in ``/autograder/source``.
This zip holds:

- ``setup.sh``: installs Python and bubblewrap with apt, and the lab's wheel into
  ``/opt/labkit``; leaves ``/autograder/source`` readable by root only;
- ``run_autograder``: ``labkit grade`` on the submission laid out as one student's
  folder, then ``labkit export --to gradescope`` into ``results.json`` (both kept as
  files in ``templates/``);
- ``labkit-VERSION-py3-none-any.whl``: the lab built from this checkout
  (``pip wheel --no-deps``), public checks only;
- ``solutions/hidden/exNN.py``: the hidden checks of the graded exercises, which only
  the grading process reads; student code runs confined and sandboxed, where neither
  ``/autograder/source`` nor its files are visible. No solution notebook is shipped.

``LABKIT_AUTOGRADER_ROOT`` (instead of ``/autograder``) and ``LABKIT_COMMAND`` (instead
of the installed ``labkit``) let a test run ``run_autograder`` in a folder laid out like
``/autograder``.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

from labkit.grading import catalog
from labkit.grading.course import Course

TEMPLATES = resources.files("labkit.grading").joinpath("templates")
#: What the wheel is built from: the package and what pyproject.toml reads.
_SOURCES = ("pyproject.toml", "README.md", "labkit")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


class AutograderError(ValueError):
    """The autograder cannot be built as asked."""


def build_wheel(course: Course, folder: Path) -> Path:
    """Build the lab's wheel from a copy of ``course`` (the checkout stays untouched)."""
    with tempfile.TemporaryDirectory(prefix="labkit-wheel-") as tmp:
        source = Path(tmp, "src")
        source.mkdir()
        for name in _SOURCES:
            path = course.root / name
            if path.is_dir():
                shutil.copytree(path, source / name, ignore=_SKIP)
            elif path.is_file():
                shutil.copyfile(path, source / name)
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", ".",
                "--wheel-dir", str(folder)]
        done = subprocess.run(argv, cwd=source, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise AutograderError(
                f"pip wheel could not build labkit ({shlex.join(argv)}):\n"
                + (done.stderr or done.stdout).strip()[-2000:]
            )
    wheels = sorted(folder.glob("labkit-*.whl"))
    if len(wheels) != 1:
        raise AutograderError(f"pip wheel left {len(wheels)} labkit wheels in {folder}")
    return wheels[0]


def _script(name: str, exercises: list[str]) -> str:
    text = TEMPLATES.joinpath(name).read_text(encoding="utf-8")
    return text.replace("@EXERCISES@", " ".join(exercises))


def build_gradescope(out: Path, exercises: list[str] | None = None,
                     course: Course | None = None) -> list[str]:
    """Write the autograder zip to ``out`` for ``exercises`` (default: every one); its names."""
    course = course or Course()
    known = catalog.exercises()
    chosen = list(dict.fromkeys(exercises or known))
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise AutograderError(
            f"unknown exercise(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    out = Path(out)
    if out.suffix != ".zip":
        raise AutograderError(f"{out}: Gradescope takes the autograder as a .zip file")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labkit-autograder-") as tmp:
        wheel = build_wheel(course, Path(tmp))
        partial = out.with_name(out.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, template in (("setup.sh", "gradescope-setup.sh"),
                                   ("run_autograder", "gradescope-run_autograder")):
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, _script(template, chosen))
            zf.write(wheel, wheel.name)
            zf.writestr("solutions/hidden/", "")  # --solutions exists with no hidden check
            for exercise in chosen:
                hidden = course.hidden / f"{exercise}.py"
                if hidden.is_file():
                    zf.write(hidden, f"solutions/hidden/{exercise}.py")
            names = zf.namelist()
        partial.replace(out)  # a zip that is there is a whole one
    return names
