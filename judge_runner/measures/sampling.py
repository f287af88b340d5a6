"""Where to spend a labelling budget: sampling probabilities for whole queries or single (query, document)
pairs, the draw, and what a budget buys (docs/deciding.md, "Labels where they count"). Each unit is graded
independently with probability ``pi_i`` (Poisson sampling), the expected cost ``sum pi_i c_i`` the budget:
``uniform``; ``active``, ``pi_i`` proportional to ``spread_i / sqrt(c_i)`` (Zrnic & Candes 2024, arXiv
2403.03208, section 4; Neyman allocation with costs, Cochran 1977, eq. 5.24); ``stratified``, the same on strata
of the spread (Fisch et al. 2024, arXiv 2406.04291); ``robust``, ``(1 - rho) uniform + rho active`` with ``rho``
chosen on past grades (Li, Zrnic & Candes 2025, arXiv 2511.08991). Known units and units graded before cost
nothing. The estimators are in :mod:`judge_runner.measures.ipw`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from judge_runner.measures.ipw import discount
from judge_runner.measures.ppi import MIN_LABELLED, t_quantile

MODES = ("uniform", "active", "stratified", "robust")
DEFAULT_RHO = 0.0
"""The robust mix without past grades: uniform on the open units."""
STRATA = 4
RHO_GRID = tuple(i / 10 for i in range(11))
WEIGHTED_MIN_UNITS = 3 * MIN_LABELLED // 2
"""Fewest units a weighted (Poisson) draw is expected to draw, else a fixed-size uniform draw: below it the draw
falls under the minimum of 10 too often, and coverage fell to 87% on SciFact (benchmarks/decide_scifact.py)."""


@dataclass(frozen=True)
class Unit:
    """A query or a (query, document) pair people may grade: ``cost`` in labels still to give; ``spread``, the
    predicted standard deviation of the people's value around the judge's; ``known``: its value needs no grade."""

    id: str
    cost: float
    spread: float
    known: bool = False


@dataclass(frozen=True)
class LabelNoise:
    """``sd[g]``: the standard deviation of the people's 0-3 grade of a document the judge graded ``g``; 1.0
    ("within about a grade") until graded pairs say otherwise."""

    sd: Mapping[int, float]

    @classmethod
    def default(cls) -> LabelNoise:
        return cls({g: 1.0 for g in range(4)})

    @classmethod
    def fit(cls, pairs: Iterable[tuple[int, int]], prior: float = 1.0, strength: int = 5) -> LabelNoise:
        """From ``(judge grade, people's grade)`` pairs: per judge grade the root mean square deviation, shrunk
        toward ``prior`` as if ``strength`` pairs had it."""
        by: dict[int, list[int]] = {g: [] for g in range(4)}
        for judge, human in pairs:
            by.setdefault(int(judge), []).append(int(human))
        sd = {}
        for g, values in by.items():
            v = np.array(values, dtype=float)
            squares = float(((v - v.mean()) ** 2).sum()) if len(v) else 0.0
            sd[g] = math.sqrt((squares + strength * prior**2) / (len(v) + strength))
        return cls(sd)

    def of(self, grade: int) -> float:
        """1.0 for a grade not seen."""
        return float(self.sd.get(int(grade), 1.0))


def _ideal(grades: Sequence[int], expected_extra: int = 0) -> float:
    """The judge's ideal DCG@10 of a query, ``expected_extra`` expected sources added at grade 3; at least 3.0,
    so a query the judge found nothing for is not infinitely uncertain."""
    gains = sorted([*grades, *([3] * expected_extra)], reverse=True)[:10]
    return max(sum(g * discount(r) for r, g in enumerate(gains, start=1)), 3.0)


def query_units(
    ranked: Mapping[str, Sequence[tuple[str, int]]],
    noise: LabelNoise | None = None,
    other: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    labelled: Mapping[str, set[str]] | None = None,
) -> list[Unit]:
    """Whole-query units for a system's mean nDCG@10 (``ranked``: ``{qid: [(document, judge grade), ...best
    first]}``) or, with ``other``, the difference ``ranked`` - ``other``. The spread linearises nDCG@10 in the
    grades: ``sqrt(sum_d (coefficient_d / ideal)^2 sd(g_d)^2)``; cost: the documents not yet graded; known: a
    difference of two identical rankings."""
    noise = noise or LabelNoise.default()
    labelled = labelled or {}
    units = []
    for qid in ranked if other is None else [q for q in ranked if q in other]:
        mine = list(ranked[qid])
        theirs = list(other[qid]) if other is not None else []
        grades = {d: g for d, g in [*mine, *theirs]}
        coefficient: dict[str, float] = {}
        for rank, (doc, _) in enumerate(mine, start=1):
            coefficient[doc] = coefficient.get(doc, 0.0) + discount(rank)
        for rank, (doc, _) in enumerate(theirs, start=1):
            coefficient[doc] = coefficient.get(doc, 0.0) - discount(rank)
        ideal = max(_ideal([g for _, g in mine]), _ideal([g for _, g in theirs]) if other is not None else 0.0)
        spread = math.sqrt(sum((c / ideal) ** 2 * noise.of(grades[d]) ** 2 for d, c in coefficient.items()))
        known = other is not None and [d for d, _ in mine] == [d for d, _ in theirs]
        cost = len([d for d in grades if d not in labelled.get(qid, set())])
        units.append(Unit(qid, float(cost), 0.0 if known else spread, known))
    return units


def pair_units(
    coefficients: Mapping[tuple[str, str], float],
    grades: Mapping[tuple[str, str], int],
    noise: LabelNoise | None = None,
    labelled: Iterable[tuple[str, str]] = (),
) -> list[Unit]:
    r"""Pair units ``"qid\tdocument"`` of a linear measure: spread ``|coefficient| * sd(judge grade)``, cost 1 (0
    when graded), known when the coefficient is 0."""
    noise = noise or LabelNoise.default()
    done = set(labelled)
    return [
        Unit(f"{q}\t{d}", 0.0 if (q, d) in done else 1.0, abs(c) * noise.of(grades.get((q, d), 0)), c == 0)
        for (q, d), c in coefficients.items()
    ]


def _fill(weights: np.ndarray, costs: np.ndarray, budget: float) -> np.ndarray:
    """``min(1, k * weights)``, ``k`` found by bisection so that the expected cost is ``budget``."""
    if budget >= costs.sum() or not np.any(weights > 0):
        return np.where(weights > 0, 1.0, 0.0) if budget >= costs.sum() else np.zeros_like(weights)
    low, high = 0.0, 1.0
    while (costs * np.minimum(1.0, high * weights)).sum() < budget:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if (costs * np.minimum(1.0, mid * weights)).sum() < budget else (low, mid)
    return np.minimum(1.0, high * weights)


def _strata(spread: np.ndarray, strata: int) -> np.ndarray:
    """Each spread replaced by its stratum's root mean square (``strata`` quantile groups)."""
    if len(spread) < strata:
        return spread
    edges = np.quantile(spread, np.linspace(0, 1, strata + 1)[1:-1])
    group = np.searchsorted(edges, spread, side="right")
    out = spread.copy()
    for g in np.unique(group):
        out[group == g] = math.sqrt(float(np.mean(spread[group == g] ** 2)))
    return out


