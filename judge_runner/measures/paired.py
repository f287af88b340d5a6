"""Telling a real change from noise: the mean per-query difference between two runs (or two systems of
one compare run), its 95% percentile bootstrap interval (Efron and Tibshirani 1993; scipy.stats.bootstrap),
and the minimum-effect rule that turns it into "regression", "improvement" or "within noise". Failed
queries follow :mod:`judge_runner.measures.failed` ("cannot tell" when they could change the verdict).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from judge_runner.measures.failed import AT_ZERO, CANNOT_TELL, Failed, Failures

MIN_QUERIES = 5


MIN_EFFECT = 0.03  # smallest difference (on a 0-1 scale) called a regression or an improvement


CONFIDENCE = 0.95


RESAMPLES = 4000


@dataclass
class Comparison:
    """A change of one column between two runs: mean difference (new - old), its 95% interval, the
    number of queries behind it, whether it was paired, the verdict and, when a side failed queries, the
    ``failed`` block (:meth:`judge_runner.measures.failed.Failures.block`; the figure is then the one with
    the failed queries at 0)."""

    column: str
    delta: float | None
    low: float | None
    high: float | None
    n: int
    paired: bool
    verdict: str  # "regression", "improvement", "within noise", "too few queries", "cannot tell"
    failed: dict[str, Any] | None = None

    def as_dict(self) -> dict:
        return {
            "column": self.column,
            "delta": self.delta,
            "ci95": [self.low, self.high],
            "n": self.n,
            "paired": self.paired,
            "verdict": self.verdict,
            "failed": self.failed,
        }

    def figure(self) -> dict[str, Any]:
        """What a ``failed`` block keeps of a second figure: ``delta``, ``ci95``, ``n``, ``verdict``."""
        return {"delta": self.delta, "ci95": [self.low, self.high], "n": self.n, "verdict": self.verdict}


def compare_values(
    a: dict[str, float],
    b: dict[str, float],
    column: str,
    *,
    paired: bool,
    min_effect: float = MIN_EFFECT,
    seed: int = 0,
    failed: tuple[Failed, Failed] | None = None,
) -> Comparison:
    """Compare per-query values ``b`` (new) with ``a`` (old), both ``{queryId: value}``: :func:`bootstrap_values`,
    with the failed queries of each side (``failed``: ``(a's, b's)``) under the rule of
    :mod:`judge_runner.measures.failed`: the figure with them at 0, its verdict "cannot tell" when the figure
    with them at the other side's value (unpaired: left out) has another."""
    if failed is None:
        return bootstrap_values(a, b, column, paired=paired, min_effect=min_effect, seed=seed)
    rule = Failures.of(a, b, failed[0], failed[1], paired=paired, column=column)

    def figure(how: str) -> Comparison:
        return bootstrap_values(*rule.fill(a, b, how), column, paired=paired, min_effect=min_effect, seed=seed)

    decided = rule.decide(figure, lambda c: c.verdict, Comparison.figure)
    if decided is None:  # never: a bootstrap always gives a figure
        return figure(AT_ZERO)
    return replace(decided.shown, verdict=decided.shown.verdict if decided.holds else CANNOT_TELL, failed=decided.failed)


def bootstrap_values(
    a: dict[str, float], b: dict[str, float], column: str, *, paired: bool, min_effect: float = MIN_EFFECT, seed: int = 0
) -> Comparison:
    """Compare per-query values ``b`` (new) with ``a`` (old), both ``{queryId: value}``: the mean difference
    b - a, its 95% percentile bootstrap interval (scipy.stats.bootstrap, ``RESAMPLES`` resamples, fixed
    ``seed``) and :func:`verdict`. ``paired``: over the queries both have (the same query set, or two
    systems of one compare run); else unpaired over each side's queries. Fewer than ``MIN_QUERIES``
    queries give "too few queries" and no interval."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    if paired:
        common = sorted(set(a) & set(b))
        diffs = np.array([b[q] - a[q] for q in common])
        if len(diffs) < MIN_QUERIES:
            return Comparison(column, float(diffs.mean()) if len(diffs) else None, None, None, len(diffs), True, "too few queries")
        delta = float(diffs.mean())
        if np.allclose(diffs, diffs[0]):
            low = high = delta
        else:
            ci = stats.bootstrap(
                (diffs,), np.mean, confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile", rng=rng
            ).confidence_interval
            low, high = float(ci.low), float(ci.high)
        n = len(diffs)
    else:
        x, y = np.array(list(b.values())), np.array(list(a.values()))
        if min(len(x), len(y)) < MIN_QUERIES:
            few = float(x.mean() - y.mean()) if len(x) and len(y) else None
            return Comparison(column, few, None, None, min(len(x), len(y)), False, "too few queries")
        delta = float(x.mean() - y.mean())
        ci = stats.bootstrap(
            (x, y),
            lambda s, t, axis=-1: np.mean(s, axis=axis) - np.mean(t, axis=axis),
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method="percentile",
            vectorized=True,
            rng=rng,
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
        n = min(len(x), len(y))
    return Comparison(column, round(delta, 6), round(low, 6), round(high, 6), n, paired, verdict(delta, low, high, min_effect))


def verdict(delta: float, low: float, high: float, min_effect: float) -> str:
    """The minimum-effect rule: "regression" when the interval lies below zero and the difference is at
    least ``min_effect`` in size, "improvement" likewise above zero, else "within noise"."""
    if high < 0 and delta <= -min_effect:
        return "regression"
    if low > 0 and delta >= min_effect:
        return "improvement"
    return "within noise"
