"""The run's pages (``index.html``, ``feedback/STUDENT.html``): escaped, complete, linked.

The class is built from ``Graded`` rows directly (no student process), with hostile
student names and hostile check output; the pages are read back with the standard
library's HTML parser, as a browser would tokenize them. One test runs ``labkit grade``
for real, on submissions that need no student process, and finds the page it left.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from gradedclass import (
    BREAK_OUT,
    HOSTILE_NAME,
    ODD_NAME,
    QUOTE_NAME,
    SCRIPT_TAG,
    hostile_class,
    write_run,
)

from labkit.grading.gradebook import Graded, NotebookStatus, feedback_markdown
from labkit.grading.report_html import SCRIPT, _bins, histogram, source_hash
from labkit.integrations.celery.proctree import kill_tree


class Parsed(HTMLParser):
    """Every start tag with its attributes, each element's text, the text of the page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    def attrs_of(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def all_text(self) -> str:
        return "".join(self.text)


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, list[Graded]]:
    results = hostile_class()
    run_dir = tmp_path / "out" / "monday"
    index = write_run(results, run_dir)
    assert index == run_dir / "index.html"
    return run_dir, results


def _pages(run_dir: Path) -> list[Path]:
    return [run_dir / "index.html", *sorted((run_dir / "feedback").glob("*.html"))]


def test_hostile_names_and_output_are_text_never_markup(run: tuple[Path, list[Graded]]) -> None:
    run_dir, _ = run
    for page in _pages(run_dir):
        parsed = Parsed(page.read_text(encoding="utf-8"))
        names = [tag for tag, _ in parsed.tags]
        # The only elements are the ones the writer makes: no img, no svg onload...
        assert {"img", "iframe", "object", "embed"} & set(names) == set(), page.name
        handlers = [(t, k) for t, attrs in parsed.tags for k in attrs if k.startswith("on")]
        assert handlers == [], page.name
        assert names.count("script") == (1 if page.name == "index.html" else 0), page.name
        assert parsed.scripts in ([SCRIPT], []), "student text got into the script"
    index = Parsed((run_dir / "index.html").read_text(encoding="utf-8"))
    for name in (HOSTILE_NAME, QUOTE_NAME, ODD_NAME):
        assert name in index.all_text  # shown as the student wrote it, as text
    hostile = Parsed(next(p for p in _pages(run_dir) if p.stem == HOSTILE_NAME).read_text())
    assert f"Feedback for {HOSTILE_NAME}" in hostile.all_text
    assert f"died: {SCRIPT_TAG}" in hostile.all_text  # a check's got, kept whole
    assert f"</td></tr></table>{SCRIPT_TAG}" in hostile.all_text  # a note
    ana = Parsed((run_dir / "feedback" / "ana.html").read_text())
    assert SCRIPT_TAG in ana.all_text and BREAK_OUT in ana.all_text


def test_the_policy_runs_only_the_pages_own_script_and_loads_nothing(
    run: tuple[Path, list[Graded]],
) -> None:
    run_dir, _ = run
    for page in _pages(run_dir):
        parsed = Parsed(page.read_text(encoding="utf-8"))
        metas = [a for a in parsed.attrs_of("meta") if a.get("http-equiv") ==
                 "Content-Security-Policy"]
        assert len(metas) == 1
        policy = dict(d.strip().split(" ", 1) for d in metas[0]["content"].split(";"))
        assert policy["default-src"] == "'none'"
        assert "unsafe" not in metas[0]["content"]  # no unsafe-inline, unsafe-eval, ...
        expected = source_hash(SCRIPT) if page.name == "index.html" else "'none'"
        assert policy["script-src"] == expected
        # The <meta> comes before anything it governs.
        assert [t for t, _ in parsed.tags].index("meta") < [t for t, _ in parsed.tags].index(
            "style")


def test_one_row_per_student_flagged_when_a_notebook_needs_attention(
    run: tuple[Path, list[Graded]],
) -> None:
    run_dir, results = run
    text = (run_dir / "index.html").read_text(encoding="utf-8")
    body = text.split('<table id="students">', 1)[1].split("</table>", 1)[0]
    parsed = Parsed(body)
    rows = [a for a in parsed.attrs_of("tr") if "data-attention" in a]
    students = sorted({g.student for g in results})
    assert len(rows) == len(students) == 5
    flagged = sorted({g.student for g in results if g.status != NotebookStatus.GRADED})
    assert [r["data-attention"] for r in rows] == [
        "yes" if s in flagged else "no" for s in students
    ]
    links = [unquote(a["href"]) for a in parsed.attrs_of("a")]
    assert links == [f"feedback/{s}.html" for s in students]


