"""Fixtures every test folder shares: a fake clock, a store on tmp_path, a seeded rng, services.

Services (PostgreSQL, Redis, RabbitMQ) are probed on 127.0.0.1. When one is missing the
test is skipped with a message saying how to start it; with ``LABKIT_REQUIRE_SERVICES=1``
(what ``.ci/run`` exports) a missing service fails the test instead, so CI cannot pass
by skipping.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from studentkit import build_kit, start_building

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.store import JobStore

#: The seed of the ``rng`` fixture; printed in the header so a failure replays.
SEED = int(os.environ.get("LABKIT_SEED", "20260101"))
# The tests speak English; the ones about the Portuguese edition ask for it themselves
# (a machine whose LANG is pt_BR, run through `make`, would otherwise set it for all).
os.environ.pop("LABKIT_LANG", None)


# (host port, how to start it, the URL handed to tests)
COMPOSE = "run `docker compose up -d` in the repository's root (compose.yaml starts all three)"
SERVICES: dict[str, tuple[int, str, str]] = {
    "postgres": (
        5432,
        f"start PostgreSQL on 127.0.0.1:5432 with a `test` database you can reach without a "
        f"password: {COMPOSE}",
        "postgresql://postgres@127.0.0.1:5432/test",
    ),
    "redis": (
        6379,
        f"start Redis on 127.0.0.1:6379: {COMPOSE}",
        "redis://127.0.0.1:6379/0",
    ),
    "rabbitmq": (
        5672,
        f"start RabbitMQ on 127.0.0.1:5672 (guest/guest): {COMPOSE}",
        "amqp://guest:guest@127.0.0.1:5672//",
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the long reliability soaks in tests/reliability (make soak)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: long reliability run, only with --soak")


_KIT_TESTS = Path(__file__).resolve().parent / "kit"


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has made its factory
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist, start building the student kit at once, in the background.

    The workers' ``kit`` fixture then finds it built (or waits on its lock) instead of
    all of them waiting while one builds, a minute of two idle workers in ``make test``.
    Only in the controller, and only when the run collects tests/kit.
    """
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    paths = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    if not any(p == _KIT_TESTS or p in _KIT_TESTS.parents or _KIT_TESTS in p.parents
               for p in paths):
        return
    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    config._labkit_kit_builder = start_building(factory.getbasetemp())  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session) -> None:
    builder = getattr(session.config, "_labkit_kit_builder", None)
    # Finished long ago in a full run; stopped, whole, if the run was cut short. poll()
    # first: until it is reaped its pid cannot be another process's.
    if builder is not None and builder.poll() is None:
        from labkit.integrations.celery.proctree import kill_tree

        kill_tree(builder.pid)
        builder.wait(10)


def pytest_report_header(config: pytest.Config) -> list[str]:
    zoo = os.environ.get("LABKIT_ZOO_SEED") or str(SEED)
    return [
        f"labkit: rng seed {SEED} (replay with LABKIT_SEED={SEED})",
        f"labkit: zoo entries graded in the sandbox drawn by LABKIT_ZOO_SEED={zoo} "
        "(a whole number is a turn of the rotation; LABKIT_ZOO_SEED=all: every entry)",
    ]


#: The files that run longest in `make test`: seconds each took on its worker in one run
#: with CI's settings on 2 cores (2026-12-08, per-test wall summed by file, the run's two
#: cores busy from the first test to the last; estimated where that day's cuts changed a
#: file). The run hands whole files to its workers (--dist loadfile, in collection
#: order: --no-loadscope-reorder), so they go longest first (longest-processing-time
#: first): a long file handed out late sets the end of the run while the other workers
#: idle (the red-team zoo of exercise 6, three minutes on a loaded worker, started at
#: 481 s once and ended the run 44 s after the rest). The kit is built while the run
#: collects (``pytest_sessionstart``), ready before the first test starts, so the kit's
#: lessons need not wait behind the others.
LONGEST: dict[str, int] = {
    "grading/test_every_exercise_graded.py": 230,
    "kit/test_kit_lessons.py": 195,
    "kit/test_kit_lessons_odd.py": 185,
    "browser/test_lab_in_chromium.py": 170,
    "grading/test_ex08_graded.py": 160,
    "grading/test_service_exercises_graded.py": 120,
    "grading/test_grade_end_to_end.py": 90,
    "grading/test_hostile_submissions.py": 77,
    "grading/test_zoo_ex10.py": 75,
    "grading/test_zoo_ex08.py": 70,
    "grading/test_checks_feedback.py": 63,
    "grading/test_grading_bench_smoke.py": 58,
    "kit/test_kit_untouched.py": 55,
    "kit/test_kit_exercises.py": 50,
    "grading/test_zoo_ex14.py": 50,
    "grading/test_zoo_ex12.py": 45,
    "grading/test_gradescope_autograder.py": 44,
    "kit/test_kit_lessons_pt_br.py": 40,
    "scenarios/test_explore_real_kill.py": 38,
}

_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest files first (``LONGEST``), then the other slow ones, then the rest.
    ranked = sorted(LONGEST, key=LONGEST.__getitem__, reverse=True)
    rank = {(_TESTS / name): i for i, name in enumerate(ranked)}
    if gone := [name for name in LONGEST if not (_TESTS / name).exists()]:
        raise pytest.UsageError(f"tests/conftest.py LONGEST names files that are gone: {gone}")

    def order(item: pytest.Item) -> tuple[int, bool]:
        slow = bool(item.get_closest_marker("slow")) or item.path.suffix == ".ipynb"
        return rank.get(item.path, len(rank)), not slow

    items.sort(key=order)
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="soak test: run with `make soak` (pytest --soak)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


def services_required() -> bool:
    """True when a missing service must fail the run (CI) instead of skipping."""
    return os.environ.get("LABKIT_REQUIRE_SERVICES", "") == "1"


def _port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_service(name: str) -> str:
    """Return the service's URL, or skip (fail under LABKIT_REQUIRE_SERVICES=1) if it is down."""
    port, how, url = SERVICES[name]
    if _port_open(port):
        return url
    message = f"{name} is not reachable on 127.0.0.1:{port}: {how}"
    if services_required():
        pytest.fail(f"{message} (LABKIT_REQUIRE_SERVICES=1 makes this a failure)")
    pytest.skip(message)


@pytest.fixture
def postgres_dsn() -> str:
    """A libpq URL for the `test` database on 127.0.0.1:5432."""
    return require_service("postgres")


@pytest.fixture
def redis_url() -> str:
    """A Redis URL for database 0 on 127.0.0.1:6379."""
    return require_service("redis")


@pytest.fixture
def amqp_url() -> str:
    """An AMQP URL for RabbitMQ on 127.0.0.1:5672 as guest."""
    return require_service("rabbitmq")


@pytest.fixture
def clock() -> FakeClock:
    """A FakeClock at the lab epoch (2026-01-01 UTC)."""
    return FakeClock(LAB_EPOCH)


@pytest.fixture
def rng() -> random.Random:
    """A seeded random generator; the seed is in the pytest header."""
    return random.Random(SEED)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where the test's job database lives."""
    return tmp_path / "jobs.db"


@pytest.fixture
def store(db_path: Path, clock: FakeClock, rng: random.Random) -> Iterator[JobStore]:
    """A fresh JobStore on tmp_path, driven by the ``clock`` fixture."""
    with JobStore(db_path, clock=clock, rng=rng) as opened:
        yield opened


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The student kit, built and installed as a student receives it (tests/studentkit.py)."""
    return build_kit(tmp_path_factory, worker_id)
