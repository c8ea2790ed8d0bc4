"""The instructor's ``labkit`` commands: ``release``, ``grade``, ``export``, ``autograder``.

``labkit.cli`` adds them to its parser with ``add_parsers``. Grading's modules (nbformat,
the sandbox) are imported when one of these commands runs, never when the parser is
built: every ``labkit inspect`` would pay a second of start-up for them.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

from labkit.cli.args import CliError, count, count_or_zero, seconds
from labkit.grading.course import Course
from labkit.grading.isolation.limits import Limits
from labkit.lang import ENGLISH, LANGUAGES, _


def cmd_release(args: argparse.Namespace) -> int:
    from labkit.grading.bundle import bundle
    from labkit.grading.release import ReleaseError, release

    if (args.out is None) == (args.bundle is None):
        raise CliError(
            _("give either OUT (the exercises folder) or --bundle DIR (the student kit)")
        )
    try:
        if args.bundle is not None:
            written = bundle(Course().root, args.solutions, args.bundle, args.lang)
        else:
            written = release(args.solutions, args.out)
    except ReleaseError as exc:
        raise CliError(str(exc)) from None
    for path in written:
        print(_("wrote {path}").format(path=path))
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from labkit.classroom.run import grade_folder, run_status
    from labkit.grading.grade import Settings
    from labkit.grading.isolation.confine import Confinement

    if args.queue is not None and not args.queue.startswith("postgresql://"):
        raise CliError(
            _("--queue takes a postgresql:// URL, not {queue!r}").format(queue=args.queue)
        )
    if args.jobs == 0 and args.queue is None:
        raise CliError(
            _("--jobs 0 grades nothing here: it goes with --queue (other machines grade)")
        )
    if args.status is not None:
        try:
            print(run_status(args.out / args.status, args.queue))
        except FileNotFoundError as exc:
            raise CliError(
                _("{error}; pass the run's id as written under --out ({out})").format(
                    error=exc, out=args.out
                )
            ) from None
        return 0
    if args.submissions is None:
        raise CliError(_("give SUBMISSIONS (a folder with one subfolder per student)"))
    if not args.solutions.is_dir():
        raise CliError(
            _("no solutions folder at {path}; pass --solutions DIR").format(path=args.solutions)
        )
    limits = Limits(
        memory=args.memory_mib << 20,
        processes=args.max_processes,
        open_files=args.max_open_files,
        file_size=args.max_file_mib << 20,
        cpu_seconds=args.cpu_seconds,
        output=args.max_output_kib << 10,
        memory_total=args.memory_total_mib << 20,
        disk=args.disk_mib << 20,
        cpu_total=args.cpu_total_s,
    )
    confinement = Confinement.detect(limits, network=args.network, sandbox=not args.no_sandbox)
    refused = None if args.no_sandbox else confinement.refusal()
    if refused:
        raise CliError(refused)
    settings = Settings(
        args.solutions,
        cell_timeout=args.cell_timeout,
        check_timeout=args.check_timeout,
        timeout_factor=args.timeout_factor,
        confinement=confinement,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31),
    )
    platforms = _platforms(args.export)
    try:
        run_dir, _outcomes = grade_folder(
            args.submissions,
            args.out,
            settings,
            jobs=args.jobs,
            only=args.exercise,
            progress=lambda line: print(line, flush=True),
            run=args.run_id,
            lease_s=args.lease_s,
            queue_url=args.queue,
        )
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        raise CliError(str(exc)) from None
    _export(run_dir, platforms, args.roster)
    return 0


def _platforms(values: list[str] | None) -> list[str]:
    from labkit.grading.export import ExportError, platforms_of

    try:
        return platforms_of(values)
    except ExportError as exc:
        raise CliError(str(exc)) from None


def _export(
    run_dir: Path, platforms: list[str], roster: Path | None, seconds: float | None = None
) -> None:
    """Write each platform's file for the run, and say what is left to fill in by hand."""
    from labkit.grading.export import ExportError, export

    if not platforms:
        return
    try:
        written = export(run_dir, platforms, roster, execution_time=seconds)
    except (ExportError, OSError) as exc:
        raise CliError(str(exc)) from None
    for done in written:
        print(
            _("wrote {platform} export {path}").format(platform=done.platform, path=done.path),
            flush=True,
        )
        for gap in done.to_complete:
            print("  " + _("before importing: {gap}").format(gap=gap), flush=True)


def cmd_grade_worker(args: argparse.Namespace) -> int:
    from labkit.classroom.run import grade_workers, queue_spec

    if not args.queue.startswith("postgresql://"):
        raise CliError(
            _("--queue takes a postgresql:// URL, not {queue!r}").format(queue=args.queue)
        )
    if "#" not in args.queue and args.run_id is None:
        raise CliError(_("say which run: --run-id RUN_ID, or the queue URL's #schema=NAME"))
    if not args.solutions.is_dir():
        raise CliError(
            _("no solutions folder at {path}; pass --solutions DIR").format(path=args.solutions)
        )
    where = queue_spec(args.queue, args.run_id or "")
    try:
        grade_workers(where, args.solutions, args.jobs)
    except (LookupError, RuntimeError) as exc:
        raise CliError(str(exc)) from None
    print(_("this machine's grading workers stopped: the queue has nothing left to grade"))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    platforms = _platforms(args.to)
    if not platforms:
        raise CliError(_("say which platform with --to canvas, moodle or gradescope"))
    _export(args.run_folder, platforms, args.roster, args.execution_time)
    return 0


