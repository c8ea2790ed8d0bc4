"""The pages an instructor reads a grading run on: ``index.html`` and ``feedback/STUDENT.html``.

``write_report(results, run_dir)`` renders the same ``Graded`` rows the CSVs and the
markdown feedback come from: the class at a glance (per exercise, a histogram of the
scores and how many notebooks need attention), then one row per student, linking to
their feedback page, with a text filter and a "needs attention only" toggle. Everything
is inside the file (the style, one short script, the SVG), so it opens from ``file://``
with no server and no network.

Folder names, notes and what a check got (which can be what student code printed) are
the student's: every string is escaped with ``html.escape``, and should one slip through,
each page's Content-Security-Policy runs no script but the page's own (named by its
hash) and loads nothing. Nothing here runs or reads student code: it renders data.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from pathlib import Path
from urllib.parse import quote

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.gradebook import Graded, NotebookStatus
from labkit.grading.scoring import cap_note

#: The statuses a notebook is flagged for: all but graded (totals.csv's ``needs_attention``).
ATTENTION = tuple(s for s in NotebookStatus if s != NotebookStatus.GRADED)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
h1 { font-size: 1.4rem; margin: 0 0 .3rem; }
h2 { font-size: 1.15rem; margin: 1.6rem 0 .4rem; }
h3 { font-size: 1rem; margin: 1rem 0 .3rem; }
table { border-collapse: collapse; margin: .4rem 0 1rem; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: left;
         vertical-align: middle; }
th { background: #f3f3f3; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.zero { color: #bbb; }
.warn { color: #b3261e; font-weight: 600; }
.bar { fill: #3b6fd4; }
.axis { fill: #c8c8c8; }
.tag { display: inline-block; font-size: 11px; padding: 0 .35rem; border-radius: 3px;
       background: #eee; margin-left: .3rem; }
.s-missing .tag, .s-crashed .tag, .s-timed-out .tag, .s-limit-hit .tag,
.c-failed, .c-timed-out { background: #fbe3e1; color: #8c1d18; }
.s-not-started .tag, .c-not-started-yet, .c-not-graded { background: #fff1cc; color: #6b4e00; }
.c-passed { color: #1e6b2f; }
.controls { display: flex; gap: 1.2rem; align-items: center; margin: .6rem 0; }
.controls input[type=search] { width: 18rem; padding: .2rem .4rem; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; margin: 0;
      padding: .3rem .5rem; font-size: 12.5px; }
dl { margin: 0 0 .6rem; } dt { font-weight: 600; margin-top: .3rem; } dd { margin: 0 0 0 1rem; }
[hidden] { display: none !important; }
"""

# The filter: no student data inside, so its hash in the CSP never changes with a class.
SCRIPT = """
const filter = document.getElementById("filter");
const attention = document.getElementById("attention");
const rows = Array.from(document.querySelectorAll("#students tbody tr"));
function apply() {
  const words = filter.value.trim().toLowerCase();
  let shown = 0;
  for (const row of rows) {
    const hide = (attention.checked && row.dataset.attention !== "yes") ||
      (words !== "" && !row.textContent.toLowerCase().includes(words));
    row.hidden = hide;
    if (!hide) shown += 1;
  }
  document.getElementById("shown").textContent = shown + " of " + rows.length + " shown";
  document.getElementById("none").hidden = shown > 0;
}
filter.addEventListener("input", apply);
attention.addEventListener("change", apply);
window.addEventListener("pageshow", apply);
apply();
"""


def source_hash(text: str) -> str:
    """A CSP source naming one inline ``<style>`` or ``<script>`` by its content."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy(script: str | None) -> str:
    """Load nothing; apply only this module's style; run only ``script`` (or nothing)."""
    scripts = source_hash(script) if script else "'none'"
    return (
        f"default-src 'none'; style-src {source_hash(STYLE)}; script-src {scripts}; "
        "base-uri 'none'; form-action 'none'"
    )


def _page(title: str, body: str, script: str | None = None) -> str:
    tail = f"<script>{script}</script>\n" if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" '
        f'content="{content_security_policy(script)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"{body}\n{tail}</body>\n</html>\n"
    )


def _slug(status: str) -> str:
    return escape(status.replace(" ", "-"))


def feedback_href(student: str) -> str:
    """Where a student's feedback page is, relative to ``index.html`` (the name encoded)."""
    return f"feedback/{quote(student, safe='')}.html"


def _by_student(results: list[Graded]) -> dict[str, list[Graded]]:
    by_student: dict[str, list[Graded]] = {}
    for g in sorted(results, key=lambda g: (g.student, g.exercise)):
        by_student.setdefault(g.student, []).append(g)
    return by_student