def test_every_link_resolves_to_a_file_or_an_anchor_that_exists(
    run: tuple[Path, list[Graded]],
) -> None:
    run_dir, _ = run
    for page in _pages(run_dir):
        parsed = Parsed(page.read_text(encoding="utf-8"))
        ids = {a["id"] for _, a in parsed.tags if "id" in a}
        for attrs in parsed.attrs_of("a"):
            href = urlsplit(attrs["href"])
            assert not href.scheme and not href.netloc, attrs["href"]  # nothing off the disk
            if href.path:
                target = (page.parent / unquote(href.path)).resolve()
                assert target.is_file(), (page.name, attrs["href"])
                assert target.is_relative_to(run_dir.resolve())
            if href.fragment:
                assert href.path == "" and href.fragment in ids, (page.name, attrs["href"])


def test_the_feedback_page_says_what_the_markdown_says(run: tuple[Path, list[Graded]]) -> None:
    run_dir, results = run
    for student in {g.student for g in results}:
        mine = sorted((g for g in results if g.student == student), key=lambda g: g.exercise)
        markdown = feedback_markdown(student, mine)
        page = (run_dir / "feedback" / f"{student}.html").read_text(encoding="utf-8")
        shown = Parsed(page)
        details = re.findall(r"^### (.+)$", markdown, re.MULTILINE)
        headings = re.findall(r"<h3>(.*?)</h3>", page)
        assert [Parsed(h).all_text for h in headings] == details
        for line in re.findall(r"^- (?:Note: |expected: |got: |hint: )(.+)$", markdown,
                               re.MULTILINE):
            assert line in shown.all_text
        assert (run_dir / "feedback" / f"{student}.md").read_text() == markdown


def test_the_overview_counts_each_status_per_exercise(run: tuple[Path, list[Graded]]) -> None:
    run_dir, _ = run
    text = (run_dir / "index.html").read_text(encoding="utf-8")
    body = text.split('<table id="overview">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1])
    cells = [[Parsed(c).all_text for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]
    # exercise, histogram, mean, graded, missing, not started, timed out, limit hit, crashed
    assert [c[3:] for c in cells] == [
        ["2", "1", "0", "1", "1", "0"],  # ex01
        ["3", "0", "1", "0", "0", "1"],  # ex02
    ]


@pytest.mark.parametrize("possible", [0, 1, 14, 20, 21, 23, 100])
def test_the_histogram_bins_cover_every_score_once(possible: int) -> None:
    bins = _bins(possible)
    covered = [s for lo, hi in bins for s in range(lo, hi + 1)]
    assert covered == list(range(possible + 1))  # no gap, no overlap
    svg = histogram("ex01", list(range(possible + 1)), possible)
    assert svg.count("<rect") == len(bins) == (possible + 1 if possible <= 20 else 10)


@pytest.mark.slow
def test_a_real_grading_run_leaves_the_page(tmp_path: Path) -> None:
    # Submissions no student process runs for (a student with nothing, a file that is
    # not a notebook), so the run takes seconds; the grader's own path writes the pages.
    subs = tmp_path / "subs"
    (subs / "ana").mkdir(parents=True)
    (subs / HOSTILE_NAME).mkdir()
    (subs / HOSTILE_NAME / "ex01_keys.ipynb").write_text("{ this is not json")
    labkit = Path(sys.executable).parent / "labkit"
    argv = [str(labkit), "grade", str(subs), "--out", str(tmp_path / "out"), "--run-id", "r",
            "--exercise", "ex01", "--jobs", "1"]
    grader = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path)
    try:
        _, stderr = grader.communicate(timeout=300)  # a bound for a loaded machine
    finally:
        kill_tree(grader.pid)  # its pool's processes too, should the run have failed
        grader.wait()
    assert grader.returncode == 0, stderr
    run_dir = tmp_path / "out" / "r"
    index = Parsed((run_dir / "index.html").read_text(encoding="utf-8"))
    assert HOSTILE_NAME in index.all_text and "img" not in [t for t, _ in index.tags]
    assert sorted(p.name for p in (run_dir / "feedback").glob("*.html")) == sorted(
        [f"{HOSTILE_NAME}.html", "ana.html"])

