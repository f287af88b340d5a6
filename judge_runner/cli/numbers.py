"""Number options of the command line: :class:`FiniteFloatRange`, a float range that refuses NaN and infinity.

``click.FloatRange`` lets ``nan`` through every bound (each comparison with NaN is false), so ``--width nan``
reached the code as a width and ended in "cannot convert float NaN to integer"; ``inf`` passes an open upper
bound. Every float option of the command line uses this type instead, and says so the same way: "Invalid value
for '--width': nan is not a finite number." (exit 2).
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """:class:`click.FloatRange` (same arguments) that also refuses NaN and +/-infinity (exit 2, naming the option)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The float of ``value`` within the range; fails (click's usage error) when it is not a finite number."""
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)
