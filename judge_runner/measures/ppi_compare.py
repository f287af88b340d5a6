"""Deciding between searches with the people's labels: the corrected difference of two systems' means, its
verdict, how many more labelled queries would decide it, and a ranking of three or more systems that carries
its uncertainty.

**The difference of two systems** (or two runs over the same queries) is the mean of the paired per-query
differences ``d_i = B_i - A_i``: the judge's ``d_i`` on every query both scored, the people's on every query
labelled in both. That is a mean like any other, so it is corrected exactly as one mean is
(:func:`judge_runner.measures.ppi.tuned_mean`: prediction-powered, power-tuned with a cross-fitted weight, t
interval, clipped to [-1, 1]; Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453). Pairing removes what the
queries share (a hard query is hard for both), and a judge biased toward one kind of system is corrected where
it matters: on the difference itself.

**The verdict** comes from the interval alone: "B better" when it lies above 0, "A better" below, else "cannot
tell yet" with how many more labelled queries would likely decide it (:func:`more_to_decide`), or, when the
estimate sits so near 0 that labelling every query of the set would not separate it from 0, how far from 0 it
sits. Queries a system failed follow :mod:`judge_runner.measures.failed`: the difference with them at 0, and
"cannot tell: B failed 5 of 14 queries" when at the other system's value its outcome differs.

**A ranking of k >= 3 systems** (:func:`corrected_ranking`): each system's corrected mean, and for every pair
the corrected difference with a simultaneous interval (Bonferroni: each pair at level ``1 - 0.05 / m`` for
``m = k (k - 1) / 2`` pairs, so all hold together with at least 95%). A system's **rank set** runs from 1 +
the number of systems surely above it to k - the number surely below it; the systems whose set holds 1 are
those that could be first. This is the rank-set construction of Chatzi, Straitouri, Thejaswi & Gomez-Rodriguez
2024 ("Prediction-powered ranking of large language models", arXiv 2402.17826), built here from pairwise
intervals rather than their joint confidence ellipsoid (more conservative, simpler to read).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from judge_runner.measures.failed import CANNOT_TELL, Failed, Failures
from judge_runner.measures.ppi import CONFIDENCE, MeanEstimate, ppi_mean, variance_at

DIFFERENCE_BOUNDS = (-1.0, 1.0)
Estimator = Callable[[Mapping[str, float], Mapping[str, float], tuple[float, float], float], MeanEstimate | None]
"""A corrected mean from ``(judge {query: value}, people {query: value}, bounds, confidence)``: PPI++ for a uniform
sample (:func:`uniform_estimator`), or a sampling design's estimator (:func:`judge_runner.measures.ipw.planned_mean`)."""


def uniform_estimator(
    judge: Mapping[str, float], human: Mapping[str, float], bounds: tuple[float, float], confidence: float
) -> MeanEstimate | None:
    """:func:`judge_runner.measures.ppi.ppi_mean`: the labelled queries a uniform sample of the scored ones."""
    return ppi_mean(judge, human, bounds=bounds, confidence=confidence)


@dataclass(frozen=True)
class Decision:
    """What would decide an undecided difference: ``more`` labelled queries (None when labelling every query
    of the set would not), ``distance`` of the estimate from 0, and the sentence for people (``text``)."""

    more: int | None
    distance: float
    text: str

    def as_dict(self) -> dict:
        """JSON-ready (camelCase)."""
        return {"moreLabelledQueries": self.more, "distanceFromZero": round(self.distance, 6), "text": self.text}


@dataclass(frozen=True)
class CorrectedDifference:
    """``system`` - ``against`` on ``column``: the corrected mean of the paired differences (``found``, a
    :class:`MeanEstimate` on [-1, 1]: its ``judge_mean`` is the judge-only difference, ``human_*`` the labelled
    queries' own), the ``outcome`` ("better", "worse": ``system`` relative to ``against``; "cannot tell";
    "same": both give the same value on every query, for the judge and the people),
    the verdict in words and, when undecided, the :class:`Decision`; ``failed``: the block of
    :meth:`judge_runner.measures.failed.Failures.block` when a system failed queries (None otherwise)."""

    system: str
    against: str
    column: str
    found: MeanEstimate
    outcome: str
    verdict: str
    decision: Decision | None
    failed: dict | None = None

    def as_dict(self) -> dict:
        """JSON-ready: the summary's ``CorrectedDifference``."""
        return {
            "system": self.system,
            "against": self.against,
            "column": self.column,
            **self.found.as_dict(),
            "judgeDelta": round(self.found.judge_mean, 6),
            "outcome": self.outcome,
            "verdict": self.verdict,
            "decide": self.decision.as_dict() if self.decision is not None else None,
            "failed": self.failed,
        }


