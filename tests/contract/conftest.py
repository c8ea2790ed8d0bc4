"""The backends the contract suite runs on. Add PostgreSQL by adding one param below."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.contract import JobStoreContract
from labkit.store import JobStore

MakeStore = Callable[[FakeClock], JobStoreContract]


def _sqlite(tmp_path: Path) -> Callable[[FakeClock], JobStoreContract]:
    counter = iter(range(1_000_000))
    return lambda clock: JobStore(tmp_path / f"contract-{next(counter)}.db", clock=clock)


BACKENDS: dict[str, Callable[[Path], Callable[[FakeClock], JobStoreContract]]] = {
    # The reference implementation; one file per store under tmp_path.
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """``make_store(clock)`` opens a fresh, empty store of the backend under test."""
    opened: list[JobStoreContract] = []
    factory = BACKENDS[request.param](tmp_path)

    def make(clock: FakeClock) -> JobStoreContract:
        store = factory(clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
