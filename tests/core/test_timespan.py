"""core/timespan.py: spans typed by people (``report --since``, ``cache prune --older-than``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from judge_runner.core.timespan import SpanTooLong, parse_age, parse_since
from tests.support.clitools import invoke


def test_spans_in_hours_days_and_weeks():
    assert parse_since("36h") == timedelta(hours=36) and parse_since(" 7d ") == timedelta(days=7) and parse_age("2w") == timedelta(weeks=2)


@pytest.mark.parametrize("text", ["", "7", "7x", "-5d", "1e999d", "7 days"])
def test_anything_else_is_refused_naming_what_an_age_is(text):
    with pytest.raises(ValueError, match="an age is a number and a unit h, d or w"):
        parse_age(text)


def test_a_span_past_what_a_date_holds_is_refused_not_an_overflow(tmp_path):
    # a new user's trial: `cache prune --older-than 99999999999d` ended in OverflowError (exit 4)
    with pytest.raises(SpanTooLong, match="longer than any span a date can hold"):
        parse_age("99999999999d")
    assert parse_age("999999999d") == timedelta(days=999999999)
    result = invoke(["cache", "prune", "--older-than", "99999999999d", "--cache", str(tmp_path / "judgments.sqlite")])
    assert result.exit_code == 2 and "is longer than any span a date can hold" in result.output, result.output