def more_to_decide(found: MeanEstimate, limit: int | None = None) -> Decision:
    """How many more labelled queries would likely decide ``found`` (a difference whose interval holds 0): the
    fewest ``m`` such that, with the per-query spreads as estimated and the estimate where it is, the interval
    at ``labelled + m`` labelled queries (:func:`judge_runner.measures.ppi.variance_at`, the same t quantile)
    no longer reaches 0. ``limit``: the most queries that could be labelled (default: the ``queries`` scored);
    when even all of them would not decide it, ``more`` is None and the text says how far from 0 the estimate
    sits instead of a number of queries no one will label."""
    limit = found.queries if limit is None else limit
    distance = abs(found.estimate)
    if found.ci95 == (0.0, 0.0):
        return Decision(None, 0.0, "no difference: both give the same value on every query, for the judge and for the people")
    quantile = found.quantile
    need = None
    for total in range(found.labelled + 1, limit + 1):  # at most a few thousand queries
        if quantile * math.sqrt(variance_at(found, total)) < distance:
            need = total - found.labelled
            break
    if need is not None:
        text = f"about {need} more labelled {'query' if need == 1 else 'queries'} would likely decide it (if the difference stays near {found.estimate:+.3f})"
    else:
        text = (
            f"the difference sits {distance:.4f} from 0, closer than labelling all {limit} queries could resolve "
            f"(±{quantile * math.sqrt(variance_at(found, limit)):.3f} then): too small to decide on this query set"
        )
    return Decision(need, distance, text)


@dataclass(frozen=True)
class Arm:
    """One system of a paired difference: its ``name``, ``{query id: judge's value}`` of every scored
    query (``judge``) and ``{query id: people's value}`` of the labelled ones (``human``)."""

    name: str
    judge: Mapping[str, float]
    human: Mapping[str, float]


@dataclass(frozen=True, kw_only=True)
class Method:
    """How a corrected figure is estimated: on ``column``, at ``confidence``, by ``estimate`` (default
    PPI++ on a uniform sample)."""

    column: str = "nDCG@10"
    confidence: float = CONFIDENCE
    estimate: Estimator = uniform_estimator


def corrected_difference(
    against: Arm,
    system: Arm,
    method: Method = Method(),
    failed: tuple[Failed, Failed] | None = None,
    known: Mapping[str, float] | None = None,
) -> CorrectedDifference | None:
    """The corrected difference ``system`` (B) - ``against`` (A) (module docstring), paired over the queries
    both scored (judge) and both have labelled (people). None with fewer than
    :data:`judge_runner.measures.ppi.MIN_LABELLED` queries labelled in both. ``failed``: the failed queries of
    A and B, under the rule of :mod:`judge_runner.measures.failed`; ``known``: people's differences known
    without a label (0 where both ranked alike)."""
    if failed is None:
        return _difference(against, system, method, known)
    rule = Failures.of(against.judge, system.judge, failed[0], failed[1], paired=True, column=method.column)

    def figure(how: str) -> CorrectedDifference | None:
        (ja, jb), (ha, hb) = rule.fill(against.judge, system.judge, how), rule.fill(against.human, system.human, how)
        return _difference(Arm(against.name, ja, ha), Arm(system.name, jb, hb), method, known)

    def second(diff: CorrectedDifference) -> dict:
        return {"estimate": round(diff.found.estimate, 6), "ci95": [round(x, 6) for x in diff.found.ci95], "outcome": diff.outcome}

    outcome = rule.decide(figure, lambda d: d.outcome, second)
    if outcome is None:
        return None
    shown = outcome.shown
    if outcome.holds:
        return replace(shown, failed=outcome.failed)
    text = outcome.failed["text"] if outcome.failed else CANNOT_TELL
    return replace(shown, outcome=CANNOT_TELL, verdict=text, decision=None, failed=outcome.failed)


