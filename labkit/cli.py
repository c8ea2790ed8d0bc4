"""The ``labkit`` command: look at a job database, send jobs back, run a worker, grade a class.

::

    labkit inspect jobs.db [--job ID] [--as-of T]  counts, dead letters, one job's attempts
    labkit retry-failed jobs.db --limit N          redrive dead jobs whose failures were transient
    labkit redrive jobs.db ID [ID ...]             redrive those dead jobs (same key)
    labkit redrive jobs.db --limit N [--kind K]    redrive in bulk: --limit is required
    labkit worker jobs.db --handlers mod:HANDLERS  run a worker until stopped (Ctrl-C)
    labkit release exercises                        write the student notebooks
    labkit release --bundle ../student-kit          the student kit: lessons, exercises, labkit
    labkit grade submissions --out grading          grade one folder per student

Every command that changes jobs accepts ``--dry-run`` and names what it would do.
``inspect``, ``redrive`` and ``retry-failed`` accept ``--as-of T`` to act as if it were
time T (UTC): ages are read, and redriven jobs become due, at T. Reports and lessons
use it to print the same thing on every run. Bulk
redrive has no default limit: redriving a whole dead-letter queue by accident floods
the dependency that killed those jobs in the first place.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import logging
import os
import signal
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from labkit import jobargs
from labkit.clock import Clock, FakeClock, SystemClock, isoformat
from labkit.errors import InvalidTransition, LabkitError
from labkit.job import Job, JobState
from labkit.report import age_text, format_table
from labkit.store import LEASE_EXPIRED_REASON, RETRYABLE_DEAD_REASONS, JobStore


class CliError(Exception):
    """A usage problem, reported as one line on stderr with exit code 2."""


#: How many rows a bulk command reads and prints at a time: memory stays flat.
BATCH = 500


def safe(value: object) -> str:
    """``value`` as text a terminal shows as is: control characters escaped.

    A key or kind comes from whoever enqueued the job; printed raw, a newline in it
    forges a table row and an escape sequence repaints the operator's terminal.
    """
    text = "-" if value is None else str(value)
    return "".join(
        ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else _escape(ch) for ch in text
    )


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _pages(items: Iterable[Job], size: int) -> Iterator[list[Job]]:
    """``items`` in lists of ``size`` (itertools.batched is Python 3.12+)."""
    it = iter(items)
    while page := list(itertools.islice(it, size)):
        yield page


def _open(path: Path, clock: Clock | None = None) -> JobStore:
    """Open an existing job database; never create one by mistake."""
    if not path.exists():
        raise CliError(
            f"no database at {path}; give the path of an existing labkit job database "
            "(the file your workers and enqueuers use)"
        )
    if path.is_file() and path.stat().st_size == 0:
        raise CliError(
            f"{path} is an empty file, not a labkit job database; it was left as it is. "
            "Give the path of the database your workers use"
        )
    try:
        return JobStore(path, clock=clock or SystemClock())
    except LabkitError as exc:
        raise CliError(str(exc)) from None


def _as_of(text: str) -> float:
    """``--as-of`` as epoch seconds: ISO 8601, read as UTC when it names no zone."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--as-of wants a time like 2026-01-01T08:00:00Z, not {text!r}"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _clock(args: argparse.Namespace) -> Clock | None:
    """A clock fixed at ``--as-of`` when given; None means the wall clock."""
    return FakeClock(args.as_of) if args.as_of is not None else None


def cmd_inspect(args: argparse.Namespace) -> int:
    with _open(args.db, _clock(args)) as store:
        if args.job is not None:
            job = store.get(args.job)
            print(
                f"job {job.id} {safe(job.kind)} key={safe(job.key)} state={job.state} "
                f"attempt {job.attempt}/{job.max_attempts} redrives={job.redrives}"
            )
            if job.dead_reason:
                print(f"dead reason: {safe(job.dead_reason)}")
            rows = [
                {
                    "attempt": a.attempt,
                    "worker": safe(a.worker),
                    "started": isoformat(a.started_at),
                    "outcome": a.outcome,
                    "error": safe(a.error),
                }
                for a in store.attempts(job.id)
            ]
            print(format_table(rows, ["attempt", "worker", "started", "outcome", "error"]))
            return 0
        counts = store.counts()
        print(format_table([counts], list(counts)))
        dead = store.dead_letters(limit=args.limit)
        print()
        print(f"dead letters ({counts['dead']}, oldest first, showing up to {args.limit}):")
        rows = [
            {
                "id": d.id,
                "kind": safe(d.kind),
                "key": safe(d.key),
                "age": age_text(d.age_s),
                "attempts": d.attempts,
                "redrives": d.redrives,
                "reason": safe(d.reason),
            }
            for d in dead
        ]
        print(format_table(rows, ["id", "kind", "key", "age", "attempts", "redrives", "reason"]))
    return 0


