"""The numbers written in a student's function, for harnesses that look for a cap in them.

A cap kept in Python (``rows[:20000]``, ``slots[-50_000:]``, a loop that stops at
``MAX_CATCH_UP``) leaves no ``LIMIT`` in the SQL: its number is in the code. ``written_in``
walks a function once and returns every number it reaches, each with where it was
found, so that each exercise keeps the ones it means by its own rule:

- ``source``: ``"code"`` (a constant of a code object: the function's, or of a function,
  lambda or comprehension it defines), ``"global"`` (the value of a global the code
  names, ``BATCH = 20000``), ``"default"`` (a parameter's default, ``max_slots=50_000``),
  and with ``objects``: ``"closure"`` (a value the function closes over) or
  ``"attribute"`` (an attribute of the notebook's classes and objects);
- ``path``: the containers it sat in, outermost first: ``()`` for a bare number,
  ``("slice.stop",)`` for the ``20000`` of ``[:20000]``, ``("tuple",)``,
  ``("tuple", "tuple")``, ``("frozenset",)``, ``("slice.step",)``...; with ``objects``,
  ``("maxlen",)`` for a deque's and ``("maxsize",)`` for an ``lru_cache``'s;
- ``value``: as written, its sign kept (``-50000`` of ``[-50000:]``), an ``int`` or a
  ``float`` (``1e5``; never a ``bool``);
- ``function``: the qualified name of the code or function that holds it;
- ``own``: whether every function on the way from the one walked to it is one of the
  notebook's (a function of the same globals); ``False`` for what was reached through a
  function of another module.

The walk follows every global the code names that has code of its own (the notebook's
functions, and any other), resolving every name in the globals of the function walked
first. Each code object is walked once per value of ``own``.

With ``objects``, the walk also reads what a bound kept in an object shows: the values a
function closes over, a deque's ``maxlen`` and an ``lru_cache``'s ``maxsize``, and the
attributes of the notebook's classes and objects (a class whose ``__module__`` is the
notebook's ``__name__``, or one of its instances), their methods walked as functions.
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


def written_in(
    functions: Iterable[Any], objects: bool = False, namespace: dict[str, Any] | None = None
) -> list[Constant]:
    """Every number written in ``functions`` and in what they reach, in the order walked:
    a function's code (its constants, then the globals it names, a function among them
    walked where it is named), then its parameters' defaults. Code this walk cannot read
    ends the walk of that function, keeping what was found.

    ``objects``: what objects hold too (see the module's docstring); an item of
    ``functions`` that is no function is then walked as an object of ``namespace``."""
    found: list[Constant] = []
    walked: set[tuple[int, bool]] = set()  # (id of a code object, own)
    visited: set[tuple[int, bool]] = set()  # (id of a function's code, own)
    opened: set[int] = set()  # ids of the objects whose attributes were read

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
        if objects:
            for cell in getattr(fn, "__closure__", None) or ():
                try:
                    held = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                reach(held, glob, own, name, "closure")

    def reach(value: Any, glob: Any, own: bool, name: str, source: str) -> None:
        """A value the code names (a global) or closes over: a function is walked, any
        other value gives its numbers (and with ``objects``, its sizes and attributes)."""
        if _has_code(value):
            mine = own and callable(value) and getattr(value, "__globals__", None) is glob
            function(value, glob, mine)
            return
        found.extend(Constant(n, source, path, name, own) for n, path in numbers_in(value))
        if objects:
            sizes(value, own, name, source)
            if _notebooks(value, glob):
                attributes(value, glob, own, name)

    def sizes(value: Any, own: bool, name: str, source: str) -> None:
        maxlen = getattr(value, "maxlen", None)  # deque(maxlen=N)
        found.extend(Constant(n, source, ("maxlen",), name, own) for n, _ in numbers_in(maxlen))
        parameters = getattr(value, "cache_parameters", None)  # functools.lru_cache
        if callable(parameters):
            maxsize = parameters().get("maxsize")
            found.extend(
                Constant(n, source, ("maxsize",), name, own) for n, _ in numbers_in(maxsize)
            )

    def attributes(thing: Any, glob: Any, own: bool, name: str) -> None:
        """The attributes of one of the notebook's classes or objects (and an object's
        class): its methods walked as functions, its other values reached."""
        if id(thing) in opened:
            return
        opened.add(id(thing))
        attrs: Any = getattr(thing, "__dict__", None)
        for value in list(attrs.values()) if hasattr(attrs, "values") else ():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if hasattr(value, "__code__"):
                function(value, glob, own)
            else:
                reach(value, glob, own, name, "attribute")
        if not isinstance(thing, type):
            attributes(type(thing), glob, own, name)

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
            reach(glob.get(named_as), glob, own, name, "global")

    for fn in functions:
        glob = getattr(fn, "__globals__", None)
        if not isinstance(glob, dict):
            glob = namespace if objects and namespace is not None else {}
        try:
            if objects and not _has_code(fn):
                attributes(fn, glob, True, type(fn).__qualname__)
            else:
                function(fn, glob, True)
        except Exception:  # noqa: BLE001, S112 - code this walk cannot read: what was found stands
            continue
    return found


def _notebooks(value: Any, glob: Any) -> bool:
    """Whether ``value`` is one of the notebook's classes or objects (not a plain value)."""
    if isinstance(value, (int, float, str, bytes, type(None))):
        return False
    kind = value if isinstance(value, type) else type(value)
    return bool(getattr(kind, "__module__", None) == glob.get("__name__", "__main__"))


def whole_numbers_in(
    functions: Iterable[Any], objects: bool = False, namespace: dict[str, Any] | None = None
) -> list[int]:
    """The whole numbers ``written_in`` finds on the notebook's own way (``own``), without
    their sign (``slots[-50000:]`` keeps the newest 50000; whole floats such as ``1e5``
    too), sorted: where a harness looks for a cap counted in Python."""
    found: set[int] = set()
    for const in written_in(functions, objects, namespace):
        value = const.value
        if not const.own:
            continue
        if isinstance(value, int):
            found.add(abs(value))
        elif value.is_integer() and abs(value) < 2**53:
            found.add(int(abs(value)))
    return sorted(found)