def _difference(a: Arm, b: Arm, method: Method, known: Mapping[str, float] | None) -> CorrectedDifference | None:
    common = [q for q in b.judge if q in a.judge]
    judge = {q: b.judge[q] - a.judge[q] for q in common}
    human = {q: b.human[q] - a.human[q] for q in common if q in a.human and q in b.human}
    human.update({q: v for q, v in (known or {}).items() if q in judge and q not in human})
    found = method.estimate(judge, human, DIFFERENCE_BOUNDS, method.confidence)
    if found is None:
        return None
    return decided(found, b.name, a.name, method.column)


def decided(found: MeanEstimate, system: str, against: str, column: str) -> CorrectedDifference:
    """The :class:`CorrectedDifference` of ``found`` (``system`` - ``against``), its verdict from its interval."""
    low, high = found.ci95
    if low > 0:
        return CorrectedDifference(system, against, column, found, "better", f"{system} better", None)
    if high < 0:
        return CorrectedDifference(system, against, column, found, "worse", f"{against} better", None)
    decision = more_to_decide(found)
    if found.ci95 == (0.0, 0.0):
        return CorrectedDifference(system, against, column, found, "same", decision.text, decision)
    return CorrectedDifference(system, against, column, found, "cannot tell", f"cannot tell yet: {decision.text}", decision)


@dataclass(frozen=True)
class RankedSystem:
    """One system in a :class:`Ranking`: its corrected mean (``found``; None with too few labelled queries),
    its rank set ``[best, worst]`` (1 is first) and whether it could be first."""

    name: str
    found: MeanEstimate | None
    rank_set: tuple[int, int]

    @property
    def could_be_first(self) -> bool:
        """Whether no other system is surely above it."""
        return self.rank_set[0] == 1

    def as_dict(self) -> dict:
        """JSON-ready."""
        return {
            "name": self.name,
            "corrected": self.found.as_dict() if self.found is not None else None,
            "rankSet": list(self.rank_set),
            "couldBeFirst": self.could_be_first,
        }


@dataclass(frozen=True)
class Ranking:
    """Systems by corrected mean of ``column``, best first, each with its rank set; ``pairs``: every pair's
    corrected difference at the simultaneous level ``pair_confidence`` (None where too few queries are
    labelled in both); ``confidence``: the level all pairs hold together (Bonferroni)."""

    column: str
    systems: list[RankedSystem]
    pairs: list[CorrectedDifference]
    confidence: float
    pair_confidence: float
    holm: bool = False
    """The verdicts by Holm's step-down procedure (each pair's interval then at 95%, ``pair_confidence`` the first
    step's level)."""

    @property
    def could_be_first(self) -> list[str]:
        """The systems whose rank set holds 1."""
        return [s.name for s in self.systems if s.could_be_first]

    def as_dict(self) -> dict:
        """JSON-ready: the summary's ``CorrectedRanking``."""
        return {
            "column": self.column,
            "confidence": self.confidence,
            "pairConfidence": round(self.pair_confidence, 6),
            "method": (
                "rank sets from corrected pairwise differences decided by Holm's step-down procedure (Holm 1979; after Chatzi et al. 2024, arXiv 2402.17826)"
                if self.holm
                else "rank sets from Bonferroni-simultaneous corrected pairwise differences (after Chatzi et al. 2024, arXiv 2402.17826)"
            ),
            "systems": [s.as_dict() for s in self.systems],
            "couldBeFirst": self.could_be_first,
            "pairs": [p.as_dict() for p in self.pairs],
        }


