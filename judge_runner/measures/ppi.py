"""Prediction-powered inference for a mean, power-tuned (PPI++), with small-sample honesty.

A judge scores every query of a run (``f_i``, all ``N`` queries); people label a random sample ``L`` of ``n``
of them (``y_i``). The estimate of the people's mean is the labelled queries' mean moved by ``lambda`` times
how far the judge's mean over all queries sits from its mean over the labelled ones::

    theta(lambda) = mean_L y + lambda * (mean_N f - mean_L f)
                  = lambda * mean_N f + mean_L (y - lambda f)

``lambda = 1`` is plain prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
"Prediction-powered inference", Science 382:669); ``lambda = 0`` is the people's own mean. PPI++ (Angelopoulos,
Duchi & Zrnic 2023, "PPI++: Efficient prediction-powered inference", arXiv 2311.01453, section 2) chooses the
weight that minimises the variance, so the judge is used as much as it tracks the people and no more. The
estimate is unbiased for any fixed ``lambda`` whatever the judge's bias.

Variance. The labelled queries are among the ``N`` (the papers' unlabelled set is disjoint), so the two terms
are correlated. With ``e = y - lambda f``::

    Var = s_e^2 / n + (lambda^2 s_f^2 + 2 lambda cov(f, e)) / N
        = s_y^2 / n - (2 lambda cov(f, y) - lambda^2 s_f^2) (1/n - 1/N)

minimised at ``lambda* = cov(f, y) / s_f^2``: the regression coefficient of the people's values on the judge's,
i.e. the double-sampling regression estimator of survey sampling (Cochran 1977, "Sampling Techniques", 3rd
ed., section 12.6), whose variance ``s_y^2 (1 - rho^2 (1 - n/N)) / n`` is never above the people's own
``s_y^2 / n``. ``lambda`` is clipped to [0, 1] as ppi_py does (``_calc_lam_glm(clip=True)``).

Small samples (Mani, Xu, Lipton & Oberst 2025, "No free lunch: non-asymptotic analysis of prediction-powered
inference", arXiv 2505.20178): a weight fitted on the same labels it is applied to makes the interval too
narrow with few labels, and PPI++ helps only when the correlation exceeds about ``1/sqrt(n - 2)``. So:

- the weight is **cross-fitted**: each labelled query's term uses the weight fitted on the other labelled
  queries (leave-one-out; the judge's spread ``s_f^2`` comes from all ``N`` queries, which holds nothing of
  the people's), and the variance is that of the cross-fitted terms;
- when that variance is not below the people's own, or the weight is about 0 (:data:`NO_INFORMATION`), the
  judge carries no information about these labels: the estimate and interval are the people's own
  (``judge_informative`` False, weight 0). No corrected interval is ever wider than the people's;
- intervals use Student's t quantiles (``n - 1`` degrees of freedom for the people's mean, ``n - 2`` once a
  weight is fitted), not the normal one;
- below :data:`MIN_LABELLED` labelled queries nothing is estimated (a variance from fewer is too unstable for
  a "95%" interval to mean 95%, and a weight cannot be fitted on held-apart queries);
- when every labelled query has the same value, the interval is not that single point but the rule of three's
  (:func:`_all_alike`), unless the judge too sees the same value everywhere;
- the estimate and the interval are clipped to the measure's range (``bounds``: [0, 1] for a mean nDCG@10,
  [-1, 1] for a difference): projecting onto the range never moves an estimate away from the truth.

The interval is for the mean of queries like these (the papers' target), so it is conservative for the ``N``
queries' own mean. With ``n = N`` it is the classical interval of the people's mean.
"""

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
"""Fewest labelled queries behind a corrected estimate (see the module docstring)."""
NO_INFORMATION = 0.05
"""A cross-fitted weight below this: the judge carries no information about the people's values."""
WHY_MINIMUM = (
    f"a corrected estimate needs at least {MIN_LABELLED} labelled queries: with fewer, the spread of the labels "
    "is too unstable for a 95% interval to hold 95%, and the judge's weight cannot be fitted on held-apart queries"
)


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student's t quantile for ``df`` degrees of freedom (scipy.stats.t.ppf, imported when first
    needed: the CLI starts without the statistics stack). Raises ValueError for ``df`` < 1."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return _t_ppf(int(df), float(confidence))


