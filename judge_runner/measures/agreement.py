"""Agreement between trials of the judge: Krippendorff's alpha at the ordinal level on 0-3, each judged (query,
result) pair a unit and each trial a coder (Krippendorff 2004, "Content Analysis", ch. 11; computed by the
``krippendorff`` package)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import krippendorff
import numpy as np

LABEL_DOMAIN = (0, 1, 2, 3)


def trials_alpha(units: Sequence[Sequence[int | None]]) -> float | None:
    """Alpha in [-1, 1] over ``units`` (one sequence of per-trial labels per pair; a missing label is None or
    absent), rounded to 6 places. None when undefined: fewer than two trials, no unit with two values, or a
    single value throughout (0/0; show "n/a", not 1.0). Raises ValueError on a label outside 0-3."""
    width = max((len(u) for u in units), default=0)
    if width < 2:
        return None
    matrix = np.full((width, len(units)), np.nan)
    for j, unit in enumerate(units):
        for i, value in enumerate(unit):
            if value is None:
                continue
            if isinstance(value, bool) or value not in LABEL_DOMAIN:
                raise ValueError(f"labels must be integers 0-3, got {value!r}")
            matrix[i, j] = value
    pairable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    observed = set(pairable[~np.isnan(pairable)].tolist())
    if pairable.shape[1] == 0 or len(observed) < 2:
        return None
    alpha = float(krippendorff.alpha(reliability_data=matrix, value_domain=list(LABEL_DOMAIN), level_of_measurement="ordinal"))
    return round(alpha, 6) if math.isfinite(alpha) else None