def choose_probabilities(
    units: Sequence[Unit], budget: float, *, mode: str = "robust", rho: float | None = None, floor: float = 0.1
) -> dict[str, float]:
    """``{unit id: probability}`` spending ``budget`` labels in expectation. ``floor``: the active part weighs
    every open unit at least ``floor`` times the mean weight, so no ``1/pi`` explodes. Known and free units get
    1. Raises ValueError for an unknown mode or a negative budget."""
    if mode not in MODES:
        raise ValueError(f"unknown sampling mode {mode!r}; use one of {', '.join(MODES)}")
    if budget < 0:
        raise ValueError("the budget must not be negative")
    open_ = [u for u in units if not u.known and u.cost > 0]
    out = {u.id: 1.0 for u in units if u.known or u.cost <= 0}
    if not open_:
        return out
    costs = np.array([u.cost for u in open_], dtype=float)
    uniform = _fill(np.ones(len(open_)), costs, budget)
    spread = np.array([u.spread for u in open_], dtype=float)
    if mode == "stratified":
        spread = _strata(spread, STRATA)
    ratio = spread / np.sqrt(costs)
    if not np.any(ratio > 0):
        ratio = np.ones(len(open_))
    ratio = np.maximum(ratio, floor * float(ratio.mean()))
    active = _fill(ratio, costs, budget)
    if mode == "uniform":
        chosen = uniform
    elif mode in ("active", "stratified"):
        chosen = active
    else:
        mix = DEFAULT_RHO if rho is None else rho
        chosen = (1 - mix) * uniform + mix * active
    out.update({u.id: float(p) for u, p in zip(open_, chosen)})
    return out


