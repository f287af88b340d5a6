"""Spans of time typed by people: ``--since 7d`` of ``report``, ``--older-than 30d`` of ``cache prune``."""

from __future__ import annotations

import re
from datetime import timedelta


class SpanTooLong(ValueError):
    """A span longer than a :class:`~datetime.timedelta` holds (999,999,999 days)."""


def parse_since(value: str) -> timedelta:
    """``"7d"``, ``"36h"``, ``"2w"`` -> a timedelta. Raises ValueError for anything else, SpanTooLong past
    999,999,999 days."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", value or "")
    if not match:
        raise ValueError(f"--since takes a number and a unit h, d or w (e.g. 7d), not {value!r}")
    amount, unit = int(match.group(1)), match.group(2)
    try:
        return timedelta(**{{"h": "hours", "d": "days", "w": "weeks"}[unit]: amount})
    except OverflowError:  # past timedelta's 999,999,999 days
        raise SpanTooLong(f"{value.strip()!r} is longer than any span a date can hold (at most 999999999d)") from None


def parse_age(text: str) -> timedelta:
    """An age for ``cache prune --older-than``, read as :func:`parse_since`; the ValueError says what an age is."""
    try:
        return parse_since(text)
    except SpanTooLong:
        raise
    except ValueError:
        raise ValueError(f"an age is a number and a unit h, d or w (e.g. 30d), not {text!r}") from None
