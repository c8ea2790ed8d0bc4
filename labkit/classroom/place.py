"""Where a grading run keeps its plan, its task list and the notebooks it grades.

A run on one machine keeps them in its folder beside ``jobs.db`` (``FolderPlace``). A
run spread over machines keeps them in PostgreSQL, in the job store's own schema
(``DatabasePlace``), so a grading worker anywhere needs only the store's URL and the
instructor's ``solutions/``: it fetches each notebook by its hash into a local cache.
Either way the jobs themselves are in a job store the place names (``store_spec``,
``labkit.backends.spec``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

PLAN = "plan.json"
TASKS = "tasks.json"
STORE = "jobs.db"
NOTEBOOKS = "notebooks"


class Place(Protocol):
    """A run's documents and notebooks, wherever they are kept."""

    #: The job store of the run (a file path or a PostgreSQL spec).
    store_spec: str

    def plan(self) -> str | None: ...

    def save_plan(self, text: str) -> None: ...

    def tasks(self) -> dict[str, dict[str, Any]]: ...

    def save_tasks(self, tasks: dict[str, dict[str, Any]]) -> None: ...

    def save_notebook(self, sha256: str, source: Path) -> None: ...

    def notebook(self, sha256: str, name: str) -> Path: ...


class FolderPlace:
    """A run kept in its folder: ``plan.json``, ``tasks.json``, ``notebooks/SHA/NAME``."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.store_spec = str(run_dir / STORE)

    def plan(self) -> str | None:
        path = self.run_dir / PLAN
        return path.read_text(encoding="utf-8") if path.exists() else None

    def save_plan(self, text: str) -> None:
        write_atomically(self.run_dir / PLAN, text)

    def tasks(self) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = json.loads(
            (self.run_dir / TASKS).read_text(encoding="utf-8")
        )
        return data

    def save_tasks(self, tasks: dict[str, dict[str, Any]]) -> None:
        write_atomically(self.run_dir / TASKS, json.dumps(tasks, sort_keys=True, indent=1))

    def save_notebook(self, sha256: str, source: Path) -> None:
        kept = self.run_dir / NOTEBOOKS / sha256 / source.name
        if not kept.exists():
            kept.parent.mkdir(parents=True, exist_ok=True)
            temporary = kept.with_name(f".{kept.name}.part")
            shutil.copyfile(source, temporary)
            os.replace(temporary, kept)

    def notebook(self, sha256: str, name: str) -> Path:
        return self.run_dir / NOTEBOOKS / sha256 / name


class DatabasePlace:
    """A run kept in PostgreSQL beside its jobs (``grading_meta``, ``grading_notebooks``).

    ``spec`` is ``postgresql://...#schema=NAME`` (``labkit.backends.spec``); the tables are
    made in that schema, which the job store makes first. Notebooks fetched to grade are
    cached in a folder of this process's own.
    """

    def __init__(self, spec: str, create: bool = True) -> None:
        import psycopg

        from labkit.backends.postgres.sql import load_statements

        self.store_spec = spec
        url, _, fragment = spec.partition("#")
        schema = fragment.removeprefix("schema=")
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ValueError(f"a grading queue needs #schema=NAME (lower case), not {spec!r}")
        self._sql = load_statements("classroom/place.sql", verbatim=("create_tables",))
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute("SELECT set_config('search_path', %s, false)", [schema])
        found = self._conn.execute("SELECT to_regclass('grading_meta') IS NOT NULL").fetchone()
        self.exists = bool(found and found[0])
        if create and not self.exists:
            self._conn.execute(self._sql["create_tables"])
            self.exists = True
        self._cache = Path(tempfile.mkdtemp(prefix="labkit-grade-cache-"))

    def _meta(self, name: str) -> str | None:
        if not self.exists:
            return None
        row = self._conn.execute(self._sql["get_meta"], {"name": name}).fetchone()
        return None if row is None else str(row[0])

    def plan(self) -> str | None:
        return self._meta("plan")

    def save_plan(self, text: str) -> None:
        self._conn.execute(self._sql["set_meta"], {"name": "plan", "value": text})

    def tasks(self) -> dict[str, dict[str, Any]]:
        data: dict[str, dict[str, Any]] = json.loads(self._meta("tasks") or "{}")
        return data

    def save_tasks(self, tasks: dict[str, dict[str, Any]]) -> None:
        text = json.dumps(tasks, sort_keys=True)
        self._conn.execute(self._sql["set_meta"], {"name": "tasks", "value": text})

    def save_notebook(self, sha256: str, source: Path) -> None:
        params = {"sha256": sha256, "name": source.name, "content": source.read_bytes()}
        self._conn.execute(self._sql["put_notebook"], params)

    def notebook(self, sha256: str, name: str) -> Path:
        kept = self._cache / sha256 / name
        if not kept.exists():
            row = self._conn.execute(
                self._sql["get_notebook"], {"sha256": sha256, "name": name}
            ).fetchone()
            if row is None:
                raise FileNotFoundError(f"notebook {name} ({sha256[:12]}) is not in the queue")
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(bytes(row[0]))
        return kept

    def close(self) -> None:
        self._conn.close()
        shutil.rmtree(self._cache, ignore_errors=True)


def place_of(where: str, create: bool = True) -> FolderPlace | DatabasePlace:
    """The place a worker is told about: a run folder, or a PostgreSQL queue spec."""
    if where.startswith("postgresql://"):
        return DatabasePlace(where, create)
    return FolderPlace(Path(where))


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` so that a reader sees the old file or the new one, never half."""
    temporary = path.with_name(f".{path.name}.part")
    with temporary.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temporary, path)
