"""How fast ``labkit grade`` grades a class: ``python bench/grading.py``.

Generates a class (default 40 students x every exercise) from the reference solutions
and the released stubs, with a seeded mix of notebooks a real class hands in:

- ``reference``: the instructor's solution;
- ``stub``: the exercise untouched;
- ``wrong``: the reference with one required function replaced by one returning None;
- ``broken``: the reference with a syntax error in the cell defining a required function;
- ``hanging``: the reference with a required function that loops forever (each check
  that calls it times out) or, one in two, a top-level loop (the cell times out).

It grades the class with this checkout's ``labkit grade`` and reports notebooks per
minute. Comparisons:

- speed: with ``--legacy REF``, the same class graded by the grader of an earlier commit
  (its whole ``labkit`` package taken from git: a Jupyter kernel per notebook, then the
  checks in the same process as the student's code), with the checks it had then;
  without it, the rate recorded before the trust boundary: 14 notebooks in 48 s on 2 cores;
- scores: with ``--same-scores``, every notebook is also scored in one process, the way
  the student's own ``check()`` runs the same checks (cells and checks side by side, no
  confinement), and every (student, exercise) whose score differs is listed;
- nbgrader: with ``--nbgrader``, the same class graded by nbgrader's ``autograde``
  (``bench/nbgrader_class.py``: the exercises as nbgrader notebooks, one autograder test
  cell per public check, nbgrader in a venv of its own); it runs the student's code
  unconfined, in the grader's own user;
- resuming: with ``--resume``, the class graded again, the grader SIGKILLed once half the
  notebooks are graded, and the resumed run timed against half the uninterrupted one.

    .venv/bin/python bench/grading.py                        # 40 students, new grader only
    .venv/bin/python bench/grading.py --same-scores          # and in-process scores
    .venv/bin/python bench/grading.py --legacy 4c7b143       # and the old grader, same class
    .venv/bin/python bench/grading.py --per-exercise         # and each exercise's own rate
    .venv/bin/python bench/grading.py --nbgrader --resume --exercise ex01   # beside nbgrader
    .venv/bin/python bench/grading.py --students 2 --exercise ex01   # a smoke run

Both graders get the same cell timeout and, by default, each check's own timeout (the
old grader is given the longest), so hanging notebooks cost each the same waiting.
Performance is measured here only: the test suite never times anything.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing, redirect_stdout
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import nbgrader_class  # noqa: E402
from labkit.grading import catalog  # noqa: E402
from labkit.grading.release import exercise_of, solution_notebooks  # noqa: E402

#: The rate before issue 10: 14 notebooks in 48 s on 2 cores.
RECORDED_BASELINE = (14, 48.0)
KINDS = {"reference": 40, "stub": 20, "wrong": 20, "broken": 10, "hanging": 10}


def _defining_cell(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode | None:
    for cell in nb.cells:
        if cell.cell_type == "code" and (
            f"def {name}(" in cell.source or f"class {name}" in cell.source
        ):
            return cell
    return None


def _cell(source: str) -> nbformat.NotebookNode:
    """A new code cell with a fixed id, so the same seed writes the same bytes."""
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "bench-added"
    return cell


def make_notebook(kind: str, exercise: str, rng: random.Random) -> nbformat.NotebookNode:
    """One student's notebook of the given kind (deterministic for a given rng state)."""
    [reference] = sorted((ROOT / "solutions").glob(f"{exercise}_*.ipynb"))
    [stub] = sorted((ROOT / "exercises").glob(f"{exercise}_*.ipynb"))
    nb = nbformat.read(stub if kind == "stub" else reference, as_version=4)
    needs = catalog.public(exercise).needs or ("operation_key",)
    name = rng.choice(needs)
    if kind == "wrong":
        nb.cells.insert(-1, _cell(f"def {name}(*args, **kwargs):\n    return None"))
    elif kind == "broken":
        cell = _defining_cell(nb, name)
        if cell is not None:
            cell.source = cell.source.replace(f"def {name}(", f"def {name}((", 1)
    elif kind == "hanging":
        if rng.random() < 0.5:
            nb.cells.insert(-1, _cell("while True:\n    pass"))
        else:
            loop = f"def {name}(*args, **kwargs):\n    while True:\n        pass"
            nb.cells.insert(-1, _cell(loop))
    return nb


