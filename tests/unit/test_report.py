"""Plain-text rendering shared by the notebooks, the CLI and the dead-letter screen."""

from __future__ import annotations

import pytest

from labkit.tables import age_text, format_table


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (90, "90s"),  # under two minutes, seconds say more than "2m"
        (120, "2m"),
        (7_199, "120m"),
        (7_200, "2h"),
        (29_052, "8h"),
        (172_800, "2d"),
    ],
)
def test_age_text_picks_the_unit_a_person_reads_best(seconds, text):
    assert age_text(seconds) == text


def test_format_table_aligns_columns_and_shows_missing_values_as_a_dash():
    table = format_table([{"id": 1, "state": "dead"}, {"id": 12, "state": None}])
    assert table.splitlines() == ["id  state", "--  -----", "1   dead", "12  -"]


def test_format_table_of_no_rows_says_so():
    assert format_table([]) == "(no rows)"