def _show(jobs: Iterable[Job], verb: str, dry_run: bool, total: int) -> int:
    """Say how many jobs (``total``), then print them a page at a time; return how many.

    ``jobs`` may be a lazy walk (the redrives happen as it is read), so memory holds one
    page. Should fewer than ``total`` come (another process redrove some meanwhile),
    a last line says so.
    """
    prefix = "would redrive" if dry_run else verb
    print(f"{prefix} {total} job(s)" + (" (dry run: nothing changed)" if dry_run else ""))
    shown = 0
    for page in _pages(jobs, BATCH):
        rows = [
            {"id": j.id, "kind": safe(j.kind), "key": safe(j.key), "reason": safe(j.dead_reason)}
            for j in page
        ]
        print(format_table(rows, ["id", "kind", "key", "reason"]))
        shown += len(page)
    if shown != total:
        print(f"({shown} of them, in the end: the others changed while this ran)")
    return shown


def _need_limit(args: argparse.Namespace, what: str) -> int:
    if args.limit is None:
        raise CliError(
            f"refusing to {what} in bulk without --limit: say how many jobs at most "
            "(for example --limit 10), and try --dry-run first to see which"
        )
    return int(args.limit)


def cmd_redrive(args: argparse.Namespace) -> int:
    with _open(args.db, _clock(args)) as store:
        if args.ids:
            if args.kind or args.queue or args.error_class:
                raise CliError("give job ids or filters (--kind/--queue/--error-class), not both")
            # The same id twice is one job: redriving it twice would fail half-way.
            chosen = [store.get(i) for i in dict.fromkeys(args.ids)]
            not_dead = [j for j in chosen if j.state != JobState.DEAD]
            if not_dead:
                listed = ", ".join(f"{j.id} is {j.state}" for j in not_dead)
                raise CliError(f"only dead jobs can be redriven ({listed}); nothing was changed")
            if args.dry_run:
                _show(chosen, "redrove", True, len(chosen))
                return 0
            redriven = [store.redrive(j.id, note=args.note) for j in chosen]
            _show(redriven, "redrove", False, len(redriven))
            return 0
        limit = _need_limit(args, "redrive")
        jobs = store.redrive_where(
            limit=limit,
            kind=args.kind,
            queue=args.queue,
            error_class=args.error_class,
            dry_run=args.dry_run,
            note=args.note,
        )
        _show(jobs, "redrove", args.dry_run, len(jobs))
    return 0


def cmd_retry_failed(args: argparse.Namespace) -> int:
    limit = _need_limit(args, "retry failed jobs")
    reasons: tuple[str, ...] = RETRYABLE_DEAD_REASONS
    if args.include_lease_expired:
        reasons += (LEASE_EXPIRED_REASON,)
    with _open(args.db, _clock(args)) as store:
        total = min(limit, store.count_dead_by_reason(reasons, kind=args.kind))
        chosen = itertools.islice(store.dead_by_reason(reasons, kind=args.kind), limit)
        if args.dry_run:
            _show(chosen, "retried", True, total)
        else:
            _show(_redrive_each(store, chosen), "retried", False, total)
        known = (*RETRYABLE_DEAD_REASONS, LEASE_EXPIRED_REASON)
        left = store.count_dead_by_reason(known, kind=args.kind, matching=False)
        if left:
            of_kind = f" of kind {safe(args.kind)}" if args.kind else ""
            print(
                f"left {left} dead job(s){of_kind} with permanent failures alone: fix their "
                "cause, then use `labkit redrive` on them"
            )
        if not args.include_lease_expired:
            crashed = store.count_dead_by_reason((LEASE_EXPIRED_REASON,), kind=args.kind)
            if crashed:
                print(
                    f"left {crashed} dead job(s) whose worker died on every attempt alone: "
                    "they may be poison jobs; read their history (`labkit inspect --job ID`), "
                    "then add --include-lease-expired to retry them"
                )
    return 0


def _redrive_each(store: JobStore, jobs: Iterable[Job]) -> Iterator[Job]:
    """Redrive each job as it is read; skip one another process redrove meanwhile."""
    for job in jobs:
        try:
            yield store.redrive(job.id, note="retry-failed")
        except InvalidTransition:
            continue


