"""Time-ordered unique names for run ids (so run file names) and calibration files: the UTC time to the
millisecond in ISO 8601 basic format plus six random hex digits, ``20261201T090000.123Z-3f9a0c``. Two machines
collide with probability 2**-24; within one folder the file is created exclusively, so a clash draws a new
suffix. Older names (``20261201T090000Z``) are still read and sorted (:func:`sort_key`)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

SUFFIX_BYTES = 3
"""Random bytes of a name's suffix (six hex digits, :func:`secrets.token_hex`)."""


def time_id(now: datetime | None = None) -> str:
    """A new name for ``now`` (default: the current time), in UTC."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%S}.{moment.microsecond // 1000:03d}Z-{secrets.token_hex(SUFFIX_BYTES)}"


def sort_key(name: str) -> str:
    """Sorts names by time, oldest first, old formats among new (plain string order puts ``Z`` after ``.``).
    Names of the same millisecond are in no particular order."""
    return name.replace("Z", "")


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or the first of ``name#2``, ``name#3``, ... not in ``taken``; added to ``taken``."""
    out, n = name, 2
    while out in taken:
        out, n = f"{name}#{n}", n + 1
    taken.add(out)
    return out


__all__ = ["SUFFIX_BYTES", "sort_key", "time_id", "unique_name"]