def corrected_ranking(
    judge: Mapping[str, Mapping[str, float]],
    human: Mapping[str, Mapping[str, float]],
    order: Sequence[str] | None = None,
    *,
    method: Method = Method(),
    failed: Mapping[str, Failed] | None = None,
    known: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
    holm: bool = False,
) -> Ranking | None:
    """The ranking of the systems of ``judge`` (``{system: {query id: judge's value}}``; ``human`` likewise for
    the labelled queries) by corrected mean, with rank sets (module docstring). ``order``: the systems'
    order for ties and output (default: as given). ``failed``: each system's failed queries (a pair one of
    whose systems failed queries that could change it is "cannot tell", and does not order them).
    ``known``: per pair ``(a, b)`` the people's differences known without a label. ``holm``: the pairs'
    verdicts by Holm's step-down procedure at ``method.confidence`` together (:func:`holm_verdicts`) instead of each pair at the Bonferroni level. None with
    fewer than two systems, or when no system has :data:`judge_runner.measures.ppi.MIN_LABELLED` labelled
    queries."""
    names = list(order or judge)
    if len(names) < 2:
        return None
    means = {s: method.estimate(judge[s], human.get(s, {}), (0.0, 1.0), CONFIDENCE) for s in names}
    if all(m is None for m in means.values()):
        return None
    m = len(names) * (len(names) - 1) // 2
    level = 1 - (1 - method.confidence) / m
    above = {s: 0 for s in names}  # systems surely above s
    below = {s: 0 for s in names}
    pairs = []
    for a, b in combinations(names, 2):
        sides = (failed.get(a, Failed(a)), failed.get(b, Failed(b))) if failed else None
        diff = corrected_difference(
            Arm(a, judge[a], human.get(a, {})),
            Arm(b, judge[b], human.get(b, {})),
            replace(method, confidence=CONFIDENCE if holm else level),
            sides,
            (known or {}).get((a, b)),
        )
        if diff is None:
            continue
        pairs.append(diff)
    if holm:
        pairs = holm_verdicts(pairs, 1 - method.confidence)
    for diff in pairs:
        a, b = diff.against, diff.system
        if diff.outcome == "better":
            above[a] += 1
            below[b] += 1
        elif diff.outcome == "worse":
            above[b] += 1
            below[a] += 1
    k = len(names)

    def key(name: str) -> tuple[float, int]:
        found = means[name]
        return (-found.estimate if found is not None else math.inf, names.index(name))

    ranked = sorted(names, key=key)
    systems = [RankedSystem(s, means[s], (1 + above[s], k - below[s])) for s in ranked]
    return Ranking(method.column, systems, pairs, method.confidence, level, holm)


def p_value(found: MeanEstimate) -> float:
    """The two-sided p-value of "the mean is 0" from a corrected estimate's t statistic (``df`` degrees of
    freedom, scipy.stats.t); 1.0 without spread, unless its interval (e.g. the rule of three's) excludes 0."""
    from scipy import stats

    sd = math.sqrt(max(found.variance, 0.0))
    if sd <= 0:
        low, high = found.ci95
        return 0.0 if low > 0 or high < 0 else 1.0
    return float(2 * stats.t.sf(abs(found.estimate) / sd, found.df))


def holm_verdicts(pairs: Sequence[CorrectedDifference], alpha: float = 1 - CONFIDENCE) -> list[CorrectedDifference]:
    """The pairs with their verdicts by Holm's step-down procedure (Holm 1979, "A simple sequentially rejective
    multiple test procedure", Scand. J. Statist. 6:65): sorted by p-value (:func:`p_value`), the ``i``-th smallest
    (from 0) is decided when it and every smaller one are at most ``alpha / (m - i)``; a decided pair is "better" or
    "worse" by its estimate's sign, every other one "cannot tell". All the verdicts hold together with probability
    at least ``1 - alpha``, as with Bonferroni, and never fewer are decided. A pair its systems' failed queries
    leave undecided (:mod:`judge_runner.measures.failed`) stays so. In the order given."""
    m = len(pairs)
    order = sorted(range(m), key=lambda i: p_value(pairs[i].found))
    decided_ = set()
    for step, i in enumerate(order):
        if p_value(pairs[i].found) > alpha / (m - step):
            break
        decided_.add(i)
    out = []
    for i, diff in enumerate(pairs):
        f = diff.found
        if (diff.failed or {}).get("holds") is False:
            out.append(diff)
        elif i in decided_ and f.estimate != 0:
            better = f.estimate > 0
            out.append(
                replace(
                    diff,
                    outcome="better" if better else "worse",
                    verdict=f"{diff.system if better else diff.against} better",
                    decision=None,
                )
            )
        elif diff.outcome in ("better", "worse"):
            decision = more_to_decide(f)
            out.append(replace(diff, outcome="cannot tell", verdict=f"cannot tell yet: {decision.text}", decision=decision))
        else:
            out.append(diff)
    return out