def cmd_autograder(args: argparse.Namespace) -> int:
    from labkit.grading.autograder import AutograderError, build_gradescope

    try:
        names = build_gradescope(args.gradescope, args.exercise)
    except AutograderError as exc:
        raise CliError(str(exc)) from None
    print(_("wrote {path}: {exercises}").format(path=args.gradescope, exercises=", ".join(names)))
    print(_("upload it as the assignment's autograder (Ubuntu 24.04 base image)"))
    return 0


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in ``--help``, unless its help already names it.

    In the reader's language: a help that names its default says the word ``_("default")``
    stands for, and the default is shown with our words, argparse's ``%(default)s`` kept
    for argparse to fill in.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if _("default") in text or action.default in (None, False):
            return text if action.default is not False else text + " " + _("(default: off)")
        shown = super()._get_help_string(action) or text
        if shown == text:
            return text
        return text + " " + _("(default: {default})").format(default="%(default)s")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the instructor's commands to the ``labkit`` command's subcommands."""
    # The course and the limits import nothing heavy: the grader's own modules (nbformat)
    # load when a grading command runs, not for every `labkit inspect`.
    default_solutions = Course().solutions
    limits = Limits()

    p = sub.add_parser("release", help=_("write the student notebooks from the solutions"))
    p.add_argument("out", type=Path, nargs="?", help=_("folder for the exercise notebooks"))
    p.add_argument(
        "--bundle",
        type=Path,
        help=_("write the whole student kit (no solutions) into this folder"),
    )
    p.add_argument("--solutions", type=Path, default=default_solutions)
    p.add_argument(
        "--lang",
        choices=LANGUAGES,
        default=ENGLISH,
        help=_(
            "with --bundle: the edition the kit opens (both are in it; LANG=pt_BR or "
            "LABKIT_LANG choose at make lab)"
        ),
    )
    p.set_defaults(run=cmd_release)

    p = sub.add_parser(
        "grade",
        help=_("grade a folder with one subfolder per student"),
        description=_(
            "Run each student's notebook confined (own uid as root, bubblewrap when "
            "installed, resource limits) and the instructor's public and hidden checks in this "
            "process; write OUT/RUN_ID/grades.csv, totals.csv and feedback/."
        ),
        formatter_class=_DefaultsShown,
    )
    p.add_argument(
        "submissions", type=Path, nargs="?", help=_("folder with one subfolder per student")
    )
    p.add_argument("--out", type=Path, default=Path("grading"), help=_("runs are written here"))
    p.add_argument(
        "--run-id",
        help=_(
            "name of this run's folder (default: UTC time, to the second); a run of that "
            "name that was stopped is resumed: what was graded stays graded"
        ),
    )
    p.add_argument(
        "--status", metavar="RUN_ID", help=_("say how far the run OUT/RUN_ID is, and stop")
    )
    p.add_argument(
        "--lease-s",
        type=seconds,
        default=10.0,
        help=_(
            "a killed grading worker's notebook is graded again this long after "
            "(a live worker renews its lease)"
        ),
    )
    p.add_argument(
        "--seed",
        type=int,
        help=_(
            "the seed this run's generated inputs are drawn from (default: a fresh one, "
            "printed and kept in run.json, so a run replays)"
        ),
    )
    p.add_argument("--solutions", type=Path, default=default_solutions, help=_("holds hidden/"))
    p.add_argument(
        "--exercise",
        action="append",
        help=_("grade only this exercise, repeatable (default: every exercise)"),
    )
    p.add_argument(
        "--jobs",
        type=count_or_zero,
        default=os.cpu_count() or 1,
        help=_(
            "notebooks graded at once here (default: the number of cores, {cores} "
            "here; 0 with --queue: only other machines grade)"
        ).format(cores=os.cpu_count()),
    )
    p.add_argument(
        "--queue",
        metavar="POSTGRESQL_URL",
        help=_(
            "put the run in PostgreSQL (schema grading_<run id>, or the URL's #schema=), "
            "notebooks included, so `labkit grade-worker --queue` on other machines grades it too"
        ),
    )
    p.add_argument("--cell-timeout", type=seconds, default=30.0, help=_("seconds per code cell"))
    p.add_argument(
        "--check-timeout",
        type=seconds,
        default=None,
        help=_("cap on each check's seconds (default: each check's own, as in check())"),
    )
    p.add_argument(
        "--timeout-factor",
        type=seconds,
        default=1.0,
        help=_("multiply every check's own timeout (more than 1 on a loaded machine)"),
    )
    p.add_argument(
        "--memory-mib",
        type=count,
        default=limits.memory >> 20,
        help=_("address space per process"),
    )
    p.add_argument(
        "--max-processes",
        type=count,
        default=limits.processes,
        help=_("processes per student (root)"),
    )
    p.add_argument(
        "--max-open-files",
        type=count,
        default=limits.open_files,
        help=_("open files per process"),
    )
    p.add_argument(
        "--max-file-mib",
        type=count,
        default=limits.file_size >> 20,
        help=_("largest file a student writes"),
    )
    p.add_argument(
        "--cpu-seconds", type=count, default=limits.cpu_seconds, help=_("CPU time per process")
    )
    p.add_argument(
        "--max-output-kib",
        type=count,
        default=limits.output >> 10,
        help=_("printed output per student"),
    )
    p.add_argument(
        "--memory-total-mib",
        type=count,
        default=limits.memory_total >> 20,
        help=_("memory of all of one notebook's processes and its /tmp together (control groups)"),
    )
    p.add_argument(
        "--cpu-total-s",
        type=count,
        default=limits.cpu_total,
        help=_("CPU seconds of all of one notebook's processes together (control groups)"),
    )
    p.add_argument(
        "--disk-mib",
        type=count,
        default=limits.disk >> 20,
        help=_("files one notebook may write in its folder, together (as root: a tmpfs)"),
    )
    p.add_argument(
        "--network",
        action="store_true",
        help=_(
            "give student code a network: a namespace of its own per notebook (as root), "
            "else the machine's"
        ),
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help=_("no own uid, no bubblewrap: limits only (to debug the grader, never for a class)"),
    )
    p.add_argument(
        "--export",
        action="append",
        metavar="PLATFORM",
        help=_(
            "also write the run's gradebook for canvas, moodle or gradescope, repeatable "
            "or comma-separated (as `labkit export` does)"
        ),
    )
    p.add_argument(
        "--roster",
        type=Path,
        help=_(
            "CSV mapping each submission folder (student) to the platform's ids, for "
            "--export: student,name,id,sis_user_id,sis_login_id,section,email,username,idnumber"
        ),
    )
    p.set_defaults(run=cmd_grade)

    p = sub.add_parser(
        "grade-worker",
        help=_("grade notebooks of a run that labkit grade --queue put in PostgreSQL"),
        description=_(
            "Start --jobs grading workers on this machine: each claims a notebook "
            "from the run's queue, grades it confined, and stores the result with the job's "
            "completion; they stop when the queue has nothing left."
        ),
        formatter_class=_DefaultsShown,
    )
    p.add_argument("--queue", required=True, metavar="POSTGRESQL_URL", help=_("the run's database"))
    p.add_argument("--run-id", help=_("the run to grade (its schema is grading_<run id>)"))
    p.add_argument("--solutions", type=Path, default=default_solutions, help=_("holds hidden/"))
    p.add_argument(
        "--jobs",
        type=count,
        default=os.cpu_count() or 1,
        help=_("notebooks graded at once here (default: the number of cores, {cores})").format(
            cores=os.cpu_count()
        ),
    )
    p.set_defaults(run=cmd_grade_worker)

    p = sub.add_parser(
        "export",
        help=_("write a finished run's gradebook for Canvas, Moodle or Gradescope"),
        description=_(
            "Read OUT/RUN_ID/grades.csv and outcomes.json and write canvas.csv, "
            "moodle.csv or gradescope/STUDENT.json (results.json) beside them."
        ),
        formatter_class=_DefaultsShown,
    )
    p.add_argument("run_folder", metavar="RUN", type=Path, help=_("a run's folder, OUT/RUN_ID"))
    p.add_argument(
        "--to",
        action="append",
        metavar="PLATFORM",
        help=_("canvas, moodle or gradescope; repeatable or comma-separated"),
    )
    p.add_argument(
        "--roster",
        type=Path,
        help=_(
            "CSV mapping each submission folder (student) to the platform's ids: "
            "student,name,id,sis_user_id,sis_login_id,section,email,username,idnumber"
        ),
    )
    p.add_argument(
        "--execution-time",
        type=float,
        help=_("gradescope: the seconds grading took, results.json's execution_time"),
    )
    p.set_defaults(run=cmd_export)

    p = sub.add_parser(
        "autograder",
        help=_("build a Gradescope autograder zip that grades with labkit"),
        description=_(
            "Write a zip with setup.sh, run_autograder, the lab's wheel and the "
            "hidden checks of the chosen exercises (never a solution notebook)."
        ),
        formatter_class=_DefaultsShown,
    )
    p.add_argument("--gradescope", type=Path, required=True, metavar="OUT.zip")
    p.add_argument(
        "--exercise",
        action="append",
        help=_("an exercise the assignment grades, repeatable (default: every exercise)"),
    )
    p.set_defaults(run=cmd_autograder)