def _load_handlers(spec: str) -> dict[str, Any]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"--handlers must look like package.module:HANDLERS, not {spec!r}")
    try:
        handlers = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"cannot load handlers {spec!r}: {exc}") from None
    if not isinstance(handlers, dict) or not handlers:
        raise CliError(f"{spec} must be a non-empty dict of job kind -> handler function")
    return handlers


def cmd_worker(args: argparse.Namespace) -> int:
    from labkit.worker import Worker

    handlers = _load_handlers(args.handlers)
    store = _open(args.db)
    try:
        worker = Worker(
            store, handlers, name=args.name, queues=args.queue or ("default",), lease_s=args.lease_s
        )
    except ValueError as exc:
        store.close()
        raise CliError(str(exc)) from None
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    print(
        f"worker {safe(args.name)} on {args.db} ({', '.join(sorted(handlers))}); Ctrl-C stops "
        "it after the current job"
    )
    # The worker's log (each job, busy back-offs, lost leases) goes to stderr.
    log = logging.getLogger("labkit.worker")
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.addHandler(to_stderr)
    level, log.level = log.level, logging.INFO
    try:
        ran = worker.run_until_idle() if args.until_idle else worker.run_forever(args.poll_s)
    except KeyboardInterrupt:
        worker.stop()
        ran = len(worker.runs)
    finally:
        log.removeHandler(to_stderr)
        log.setLevel(level)
        store.close()
    print(f"worker {safe(args.name)} stopped after {ran} job(s)")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from labkit.grading.bundle import bundle
    from labkit.grading.grade import LABKIT_ROOT
    from labkit.grading.release import ReleaseError, release

    if (args.out is None) == (args.bundle is None):
        raise CliError("give either OUT (the exercises folder) or --bundle DIR (the student kit)")
    try:
        if args.bundle is not None:
            written = bundle(LABKIT_ROOT, args.solutions, args.bundle)
        else:
            written = release(args.solutions, args.out)
    except ReleaseError as exc:
        raise CliError(str(exc)) from None
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from labkit.grading.confine import Confinement, Limits
    from labkit.grading.grade import Settings, grade_folder

    if not args.solutions.is_dir():
        raise CliError(f"no solutions folder at {args.solutions}; pass --solutions DIR")
    limits = Limits(
        memory=args.memory_mib << 20,
        processes=args.max_processes,
        open_files=args.max_open_files,
        file_size=args.max_file_mib << 20,
        cpu_seconds=args.cpu_seconds,
        output=args.max_output_kib << 10,
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
    )
    try:
        grade_folder(
            args.submissions,
            args.out,
            settings,
            jobs=args.jobs,
            only=args.exercise,
            progress=lambda line: print(line, flush=True),
            run=args.run_id,
        )
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc)) from None
    return 0


def _version() -> str:
    try:
        return metadata.version("labkit")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return "unknown (not installed)"


def _count(text: str) -> int:
    """An argparse type: a whole number of jobs, 1 or more."""
    try:
        return jobargs.count("the value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a whole number, 1 or more, not {text!r}"
        ) from None


def _job_id(text: str) -> int:
    """An argparse type: a job id."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a job id is a whole number, not {text!r}") from None
    if not jobargs.in_id_range(value):
        raise argparse.ArgumentTypeError(f"a job id is 1 or more, not {text!r}")
    return value


def _seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds."""
    try:
        return jobargs.seconds("the value", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a positive, finite number of seconds (ten years at most), not {text!r}"
        ) from None


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in ``--help``, unless its help already names it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False):
            return text if action.default is not False else text + " (default: off)"
        return super()._get_help_string(action) or text


