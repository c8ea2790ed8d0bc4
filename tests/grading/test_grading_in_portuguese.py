"""``LABKIT_LANG=pt_BR labkit grade``: the feedback a student reads is Portuguese, through
the real sandbox, hidden checks included; the gradebook's identifiers stay English.

One wrong ex01 (the key leaves out the entity and the version): it fails a public check
and two hidden ones. Their hints come from three places (the package's catalog, the
instructor's ``solutions/locale/pt_BR/hidden.po``, and texts the checks build from
values), and each must arrive in Portuguese in ``feedback/STUDENT.md``.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from gradingkit import HIDDEN, SEED, SOLUTIONS, notebook_for

from labkit.grading import catalog

pytestmark = pytest.mark.slow

WRONG = 'def operation_key(source, entity_id, action, version=1):\n    return f"{source}:{action}"'


def test_a_wrong_solution_graded_in_portuguese(tmp_path: Path) -> None:
    nb = nbformat.read(notebook_for(SOLUTIONS, "ex01"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(WRONG))
    (tmp_path / "subs" / "ana").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "ana" / "ex01_keys.ipynb")
    labkit = Path(sys.executable).parent / "labkit"
    argv = [str(labkit), "grade", "subs", "--out", "out", "--run-id", "r", "--exercise", "ex01"]
    done = subprocess.run(
        [*argv, "--seed", str(SEED)],
        cwd=tmp_path,
        env={**os.environ, "LABKIT_LANG": "pt_BR"},
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "r" / "grades.csv").open() as fh:
        [row] = list(csv.DictReader(fh))
    possible = sum(c.points for c in catalog.all_checks("ex01", HIDDEN))
    assert (row["status"], row["max"]) == ("graded", str(possible))  # identifiers stay English
    feedback = (tmp_path / "out" / "r" / "feedback" / "ana.md").read_text()
    assert feedback.startswith("# Feedback para ana")
    sections = {s.split("\n", 1)[0]: s for s in feedback.split("\n### ")[1:]}
    assert set(sections) >= {
        "key_names_the_intent: falhou",  # public
        "key_is_plain_text: falhou",  # hidden, its hint a literal of the hidden checks
        "key_shows_every_part: falhou",  # hidden, its expectation built from values
    }, feedback
    for title, text in sections.items():
        assert "- esperado:" in text and "- dica:" in text, text
        for english in ("expected", "hint", "the key", "must not", "operators"):
            assert english not in text, f"{title}: still English ({english!r}):\n{text}"
    assert "(oculto, grave)" in feedback and "| check | pontos | resultado |" in feedback
