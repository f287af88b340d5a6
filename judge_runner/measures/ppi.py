"""Prediction-powered inference for a mean, power-tuned (PPI++), honest with few labels (docs/deciding.md, "The
estimator"). The judge scores all N queries (``f``), people grade a random n of them (``y``)::

    theta(lambda) = mean_L y + lambda * (mean_N f - mean_L f)
    Var = s_e^2 / n + (lambda^2 s_f^2 + 2 lambda cov(f, e)) / N,  e = y - lambda f

``lambda = 1`` is plain PPI (Angelopoulos et al. 2023, Science 382:669), ``0`` the people's own mean; PPI++
(Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453) minimises the variance at ``cov(f, y) / s_f^2``, the
double-sampling regression estimator (Cochran 1977, "Sampling Techniques", 12.6), clipped to [0, 1] as ppi_py
does. Against small-sample optimism (Mani et al. 2025, arXiv 2505.20178) the weight is cross-fitted (leave one
out), intervals use t quantiles, and the people's own interval is given whenever the judge's is not narrower.
The interval is for queries like these, so conservative for the N queries' own mean."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import cast

import numpy as np

CONFIDENCE = 0.95
Z95 = NormalDist().inv_cdf(0.975)  # 1.959964: the two-sided 95% normal quantile (planning figures only)
MIN_LABELLED = 10
"""Fewest graded queries behind a corrected estimate: with fewer a 95% interval does not hold 95%, and no weight
can be fitted on held-apart queries."""
NO_INFORMATION = 0.05
"""A cross-fitted weight below this: the judge carries no information about the people's values."""
WHY_MINIMUM = (
    f"a corrected estimate needs at least {MIN_LABELLED} labelled queries: with fewer, the spread of the labels "
    "is too unstable for a 95% interval to hold 95%, and the judge's weight cannot be fitted on held-apart queries"
)


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student's t quantile (scipy.stats.t.ppf). Raises ValueError for ``df`` < 1."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return _t_ppf(int(df), float(confidence))


