"""The SQL loader: named statements, and the fragments both engines share."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from labkit import queries

#: Every statement that leases jobs, on both engines.
CLAIMS = [
    ("store/sqlite.sql", "claim"),
    ("store/sqlite.sql", "claim_one_queue"),
    ("patterns/queues.sql", "claim_capped"),
    ("patterns/queues.sql", "claim_serial"),
    ("backends/postgres/store.sql", "claim"),
    ("backends/postgres/queues.sql", "claim_capped"),
    ("backends/postgres/queues.sql", "claim_serial"),
]


@pytest.mark.parametrize(("filename", "name"), CLAIMS)
def test_every_claim_sets_the_one_shared_lease(filename, name):
    lease = queries.load(queries.SHARED)["lease_claimed"]
    sql = queries.load(filename)[name]
    assert lease in sql
    assert "{{" not in sql  # every fragment was filled in


def test_no_statement_writes_a_claim_token_by_hand():
    # A claim written out again would be free to drift from the store's: the token rule
    # lives in shared.sql alone.
    token = re.compile(r"lease_token\s*=\s*(?!NULL|:token|b\.)\S", re.IGNORECASE)
    root = Path(str(resources.files("labkit")))
    files = sorted(root.rglob("*.sql"))
    assert len(files) > 10  # every engine's statements, wherever they live
    for path in files:
        if path.relative_to(root).as_posix() != queries.SHARED:
            found = token.findall(path.read_text(encoding="utf-8"))
            assert found == [], f"{path.name} sets lease_token itself: use {{{{ lease_claimed }}}}"


def test_a_claim_leases_what_it_always_leased():
    lines = [ln.strip() for ln in queries.load(queries.SHARED)["lease_claimed"].splitlines()]
    assert lines[0] == "SET state = 'running',"
    assert "lease_owner = :worker," in lines and "lease_until = :now + :lease_s," in lines
    token = "lease_token = jobs.id || '.' || (1 + (SELECT count(*)"
    assert any(ln.startswith(token) for ln in lines)


def test_an_unknown_fragment_is_named_with_where_it_was_used():
    with pytest.raises(KeyError, match=r"store\.sql: claim uses \{\{ nope \}\}.*shared\.sql"):
        queries._fill("UPDATE jobs\n{{ nope }}", "store.sql: claim")


def test_headers_split_statements_and_drop_their_comment_lines():
    sql = queries.load("store/sqlite.sql")["claim"]
    assert sql.startswith("UPDATE jobs\n   SET state = 'running',")
    assert not any(line.startswith("--") for line in sql.splitlines())


def test_a_statement_both_engines_run_alike_is_written_once() -> None:
    # What reads the same on SQLite and PostgreSQL lives in store/common.sql; a copy in an
    # engine's own file would be free to drift from the other's.
    def norm(sql: str) -> str:
        return " ".join(sql.split())

    pairs = [
        ("store/sqlite.sql", "backends/postgres/store.sql"),
        ("patterns/queues.sql", "backends/postgres/queues.sql"),
    ]
    for mine, theirs in pairs:
        a, b = queries.load(mine), queries.load(theirs)
        same = sorted(n for n in a.keys() & b.keys() if norm(a[n]) == norm(b[n]))
        assert same == [], f"{mine} and {theirs} both write {same}: move them to store/common.sql"
    assert len(queries.load("store/common.sql")) >= 10


def test_a_name_in_two_files_is_refused() -> None:
    with pytest.raises(ValueError, match=r"store/common.sql defines 'get_meta' again"):
        queries.load_all("store/common.sql", "store/common.sql")
