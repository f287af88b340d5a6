"""Agreement between trials of the judge: Krippendorff's alpha, ordinal (issue 14, item 7).

Each judged (query, result) pair is a unit; each trial is a "coder". Alpha = 1 - D_o / D_e (observed
over expected disagreement; Krippendorff 2004, "Content Analysis", ch. 11; 2011, "Computing
Krippendorff's Alpha-Reliability"), computed with the ``krippendorff`` package (Castro, pinned in
pyproject.toml) at the ordinal level on the value domain 0-3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import krippendorff
import numpy as np

LABEL_DOMAIN = (0, 1, 2, 3)


def trials_alpha(units: Sequence[Sequence[int | None]]) -> float | None:
    """Krippendorff's alpha (ordinal) over trial labels.

    ``units``: one sequence per judged (query, result) pair, holding its label in each trial; a trial
    that produced no label for that pair (it failed, or fewer trials ran) is None or simply absent
    (rows may differ in length). Missing values are handled as the package does: a unit contributes
    only the pairs of values it has, and a unit with fewer than two values contributes nothing.

    Returns alpha in [-1, 1] (1 perfect agreement, 0 chance level), rounded to 6 places, or None when
    it is undefined: fewer than two trials, no unit with two values, or every label the same value
    (expected disagreement 0, so alpha is 0/0; the caller should show "n/a", not 1.0). Raises
    ValueError on a label outside 0-3.
    """
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
