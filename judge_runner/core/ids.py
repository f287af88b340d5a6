"""Names that must be unique across folders and machines and still sort by time: run ids (and so run file
names) and calibration file names.

A name is the UTC time to the millisecond in ISO 8601 basic format, then six random hex digits:
``20261201T090000.123Z-3f9a0c``. Two runs started in the same millisecond on two machines (or in two
folders later copied together) share a name with probability 2**-24 (one in 16.8 million); within one
folder the file is also created exclusively, so a clash there draws a new suffix. Names written before
(``20261201T090000Z``, and ``20261201T090000.123Z`` or ``20261201T090000.123-1Z`` on a clash in one
folder) are still read: nothing parses a name, and :func:`sort_key` orders old and new names by time.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

SUFFIX_BYTES = 3
"""Random bytes of a name's suffix (six hex digits, :func:`secrets.token_hex`)."""


def time_id(now: datetime | None = None) -> str:
    """A new time-ordered unique name: ``now`` (default the current time; converted to UTC) as
    ``%Y%m%dT%H%M%S.<milliseconds>Z`` plus ``-`` and :data:`SUFFIX_BYTES` random bytes in hex."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%S}.{moment.microsecond // 1000:03d}Z-{secrets.token_hex(SUFFIX_BYTES)}"


def sort_key(name: str) -> str:
    """The key that sorts names by their time, oldest first, old formats among new ones: the name without
    its ``Z``. ``20261201T090000Z`` (no milliseconds) sorts before ``20261201T090000.123Z`` and
    ``20261201T090000.123Z-3f9a0c`` of the same second, which plain string order does not do (``Z`` sorts
    after ``.``). Names of the same millisecond are in no particular order."""
    return name.replace("Z", "")


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name#2``, ``name#3`` ... the first not in ``taken``; added to ``taken``. For names
    shown side by side that must not merge (two systems, two run files named alike)."""
    out, n = name, 2
    while out in taken:
        out, n = f"{name}#{n}", n + 1
    taken.add(out)
    return out


__all__ = ["SUFFIX_BYTES", "sort_key", "time_id", "unique_name"]