def _bins(possible: int) -> list[tuple[int, int]]:
    """Score ranges, lowest first: one per score up to 20 points, else ten of them."""
    if possible <= 20:
        return [(s, s) for s in range(possible + 1)]
    edges = [-(-i * possible // 10) for i in range(11)]  # ceil(i * possible / 10)
    return [(edges[i], edges[i + 1] - 1 if i < 9 else possible) for i in range(10)]


def histogram(exercise: str, scores: list[int], possible: int) -> str:
    """An inline SVG of how many students got each score (a grey line where none did)."""
    bins = _bins(possible)
    counts = [sum(lo <= s <= hi for s in scores) for lo, hi in bins]
    tallest, width, height = max(counts, default=0) or 1, 7, 32
    bars = []
    for i, ((lo, hi), n) in enumerate(zip(bins, counts, strict=True)):
        scored = f"{lo}" if lo == hi else f"{lo}-{hi}"
        h = max(1, round(height * n / tallest)) if n else 1
        bars.append(
            f'<rect class="{"bar" if n else "axis"}" x="{i * (width + 1)}" y="{height - h}" '
            f'width="{width}" height="{h}"><title>{n} scored {scored}</title></rect>'
        )
    label = escape(f"{exercise}: " + ", ".join(
        f"{n} scored {lo}" + ("" if lo == hi else f"-{hi}")
        for (lo, hi), n in zip(bins, counts, strict=True) if n
    ))
    return (
        f'<svg role="img" aria-label="{label}" width="{len(bins) * (width + 1)}" '
        f'height="{height}" viewBox="0 0 {len(bins) * (width + 1)} {height}">'
        + "".join(bars) + "</svg>"
    )


def _count(n: int) -> str:
    return f'<td class="num {"warn" if n else "zero"}">{n}</td>'


def _overview(by_student: dict[str, list[Graded]]) -> str:
    """Per exercise: the score histogram, the mean, and each status that needs attention."""
    by_exercise: dict[str, list[Graded]] = {}
    for graded in by_student.values():
        for g in graded:
            by_exercise.setdefault(g.exercise, []).append(g)
    head = "".join(f'<th class="num">{escape(s)}</th>' for s in ATTENTION)
    rows = []
    for exercise, graded in sorted(by_exercise.items()):
        possible = max(g.possible for g in graded)
        scores = [g.score for g in graded]
        mean = sum(scores) / len(scores)
        rows.append(
            f"<tr><td>{escape(exercise)} {escape(graded[0].title)}</td>"
            f"<td>{histogram(exercise, scores, possible)}</td>"
            f'<td class="num">{mean:.1f} / {possible}</td>'
            f'<td class="num">{sum(g.status == NotebookStatus.GRADED for g in graded)}</td>'
            + "".join(_count(sum(g.status == s for g in graded)) for s in ATTENTION)
            + "</tr>"
        )
    return (
        '<h2>The class at a glance</h2>\n<table id="overview"><thead><tr><th>exercise</th>'
        f'<th>scores (0 to max)</th><th class="num">mean</th><th class="num">graded</th>{head}'
        "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody></table>"
    )


def _student_row(student: str, graded: list[Graded], exercises: list[str]) -> str:
    by_exercise = {g.exercise: g for g in graded}
    score, possible = sum(g.score for g in graded), sum(g.possible for g in graded)
    percent = f"{100 * score / possible:.1f}%" if possible else "-"
    cells = []
    for exercise in exercises:
        g = by_exercise.get(exercise)
        if g is None:
            cells.append('<td class="num zero">-</td>')
            continue
        tag = f'<span class="tag">{escape(g.status)}</span>'
        tag = "" if g.status == NotebookStatus.GRADED else tag
        cells.append(f'<td class="num s-{_slug(g.status)}">{g.score}/{g.possible}{tag}</td>')
    flagged = [g for g in graded if g.status != NotebookStatus.GRADED]
    attention = "; ".join(f"{g.exercise} {g.status}" for g in flagged)
    return (
        f'<tr data-attention="{"yes" if flagged else "no"}">'
        f'<td><a href="{escape(feedback_href(student))}">{escape(student)}</a></td>'
        f'<td class="num">{score}/{possible}</td><td class="num">{percent}</td>'
        + "".join(cells)
        + f"<td>{escape(attention)}</td></tr>"
    )


def index_html(run: str, results: list[Graded]) -> str:
    """The run's page: the class at a glance, then one filterable row per student."""
    by_student = _by_student(results)
    exercises = sorted({g.exercise for g in results})
    head = "".join(f'<th class="num">{escape(e)}</th>' for e in exercises)
    rows = "\n".join(_student_row(s, graded, exercises) for s, graded in by_student.items())
    body = (
        f"<h1>Grading run {escape(run)}</h1>\n"
        f"<p>{len(by_student)} student(s) x {len(exercises)} exercise(s). The same data as "
        '<a href="grades.csv">grades.csv</a> and <a href="totals.csv">totals.csv</a>; '
        "each student's name opens their feedback.</p>\n"
        + _overview(by_student)
        + "\n<h2>Students</h2>\n"
        '<div class="controls"><label>Filter <input id="filter" type="search" '
        'placeholder="student, exercise or status" autocomplete="off"></label>'
        '<label><input id="attention" type="checkbox"> needs attention only</label>'
        '<span id="shown"></span></div>\n'
        '<table id="students"><thead><tr><th>student</th><th class="num">total</th>'
        f'<th class="num">percent</th>{head}<th>needs attention</th></tr></thead>\n'
        f"<tbody>\n{rows}\n</tbody></table>\n"
        '<p id="none" hidden>No student matches the filter.</p>'
    )
    return _page(f"Grading run {run}", body, SCRIPT)


def _check_details(outcomes: list[Outcome]) -> list[str]:
    """Each check that did not pass, with what was expected, got and a hint.

    The same checks ``feedback_markdown`` details: not the passed, not the not-started,
    not the not-graded that say nothing.
    """
    parts = []
    for o in outcomes:
        quiet = o.status == CheckStatus.NOT_GRADED and not o.got
        if o.status in (CheckStatus.PASSED, CheckStatus.NOT_STARTED) or quiet:
            continue
        parts.append(f'<h3>{escape(o.check)}: <span class="c-{_slug(o.status)}">'
                     f"{escape(o.status)}</span></h3>")
        said = [(k, v) for k, v in (("expected", o.expected), ("got", o.got), ("hint", o.hint))
                if v]
        if said:
            parts.append("<dl>" + "".join(
                f"<dt>{k}</dt><dd><pre>{escape(v)}</pre></dd>" for k, v in said) + "</dl>")
    return parts


def _exercise_section(g: Graded) -> str:
    parts = [f'<section id="{escape(g.exercise)}">',
             f"<h2>{escape(g.exercise)}: {escape(g.title)} ({g.score}/{g.possible}, "
             f'<span class="s-{_slug(g.status)}">{escape(g.status)}</span>)</h2>']
    if g.notebook:
        parts.append(f"<p>Notebook: <code>{escape(g.notebook)}</code></p>")
    notes = [*g.notes, *filter(None, [cap_note(g.outcomes)])]
    if notes:
        parts.append("<ul>" + "".join(f"<li>Note: {escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("<table><thead><tr><th>check</th><th class=\"num\">points</th><th>result</th>"
                 "</tr></thead><tbody>")
    parts += [
        f'<tr><td>{escape(o.label)}</td><td class="num">{o.earned}/{o.points}</td>'
        f'<td class="c-{_slug(o.status)}">{escape(o.status)}</td></tr>'
        for o in g.outcomes
    ]
    parts.append("</tbody></table>")
    return "\n".join([*parts, *_check_details(g.outcomes), "</section>"])


def feedback_html(student: str, results: list[Graded]) -> str:
    """One student's feedback page: what ``feedback_markdown`` says, as HTML."""
    results = sorted(results, key=lambda g: g.exercise)
    rows = "".join(
        f'<tr><td><a href="#{escape(g.exercise)}">{escape(g.exercise)} {escape(g.title)}</a>'
        f'</td><td class="num">{g.score}/{g.possible}</td>'
        f'<td class="s-{_slug(g.status)}">{escape(g.status)}</td></tr>'
        for g in results
    )
    total = f"{sum(g.score for g in results)}/{sum(g.possible for g in results)}"
    body = (
        '<p><a href="../index.html">&larr; the whole class</a></p>\n'
        f"<h1>Feedback for {escape(student)}</h1>\n"
        '<table id="summary"><thead><tr><th>exercise</th><th class="num">score</th>'
        f"<th>status</th></tr></thead><tbody>{rows}"
        f'<tr><th>total</th><th class="num">{total}</th><th></th></tr></tbody></table>\n'
        + "\n".join(_exercise_section(g) for g in results)
    )
    return _page(f"Feedback for {student}", body)


def _write(path: Path, text: str) -> None:
    # A check's "got" can hold a lone surrogate (JSON allows "\ud800"): replace it, so a
    # student's output never stops the page from being written.
    path.write_text(text, encoding="utf-8", errors="replace")


def write_report(results: list[Graded], run_dir: Path) -> Path:
    """Write ``run_dir/index.html`` and ``run_dir/feedback/STUDENT.html``; the index's path."""
    folder = run_dir / "feedback"
    folder.mkdir(parents=True, exist_ok=True)
    for student, graded in _by_student(results).items():
        _write(folder / f"{student}.html", feedback_html(student, graded))
    index = run_dir / "index.html"
    _write(index, index_html(run_dir.name, results))
    return index