def choose_rho(units: Sequence[Unit], budget: float, past: Sequence[tuple[str, float, float]]) -> float:
    """The robust mix on :data:`RHO_GRID` minimising the draw part of the variance, ``sum e_i^2 (1/pi_i - 1)``,
    estimated from ``past`` ``(unit id, residual, probability)`` by inverse-probability weights (Li, Zrnic &
    Candes 2025, section 3). Uniform is on the grid, so never predicted worse. ``units`` as they were before the
    past grades. :data:`DEFAULT_RHO` with fewer than :data:`~judge_runner.measures.ppi.MIN_LABELLED` past units."""
    ids = {u.id for u in units}
    seen = [(i, e, p) for i, e, p in past if i in ids and p > 0]
    if len(seen) < MIN_LABELLED:
        return DEFAULT_RHO
    best, best_value = 0.0, math.inf
    for rho in RHO_GRID:
        pi = choose_probabilities(units, budget, mode="robust", rho=rho)
        value = sum(e**2 * (1 / max(pi[i], 1e-9) - 1) / p for i, e, p in seen)
        if value < best_value - 1e-12:
            best, best_value = rho, value
    return best


def residuals(judge: Mapping[str, float], human: Mapping[str, float], probabilities: Mapping[str, float]) -> list[tuple[str, float, float]]:
    """``(unit id, residual, probability)`` of the graded units: the people's value minus ``a + lambda * judge``
    fitted by inverse-probability-weighted least squares, as :mod:`judge_runner.measures.ipw` would."""
    ids = [u for u in human if u in judge and probabilities.get(u, 0) > 0]
    if not ids:
        return []
    f = np.array([judge[u] for u in ids], dtype=float)
    y = np.array([human[u] for u in ids], dtype=float)
    w = np.array([1 / probabilities[u] for u in ids])
    mean_f, mean_y = float((w * f).sum() / w.sum()), float((w * y).sum() / w.sum())
    var_f = float((w * (f - mean_f) ** 2).sum())
    lam = float(np.clip((w * (f - mean_f) * (y - mean_y)).sum() / var_f, 0, 1)) if var_f > 1e-12 else 0.0
    e = y - (mean_y - lam * mean_f) - lam * f
    return [(u, float(r), float(probabilities[u])) for u, r in zip(ids, e)]


def poisson_sample(probabilities: Mapping[str, float], seed: int) -> list[str]:
    """The units drawn, each independently with its probability (seeded), in order; units at 1 are always in."""
    rng = np.random.default_rng(seed)
    return [u for u, p in probabilities.items() if p >= 1 or rng.random() < p]


@dataclass(frozen=True)
class Plan:
    """How to spend a budget: ``"uniform"`` (``size`` of the open units at random; known and graded units free)
    or ``"weighted"`` (Poisson, by ``probabilities``); ``rho`` the robust mix. Estimated by
    :func:`judge_runner.measures.ipw.planned_mean`."""

    design: str
    probabilities: dict[str, float]
    size: int | None
    rho: float
    budget: float

    def draw(self, seed: int) -> list[str]:
        """The units to grade and the free ones, seeded."""
        if self.design == "weighted":
            return poisson_sample(self.probabilities, seed)
        free = [u for u, p in self.probabilities.items() if p >= 1]
        open_ = [u for u, p in self.probabilities.items() if p < 1]
        rng = np.random.default_rng(seed)
        chosen: list[int] = sorted(rng.choice(len(open_), min(self.size or 0, len(open_)), replace=False).tolist()) if open_ else []
        return free + [open_[i] for i in chosen]


