"""Prediction-powered inference for a mean (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, "Prediction-
powered inference", Science 382(6671):669-674; the mean estimator of their section "Means").

A judge scores every query of a run (``f_i``, all ``N`` queries); people label a random sample ``L`` of
``n`` of them (``y_i``). The prediction-powered estimate of the mean human value is the judge's mean over
all queries corrected by the mean of the human-minus-judge differences (the "rectifier") over the labelled
ones::

    theta = mean_{i in N} f_i + mean_{i in L} (y_i - f_i)

It is unbiased whatever the judge's bias, and its interval is narrower than the labelled sample's alone
when the judge tracks the people (Var(y - f) < Var(y)). The labelled queries are a subset of the ``N``
(the paper's unlabelled set is disjoint), so the variance carries the covariance of the two terms:
``Var = (s_y^2 - s_d^2) / N + s_d^2 / n`` with ``s_d^2`` the variance of ``y - f`` and
``s_y^2 - s_d^2 = s_f^2 + 2 cov(f, d)`` estimated from the judge's values on all queries and the
covariance on the labelled ones. With ``n = N`` this is the classical interval of the human mean; the
95% interval is the normal one, ``theta -/+ z_0.975 sqrt(Var)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z95 = NormalDist().inv_cdf(0.975)  # 1.959964: the two-sided 95% normal quantile
MIN_LABELLED = 2  # a variance needs two labelled queries


@dataclass(frozen=True)
class MeanEstimate:
    """A prediction-powered mean: ``estimate`` with its 95% interval ``ci95``; ``judge_mean`` over the
    ``queries`` (N) the judge scored; ``correction`` = mean(human - judge) over the ``labelled`` (n)
    queries; ``human_mean`` and ``human_ci95``: the classical mean and 95% normal interval of the
    labelled queries alone (what the people's labels say without the judge), for comparison."""

    estimate: float
    ci95: tuple[float, float]
    judge_mean: float
    correction: float
    queries: int
    labelled: int
    human_mean: float
    human_ci95: tuple[float, float]

    def as_dict(self) -> dict:
        """JSON-ready (camelCase, rounded to 6 decimals)."""

        def r(x: float) -> float:
            return round(float(x), 6)

        return {
            "estimate": r(self.estimate),
            "ci95": [r(self.ci95[0]), r(self.ci95[1])],
            "judgeMean": r(self.judge_mean),
            "correction": r(self.correction),
            "queries": self.queries,
            "labelled": self.labelled,
            "humanOnly": {"mean": r(self.human_mean), "ci95": [r(self.human_ci95[0]), r(self.human_ci95[1])]},
        }


def ppi_mean(judge: Mapping[str, float], human: Mapping[str, float]) -> MeanEstimate | None:
    """The prediction-powered estimate of the mean (module docstring). ``judge``: ``{query id: judge's
    value}`` over every scored query; ``human``: ``{query id: people's value}`` over the labelled ones
    (ids missing from ``judge`` are ignored). None with fewer than :data:`MIN_LABELLED` labelled queries."""
    labelled = [q for q in human if q in judge]
    if len(labelled) < MIN_LABELLED:
        return None
    f_all = np.array([float(v) for v in judge.values()])
    y = np.array([float(human[q]) for q in labelled])
    f = np.array([float(judge[q]) for q in labelled])
    d = y - f
    big_n, n = len(f_all), len(labelled)
    estimate = float(f_all.mean() + d.mean())
    s_d2 = float(d.var(ddof=1))
    s_f2 = float(f_all.var(ddof=1)) if big_n > 1 else 0.0
    cov_fd = float(np.cov(f, d, ddof=1)[0, 1])
    variance = max(s_f2 + 2 * cov_fd, 0.0) / big_n + s_d2 / n
    half = Z95 * math.sqrt(max(variance, 0.0))
    human_half = Z95 * math.sqrt(float(y.var(ddof=1)) / n)
    return MeanEstimate(
        estimate,
        (estimate - half, estimate + half),
        float(f_all.mean()),
        float(d.mean()),
        big_n,
        n,
        float(y.mean()),
        (float(y.mean()) - human_half, float(y.mean()) + human_half),
    )


def queries_for_width(sd: float, width: float, population: int | None = None) -> int:
    """How many queries to label so that a 95% interval of a mean is at most ``width`` wide (full width,
    e.g. 0.1 for +/- 0.05), when per-query values spread with standard deviation ``sd``: ``n0 = (2 z sd /
    width)^2``, with the finite-population correction ``n0 / (1 + n0 / N)`` when the ``population`` (N
    queries) is given (Cochran 1977, "Sampling Techniques", eq. 4.2). That is the interval of the labelled
    queries alone; the prediction-powered one is narrower when the judge tracks the labels, so this is a
    safe upper figure. At least :data:`MIN_LABELLED`, at most ``population``. Raises ValueError for a
    width that is not positive."""
    if width <= 0:
        raise ValueError("the interval width must be positive")
    n0 = (2 * Z95 * max(sd, 0.0) / width) ** 2
    n = n0 / (1 + n0 / population) if population else n0
    n = max(MIN_LABELLED, math.ceil(n - 1e-9))
    return min(n, population) if population else n
