"""Number options of the command line: :class:`FiniteFloatRange`, which every float option uses.
``click.FloatRange`` lets ``nan`` through every bound (each comparison with NaN is false) and ``inf``
through an open upper one.
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """:class:`click.FloatRange` that also refuses NaN and +/-infinity (exit 2, naming the option)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Fails (click's usage error) for a value that is not a finite number in the range."""
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)