@lru_cache(maxsize=4096)
def _t_ppf(df: int, confidence: float) -> float:
    from scipy import stats  # heavy: only where an interval is computed

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def clip_interval(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """``[low, high]`` intersected with ``bounds``."""
    return max(low, bounds[0]), min(high, bounds[1])


@dataclass(frozen=True)
class MeanEstimate:
    """A corrected mean: ``estimate`` with its 95% interval ``ci95`` (both within ``bounds``); ``weight`` the
    judge's weight lambda (0: the people's own figures, see ``judge_informative``); ``judge_mean`` over the
    ``queries`` (N) the judge scored; ``correction`` = estimate - judge_mean; ``labelled`` (n); ``human_mean``
    and ``human_ci95``: the labelled queries' own mean and t interval (what the people's labels say without the
    judge), always given beside. ``labelled_variance`` and ``shared_variance``: the variance's parts, ``Var =
    labelled_variance / n + shared_variance / N`` (for projections: :func:`variance_at`); ``df``: the t
    quantile's degrees of freedom, ``confidence`` the interval's level."""

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
        """Half the interval's width before clipping (``t * sqrt(Var)``)."""
        return self.quantile * math.sqrt(max(self.variance, 0.0))

    @property
    def variance(self) -> float:
        """The estimate's variance."""
        return variance_at(self, self.labelled)

    @property
    def quantile(self) -> float:
        """The t quantile of the interval (``df`` degrees of freedom)."""
        return t_quantile(self.df, self.confidence)

    def as_dict(self) -> dict:
        """JSON-ready (camelCase, rounded to 6 decimals): the summary's ``CorrectedMean``."""

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
    """The variance ``found`` would have with ``labelled`` queries labelled out of the same ``queries``, the
    per-query spreads staying as estimated: ``labelled_variance / labelled + shared_variance / queries``."""
    return found.labelled_variance / max(labelled, 1) + found.shared_variance / max(found.queries, 1)


BUNCHED = 0.75
"""A labelled value held by more than this share of the labelled units bunches them (:func:`effective_n`): three
quarters, where a t interval's coverage visibly fell (87% instead of 95%) on SciFact's zero-inflated differences."""


def effective_n(values: Sequence[float] | np.ndarray) -> int:
    """How many labelled values the spread rests on: all of them, unless one value holds more than
    :data:`BUNCHED` of them (a difference of two systems that rank most queries alike is 0 on most), then only
    those off it. The t quantile takes its degrees of freedom from this count: with few values off a common one,
    the sample spread is often too small (it misses the rare large ones), and the usual n - 1 gave the weighted
    design's intervals of hybrid - hybrid-rrf10 on SciFact 87% coverage (benchmarks/decide_scifact.py)."""
    array = np.round(np.asarray(values, dtype=float), 12)
    if len(array) == 0:
        return 0
    _, counts = np.unique(array, return_counts=True)
    top = int(counts.max())
    return len(array) - top if top > BUNCHED * len(array) else len(array)


def _cross_fitted_weights(f: np.ndarray, y: np.ndarray, s_f2: float) -> np.ndarray:
    """Leave-one-out weights: for each labelled query, ``cov(f, y)`` over the other labelled queries over the
    judge's variance ``s_f2`` over all queries, clipped to [0, 1]."""
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
    """The corrected mean from arrays (module docstring): ``f_all`` the judge's value of every scored query
    (N), ``f_labelled`` and ``y_labelled`` the judge's and the people's values of the labelled ones (n, the
    same order). ``weight``: None for the cross-fitted PPI++ weight with the fall-back to the people's own
    interval; a number (1.0: plain PPI; 0.0: the people's own) to fix it. ``confidence``: of the interval
    ``ci95`` (0.95 unless simultaneous intervals need more). None with fewer than
    :data:`MIN_LABELLED` labelled queries. Raises ValueError when the labelled arrays differ in length."""
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
    """The 95% interval around ``estimate`` when all ``n`` labels agree: the share of units that would differ
    is only known to be below ``3/n`` (the rule of three, Hanley & Lippman-Hand 1983, "If nothing goes wrong, is
    everything all right?", JAMA 249:1743), each at most as far as the measure's range ``bounds`` allows:
    ``[c - 3/n (c - low), c + 3/n (high - c)]``, clipped to the range."""
    low, high = bounds
    return clip_interval(estimate - 3 / n * (estimate - low), estimate + 3 / n * (high - estimate), bounds)


def _all_alike(f_all: np.ndarray, y: np.ndarray, bounds: tuple[float, float], confidence: float) -> MeanEstimate:
    """Every labelled query has the same value ``c``: a t interval would be ``[c, c]``. Unless the judge too
    gives every query that value (nothing varies as far as either can see, e.g. two runs that returned the same
    results everywhere), the share of queries that differ is only known to be below ``3/n`` (the rule of three,
    Hanley & Lippman-Hand 1983, "If nothing goes wrong, is everything all right?", JAMA 249:1743), each at most
    as far as the measure's range allows: ``[c - 3/n (c - low), c + 3/n (high - c)]``."""
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
    """The corrected mean (:func:`tuned_mean`) from ``judge`` ``{query id: judge's value}`` over every scored
    query and ``human`` ``{query id: people's value}`` over the labelled ones (ids missing from ``judge`` are
    ignored). None with fewer than :data:`MIN_LABELLED` labelled queries."""
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
    """How many queries to label so that a 95% interval of a mean is at most ``width`` wide (full width,
    e.g. 0.1 for +/- 0.05), when per-query values spread with standard deviation ``sd``: ``n0 = (2 z sd /
    width)^2``, with the finite-population correction ``n0 / (1 + n0 / N)`` when the ``population`` (N
    queries) is given (Cochran 1977, "Sampling Techniques", eq. 4.2). That is the interval of the labelled
    queries alone; the corrected one is never wider, so this is a safe upper figure. At least
    :data:`MIN_LABELLED`, at most ``population``. Raises ValueError for a width that is not positive."""
    if width <= 0:
        raise ValueError("the interval width must be positive")
    n0 = (2 * Z95 * max(sd, 0.0) / width) ** 2
    n = n0 / (1 + n0 / population) if population else n0
    n = max(MIN_LABELLED, math.ceil(n - 1e-9))
    return min(n, population) if population else n
