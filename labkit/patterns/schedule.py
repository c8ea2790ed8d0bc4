"""Periodic jobs that any number of schedulers enqueue exactly once per slot.

A schedule fires at slots: every N seconds (aligned to the Unix epoch, so every process
computes the same slots) or at the minutes a small crontab expression matches (UTC).
``tick()`` enqueues each due slot with the key ``schedule:<name>:<fire time>``; the
job store refuses a second job with the same key, so two schedulers (two hosts, or a
restarted one overlapping with the old) enqueue every slot once. That is the fix for
seed 000's cron that ran twice and charged twice.

The store is also the memory: the latest slot a schedule has is read back from its
keys, so after downtime ``tick()`` knows which slots were missed and applies the
schedule's catch-up policy:

=========  =================================================================
``skip``   drop missed slots; run only slots still within ``grace`` seconds
``once``   run one job for the most recent missed slot (Celery Beat's habit)
``all``    run every missed slot, oldest first (at most ``max_catch_up``)
=========  =================================================================

Hence the lesson of notebook 10: keys must outlive every late arrival. If finished
jobs are pruned (``JobStore.prune_finished``) before a slow or restarted scheduler
reconciles, the slot's key is gone and the slot runs again.

In production: Celery Beat (one instance, guarded by a lock) with idempotent tasks,
APScheduler, or a database-backed scheduler such as Oban's Cron plugin, which relies
on the same unique-key idea.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from labkit import queries
from labkit.clock import Clock
from labkit.job import Job
from labkit.store import JobStore

SQL = queries.load("patterns/schedule.sql")
CatchUp = Literal["skip", "once", "all"]
CATCH_UP: tuple[str, ...] = ("skip", "once", "all")

FIELDS = {  # name: (low, high) as crontab spells them
    "minute": (0, 59),
    "hour": (0, 23),
    "day": (1, 31),
    "month": (1, 12),
    "weekday": (0, 6),  # 0 = Sunday, as in crontab (7 is accepted for Sunday too)
}


def slot_iso(ts: float) -> str:
    """A fire time as it appears in keys: ``2026-01-01T00:00:00Z`` (sorts by time)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_slot_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def slot_key(schedule: str, fire_time: float) -> str:
    """The job key of one slot: ``schedule:<name>:<fire time>``."""
    return f"schedule:{schedule}:{slot_iso(fire_time)}"


def fire_time_of(job: Job) -> float:
    """The slot a scheduled job stands for, read back from its key."""
    # Schedule names hold no ':', so everything after the second one is the fire time.
    return parse_slot_iso(job.key.split(":", 2)[2])


def parse_field(name: str, spec: int | str | Iterable[int]) -> frozenset[int]:
    """Values one crontab field allows: ``*``, ``*/15``, ``5``, ``1-5``, ``0,30``, ``1-9/2``."""
    low, high = FIELDS[name]
    if isinstance(spec, int):
        values = {spec}
    elif isinstance(spec, str):
        values = set()
        for part in spec.replace(" ", "").split(","):
            values |= _parse_part(name, part, low, high)
    else:
        values = {int(v) for v in spec}
    if name == "weekday":
        values = {0 if v == 7 else v for v in values}
    bad = sorted(v for v in values if not low <= v <= high)
    if not values or bad:
        raise ValueError(
            f"cron {name}={spec!r} is out of range: {name} takes {low}-{high} "
            "(forms: '*', '*/15', '5', '1-5', '0,30')"
        )
    return frozenset(values)


def _parse_part(name: str, part: str, low: int, high: int) -> set[int]:
    base, _, step_text = part.partition("/")
    try:
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = int(base)
            end = high if step_text else start
    except ValueError:
        raise ValueError(
            f"cron {name}={part!r} is not understood; use '*', '*/15', '5', '1-5' or '0,30'"
        ) from None
    if step < 1 or start > end:
        raise ValueError(f"cron {name}={part!r}: the range is empty or the step is below 1")
    if name == "weekday" and end == 7:
        return set(range(start, 7, step)) | ({0} if (7 - start) % step == 0 else set())
    return set(range(start, end + 1, step))


@dataclass(frozen=True)
class Every:
    """Slots at every multiple of ``seconds`` since the Unix epoch."""

    seconds: float

    def slots_back(self, now: float) -> Iterator[float]:
        slot = math.floor(now / self.seconds) * self.seconds
        while True:
            yield slot
            slot -= self.seconds


@dataclass(frozen=True)
class Cron:
    """Slots at the start of every UTC minute the five fields match.

    As in crontab, when both ``day`` and ``weekday`` are restricted a minute matches if
    either does.
    """

    minute: frozenset[int]
    hour: frozenset[int]
    day: frozenset[int]
    month: frozenset[int]
    weekday: frozenset[int]
    day_any: bool
    weekday_any: bool

    def matches(self, ts: float) -> bool:
        t = datetime.fromtimestamp(ts, UTC)
        if t.minute not in self.minute or t.hour not in self.hour or t.month not in self.month:
            return False
        day_ok = t.day in self.day
        weekday_ok = (t.isoweekday() % 7) in self.weekday
        if self.day_any or self.weekday_any:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def slots_back(self, now: float) -> Iterator[float]:
        minute = math.floor(now / 60) * 60
        while True:
            if self.matches(minute):
                yield float(minute)
            minute -= 60


@dataclass(frozen=True)
class Schedule:
    """One periodic job: what to enqueue, when, and what to do about missed slots."""

    name: str
    kind: str
    payload: Any
    when: Every | Cron
    catch_up: CatchUp
    grace: float
    since: float
    queue: str
    max_attempts: int