def make_class(
    folder: Path,
    students: int,
    exercises: list[str],
    seed: int,
    mix: dict[str, int] | None = None,
    record: dict[tuple[str, str], str] | None = None,
) -> Counter[str]:
    """Write ``folder/sNN/exNN_name.ipynb`` for every student; count the kinds.

    ``record``, when given, gets each (student, exercise)'s kind.
    """
    rng = random.Random(seed)
    mix = mix or KINDS
    names, weights = list(mix), list(mix.values())
    kinds: Counter[str] = Counter()
    for i in range(students):
        for exercise in exercises:
            kind = rng.choices(names, weights)[0]
            kinds[kind] += 1
            [stub] = sorted((ROOT / "exercises").glob(f"{exercise}_*.ipynb"))
            if record is not None:
                record[f"s{i:02d}", exercise] = kind
            path = folder / f"s{i:02d}" / stub.name
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(make_notebook(kind, exercise, rng), path)
    return kinds


def _scores(csv_path: Path) -> dict[tuple[str, str], int]:
    with csv_path.open() as fh:
        return {(r["student"], r["exercise"]): int(r["score"]) for r in csv.DictReader(fh)}


def grade_argv(subs: Path, out: Path, args: argparse.Namespace, run_id: str) -> list[str]:
    """This checkout's ``labkit grade`` on the class, with the bench's settings."""
    argv = [sys.executable, "-m", "labkit.cli", "grade", str(subs), "--out", str(out)]
    argv += [
        "--run-id",
        run_id,
        "--jobs",
        str(args.jobs),
        "--cell-timeout",
        str(args.cell_timeout),
        "--seed",  # the in-process scores draw the same generated inputs
        str(args.seed),
    ]
    if args.check_timeout is not None:
        argv += ["--check-timeout", str(args.check_timeout)]
    for exercise in args.exercise or []:
        argv += ["--exercise", exercise]
    return argv


def run_new(
    subs: Path, out: Path, args: argparse.Namespace
) -> tuple[float, dict[tuple[str, str], int]]:
    argv = grade_argv(subs, out, args, "bench")
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=out.parent)
    return time.perf_counter() - started, _scores(out / "bench" / "grades.csv")


def _succeeded(jobs_db: Path) -> int:
    """Notebooks graded so far in a run's job store, read without writing to it."""
    try:
        with closing(sqlite3.connect(f"file:{jobs_db}?mode=ro", uri=True, timeout=1)) as db:
            [(count,)] = db.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'")
    except sqlite3.OperationalError:  # not made yet, or busy for a moment
        return 0
    return int(count)


def resumed_cost(
    subs: Path, tmp: Path, total: int, args: argparse.Namespace
) -> tuple[int, float, int]:
    """Grade the class, SIGKILL the grader's whole process group once half the notebooks
    are graded, grade again with the same run id; (graded at the kill, resumed seconds,
    notebooks in flight at the kill that the resumed run gave back at once).

    The default lease (10 s): the resumed run holds the run's lock, so it knows the
    killed workers are gone and grades what they held at once, without waiting for it.
    """
    out = tmp / "out-resume"
    out.mkdir()
    argv = grade_argv(subs, out, args, "resume")
    quiet = subprocess.DEVNULL
    grader = subprocess.Popen(argv, start_new_session=True, stdout=quiet, stderr=quiet, cwd=tmp)
    graded = 0
    try:
        while grader.poll() is None:
            graded = _succeeded(out / "resume" / "jobs.db")
            if graded >= total / 2:
                os.killpg(grader.pid, signal.SIGKILL)
                break
            time.sleep(0.1)
    finally:
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
        grader.wait()
    started = time.perf_counter()
    said = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True, cwd=tmp).stdout
    seconds = time.perf_counter() - started
    back = re.search(r"^(\d+) notebook\(s\) were being graded when the run stopped", said, re.M)
    return graded, seconds, int(back[1]) if back else 0


def per_exercise(subs: Path, tmp: Path, exercises: list[str], args: argparse.Namespace) -> None:
    """Grade each exercise's notebooks alone (same class, same seed) and print its rate.

    The kill and race sweeps make some exercises cost more than others; one run per
    exercise says which. The runs are one after another, so their sum is a little more
    than the whole class in one run (each run's last notebooks leave a core idle).
    """
    print("per exercise (each graded alone):")
    for exercise in exercises:
        out = tmp / f"out-{exercise}"
        out.mkdir()
        one = argparse.Namespace(**{**vars(args), "exercise": [exercise]})
        seconds, scores = run_new(subs, out, one)
        print(f"  {exercise}: {len(scores):3d} notebooks {seconds:7.1f} s "
              f"{len(scores) / seconds * 60:7.1f} notebooks/min")  # fmt: skip


