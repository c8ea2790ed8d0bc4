"""How much a run of fencing tokens can hold, read from their text.

A lease token fences a worker whose lease ended out of the job's next run: it must
never repeat. One of 16, 24 or 32 random bits (``hex(randomblob(2))``, a number below a
million, ``secrets.randbits(32)``, ``uuid4().hex[:8]``) repeats only now and then in the
claims a check can afford, yet its text shows how little it holds: the characters seen
at each position bound the values it can take. A counter or a clock (``uuid1``,
``time_ns``) varies as little, but only grows: unique by construction. Exercises 3 and
13 judge their tokens with these two numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

#: Fewer bits than this in what the tokens' text can hold is too few to fence: 32
#: random bits repeat, by the birthday bound, once in about 77,000 claims of a job (a
#: few months of a job retried every minute). Halfway to the 64 bits the hints ask for,
#: as the bound is read from a few hundred tokens: 64 random bits in base64
#: (``token_urlsafe(8)``) show about 63.9, a 64-bit number in decimal about 64.1, and
#: ``uuid4().hex`` 122. Measured, a token of 32 bits shows 32 (hex) to 33 (decimal).
TOKEN_BITS = 48


def token_bits(tokens: Sequence[object]) -> float:
    """An upper bound on the bits the tokens' text holds: the sum over positions (from
    the left, and again from the right, the smaller taken) of log2 of the characters seen
    there, a missing one counted as a character."""
    texts = [str(t) for t in tokens]

    def from_left(words: list[str]) -> float:
        width = max(map(len, words), default=0)
        seen = [{w[i] if i < len(w) else None for w in words} for i in range(width)]
        return sum(math.log2(len(s)) for s in seen)

    return min(from_left(texts), from_left([t[::-1] for t in texts]))


def token_falls(tokens: Sequence[object]) -> int:
    """How often a token is smaller than the one before (as text, or as a number when
    they all are numbers): about half the time for random tokens, never for a counter."""
    texts = [str(t) for t in tokens]
    falls = sum(b < a for a, b in pairwise(texts))
    try:
        numbers = [float(t) for t in texts]
    except ValueError:
        return falls
    return min(falls, sum(b < a for a, b in pairwise(numbers)))


def too_few_bits(tokens: Sequence[object]) -> float | None:
    """The bits the tokens can hold when that is too few to fence and they do not only
    grow (a twentieth of falls allowed), else None."""
    bits = token_bits(tokens)
    if bits >= TOKEN_BITS or token_falls(tokens) <= len(tokens) // 20:
        return None
    return bits
