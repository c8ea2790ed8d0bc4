"""The data-only channel: what crosses it, what is refused, and how big a message may be."""

from __future__ import annotations

import json
import math
import os

import pytest

from labkit.grading.isolation.channel import LineReader, NotData, decode, dumps, encode, write


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        -(2**70),  # bigger than any C integer
        1.5,
        "naïve ✓",
        [1, [2, [3]]],
        (1, "a", (2.0, None)),  # tuples stay tuples
        b"\x00\xff",  # bytes
        {"a": [1, (2,)], "b": {"c": None}},
        {1: "one", (2, 3): "pair"},  # keys JSON cannot hold
        {"$tuple": "a key that looks like a tag"},
    ],
)
def test_plain_data_round_trips_exactly(value: object) -> None:
    back = decode(json.loads(dumps({"v": encode(value)}))["v"])
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_round_trip(value: float) -> None:
    back = decode(json.loads(dumps({"v": encode(value)}))["v"])
    assert isinstance(back, float) and (math.isnan(back) if math.isnan(value) else back == value)


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, len, type, [1, {2: object()}]],
)
def test_live_objects_are_refused_with_their_type(value: object) -> None:
    with pytest.raises(NotData, match="is not plain data"):
        encode(value)


@pytest.mark.parametrize(
    "wire",
    [
        {"$tuple": 1, "extra": 2},  # a tag with company
        {"$dict": [[1]]},  # a pair that is not a pair
        {"$dict": [[[1], 2]]},  # an unhashable key
    ],
)
def test_malformed_tags_from_the_other_side_are_refused(wire: object) -> None:
    with pytest.raises(NotData):
        decode(wire)


def test_a_message_over_the_cap_is_refused_not_buffered_forever() -> None:
    read_fd, write_fd = os.pipe()
    try:
        reader = LineReader(read_fd, cap=1000)
        write(write_fd, {"v": "x" * 10})
        assert reader.read(5) == {"v": "x" * 10}
        os.write(write_fd, b"{" + b'"v": "' + b"y" * 5000)
        with pytest.raises(ValueError, match="longer than 1000 bytes"):
            reader.read(5)
    finally:
        os.close(read_fd)
        os.close(write_fd)