def run_legacy(
    ref: str, subs: Path, tmp: Path, args: argparse.Namespace
) -> tuple[float, dict[tuple[str, str], int]]:
    """The grader of commit ``ref`` (a kernel per notebook, checks beside the student's code),
    its whole ``labkit`` package as it was then, grading the same class.

    The package moved into folders since the trust boundary came, so the old grader's
    modules no longer fit today's tree: the old tree is taken whole (``git archive``), with
    the checks it had then. Scores agree wherever those checks are today's.
    """
    tree = tmp / "legacy"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "labkit"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    longest = max(c.timeout for e in catalog.exercises() for c in catalog.all_checks(e))
    out = tmp / "legacy.csv"
    boot = (
        f"import sys; sys.path.insert(0, {str(tree)!r})\n"
        "from pathlib import Path\n"
        "from labkit.grading.grade import Settings, grade_folder\n"
        f"settings = Settings(Path({str(ROOT / 'solutions')!r}), cell_timeout={args.cell_timeout},"
        f" check_timeout={args.check_timeout or longest})\n"
        f"grade_folder(Path({str(subs)!r}), Path({str(out)!r}), Path({str(tmp / 'legacy-fb')!r}),"
        f" settings, jobs={args.jobs}, only={args.exercise!r}, progress=lambda line: None)\n"
    )
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", boot], check=True, stdout=subprocess.DEVNULL, cwd=tmp)
    return time.perf_counter() - started, _scores(out)


