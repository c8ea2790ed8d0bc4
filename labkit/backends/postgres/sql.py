"""PostgreSQL's statements in psycopg's parameter style, loaded from the ``.sql`` files.

Every ``.sql`` file of labkit writes parameters as ``:name`` (one house style for both
engines); psycopg takes ``%(name)s``. ``load_statements(*files)`` reads the named statements
(``labkit.queries``) and converts each, leaving alone the DDL listed in ``verbatim``
(a schema script is sent as it is, since it has no parameters and may hold ``%``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from labkit import queries

_NAMED = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


def pyformat(text: str) -> str:
    """``:name`` (labkit's style) to psycopg's ``%(name)s``, a literal ``%`` doubled."""
    return _NAMED.sub(r"%(\1)s", text.replace("%", "%%"))


def load_statements(*filenames: str, verbatim: Iterable[str] = ()) -> dict[str, str]:
    """The statements of ``filenames`` (one dict, no name twice), in psycopg's style."""
    keep = set(verbatim)
    return {
        name: text if name in keep else pyformat(text)
        for name, text in queries.load_all(*filenames).items()
    }
