"""Spans of time typed by people: ``--since 7d`` of ``report``, ``--older-than 30d`` of ``cache prune``."""

from __future__ import annotations

import re
from datetime import timedelta


def parse_since(value: str) -> timedelta:
    """``"7d"``, ``"36h"``, ``"2w"`` -> a timedelta. Raises ValueError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", value or "")
    if not match:
        raise ValueError(f"--since takes a number and a unit h, d or w (e.g. 7d), not {value!r}")
    amount, unit = int(match.group(1)), match.group(2)
    return {"h": timedelta(hours=amount), "d": timedelta(days=amount), "w": timedelta(weeks=amount)}[unit]
