"""Tables of what the database and the world hold, for notebooks and the CLI.

``format_table`` is the plain text a terminal (and nbval) reads. In a notebook,
``show(rows)`` displays a ``Table``: an HTML table JupyterLab draws (left-aligned,
long text wrapped at spaces, never cut off) with the same plain text as its
``text/plain`` twin. Both come from the rows alone, so a re-run is byte-identical.

``html_cell`` and ``html_table`` are the pieces the dead-letter screen, the crash
matrix grid and the ``check()`` report build on. (pandas users reach for
``DataFrame.style``; labkit keeps its outputs free of pandas' version-dependent HTML.)
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from labkit.clock import isoformat


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _as_dict(row: Any) -> dict[str, Any]:
    if is_dataclass(row) and not isinstance(row, type):
        return asdict(row)
    return dict(row)


def format_table(
    rows: Iterable[Mapping[str, Any] | Any], columns: Sequence[str] | None = None
) -> str:
    """Render rows (dicts or dataclasses) as an aligned text table."""
    dicts = [_as_dict(r) for r in rows]
    if columns is None:
        columns = list(dicts[0]) if dicts else []
    if not dicts:
        return "(no rows)"
    cells = [[_cell(d.get(c)) for c in columns] for d in dicts]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


#: Inline styles only: JupyterLab keeps them in outputs, while <style> blocks may be dropped.
# (JupyterLab centres tables and right-aligns cells by default: undo both.)
TABLE_STYLE = "border-collapse:collapse;margin:0.3em 0;table-layout:auto;max-width:100%"
CELL_STYLE = "text-align:left;vertical-align:top;padding:2px 8px;border-bottom:1px solid #ccc"
#: Where a word without spaces may wrap: after these (HTML-escaped) separators.
WRAP_AFTER = (":", "/", "&amp;", "?", ",", "_")
_HYPHENATED = re.compile(r"[^\s:/?,_<>]+-[^\s:/?,_<>]+")
#: Short words that must never break (an error class, a state, a number).
NOWRAP = "white-space:nowrap"


def html_cell(value: Any, tag: str = "td", style: str = "") -> str:
    """One table cell, escaped; long text wraps at spaces and after ``: / & ? , _``.

    Keys, URLs and snake_case names have no spaces; a ``<wbr>`` after their separators
    lets them wrap at a separator instead of running off the right edge or breaking
    mid-word; a piece with a hyphen is never split at it. (A cell styled
    ``white-space:nowrap`` never wraps at all.)
    """
    text = html.escape(_cell(value), quote=False)
    for sep in WRAP_AFTER:
        text = text.replace(sep, sep + "<wbr>")
    # Browsers also break after a hyphen ("2026-01-" / "01"); keep such pieces whole.
    text = _HYPHENATED.sub(lambda m: f'<span style="{NOWRAP}">{m.group(0)}</span>', text)
    css = CELL_STYLE + (f";{style}" if style else "")
    return f'<{tag} style="{css}">{text}</{tag}>'


def pre_html(text: str) -> str:
    """``text`` as a preformatted HTML block, escaped."""
    return f"<pre>{html.escape(text, quote=False)}</pre>"


def html_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    nowrap: Iterable[str] = (),
    cell_style: Mapping[tuple[int, str], str] | None = None,
) -> str:
    """An HTML table of ``rows``; ``nowrap`` columns never wrap; extra CSS per (row, column)."""
    keep = set(nowrap)
    styles = cell_style or {}
    head = "".join(html_cell(c, "th", NOWRAP) for c in columns)
    body = "".join(
        "<tr>" + "".join(
            html_cell(row.get(c), "td", ";".join(
                s for s in (NOWRAP if c in keep else "", styles.get((n, c), "")) if s
            ))
            for c in columns
        ) + "</tr>"
        for n, row in enumerate(rows)
    )
    return (f'<table class="labkit-table" style="{TABLE_STYLE}">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


@dataclass(frozen=True)
class Rich:
    """An output with an HTML face for JupyterLab and a plain-text twin for nbval and terminals.

    ``print(x)`` and ``repr(x)`` give the text; a notebook cell shows the HTML.
    """

    text: str
    html: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return self.html


class Table(Rich):
    """Rows as an HTML table, with ``format_table`` as its plain text."""

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any] | Any],
        columns: Sequence[str] | None = None,
        nowrap: Iterable[str] = (),
    ) -> None:
        dicts = [_as_dict(r) for r in rows]
        cols = list(columns) if columns is not None else (list(dicts[0]) if dicts else [])
        text = format_table(dicts, cols)
        body = html_table(dicts, cols, nowrap) if dicts else "<p><i>(no rows)</i></p>"
        super().__init__(text, body)


def display(obj: Rich) -> None:
    """Show ``obj`` in a notebook (HTML with its text twin); print its text elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display as ipython_display
    except ImportError:  # no IPython at all: a plain terminal
        print(obj.text)
        return
    if get_ipython() is None:
        print(obj.text)
    else:
        ipython_display(obj)  # type: ignore[no-untyped-call]


def age_text(seconds: float) -> str:
    """A short age for people: 90s, 12m, 8h, 3d (whole units, seconds up to two minutes)."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86_400:.0f}d"


def show(
    rows: Rich | Iterable[Mapping[str, Any] | Any], columns: Sequence[str] | None = None
) -> None:
    """Show rows (or a ready ``Table``): HTML in a notebook, ``format_table`` text elsewhere."""
    display(rows if isinstance(rows, Rich) else Table(rows, columns))


JOB_COLUMNS = ("id", "kind", "key", "state", "attempt", "max_attempts", "run_after", "lease_owner")


def jobs_table(
    store: Any, columns: Sequence[str] = JOB_COLUMNS, state: str | None = None
) -> Table:
    """The jobs table, times shown as UTC: ``show()`` it as HTML, ``print()`` it as text."""
    rows = []
    for job in store.jobs(state=state):
        row = asdict(job)
        row["state"] = str(job.state)
        for name in ("run_after", "lease_until", "created_at", "updated_at"):
            row[name] = isoformat(row[name]) if row[name] is not None else None
        rows.append(row)
    return Table(rows, columns)
