"""Corrected means when people grade a non-uniform sample: the augmented inverse-probability-weighted mean
(Zrnic & Candes 2024, arXiv 2403.03208, section 3; the difference estimator of Sarndal, Swensson & Wretman 1992,
section 6.3), each unit graded independently with known probability ``pi_i``::

    z_i = m_i + (y_i - m_i) * xi_i / pi_i,   theta = mean_N z_i,   m_i = a + lambda f_i

unbiased whatever the judge and the probabilities. The variance is design-based (Sarndal et al., eq. 6.6.4);
``a`` and ``lambda`` minimise its draw part by weighted least squares (PPI++'s power tuning), cross-fitted as in
:mod:`judge_runner.measures.ppi`. Single pairs estimate scaled DCG@10, not nDCG@10 (docs/deciding.md, "Labels
where they count")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from judge_runner.measures.ppi import (
    CONFIDENCE,
    MIN_LABELLED,
    NO_INFORMATION,
    MeanEstimate,
    clip_interval,
    effective_n,
    rule_of_three,
    t_quantile,
    tuned_mean,
)

MAX_GRADE = 3
DEPTH = 10
SCALED_DCG_IDEAL = sum(MAX_GRADE / math.log2(r + 2) for r in range(DEPTH))
"""DCG@10 of ten grade-3 results (trec_eval's linear gain, log2 discount): the scale of scaled DCG@10."""


def discount(rank: int) -> float:
    """``1 / log2(rank + 1)`` of a 1-based rank, 0 past :data:`DEPTH`."""
    return 1.0 / math.log2(rank + 1) if 1 <= rank <= DEPTH else 0.0


def _wls_loo(f: np.ndarray, y: np.ndarray, w: np.ndarray, fit: bool) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out weighted least squares of ``y`` on ``a + lambda f``: per unit the ``(a, lambda)`` fitted
    without it, ``lambda`` clipped to [0, 1] (0 unless ``fit``)."""
    sw, swf, swy = w.sum() - w, (w * f).sum() - w * f, (w * y).sum() - w * y
    swff, swfy = (w * f * f).sum() - w * f * f, (w * f * y).sum() - w * f * y
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_f = np.where(sw > 0, swf / sw, 0.0)
        mean_y = np.where(sw > 0, swy / sw, 0.0)
        var_f = swff - sw * mean_f**2
        lam = np.where(var_f > 1e-12, (swfy - sw * mean_f * mean_y) / var_f, 0.0)
    lam = np.clip(lam, 0.0, 1.0) if fit else np.zeros_like(lam)
    return mean_y - lam * mean_f, lam


def _wls(f: np.ndarray, y: np.ndarray, w: np.ndarray, fit: bool) -> tuple[float, float]:
    """Weighted least squares of ``y`` on ``a + lambda f``, ``lambda`` clipped to [0, 1] (0 unless ``fit``)."""
    sw = float(w.sum())
    if sw <= 0:
        return 0.0, 0.0
    mean_f, mean_y = float((w * f).sum()) / sw, float((w * y).sum()) / sw
    var_f = float((w * (f - mean_f) ** 2).sum())
    lam = float(np.clip((w * (f - mean_f) * (y - mean_y)).sum() / var_f, 0.0, 1.0)) if fit and var_f > 1e-12 else 0.0
    return mean_y - lam * mean_f, lam


def _design_terms(f: np.ndarray, y: np.ndarray, pi: np.ndarray, labelled: np.ndarray, fit: bool) -> tuple[np.ndarray, float, float]:
    """``(z over every unit, mean lambda, variance)``. Each unit's prediction is fitted without it, so ``E[z_i]
    = y_i`` exactly; the variance is the people's Hajek-weighted spread over ``N`` plus the draw's ``sum (1 -
    pi)/pi^2 e^2 / N^2`` (Sarndal et al. 1992, eq. 6.6.4)."""
    lab = np.flatnonzero(labelled)
    w = np.where(pi[lab] < 1, (1 - pi[lab]) / pi[lab] ** 2, 0.0)
    if np.any(w > 0):  # units labelled for certain inform the fit too, as a typical drawn unit would
        w = np.where(pi[lab] < 1, w, float(np.median(w[w > 0])))
    else:
        w = np.ones(len(lab))
    a_all, lam_all = _wls(f[lab], y[lab], w, fit)
    m = a_all + lam_all * f
    if len(lab):
        a_loo, lam_loo = _wls_loo(f[lab], y[lab], w, fit)
        m[lab] = a_loo + lam_loo * f[lab]
    z = m.copy()
    z[lab] = m[lab] + (y[lab] - m[lab]) / pi[lab]
    big_n = len(f)
    hajek = 1 / pi[lab]
    mean_y = float((hajek * y[lab]).sum() / hajek.sum())
    spread = float((hajek * (y[lab] - mean_y) ** 2).sum() / hajek.sum()) * len(lab) / max(len(lab) - 1, 1)
    draw = float(((1 - pi[lab]) / pi[lab] ** 2 * (y[lab] - m[lab]) ** 2).sum()) / big_n**2
    return z, float(lam_loo.mean()) if len(lab) else 0.0, spread / big_n + draw


@dataclass(frozen=True)
class DesignUnit:
    """One unit of a sampling design: the judge's value, the people's (None when not graded), and the
    probability it was graded with (1 for one graded before, or known without a grade)."""

    judge: float
    human: float | None
    probability: float


def design_mean(
    units: Sequence[DesignUnit],
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    weight: float | None = None,
    confidence: float = CONFIDENCE,
) -> MeanEstimate | None:
    """The corrected mean of ``units`` under their design; ``human_*`` is the people's own under the same
    design, and ``labelled_variance`` = n * Var. ``weight``: None to fit lambda, 0 for the people's own. None
    with fewer than :data:`~judge_runner.measures.ppi.MIN_LABELLED` units drawn (``pi < 1``). Raises ValueError
    for a graded unit whose probability is not in (0, 1]."""
    f = np.array([u.judge for u in units], dtype=float)
    labelled = np.array([u.human is not None for u in units])
    y = np.array([u.human if u.human is not None else 0.0 for u in units], dtype=float)
    pi = np.array([u.probability for u in units], dtype=float)
    if np.any(labelled & ((pi <= 0) | (pi > 1))):
        raise ValueError("every labelled unit needs a probability in (0, 1]")
    n, big_n = int(labelled.sum()), len(units)
    drawn = int((labelled & (pi < 1)).sum())  # certain units carry no draw: the variance rests on the drawn ones
    if drawn < MIN_LABELLED or big_n < 2:
        return None
    human_z, _, human_var = _design_terms(f, y, pi, labelled, fit=False)
    tuned_z, lam, tuned_var = _design_terms(f, y, pi, labelled, fit=weight is None)
    n_eff = min(drawn, effective_n(y[labelled & (pi < 1)]))
    human_half = t_quantile(max(n_eff - 1, 1), confidence) * math.sqrt(human_var)
    tuned_half = t_quantile(max(n_eff - 2, 1), confidence) * math.sqrt(tuned_var)
    human_c, tuned_c = float(human_z.mean()), float(tuned_z.mean())
    human_low, human_high = clip_interval(human_c - human_half, human_c + human_half, bounds)
    tuned_low, tuned_high = clip_interval(tuned_c - tuned_half, tuned_c + tuned_half, bounds)
    narrower = tuned_high - tuned_low < human_high - human_low
    informative = weight is None and lam >= NO_INFORMATION and narrower
    z, var, df = (tuned_z, tuned_var, max(n_eff - 2, 1)) if informative else (human_z, human_var, max(n_eff - 1, 1))
    centre, human_centre = float(z.mean()), float(human_z.mean())
    half = t_quantile(df, confidence) * math.sqrt(var)
    estimate = float(np.clip(centre, *bounds))
    return MeanEstimate(
        estimate=estimate,
        ci95=clip_interval(centre - half, centre + half, bounds),
        weight=lam if informative else 0.0,
        judge_informative=informative,
        judge_mean=float(f.mean()),
        correction=estimate - float(f.mean()),
        queries=big_n,
        labelled=n,
        human_mean=float(np.clip(human_centre, *bounds)),
        human_ci95=clip_interval(human_centre - human_half, human_centre + human_half, bounds),
        labelled_variance=var * n,
        shared_variance=0.0,
        df=df,
        bounds=bounds,
        confidence=confidence,
    )


def planned_mean(
    design: str,
    judge: Mapping[str, float],
    human: Mapping[str, float],
    probabilities: Mapping[str, float],
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    confidence: float = CONFIDENCE,
) -> MeanEstimate | None:
    """The corrected mean under a plan's ``design``: ``"weighted"`` is :func:`ipw_mean`; ``"uniform"``
    stratifies the units known for certain from the uniform sample, corrected by PPI++, and weights the strata
    by size (Cochran 1977, section 5.2). None with too few graded queries in the sample. Raises ValueError for
    an unknown design."""
    if design == "weighted":
        return ipw_mean(judge, human, probabilities, bounds=bounds, confidence=confidence)
    if design != "uniform":
        raise ValueError(f"unknown design {design!r}")
    certain = [q for q in judge if probabilities.get(q, 0) >= 1 and q in human]
    sampled = [q for q in judge if q not in set(certain)]
    found = tuned_mean(
        [judge[q] for q in sampled],
        [judge[q] for q in sampled if q in human],
        [human[q] for q in sampled if q in human],
        bounds=bounds,
        confidence=confidence,
    )
    if found is None or not certain:
        return found
    big_n, n_c = len(judge), len(certain)
    y_c = np.array([human[q] for q in certain], dtype=float)
    share = len(sampled) / big_n
    centre = share * found.estimate + (1 - share) * float(y_c.mean())
    # the sampled stratum's variance as its own interval says it (wider than its t variance for the rule of three's,
    # when every labelled value is alike), so that a certain stratum never narrows that interval away
    sampled_var = max(found.variance, ((found.ci95[1] - found.ci95[0]) / (2 * found.quantile)) ** 2)
    var = share**2 * sampled_var + (1 - share) ** 2 * (float(y_c.var(ddof=1)) / n_c if n_c > 1 else 0.0)
    half = found.quantile * math.sqrt(var)
    y_o = np.array([human[q] for q in sampled if q in human], dtype=float)
    certain_var = (1 - share) ** 2 * (float(y_c.var(ddof=1)) / n_c if n_c > 1 else 0.0)
    human_centre = share * float(y_o.mean()) + (1 - share) * float(y_c.mean())
    human_df = max(effective_n(y_o) - 1, 1)
    human_half = t_quantile(human_df, found.confidence) * math.sqrt(share**2 * float(y_o.var(ddof=1)) / len(y_o) + certain_var)
    estimate = float(np.clip(centre, *bounds))
    return MeanEstimate(
        estimate=estimate,
        ci95=clip_interval(centre - half, centre + half, bounds),
        weight=found.weight,
        judge_informative=found.judge_informative,
        judge_mean=float(np.mean(list(judge.values()))),
        correction=estimate - float(np.mean(list(judge.values()))),
        queries=big_n,
        labelled=found.labelled + n_c,
        human_mean=float(np.clip(human_centre, *bounds)),
        human_ci95=clip_interval(human_centre - human_half, human_centre + human_half, bounds),
        labelled_variance=var * (found.labelled + n_c),  # so that .variance (labelled_variance / labelled) is var
        shared_variance=0.0,
        df=found.df,
        bounds=bounds,
        confidence=found.confidence,
    )


def ipw_mean(
    judge: Mapping[str, float],
    human: Mapping[str, float],
    probabilities: Mapping[str, float],
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    weight: float | None = None,
    confidence: float = CONFIDENCE,
) -> MeanEstimate | None:
    """:func:`design_mean` over queries, by id: ``probabilities`` is needed for every graded query. For a
    difference pass per-query differences and ``bounds=(-1, 1)``. Raises ValueError for a graded query without a
    probability."""
    missing = [q for q in human if q in judge and q not in probabilities]
    if missing:
        raise ValueError(f"no sampling probability for labelled queries {', '.join(missing[:3])}")
    units = [DesignUnit(float(v), float(human[q]) if q in human else None, float(probabilities.get(q, 0.0))) for q, v in judge.items()]
    return design_mean(units, bounds=bounds, weight=weight, confidence=confidence)


@dataclass(frozen=True)
class PairTerm:
    """One (query, document) pair's part of a linear measure: ``coefficient`` (the rank's discount over
    :data:`SCALED_DCG_IDEAL`, or two systems' difference of them), the judge's and the people's grades, and the
    probability of being graded."""

    qid: str
    coefficient: float
    judge: float
    human: float | None
    probability: float


def ipw_pair_mean(
    terms: Sequence[PairTerm], queries: int, *, bounds: tuple[float, float] = (0.0, 1.0), confidence: float = CONFIDENCE
) -> MeanEstimate | None:
    """The corrected mean over ``queries`` of ``sum coefficient * grade`` per query (scaled DCG@10, ``bounds``
    (0, 1); a difference, (-1, 1)) from a pair-level sample. One weighted fit shared by all pairs (weights
    ``coefficient^2 (1 - pi)/pi^2``, no cross-fitting); the variance is over the query totals. Grades all alike
    give the people's figure with the rule of three's interval. None with fewer than
    :data:`~judge_runner.measures.ppi.MIN_LABELLED` pairs drawn. Raises ValueError for a bad probability or more
    queries among the terms than ``queries``."""
    labelled = [t for t in terms if t.human is not None]
    if any(not 0 < t.probability <= 1 for t in labelled):
        raise ValueError("every labelled pair needs a probability in (0, 1]")
    drawn = sum(1 for t in labelled if t.probability < 1)
    if drawn < MIN_LABELLED or queries < 2:
        return None
    index = {q: i for i, q in enumerate(dict.fromkeys(t.qid for t in terms))}
    if len(index) > queries:
        raise ValueError("more queries among the terms than the queries counted")
    c = np.array([t.coefficient for t in terms])
    f = np.array([t.judge for t in terms], dtype=float)
    h = np.array([t.human if t.human is not None else 0.0 for t in terms], dtype=float)
    pi = np.array([t.probability for t in terms], dtype=float)
    xi = np.array([t.human is not None for t in terms])
    owner = np.array([index[t.qid] for t in terms])
    w = np.where(xi & (pi < 1), c**2 * (1 - pi) / np.where(xi, pi, 1.0) ** 2, 0.0)

    def totals(fit: bool) -> tuple[np.ndarray, float]:
        sw = w.sum()
        mean_f, mean_h = ((w * f).sum() / sw, (w * h).sum() / sw) if sw > 0 else (0.0, 0.0)
        var_f = (w * (f - mean_f) ** 2).sum()
        lam = float(np.clip((w * (f - mean_f) * (h - mean_h)).sum() / var_f, 0, 1)) if fit and var_f > 1e-12 else 0.0
        m = (mean_h - lam * mean_f) + lam * f
        part = c * np.where(xi, m + (h - m) / np.where(xi, pi, 1.0), m)
        out = np.zeros(queries)
        np.add.at(out, owner, part)
        return out, lam

    human_t, _ = totals(False)
    tuned_t, lam = totals(True)
    human_half = t_quantile(drawn - 1, confidence) * math.sqrt(float(human_t.var(ddof=1)) / queries)
    tuned_half = t_quantile(drawn - 2, confidence) * math.sqrt(float(tuned_t.var(ddof=1)) / queries)
    informative = lam >= NO_INFORMATION and tuned_half < human_half
    chosen, half, df = (tuned_t, tuned_half, drawn - 2) if informative else (human_t, human_half, drawn - 1)
    judge_totals = np.zeros(queries)
    np.add.at(judge_totals, owner, c * f)
    centre, human_centre = float(chosen.mean()), float(human_t.mean())
    estimate = float(np.clip(centre, *bounds))
    interval = clip_interval(centre - half, centre + half, bounds)
    if float(np.ptp(h[xi])) == 0:  # every label alike: the spread says nothing (0 when all are 0); the rule of three
        informative, lam, centre = False, 0.0, human_centre
        estimate = float(np.clip(centre, *bounds))
        interval = human_ci = rule_of_three(estimate, drawn, bounds)
    else:
        human_ci = clip_interval(human_centre - human_half, human_centre + human_half, bounds)
    return MeanEstimate(
        estimate=estimate,
        ci95=interval,
        weight=lam if informative else 0.0,
        judge_informative=informative,
        judge_mean=float(judge_totals.mean()),
        correction=estimate - float(judge_totals.mean()),
        queries=queries,
        labelled=len(labelled),
        human_mean=float(np.clip(human_centre, *bounds)),
        human_ci95=human_ci,
        labelled_variance=float(chosen.var(ddof=1)) / queries * len(labelled),
        shared_variance=0.0,
        df=df,
        bounds=bounds,
        confidence=confidence,
    )