def in_process_scores(
    subs: Path, exercises: list[str], args: argparse.Namespace
) -> dict[tuple[str, str], int]:
    """Each notebook scored the way the student's ``check()`` scores it: all in this process.

    The generated notebooks are the bench's own, so running them here is safe.
    """
    import time as clock_module

    from labkit.grading.checks import run_checks
    from labkit.grading.grade import find_notebooks, seeded_environment, warm_up
    from labkit.grading.isolation.student_side import run_cells
    from labkit.grading.scoring import score
    from labkit.grading.seeds import use_grading_seed

    warm_up()
    # As `labkit grade --seed` does: the same generated inputs, the same time zone. Both
    # are this process's, so both are put back afterwards (the smoke test runs in pytest).
    zone = os.environ.get("TZ")
    use_grading_seed(args.seed)
    os.environ["TZ"] = seeded_environment(args.seed)["TZ"]
    clock_module.tzset()
    scores: dict[tuple[str, str], int] = {}
    try:
        for folder in sorted(p for p in subs.iterdir() if p.is_dir()):
            found, _ = find_notebooks(folder, exercises)
            for exercise, path in found.items():
                nb = nbformat.read(path, as_version=4)
                cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
                with tempfile.TemporaryDirectory() as work:
                    here = os.getcwd()
                    os.chdir(work)  # %%writefile cells and the checks' files land there
                    try:
                        # What the cells print is the notebook's, not the bench's report.
                        with redirect_stdout(io.StringIO()):
                            values, _ = run_cells(cells, args.cell_timeout)
                        checks = catalog.all_checks(exercise, ROOT / "solutions" / "hidden")
                        outcomes = run_checks(checks, values, args.check_timeout, Path(work))
                    finally:
                        os.chdir(here)
                scores[folder.name, exercise] = score(outcomes)[0]  # severe mistakes capped
    finally:
        use_grading_seed(None)
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        clock_module.tzset()
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cell-timeout", type=float, default=5.0)
    parser.add_argument(
        "--check-timeout", type=float, help="cap every check (default: each check's own)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-hanging",
        action="store_true",
        help="leave out hanging notebooks (the issue's mix: reference, stub, wrong, broken); "
        "their timeouts cost both graders the same seconds and hide the difference",
    )
    parser.add_argument("--legacy", metavar="REF", help="also grade with the grader of this commit")
    parser.add_argument(
        "--same-scores", action="store_true", help="also score every notebook in one process"
    )
    parser.add_argument(
        "--per-exercise",
        action="store_true",
        help="also grade each exercise's notebooks on their own and print each one's rate",
    )
    parser.add_argument(
        "--nbgrader",
        action="store_true",
        help=f"also grade the class with nbgrader's autograde ({nbgrader_class.NBGRADER}, "
        "in its own venv bench/.nbgrader-venv, made on first use) and compare the rates",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="also grade the class again, SIGKILL the grader halfway and time the resumed run",
    )
    args = parser.parse_args(argv)
    exercises = args.exercise or [
        e for e in map(exercise_of, solution_notebooks(ROOT / "solutions")) if e
    ]
    replay = " ".join(sys.argv[1:] if argv is None else argv)
    print(f"seed {args.seed}; replay: python bench/grading.py {replay} --seed {args.seed}")
    with tempfile.TemporaryDirectory(prefix="labkit-bench-grading-") as tmp_name:
        tmp = Path(tmp_name)
        subs = tmp / "submissions"
        mix = {k: w for k, w in KINDS.items() if k != "hanging"} if args.no_hanging else None
        each: dict[tuple[str, str], str] = {}
        kinds = make_class(subs, args.students, exercises, args.seed, mix, each)
        total = sum(kinds.values())
        print(f"class: {args.students} students x {len(exercises)} exercises = {total} notebooks")
        print("mix: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        out = tmp / "out"
        out.mkdir()
        seconds, scores = run_new(subs, out, args)
        rate = total / seconds * 60
        print(f"new grader:    {seconds:7.1f} s  {rate:7.1f} notebooks/min  (--jobs {args.jobs})")
        if args.per_exercise:
            per_exercise(subs, tmp, exercises, args)
        if args.nbgrader:
            nb_seconds, nb_scores = nbgrader_class.grade_with_nbgrader(
                subs, each, exercises, tmp / "course", args.cell_timeout
            )
            nb_rate = len(nb_scores) / nb_seconds * 60
            how = f"{nbgrader_class.NBGRADER} autograde, {len(nb_scores)} of {total} graded"
            print(f"nbgrader:      {nb_seconds:7.1f} s  {nb_rate:7.1f} notebooks/min  ({how})")
            # The conversion is right if nbgrader gives every reference all its points.
            earned = {key: e for key, (e, out_of) in nb_scores.items() if e == out_of}
            full = Counter(kind for key, kind in each.items() if key in earned)
            print("  every public point: " + ", ".join(
                f"{kind} {full[kind]} of {n}" for kind, n in sorted(kinds.items())
            ))  # fmt: skip
            print(f"labkit / nbgrader: {rate / nb_rate:.2f}x (target: at least 2x)")
            print("  nbgrader: public checks only, one notebook at a time, the student's code")
            print("  unconfined in the grader's own user; labkit: public and hidden checks,")
            print(f"  {args.jobs} notebooks at once, each confined")
        if args.resume:
            graded, resumed, back = resumed_cost(subs, tmp, total, args)
            left = seconds * (total - graded) / total
            print(f"resumed run:   {resumed:7.1f} s  after a SIGKILL at {graded} of {total} graded")
            print(f"  ({back} notebook(s) in flight at the kill, graded again at once)")
            print(
                f"resumed / half the uninterrupted run: {resumed / (seconds / 2):.2f} (target: at "
                f"most 1); resumed / the uninterrupted run's share left: {resumed / left:.2f}"
            )
        if args.legacy:
            old_seconds, old_scores = run_legacy(args.legacy, subs, tmp, args)
            old_rate = total / old_seconds * 60
            print(
                f"legacy grader: {old_seconds:7.1f} s  {old_rate:7.1f} notebooks/min  "
                f"({args.legacy})"
            )
            differ = sorted(k for k in scores if scores[k] != old_scores.get(k))
            print(f"speed-up: {rate / old_rate:.1f}x; scores that differ: {len(differ)} of {total}")
            for key in differ[:20]:
                print(f"  {key[0]} {key[1]}: new {scores[key]}, legacy {old_scores.get(key)}")
        if args.same_scores:
            local = in_process_scores(subs, exercises, args)
            differ = sorted(k for k in scores if scores[k] != local.get(k))
            print(f"in-process scores that differ from the graded ones: {len(differ)} of {total}")
            for key in differ[:20]:
                print(f"  {key[0]} {key[1]}: graded {scores[key]}, in-process {local.get(key)}")
        if not args.legacy:
            n, s = RECORDED_BASELINE
            old_rate = n / s * 60
            print(f"recorded baseline: {n} notebooks in {s:g} s = {old_rate:.1f} notebooks/min")
            print(f"speed-up: {rate / old_rate:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