def build_parser() -> argparse.ArgumentParser:
    # labkit.grading.grade's DEFAULT_SOLUTIONS, named here without importing grading: that
    # pulls in nbformat, a second of start-up every `labkit inspect` would pay for nothing.
    default_solutions = Path(__file__).resolve().parents[1] / "solutions"
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--version", action="version", version=f"labkit {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, help="what to do (`labkit COMMAND --help` for its options)"
    )
    db_help = "the labkit job database (a SQLite file your workers use)"

    def as_of(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--as-of", type=_as_of, help="act at this UTC time (ISO 8601) instead of now"
        )

    p = sub.add_parser("inspect", help="counts by state, dead letters, one job's history")
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument("--job", type=_job_id, help="show this job's attempt history")
    p.add_argument(
        "--limit", type=_count, default=20, help="dead letters to list, 1 or more (default 20)"
    )
    as_of(p)
    p.set_defaults(run=cmd_inspect)

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--limit", type=_count, help="at most this many jobs, 1 or more (required in bulk)"
        )
        p.add_argument("--kind", help="only dead jobs of this kind")
        p.add_argument(
            "--dry-run", action="store_true", help="show what would change, change nothing"
        )
        as_of(p)

    p = sub.add_parser("redrive", help="send dead jobs back to pending, keeping their keys")
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument("ids", nargs="*", type=_job_id, help="job ids (or use filters with --limit)")
    filters(p)
    p.add_argument("--queue", help="only dead jobs of this queue")
    p.add_argument("--error-class", help="only dead jobs whose last error had this class")
    p.add_argument("--note", default="", help="why (kept in the redrive history)")
    p.set_defaults(run=cmd_redrive)

    p = sub.add_parser("retry-failed", help="redrive dead jobs whose failures were transient")
    p.add_argument("db", type=Path, help=db_help)
    filters(p)
    p.add_argument(
        "--include-lease-expired",
        action="store_true",
        help="also retry jobs whose worker died on every attempt (often poison jobs: "
        "read their history first)",
    )
    p.set_defaults(run=cmd_retry_failed)

    p = sub.add_parser("worker", help="run a worker on a job database")
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument("--handlers", required=True, help="package.module:HANDLERS (kind -> function)")
    p.add_argument("--name", default="worker", help="the worker's name in leases and logs")
    p.add_argument("--queue", action="append", help="a queue to take jobs from (repeatable)")
    p.add_argument(
        "--lease-s", type=_seconds, default=30.0, help="seconds a claimed job stays leased"
    )
    p.add_argument(
        "--poll-s", type=_seconds, default=1.0, help="seconds to wait when no job is ready"
    )
    p.add_argument("--until-idle", action="store_true", help="stop when nothing is ready")
    p.set_defaults(run=cmd_worker)

    p = sub.add_parser("release", help="write the student notebooks from the solutions")
    p.add_argument("out", type=Path, nargs="?", help="folder for the exercise notebooks")
    p.add_argument(
        "--bundle", type=Path, help="write the whole student kit (no solutions) into this folder"
    )
    p.add_argument("--solutions", type=Path, default=default_solutions)
    p.set_defaults(run=cmd_release)

    p = sub.add_parser(
        "grade",
        help="grade a folder with one subfolder per student",
        description="Run each student's notebook confined (own uid as root, bubblewrap when "
        "installed, resource limits) and the instructor's public and hidden checks in this "
        "process; write OUT/RUN_ID/grades.csv, totals.csv and feedback/.",
        formatter_class=_DefaultsShown,
    )
    p.add_argument("submissions", type=Path, help="folder with one subfolder per student")
    p.add_argument("--out", type=Path, default=Path("grading"), help="runs are written here")
    p.add_argument("--run-id", help="name of this run's folder (default: UTC time, to the second)")
    p.add_argument("--solutions", type=Path, default=default_solutions, help="holds hidden/")
    p.add_argument(
        "--exercise",
        action="append",
        help="grade only this exercise, repeatable (default: every exercise)",
    )
    p.add_argument(
        "--jobs",
        type=_count,
        default=os.cpu_count() or 1,
        help=f"notebooks graded at once (default: the number of cores, {os.cpu_count()} here)",
    )
    p.add_argument("--cell-timeout", type=_seconds, default=30.0, help="seconds per code cell")
    p.add_argument(
        "--check-timeout",
        type=_seconds,
        default=None,
        help="cap on each check's seconds (default: each check's own, as in check())",
    )
    p.add_argument(
        "--timeout-factor",
        type=_seconds,
        default=1.0,
        help="multiply every check's own timeout (more than 1 on a loaded machine)",
    )
    p.add_argument("--memory-mib", type=_count, default=1024, help="address space per process")
    p.add_argument("--max-processes", type=_count, default=128, help="processes per student (root)")
    p.add_argument("--max-open-files", type=_count, default=256, help="open files per process")
    p.add_argument("--max-file-mib", type=_count, default=64, help="largest file a student writes")
    p.add_argument("--cpu-seconds", type=_count, default=120, help="CPU time per process")
    p.add_argument("--max-output-kib", type=_count, default=4096, help="printed output per student")
    p.add_argument(
        "--network", action="store_true", help="let student code reach the network (services)"
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="no own uid, no bubblewrap: limits only (to debug the grader, never for a class)",
    )
    p.set_defaults(run=cmd_grade)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except CliError as exc:
        print(f"labkit {args.command}: {exc}", file=sys.stderr)
        return 2
    except LabkitError as exc:
        print(f"labkit {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
