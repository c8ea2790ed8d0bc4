"""The ``labkit`` commands on a job database: inspect, redrive, retry-failed, worker.

``labkit.cli`` adds them to its parser with ``add_parsers``. Every command that changes jobs
accepts ``--dry-run`` and names what it would do. ``inspect``, ``redrive`` and ``retry-failed``
accept ``--as-of T`` to act as if it were time T (UTC): ages are read, and redriven jobs
become due, at T. Reports and lessons use it to print the same thing on every run. Bulk
redrive has no default limit: redriving a whole dead-letter queue by accident floods the
dependency that killed those jobs in the first place.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import logging
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from labkit import dbfile
from labkit.cli.args import CliError, count, job_id, name, safe, seconds, utc_time
from labkit.clock import Clock, FakeClock, SystemClock, isoformat
from labkit.errors import InvalidTransition, LabkitError
from labkit.job import Job, JobState
from labkit.lang import _
from labkit.store import JobStore
from labkit.store.contract import LEASE_EXPIRED_REASON, RETRYABLE_DEAD_REASONS
from labkit.tables import age_text, format_table

#: How many rows a bulk command reads and prints at a time: memory stays flat.
BATCH = 500


def _pages(items: Iterable[Job], size: int) -> Iterator[list[Job]]:
    """``items`` in lists of ``size`` (itertools.batched is Python 3.12+)."""
    it = iter(items)
    while page := list(itertools.islice(it, size)):
        yield page


def _open(path: Path, clock: Clock | None = None) -> JobStore:
    """Open an existing job database; never create one by mistake, nor through a link.

    A link given as the database is refused, as dbfile refuses one beside it: an operator
    runs these commands on a path someone else may have planted.
    """
    real = os.path.realpath(path)
    advice = (
        _("Pass the real path ({real}) instead, not a link to it").format(real=real)
        if path.exists()
        else _("Pass the real path, not a link to it")
    )
    if refused := dbfile.link_error(path, advice):
        raise CliError(str(refused))
    if not path.exists():
        raise CliError(
            _(
                "no database at {path}; give the path of an existing labkit job database "
                "(the file your workers and enqueuers use)"
            ).format(path=path)
        )
    if path.is_file() and path.stat().st_size == 0:
        raise CliError(
            _(
                "{path} is an empty file, not a labkit job database; it was left as it is. "
                "Give the path of the database your workers use"
            ).format(path=path)
        )
    try:
        return JobStore(path, clock=clock or SystemClock())
    except LabkitError as exc:
        raise CliError(str(exc)) from None


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
                print(_("dead reason: {reason}").format(reason=safe(job.dead_reason)))
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
        print(
            _("dead letters ({count}, oldest first, showing up to {limit}):").format(
                count=counts["dead"], limit=args.limit
            )
        )
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


def _show(jobs: Iterable[Job], done: str, dry_run: bool, total: int) -> int:
    """Say how many jobs (``total``), then print them a page at a time; return how many.

    ``done`` says what happened to ``{count}`` jobs ("redrove {count} job(s)"), a dry run
    what would. ``jobs`` may be a lazy walk (the redrives happen as it is read), so memory
    holds one page. Should fewer than ``total`` come (another process redrove some
    meanwhile), a last line says so.
    """
    if dry_run:
        done = _("would redrive {count} job(s) (dry run: nothing changed)")
    print(done.format(count=total))
    shown = 0
    for page in _pages(jobs, BATCH):
        rows = [
            {"id": j.id, "kind": safe(j.kind), "key": safe(j.key), "reason": safe(j.dead_reason)}
            for j in page
        ]
        print(format_table(rows, ["id", "kind", "key", "reason"]))
        shown += len(page)
    if shown != total:
        print(
            _("({count} of them, in the end: the others changed while this ran)").format(
                count=shown
            )
        )
    return shown


def _need_limit(args: argparse.Namespace, refusal: str) -> int:
    """``--limit``, or ``refusal`` (why a bulk change needs one) as a usage error."""
    if args.limit is None:
        raise CliError(refusal)
    return int(args.limit)


def cmd_redrive(args: argparse.Namespace) -> int:
    with _open(args.db, _clock(args)) as store:
        if args.ids:
            if args.kind or args.queue or args.error_class:
                raise CliError(
                    _("give job ids or filters (--kind/--queue/--error-class), not both")
                )
            # The same id twice is one job: redriving it twice would fail half-way.
            chosen = [store.get(i) for i in dict.fromkeys(args.ids)]
            not_dead = [j for j in chosen if j.state != JobState.DEAD]
            if not_dead:
                listed = ", ".join(
                    _("{id} is {state}").format(id=j.id, state=j.state) for j in not_dead
                )
                raise CliError(
                    _("only dead jobs can be redriven ({listed}); nothing was changed").format(
                        listed=listed
                    )
                )
            if args.dry_run:
                _show(chosen, _("redrove {count} job(s)"), True, len(chosen))
                return 0
            redriven = [store.redrive(j.id, note=args.note) for j in chosen]
            _show(redriven, _("redrove {count} job(s)"), False, len(redriven))
            return 0
        limit = _need_limit(
            args,
            _(
                "refusing to redrive in bulk without --limit: say how many jobs at most "
                "(for example --limit 10), and try --dry-run first to see which"
            ),
        )
        jobs = store.redrive_where(
            limit=limit,
            kind=args.kind,
            queue=args.queue,
            error_class=args.error_class,
            dry_run=args.dry_run,
            note=args.note,
        )
        _show(jobs, _("redrove {count} job(s)"), args.dry_run, len(jobs))
    return 0


def cmd_retry_failed(args: argparse.Namespace) -> int:
    limit = _need_limit(
        args,
        _(
            "refusing to retry failed jobs in bulk without --limit: say how many jobs at "
            "most (for example --limit 10), and try --dry-run first to see which"
        ),
    )
    reasons: tuple[str, ...] = RETRYABLE_DEAD_REASONS
    if args.include_lease_expired:
        reasons += (LEASE_EXPIRED_REASON,)
    with _open(args.db, _clock(args)) as store:
        total = min(limit, store.count_dead_by_reason(reasons, kind=args.kind))
        chosen = itertools.islice(store.dead_by_reason(reasons, kind=args.kind), limit)
        if args.dry_run:
            _show(chosen, _("retried {count} job(s)"), True, total)
        else:
            _show(_redrive_each(store, chosen), _("retried {count} job(s)"), False, total)
        known = (*RETRYABLE_DEAD_REASONS, LEASE_EXPIRED_REASON)
        left = store.count_dead_by_reason(known, kind=args.kind, matching=False)
        if left and args.kind:
            print(
                _(
                    "left {count} dead job(s) of kind {kind} with permanent failures alone: "
                    "fix their cause, then use `labkit redrive` on them"
                ).format(count=left, kind=safe(args.kind))
            )
        elif left:
            print(
                _(
                    "left {count} dead job(s) with permanent failures alone: fix their "
                    "cause, then use `labkit redrive` on them"
                ).format(count=left)
            )
        if not args.include_lease_expired:
            crashed = store.count_dead_by_reason((LEASE_EXPIRED_REASON,), kind=args.kind)
            if crashed:
                print(
                    _(
                        "left {count} dead job(s) whose worker died on every attempt alone: "
                        "they may be poison jobs; read their history "
                        "(`labkit inspect --job ID`), then add --include-lease-expired to "
                        "retry them"
                    ).format(count=crashed)
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
    module_name, _colon, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(
            _("--handlers must look like package.module:HANDLERS, not {spec!r}").format(spec=spec)
        )
    try:
        handlers = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(
            _("cannot load handlers {spec!r}: {error}").format(spec=spec, error=exc)
        ) from None
    if not isinstance(handlers, dict) or not handlers:
        raise CliError(
            _("{spec} must be a non-empty dict of job kind -> handler function").format(spec=spec)
        )
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
    signal.signal(signal.SIGTERM, lambda *_signal: worker.stop())
    print(
        _("worker {name} on {db} ({kinds}); Ctrl-C stops it after the current job").format(
            name=safe(args.name), db=args.db, kinds=", ".join(sorted(handlers))
        )
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
    print(_("worker {name} stopped after {count} job(s)").format(name=safe(args.name), count=ran))
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add inspect, redrive, retry-failed and worker to the ``labkit`` parser."""
    db_help = _("the labkit job database (a SQLite file your workers use)")

    def as_of(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--as-of", type=utc_time, help=_("act at this UTC time (ISO 8601) instead of now")
        )

    p = sub.add_parser("inspect", help=_("counts by state, dead letters, one job's history"))
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument("--job", type=job_id, help=_("show this job's attempt history"))
    p.add_argument(
        "--limit", type=count, default=20, help=_("dead letters to list, 1 or more (default 20)")
    )
    as_of(p)
    p.set_defaults(run=cmd_inspect)

    def filters(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--limit", type=count, help=_("at most this many jobs, 1 or more (required in bulk)")
        )
        p.add_argument("--kind", type=name, help=_("only dead jobs of this kind"))
        p.add_argument(
            "--dry-run", action="store_true", help=_("show what would change, change nothing")
        )
        as_of(p)

    p = sub.add_parser("redrive", help=_("send dead jobs back to pending, keeping their keys"))
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument("ids", nargs="*", type=job_id, help=_("job ids (or use filters with --limit)"))
    filters(p)
    p.add_argument("--queue", type=name, help=_("only dead jobs of this queue"))
    p.add_argument(
        "--error-class", type=name, help=_("only dead jobs whose last error had this class")
    )
    p.add_argument("--note", default="", help=_("why (kept in the redrive history)"))
    p.set_defaults(run=cmd_redrive)

    p = sub.add_parser("retry-failed", help=_("redrive dead jobs whose failures were transient"))
    p.add_argument("db", type=Path, help=db_help)
    filters(p)
    p.add_argument(
        "--include-lease-expired",
        action="store_true",
        help=_(
            "also retry jobs whose worker died on every attempt (often poison jobs: "
            "read their history first)"
        ),
    )
    p.set_defaults(run=cmd_retry_failed)

    p = sub.add_parser("worker", help=_("run a worker on a job database"))
    p.add_argument("db", type=Path, help=db_help)
    p.add_argument(
        "--handlers", required=True, help=_("package.module:HANDLERS (kind -> function)")
    )
    p.add_argument(
        "--name", type=name, default="worker", help=_("the worker's name in leases and logs")
    )
    p.add_argument(
        "--queue", type=name, action="append", help=_("a queue to take jobs from (repeatable)")
    )
    p.add_argument(
        "--lease-s", type=seconds, default=30.0, help=_("seconds a claimed job stays leased")
    )
    p.add_argument(
        "--poll-s", type=seconds, default=1.0, help=_("seconds to wait when no job is ready")
    )
    p.add_argument("--until-idle", action="store_true", help=_("stop when nothing is ready"))
    p.set_defaults(run=cmd_worker)