def plan_budget(
    units: Sequence[Unit], budget: float, past: Sequence[tuple[str, float, float]] = (), past_units: Sequence[Unit] | None = None
) -> Plan:
    """The budgeted sampler: ``rho`` chosen on past grades (over ``past_units``, the units as they were then;
    default ``units``); at ``rho = 0``, or when a weighted draw would hold fewer than
    :data:`WEIGHTED_MIN_UNITS`, a fixed-size uniform draw, tighter than a Poisson draw of the same expected
    size."""
    reference = list(past_units) if past_units is not None else list(units)
    open_cost = sum(u.cost for u in units if not u.known and u.cost > 0)
    share = budget / open_cost if open_cost else 0.0
    past_cost = sum(u.cost for u in reference if not u.known and u.cost > 0)
    rho = choose_rho(reference, share * past_cost, past) if past else DEFAULT_RHO
    if rho > 0:
        weighted = choose_probabilities(units, budget, mode="robust", rho=rho)
        if sum(weighted[u.id] for u in units if not u.known and u.cost > 0) >= WEIGHTED_MIN_UNITS:
            return Plan("weighted", weighted, None, rho, budget)
    open_ = [u for u in units if not u.known and u.cost > 0]
    size = min(len(open_), int(round(budget / (open_cost / len(open_))))) if open_ else 0
    probabilities = {u.id: (size / len(open_) if u in open_ else 1.0) for u in units}
    return Plan("uniform", probabilities, size, 0.0, budget)


def predicted_half_width(units: Sequence[Unit], probabilities: Mapping[str, float], target_sd: float, queries: int) -> float:
    """The predicted 95% half-width: ``t * sqrt((target_sd^2 + sum_i spread_i^2 (1/pi_i - 1) / queries) /
    queries)``, t with the expected units drawn less 2 degrees of freedom. For pair units ``queries`` is the
    queries they belong to."""
    draw = sum(u.spread**2 * (1 / probabilities[u.id] - 1) if probabilities.get(u.id, 0) > 0 else math.inf for u in units if not u.known)
    expected = sum(probabilities.get(u.id, 0) for u in units if not u.known and u.cost > 0)
    df = max(int(round(expected)) - 2, 1)
    return t_quantile(df) * math.sqrt((target_sd**2 + draw / queries) / queries)


def labels_for_half_width(
    units: Sequence[Unit], half_width: float, target_sd: float, queries: int, *, mode: str = "robust", rho: float | None = None
) -> int | None:
    """The fewest labels (expected) predicted to reach ``half_width``; None when grading every unit would not.
    Raises ValueError for a half-width not positive."""
    if half_width <= 0:
        raise ValueError("the half-width must be positive")
    total = sum(u.cost for u in units if not u.known)

    def width(budget: float) -> float:
        return predicted_half_width(units, choose_probabilities(units, budget, mode=mode, rho=rho), target_sd, queries)

    if width(total) > half_width:
        return None
    low, high = 0.0, float(total)
    while high - low > 0.5:
        mid = (low + high) / 2
        low, high = (low, mid) if width(mid) <= half_width else (mid, high)
    return math.ceil(high)


def budget_text(labels: int, half_width: float | None, what: str, seconds_per_label: float | None = None, *, why_none: str = "") -> str:
    """What a budget buys, for people: ``about 150 labels (25 min at 10 s each) for ±0.03 on the difference``,
    or, with ``half_width`` None, too few for an interval and ``why_none``."""
    pace = ""
    if seconds_per_label:
        minutes = labels * seconds_per_label / 60
        spent = f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
        pace = f" ({spent} at {seconds_per_label:.0f} s each)"
    bought = f"about {labels} label{'s' if labels != 1 else ''}{pace}"
    if half_width is None:
        return f"{bought}: too few for an interval on {what}" + (f": {why_none}" if why_none else "")
    return f"{bought} for ±{half_width:.2f} on {what}"
