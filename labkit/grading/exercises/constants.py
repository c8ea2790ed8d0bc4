"""The numbers written in a student's function, for harnesses that look for a cap in them.

A cap kept in Python (``rows[:20000]``, ``slots[-50_000:]``, a loop that stops at
``MAX_CATCH_UP``) leaves no ``LIMIT`` in the SQL: its number is in the code. ``written_in``
walks a function once and returns every number it reaches, each with where it was
found, so that each exercise keeps the ones it means by its own rule:

- ``source``: ``"code"`` (a constant of a code object: the function's, or of a function,
  lambda or comprehension it defines), ``"global"`` (the value of a global the code
  names, ``BATCH = 20000``) or ``"default"`` (a parameter's default, ``max_slots=50_000``);
- ``path``: the containers it sat in, outermost first: ``()`` for a bare number,
  ``("slice.stop",)`` for the ``20000`` of ``[:20000]``, ``("tuple",)``,
  ``("tuple", "tuple")``, ``("frozenset",)``, ``("slice.step",)``...;
- ``value``: as written, its sign kept (``-50000`` of ``[-50000:]``), an ``int`` or a
  ``float`` (``1e5``; never a ``bool``);
- ``function``: the qualified name of the code or function that holds it;
- ``own``: whether every function on the way from the one walked to it is one of the
  notebook's (a function of the same globals); ``False`` for what was reached through a
  function of another module.

The walk follows every global the code names that has code of its own (the notebook's
functions, and any other), resolving every name in the globals of the function walked
first. Each code object is walked once per value of ``own``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: The slice parts, as ``path`` names them.
_SLICE_PARTS = ("slice.start", "slice.stop", "slice.step")


@dataclass(frozen=True)
class Constant:
    """One number written in the walked code (see the module's docstring)."""

    value: int | float
    source: str
    path: tuple[str, ...]
    function: str
    own: bool

    @property
    def bare(self) -> bool:
        """Written as a plain number, in no tuple or slice."""
        return not self.path


def numbers_in(
    value: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[int | float, tuple[str, ...]]]:
    """The numbers ``value`` is or holds (slices, tuples and frozensets, nested), each with
    its ``path``; booleans are not numbers here."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value, path
    elif isinstance(value, slice):
        for part, where in zip((value.start, value.stop, value.step), _SLICE_PARTS, strict=True):
            yield from numbers_in(part, (*path, where))
    elif isinstance(value, tuple):
        for part in value:
            yield from numbers_in(part, (*path, "tuple"))
    elif isinstance(value, frozenset):
        for part in value:
            yield from numbers_in(part, (*path, "frozenset"))


def _has_code(value: Any) -> bool:
    return hasattr(getattr(value, "__code__", None), "co_consts")


def written_in(functions: Iterable[Any]) -> list[Constant]:
    """Every number written in ``functions`` and in what they reach, in the order walked:
    a function's code (its constants, then the globals it names, a function among them
    walked where it is named), then its parameters' defaults. Code this walk cannot read
    ends the walk of that function, keeping what was found."""
    found: list[Constant] = []
    walked: set[tuple[int, bool]] = set()  # (id of a code object, own)
    visited: set[tuple[int, bool]] = set()  # (id of a function's code, own)

    def function(fn: Any, glob: Any, own: bool) -> None:
        code = getattr(fn, "__code__", None)
        if code is None or (id(code), own) in visited:
            return
        visited.add((id(code), own))
        walk(code, glob, own)
        name = getattr(code, "co_qualname", getattr(code, "co_name", "?"))
        defaults = (*(getattr(fn, "__defaults__", None) or ()),)
        kwdefaults = getattr(fn, "__kwdefaults__", None) or {}
        for value in (*defaults, *kwdefaults.values()):
            found.extend(Constant(n, "default", path, name, own) for n, path in numbers_in(value))

    def walk(code: Any, glob: Any, own: bool) -> None:
        if (id(code), own) in walked:
            return
        walked.add((id(code), own))
        name = getattr(code, "co_qualname", getattr(code, "co_name", "?"))
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                walk(const, glob, own)
            else:
                found.extend(Constant(n, "code", path, name, own) for n, path in numbers_in(const))
        for named_as in code.co_names:
            named = glob.get(named_as)
            if _has_code(named):
                mine = own and callable(named) and getattr(named, "__globals__", None) is glob
                function(named, glob, mine)
            else:
                found.extend(
                    Constant(n, "global", path, name, own) for n, path in numbers_in(named)
                )

    for fn in functions:
        glob = getattr(fn, "__globals__", None)
        if not isinstance(glob, dict):
            glob = {}
        try:
            function(fn, glob, True)
        except Exception:  # noqa: BLE001, S112 - code this walk cannot read: what was found stands
            continue
    return found