@lru_cache(maxsize=4096)
def _t_ppf(df: int, confidence: float) -> float:
    from scipy import stats  # heavy: only where an interval is computed

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def clip_interval(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    return max(low, bounds[0]), min(high, bounds[1])


@dataclass(frozen=True)
class MeanEstimate:
    """A corrected mean and its interval, within ``bounds``. ``weight``: the judge's lambda (0: the people's own
    figures); ``human_mean``/``human_ci95``: the graded queries' own mean and t interval, always given beside;
    ``Var = labelled_variance / n + shared_variance / N`` (:func:`variance_at`)."""

    estimate: float
    ci95: tuple[float, float]
    weight: float
    judge_informative: bool
    judge_mean: float
    correction: float
    queries: int
    labelled: int
    human_mean: float
    human_ci95: tuple[float, float]
    labelled_variance: float
    shared_variance: float
    df: int
    bounds: tuple[float, float] = (0.0, 1.0)
    confidence: float = CONFIDENCE

    @property
    def half_width(self) -> float:
        """Half the interval's width before clipping."""
        return self.quantile * math.sqrt(max(self.variance, 0.0))

    @property
    def variance(self) -> float:
        return variance_at(self, self.labelled)

    @property
    def quantile(self) -> float:
        return t_quantile(self.df, self.confidence)

    def as_dict(self) -> dict:
        """The summary's ``CorrectedMean``, rounded to 6 decimals."""

        def r(x: float) -> float:
            return round(float(x), 6)

        return {
            "estimate": r(self.estimate),
            "ci95": [r(self.ci95[0]), r(self.ci95[1])],
            "weight": r(self.weight),
            "judgeInformative": self.judge_informative,
            "judgeMean": r(self.judge_mean),
            "correction": r(self.correction),
            "queries": self.queries,
            "labelled": self.labelled,
            "humanOnly": {"mean": r(self.human_mean), "ci95": [r(self.human_ci95[0]), r(self.human_ci95[1])]},
        }


def variance_at(found: MeanEstimate, labelled: int) -> float:
    """The variance ``found`` would have with ``labelled`` queries graded, the per-query spreads as estimated."""
    return found.labelled_variance / max(labelled, 1) + found.shared_variance / max(found.queries, 1)


BUNCHED = 0.75
"""A graded value held by more than this share of the units bunches them (:func:`effective_n`): where a t
interval's coverage fell to 87% on SciFact's zero-inflated differences."""


def effective_n(values: Sequence[float] | np.ndarray) -> int:
    """How many graded values the spread rests on: all, unless one value holds more than :data:`BUNCHED` of
    them, then only those off it; the t quantile's degrees of freedom come from this
    (benchmarks/decide_scifact.py)."""
    array = np.round(np.asarray(values, dtype=float), 12)
    if len(array) == 0:
        return 0
    _, counts = np.unique(array, return_counts=True)
    top = int(counts.max())
    return len(array) - top if top > BUNCHED * len(array) else len(array)


def _cross_fitted_weights(f: np.ndarray, y: np.ndarray, s_f2: float) -> np.ndarray:
    """Leave-one-out weights: ``cov(f, y)`` over the other graded queries over ``s_f2`` (all queries), clipped
    to [0, 1]."""
    n = len(y)
    if s_f2 <= 0:
        return np.zeros(n)
    sf, sy, sfy = f.sum(), y.sum(), (f * y).sum()
    rest = n - 1
    mean_f = (sf - f) / rest
    mean_y = (sy - y) / rest
    cov = ((sfy - f * y) - rest * mean_f * mean_y) / (rest - 1)
    return cast(np.ndarray, np.clip(cov / s_f2, 0.0, 1.0))


def tuned_mean(
    f_all: Sequence[float],
    f_labelled: Sequence[float],
    y_labelled: Sequence[float],
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    weight: float | None = None,
    confidence: float = CONFIDENCE,
) -> MeanEstimate | None:
    """The corrected mean from ``f_all`` (the judge's value of all N queries) and ``f_labelled``, ``y_labelled``
    (the judge's and the people's values of the n graded ones, same order). ``weight``: None for the
    cross-fitted PPI++ weight, a number to fix it (1: plain PPI, 0: the people's own). None below
    :data:`MIN_LABELLED`. Raises ValueError when the graded arrays differ in length."""
    f_n = np.asarray(f_all, dtype=float)
    f = np.asarray(f_labelled, dtype=float)
    y = np.asarray(y_labelled, dtype=float)
    if len(f) != len(y):
        raise ValueError("one judge value per labelled value is required")
    n, big_n = len(y), max(len(f_n), len(y))
    if n < MIN_LABELLED:
        return None
    s_f2 = float(f_n.var(ddof=1)) if len(f_n) > 1 else 0.0
    s_y2 = float(y.var(ddof=1))
    if float(np.ptp(y)) == 0:
        return _all_alike(f_n, y, bounds, confidence)
    n_eff = effective_n(y)
    human_half = t_quantile(max(n_eff - 1, 1), confidence) * math.sqrt(s_y2 / n)
    human = (float(y.mean()), clip_interval(float(y.mean()) - human_half, float(y.mean()) + human_half, bounds))
    tuned = weight is None
    lam = _cross_fitted_weights(f, y, s_f2) if weight is None else np.full(n, float(weight))
    terms = y - lam * (f - f_n.mean())
    psi = y - lam * f
    lam_bar = float(lam.mean())
    labelled_var = float(psi.var(ddof=1))
    shared = max(lam_bar**2 * s_f2 + 2 * lam_bar * float(np.cov(f, psi, ddof=1)[0, 1]), 0.0)
    # the judge informs when its interval (t with n - 2 degrees of freedom), clipped to the range, is narrower
    # than the people's own
    tuned_half = t_quantile(max(n_eff - 2, 1), confidence) * math.sqrt(labelled_var / n + shared / big_n)
    centre = float(terms.mean())
    tuned_low, tuned_high = clip_interval(centre - tuned_half, centre + tuned_half, bounds)
    narrower = tuned_high - tuned_low < human[1][1] - human[1][0]
    informative = lam_bar >= NO_INFORMATION and narrower if tuned else lam_bar != 0
    if not informative:  # the judge adds nothing (or was given weight 0): the people's own figures
        lam_bar, labelled_var, shared, terms = 0.0, s_y2, 0.0, y
    df = max(n_eff - 2, 1) if tuned and informative else max(n_eff - 1, 1)
    centre = float(terms.mean())
    half = t_quantile(df, confidence) * math.sqrt(labelled_var / n + shared / big_n)
    estimate = float(np.clip(centre, *bounds))
    return MeanEstimate(
        estimate=estimate,
        ci95=clip_interval(centre - half, centre + half, bounds),
        weight=lam_bar,
        judge_informative=informative,
        judge_mean=float(f_n.mean()),
        correction=estimate - float(f_n.mean()),
        queries=big_n,
        labelled=n,
        human_mean=human[0],
        human_ci95=human[1],
        labelled_variance=labelled_var,
        shared_variance=shared,
        df=df,
        bounds=bounds,
        confidence=confidence,
    )


def rule_of_three(estimate: float, n: int, bounds: tuple[float, float]) -> tuple[float, float]:
    """The 95% interval around ``estimate`` when all ``n`` grades agree: the share that would differ is below
    ``3/n`` (Hanley & Lippman-Hand 1983, JAMA 249:1743), each at most as far as ``bounds`` allow: ``[c - 3/n (c
    - low), c + 3/n (high - c)]``."""
    low, high = bounds
    return clip_interval(estimate - 3 / n * (estimate - low), estimate + 3 / n * (high - estimate), bounds)


def _all_alike(f_all: np.ndarray, y: np.ndarray, bounds: tuple[float, float], confidence: float) -> MeanEstimate:
    """Every graded query has the same value ``c``: the rule of three's interval, or ``[c, c]`` when the judge
    too gives every query ``c``."""
    n, c = len(y), float(y[0])
    interval = (c, c) if float(np.ptp(f_all)) == 0 and float(f_all[0]) == c else rule_of_three(c, n, bounds)
    return MeanEstimate(
        estimate=c,
        ci95=interval,
        weight=0.0,
        judge_informative=False,
        judge_mean=float(f_all.mean()),
        correction=c - float(f_all.mean()),
        queries=max(len(f_all), n),
        labelled=n,
        human_mean=c,
        human_ci95=interval,
        labelled_variance=0.0,
        shared_variance=0.0,
        df=n - 1,
        bounds=bounds,
        confidence=confidence,
    )


def ppi_mean(
    judge: Mapping[str, float],
    human: Mapping[str, float],
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    weight: float | None = None,
    confidence: float = CONFIDENCE,
) -> MeanEstimate | None:
    """:func:`tuned_mean` from ``judge`` ``{query id: value}`` over every scored query and ``human`` over the
    graded ones (ids missing from ``judge`` are ignored)."""
    labelled = [q for q in human if q in judge]
    return tuned_mean(
        [float(v) for v in judge.values()],
        [float(judge[q]) for q in labelled],
        [float(human[q]) for q in labelled],
        bounds=bounds,
        weight=weight,
        confidence=confidence,
    )


def queries_for_width(sd: float, width: float, population: int | None = None) -> int:
    """Queries to grade for a 95% interval at most ``width`` wide (full width) when values spread with ``sd``:
    ``n0 = (2 z sd / width)^2``, divided by ``1 + n0 / N`` given the ``population`` N (Cochran 1977, eq. 4.2).
    An upper figure: the corrected interval is never wider. Within [:data:`MIN_LABELLED`, ``population``].
    Raises ValueError for a width not positive."""
    if width <= 0:
        raise ValueError("the interval width must be positive")
    n0 = (2 * Z95 * max(sd, 0.0) / width) ** 2
    n = n0 / (1 + n0 / population) if population else n0
    n = max(MIN_LABELLED, math.ceil(n - 1e-9))
    return min(n, population) if population else n
