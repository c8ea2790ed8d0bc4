"""The floor plan, read from the source: what lives on the ground floor, and which way imports go.

``docs/architecture.md`` draws the folders and the direction of their imports; these
tests read every module's ``import`` statements (with ``ast``, nothing is imported) and
fail on the first arrow that points the wrong way, naming the module and what it
imported.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import labkit

PACKAGE = Path(labkit.__file__).parent

#: The modules at the top of labkit/: the ground floor, and what sits right on the store.
GROUND = {"errors", "clock", "job", "jobargs", "keys", "redact", "retry", "logs", "faults"}
GROUND |= {"dbfile", "queries", "tables"}
# Which language the lab speaks and its catalogs: what check(), the grader and the lessons'
# tools all read, so it sits under them (it imports nothing of labkit).
GROUND |= {"lang"}
# A child process tied to its parent's life: the celery harness, the grading workers and
# the forked racers each ask for it.
GROUND |= {"orphans"}
TOP_LEVEL = GROUND | {"__init__", "__main__", "metrics", "worker", "worker_process"}
#: What the lab is, as opposed to the grader: the grader's engine never imports these.
LAB = (
    "labkit.store",
    "labkit.worker",
    "labkit.world",
    "labkit.backends",
    "labkit.explore",
    "labkit.patterns",
    "labkit.integrations",
    "labkit.notebook",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imports() -> dict[str, set[str]]:
    """Every labkit module and the labkit modules it imports (``from labkit import x`` as x).

    Read when a test first asks, not as the module is collected: parsing every module
    takes about two CPU-seconds, and each of ``make test``'s pytest workers collects
    this file while only one runs it."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "labkit":
                    names |= {f"labkit.{a.name}" for a in node.names if a.name != "lazy_exports"}
                elif node.module.startswith("labkit."):
                    names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("labkit")}
        found[_module_name(path)] = names
    return found



def _offenders(where: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in _imports().items()
        if module == where or module.startswith(where + ".")
        for name in names
        if name.startswith(forbidden)
    )


def test_the_top_of_labkit_holds_the_ground_floor_only() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == TOP_LEVEL, f"move {sorted(top - TOP_LEVEL)} into its folder"


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    ground = {f"labkit.{m}" for m in GROUND}
    bad = sorted(
        f"{module} imports {name}"
        for module in ground
        for name in _imports()[module]
        if name not in ground
    )
    assert bad == []


def test_the_grader_knows_checks_and_notebooks_never_jobs() -> None:
    bad = [
        line
        for line in _offenders("labkit.grading", LAB)
        if not line.startswith("labkit.grading.exercises")  # content: it drives the lab
    ]
    assert bad == []


def test_the_trust_boundary_imports_only_the_ground_floor_and_the_grading_engine() -> None:
    allowed = {f"labkit.{m}" for m in GROUND} | {
        "labkit.grading.checks",
        "labkit.grading.course",
        "labkit.grading.stub",
    }
    bad = sorted(
        f"{module} imports {name}"
        for module, names in _imports().items()
        if module.startswith("labkit.grading.isolation")
        for name in names
        if name not in allowed and not name.startswith("labkit.grading.isolation")
    )
    assert bad == []


def test_postgresql_imports_nothing_of_the_sqlite_engine() -> None:
    # labkit.store itself is the lazy front whose one name is the SQLite JobStore.
    sqlite_side = {"labkit.store", "labkit.store.sqlite", "labkit.patterns.queues"}
    bad = sorted(
        f"{module} imports {name}"
        for module, names in _imports().items()
        if module.startswith("labkit.backends.postgres")
        for name in names
        if name in sqlite_side
    )
    assert bad == []


def test_nothing_outside_notebook_needs_jupyter() -> None:
    bad = [
        line
        for line in _offenders("labkit", ("labkit.notebook",))
        if not line.startswith("labkit.notebook")
    ]
    assert bad == []


def test_no_exercise_imports_another_exercise() -> None:
    bad = sorted(
        f"{module} imports {name}"
        for module, names in _imports().items()
        if module.startswith("labkit.grading.exercises.ex")
        for name in names
        if name.startswith("labkit.grading.exercises.ex")
        and name.split(".")[3] != module.split(".")[3]
    )
    assert bad == []


def test_only_the_command_line_uses_the_classroom() -> None:
    """The class-as-jobs layer sits on the grader and the store; nothing below imports it."""
    bad = [
        line
        for line in _offenders("labkit", ("labkit.classroom",))
        if not line.startswith(("labkit.classroom", "labkit.cli"))
    ]
    assert bad == []
