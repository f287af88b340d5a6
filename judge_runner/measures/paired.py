"""Telling a real change from noise: the mean per-query difference, its 95% percentile bootstrap interval (Efron
and Tibshirani 1993; scipy.stats.bootstrap), and the minimum-effect rule that calls it a regression, an
improvement or within noise. Failed queries follow :mod:`judge_runner.measures.failed`."""

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
    """A change of one column between two runs (new - old) and its verdict; ``failed``: the failed queries'
    block, the figure then being the one with them at 0."""

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
        """What a ``failed`` block keeps of a second figure."""
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
    """:func:`bootstrap_values` of ``b`` (new) against ``a`` (old), ``{queryId: value}``, with each side's
    ``failed`` queries under the rule of :mod:`judge_runner.measures.failed`."""
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
    """The mean difference b - a, its percentile bootstrap interval (:data:`RESAMPLES`, fixed ``seed``) and
    :func:`verdict`; paired over the queries both have, else unpaired. Fewer than :data:`MIN_QUERIES` give "too
    few queries" and no interval."""
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
    """ "regression" when the interval lies below 0 and the difference is at least ``min_effect``, "improvement"
    likewise above, else "within noise"."""
    if high < 0 and delta <= -min_effect:
        return "regression"
    if low > 0 and delta >= min_effect:
        return "improvement"
    return "within noise"