@dataclass(frozen=True)
class Fired:
    """One slot a tick handled: ``created`` False means another scheduler had enqueued it."""

    schedule: str
    fire_time: float
    job: Job
    created: bool
    scheduler: str

    @property
    def fire_iso(self) -> str:
        return slot_iso(self.fire_time)


class Scheduler:
    """Turns schedules into jobs in a JobStore, one job per slot whoever ticks.

    ``Scheduler(store, clock, name="scheduler", lookback=86400, max_catch_up=100)``:
    ``lookback`` bounds how far back a tick looks for missed slots, ``max_catch_up``
    how many it enqueues at once under ``catch_up="all"``.
    """

    def __init__(
        self,
        store: JobStore,
        clock: Clock,
        name: str = "scheduler",
        *,
        lookback: float = 86_400.0,
        max_catch_up: int = 100,
    ) -> None:
        self.store = store
        self.clock = clock
        self.name = name
        self.lookback = float(lookback)
        self.max_catch_up = max_catch_up
        self.schedules: dict[str, Schedule] = {}

    def _add(
        self,
        name: str,
        kind: str,
        payload: Any,
        when: Every | Cron,
        catch_up: str,
        grace: float,
        since: float | None,
        queue: str,
        max_attempts: int,
    ) -> Schedule:
        if not name or ":" in name:
            raise ValueError(f"schedule name {name!r} must be non-empty and without ':'")
        if name in self.schedules:
            raise ValueError(f"schedule {name!r} already exists in this scheduler")
        if catch_up not in CATCH_UP:
            raise ValueError(f"catch_up must be one of {', '.join(CATCH_UP)}, not {catch_up!r}")
        if grace < 0:
            raise ValueError("grace must be >= 0 seconds")
        schedule = Schedule(
            name=name,
            kind=kind,
            payload=payload,
            when=when,
            catch_up=catch_up,  # type: ignore[arg-type]
            grace=float(grace),
            since=self.clock.now() if since is None else float(since),
            queue=queue,
            max_attempts=max_attempts,
        )
        self.schedules[name] = schedule
        return schedule

    def every(
        self,
        seconds: float,
        kind: str,
        payload: Any = None,
        *,
        name: str,
        catch_up: CatchUp = "once",
        grace: float = 60.0,
        since: float | None = None,
        queue: str = "default",
        max_attempts: int = 5,
    ) -> Schedule:
        """Fire ``kind`` every ``seconds`` (at epoch-aligned slots) from ``since`` (now).

        A slot counts as on time while ``now - slot <= grace``; older due slots count as
        missed and follow ``catch_up``.
        """
        if seconds <= 0:
            raise ValueError(f"every(seconds={seconds!r}): the period must be positive")
        return self._add(
            name, kind, payload, Every(float(seconds)), catch_up, grace, since, queue, max_attempts
        )

    def cron(
        self,
        kind: str,
        payload: Any = None,
        *,
        name: str,
        minute: int | str | Iterable[int] = "*",
        hour: int | str | Iterable[int] = "*",
        day: int | str | Iterable[int] = "*",
        month: int | str | Iterable[int] = "*",
        weekday: int | str | Iterable[int] = "*",
        catch_up: CatchUp = "once",
        grace: float = 60.0,
        since: float | None = None,
        queue: str = "default",
        max_attempts: int = 5,
    ) -> Schedule:
        """Fire ``kind`` at the UTC minutes a crontab-like expression matches.

        ``cron("report", minute=0, hour="*/6", name="report")`` is ``0 */6 * * *``;
        weekday 0 (or 7) is Sunday.
        """
        when = Cron(
            minute=parse_field("minute", minute),
            hour=parse_field("hour", hour),
            day=parse_field("day", day),
            month=parse_field("month", month),
            weekday=parse_field("weekday", weekday),
            day_any=day == "*",
            weekday_any=weekday == "*",
        )
        return self._add(name, kind, payload, when, catch_up, grace, since, queue, max_attempts)

    def last_slot(self, schedule: str) -> float | None:
        """The latest slot of ``schedule`` that has a job in the store (None if none)."""
        prefix = f"schedule:{schedule}:"
        row = self.store.conn.execute(
            SQL["last_slot"], {"prefix": prefix, "prefix_end": prefix[:-1] + ";"}
        ).fetchone()
        return None if row is None or row[0] is None else parse_slot_iso(row[0][len(prefix) :])

    def due(self, schedule: Schedule, now: float) -> list[float]:
        """The slots of ``schedule`` to enqueue at ``now``, oldest first, after catch-up."""
        last = self.last_slot(schedule.name)
        floor = max(schedule.since, now - self.lookback)
        pending: list[float] = []
        for slot in schedule.when.slots_back(now):
            if slot < floor or (last is not None and slot <= last):
                break
            pending.append(slot)
            if len(pending) >= self.max_catch_up:
                break
        pending.reverse()
        on_time = [s for s in pending if now - s <= schedule.grace]
        missed = [s for s in pending if now - s > schedule.grace]
        if schedule.catch_up == "all":
            return pending
        if schedule.catch_up == "once" and missed:
            return [missed[-1], *on_time]
        return on_time

    def tick(self) -> list[Fired]:
        """Enqueue every due slot of every schedule; return what each slot became."""
        now = self.clock.now()
        fired: list[Fired] = []
        for schedule in self.schedules.values():
            for slot in self.due(schedule, now):
                job, created = self.store.enqueue(
                    schedule.kind,
                    schedule.payload,
                    key=slot_key(schedule.name, slot),
                    queue=schedule.queue,
                    run_after=slot,
                    max_attempts=schedule.max_attempts,
                )
                fired.append(Fired(schedule.name, slot, job, created, self.name))
        return fired
