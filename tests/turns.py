"""Turns of a rotation: a test that cannot afford all of a list each run takes a slice.

``LABKIT_ZOO_SEED`` names the turn (``seed`` below). CI passes the commit's place in the history
(``.ci/run``), so successive commits take successive slices of a fixed order and every
item is taken once in as many commits as the list has slices; any other value draws at
random (replayed by that value); ``all`` takes every item. Used by the zoo graded through
the sandbox (``grading/zoograding.py``) and by the lessons run twice, once per edition
(``kit/test_kit_lessons_pt_br.py``).
"""

from __future__ import annotations

import hashlib
import random


def place(what: str, item: str) -> str:
    """An item's place in its rotation: fixed by its name, so an item added later takes a
    place of its own without moving the others'."""
    return hashlib.sha256(f"{what}:{item}".encode()).hexdigest()


def taken(what: str, items: list[str], seed: str, many: int) -> list[str]:
    """The ``many`` of ``what``'s ``items`` taken under ``seed``.

    A whole-number seed is a turn: turn ``n`` takes the ``n``-th slice of the items in
    their fixed order (``place``), so the turns ``n`` .. ``n + len(items) - 1`` take every
    item once. Any other seed draws at random.
    """
    if not seed.isdigit():
        return random.Random(f"{seed}:{what}").sample(items, min(many, len(items)))
    order = sorted(items, key=lambda item: place(what, item))
    turns = -(-len(order) // many)
    start = int(seed) % turns * many
    return order[start : start + many]


def this_turn(what: str, items: list[str], many: int, seed: str) -> list[str]:
    """The ``many`` of ``items`` (a rotation called ``what``) this turn takes; "all": every
    one."""
    return list(items) if seed == "all" else taken(what, items, seed, many)
