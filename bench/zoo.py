"""Every wrong solution of the project's zoo graded for real: ``python bench/zoo.py``.

The zoo (``tests/grading/test_zoo_exNN.py``, one plausible mistake per entry, each
named after the check that must catch it) is tested entry by entry in process, and CI
grades a sample of it through the confined grader. This grades all of it the way an
instructor grades: each entry becomes one student's notebook (``zoo_notebooks``), and
this checkout's ``labkit grade`` grades the class with the sandbox, own uids and
control groups the machine has. Per exercise it reports how many entries the named
check caught there (failed, 0 points, the score below full marks, some other check
passed), how many severe ones were capped at half, and the rate. With
``--same-scores`` each notebook is also scored in one process, as ``check()`` scores
it, and every entry whose two scores differ is listed. Such an entry is scored in process
twice more: when those scores differ among themselves, the student's code decides its
score anew in each process (a spread drawn from ``id(self)``), and it is listed apart.
(The student's ``random`` module is seeded per check, from the run's seed, on both
paths: ``seeds.student_seed``.)

    .venv/bin/python bench/zoo.py                      # the whole zoo
    .venv/bin/python bench/zoo.py --exercise ex09      # one exercise's entries
    .venv/bin/python bench/zoo.py --same-scores        # and in-process scores
    .venv/bin/python bench/zoo.py --last 5             # each exercise's newest 5 entries
    .venv/bin/python bench/zoo.py --right              # the right solutions instead

With ``--right`` it grades the other side of each zoo file: the right solutions written
otherwise (``RIGHT``), which the tests run in process against the one check each once
lost to. Here every check runs on them, through the sandbox, and each must score full
marks; the checks that took points are listed.

Exit status 1 when an entry is not caught, a severe one is not capped, a right solution
loses a point, or (with ``--same-scores``) a score differs between the paths while it
holds still in process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "grading"), str(ROOT / "tests")]

from zoo_notebooks import Entry, every_entry, right_entries  # noqa: E402
from zoograding import graded_records, not_caught  # noqa: E402

from bench.grading import in_process_scores  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exercise", action="append", help="only this exercise (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=7, help="the grading seed (--seed)")
    parser.add_argument("--first", type=int, help="only each exercise's first N entries")
    parser.add_argument("--last", type=int,
                        help="only each exercise's last N entries (the newest: entries are "
                             "appended)")  # fmt: skip
    parser.add_argument("--mistakes", type=Path,
                        help="only the entries named in this file, one mistake per line "
                             "(a red-team round's new entries)")  # fmt: skip
    parser.add_argument("--same-scores", action="store_true",
                        help="also score each notebook in one process and compare")  # fmt: skip
    parser.add_argument("--right", action="store_true",
                        help="grade the right solutions written otherwise (RIGHT): each must "
                             "score full marks")  # fmt: skip
    args = parser.parse_args(argv)
    zoo = right_entries() if args.right else every_entry()
    picked = [e for e in zoo if not args.exercise or e.exercise in args.exercise]
    if args.mistakes is not None:
        wanted = set(args.mistakes.read_text(encoding="utf-8").splitlines()) - {""}
        unknown = wanted - {e.mistake for e in picked}
        if unknown:
            what = "right solution" if args.right else "zoo entry"
            parser.error(f"{args.mistakes}: no {what} is named {sorted(unknown)[0]!r}")
        picked = [e for e in picked if e.mistake in wanted]
    if args.first is not None:
        seen: Counter[str] = Counter()
        for entry in list(picked):
            seen[entry.exercise] += 1
            if seen[entry.exercise] > args.first:
                picked.remove(entry)
    if args.last is not None:
        by_exercise: dict[str, list[Entry]] = {}
        for entry in picked:
            by_exercise.setdefault(entry.exercise, []).append(entry)
        newest = {id(e) for entries in by_exercise.values() for e in entries[-args.last :]}
        picked = [e for e in picked if id(e) in newest]
    replay = " ".join(f"--exercise {e}" for e in args.exercise or [])
    replay += f" --first {args.first}" if args.first is not None else ""
    replay += f" --last {args.last}" if args.last is not None else ""
    replay += f" --mistakes {args.mistakes}" if args.mistakes is not None else ""
    replay += " --right" if args.right else ""
    print(f"seed {args.seed}; replay: python bench/zoo.py {replay} --jobs {args.jobs} "
          f"--seed {args.seed}{' --same-scores' if args.same_scores else ''}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="labkit-zoo-") as tmp:
        subs = Path(tmp) / "submissions"
        students: dict[str, Entry] = {}
        for n, entry in enumerate(picked):
            student = f"{entry.exercise}-{n:03d}"
            (subs / student).mkdir(parents=True)
            nbformat.write(entry.notebook(), subs / student / entry.filename)
            students[student] = entry
        exercises = sorted({e.exercise for e in picked})
        argv = [sys.executable, "-m", "labkit.cli", "grade", str(subs), "--out", tmp,
                "--run-id", "zoo", "--jobs", str(args.jobs), "--seed", str(args.seed)]  # fmt: skip
        for exercise in exercises:
            argv += ["--exercise", exercise]
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
        seconds = time.perf_counter() - started
        run = Path(tmp) / "zoo"
        # Each student hands in one exercise; the others are records of "missing".
        graded = graded_records(run)
        records = {s: graded[(s, e.exercise)] for s, e in students.items()}
        missed: list[str] = []
        per: Counter[str] = Counter()
        severe: Counter[str] = Counter()
        for student, entry in students.items():
            judge = _not_kept if args.right else not_caught
            why = judge(records[student], entry.check)
            if why is None:
                per[entry.exercise] += 1
                severe[entry.exercise] += bool(records[student].get("cap"))
            else:
                missed.append(f"  {entry.exercise} {entry.mistake!r}: {why}")
        differ: list[str] = []
        varies: list[str] = []
        if args.same_scores:
            bench_args = argparse.Namespace(seed=args.seed, cell_timeout=30.0, check_timeout=None)
            inside = in_process_scores(subs, exercises, bench_args)
            apart = {s: e for s, e in students.items()
                     if inside.get((s, e.exercise)) != int(records[s]["score"])}  # fmt: skip
            # Scored in process twice more: code that draws from id() or hash() of an
            # object, or from a thread's timing, scores differently in every process.
            again = [_rescored(subs, apart, exercises, bench_args) for _ in range(2)]
            for student, entry in apart.items():
                graded = int(records[student]["score"])
                alone = inside.get((student, entry.exercise))
                seen = {alone, *(a.get((student, entry.exercise)) for a in again)}
                line = f"  {entry.exercise} {entry.mistake!r}: graded {graded}, in process {alone}"
                if len(seen) > 1:
                    varies.append(f"{line} (then {sorted(seen - {alone})} in two more runs)")
                else:
                    differ.append(line)
    total = Counter(e.exercise for e in picked)
    if args.right:
        print(f"right solutions written otherwise: {len(picked)} over {len(exercises)} "
              f"exercises, graded by labkit grade (confined) in {seconds:.1f} s")  # fmt: skip
        for exercise in exercises:
            print(f"  {exercise}: {per[exercise]:3d} of {total[exercise]:3d} kept full marks")
        print(f"right solutions that lost points in the sandbox: {len(missed)}")
        print("\n".join(missed))
        return 1 if missed else 0
    print(f"the zoo: {len(picked)} wrong solutions over {len(exercises)} exercises, graded by "
          f"labkit grade (confined) in {seconds:.1f} s, {len(picked) / seconds * 60:.1f} "
          "notebooks/min")  # fmt: skip
    for exercise in exercises:
        print(f"  {exercise}: {per[exercise]:3d} of {total[exercise]:3d} caught by the check "
              f"named after the mistake; {severe[exercise]} capped at half (severe)")  # fmt: skip
    print(f"not caught in the sandbox: {len(missed)}")
    print("\n".join(missed))
    if args.same_scores:
        print(f"in-process scores that differ from the graded ones: {len(differ)} of {len(picked)}")
        print("\n".join(differ))
        print(f"entries whose score varies from one process to the next, in process too (the "
              f"student's code, not the grading path): {len(varies)}")  # fmt: skip
        print("\n".join(varies))
    return 1 if missed or differ else 0


def _rescored(
    subs: Path, students: dict[str, Entry], exercises: list[str], args: argparse.Namespace
) -> dict[tuple[str, str], int]:
    """``students``' notebooks of ``subs`` scored in process once more."""
    if not students:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        for student in students:
            (Path(tmp) / student).symlink_to(subs / student)
        return in_process_scores(Path(tmp), exercises, args)


def _not_kept(record: dict[str, Any], check: str) -> str | None:
    """Why a right solution's graded record is not full marks, or None. ``check`` is the
    one it once lost to; every check that took a point is named."""
    if record["status"] == "graded" and record["score"] == record["max"]:
        return None
    lost = [
        f"{c['check']} ({c['status']}, {c['earned']}/{c['points']}: {str(c.get('got'))[:200]!r})"
        for c in record.get("checks") or []
        if c["earned"] != c["points"]
    ]
    score = f"scored {record['score']}/{record['max']}, {record['status']}"
    return f"{score} (once lost to {check}): {'; '.join(lost) or 'no check failed'}"


if __name__ == "__main__":
    sys.exit(main())
