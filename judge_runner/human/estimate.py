"""The corrected estimate of a budgeted labelling session from the design and inclusion probabilities its
journal recorded: :func:`judge_runner.measures.ipw.planned_mean` over whole queries,
:func:`judge_runner.measures.ipw.ipw_pair_mean` over pairs; never as if the sample were uniform. Drawn units are
shown in random order, so a session stopped early graded a random part of its draw: for the uniform design a
smaller uniform sample, exactly; otherwise each drawn probability is scaled by the share graded (approximately
right)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from judge_runner.human.budget import Question, judge_grades, pair_coefficients, pair_id, pool_of, query_values
from judge_runner.human.ranking import RankingEstimate, estimate_ranking, few_drawn
from judge_runner.measures.ipw import PairTerm, ipw_pair_mean, planned_mean
from judge_runner.measures.ppi import MIN_LABELLED, MeanEstimate, tuned_mean
from judge_runner.runs.read import RunFile


@dataclass(frozen=True)
class BudgetEstimate:
    """``found`` is None with fewer than :data:`~judge_runner.measures.ppi.MIN_LABELLED` drawn units graded;
    ``complete`` of the ``drawn`` are graded, ``free`` were certain without a draw; ``share`` scaled the
    probabilities. ``census``: every unit has the people's value with probability 1, so ``exact`` is the
    people's figure on this query set and ``found`` their own t interval over queries like these."""

    question: Question
    found: MeanEstimate | None
    design: str
    drawn: int
    complete: int
    free: int
    share: float
    census: bool = False
    exact: float | None = None
    whole: bool = False
    """Every unit was drawn with probability 1 (a census design)."""

    def verdict(self) -> str:
        """For a difference: ``<B> better``, ``<A> better`` or ``cannot tell yet``; else ''."""
        if self.found is None or self.question.kind != "difference":
            return ""
        low, high = self.found.ci95
        a, b = (s if s is not None else "the run" for s in self.question.systems)
        return f"{b} better" if low > 0 else f"{a} better" if high < 0 else "cannot tell yet"

    def lines(self) -> list[str]:
        """The closing lines for people: the estimate and what it rests on, or why there is none yet."""
        unit = "queries" if self.question.unit == "queries" else "pairs"
        rests = f"{self.complete} of the {self.drawn} drawn {unit} labelled" + (
            f", {self.free} known without a draw (labelled before{', or ranked alike' if self.question.kind == 'difference' else ''})"
            if self.free
            else ""
        )
        what = self.question.text()
        if self.census and self.exact is not None:
            return [self._census_line(what, rests)]
        if self.found is None and self.drawn < MIN_LABELLED:
            return [f"no corrected estimate of {what}: {rests}; {few_drawn(self.drawn, unit, self.whole)}"]
        if self.found is None:
            return [
                f"no corrected estimate of {what} yet: {rests}; an estimate needs at least {MIN_LABELLED} drawn {unit} labelled "
                "(run the same command to go on: the recorded probabilities keep it unbiased)"
            ]
        f = self.found
        sign = "+" if self.question.kind == "difference" else ""
        value = f"{f.estimate:{sign}.3f} [{f.ci95[0]:{sign}.3f}, {f.ci95[1]:{sign}.3f}]"
        judge = "the judge did not narrow it" if not f.judge_informative else f"judge weight {f.weight:.2f}"
        verdict = f": {self.verdict()}" if self.verdict() else ""
        out = [
            f"corrected {what}: {value}{verdict} (95% interval; judge alone {f.judge_mean:{sign}.3f}, {judge}; "
            f"people's labels alone {f.human_mean:{sign}.3f}; {rests}; {self.design} design, each label weighted by the "
            "probability it was drawn with)"
        ]
        if self.complete < self.drawn:
            how = (
                "a smaller uniform sample, exactly"
                if self.design == "uniform" and self.question.unit == "queries"
                else f"each drawn probability scaled by {self.share:.2f}, the share labelled (approximately right)"
            )
            out.append(
                f"  stopped early: the {unit} are shown in a random order, so the labelled ones are a random part of the draw: {how}"
            )
        return out

    def _census_line(self, what: str, rests: str) -> str:
        sign = "+" if self.question.kind == "difference" else ""
        queries = self.found.queries if self.found is not None else None
        head = (
            f"the people's exact figure of {what}: {self.exact:{sign}.3f} on this query set (a census: every unit labelled with "
            f"probability 1, nothing drawn at random, so no sampling error here; {rests})"
        )
        if self.found is None:
            return f"{head}; too few queries (under {MIN_LABELLED}) for an interval over queries like these"
        low, high = self.found.ci95
        verdict = f": {self.verdict()}" if self.verdict() else ""
        return f"{head}; over queries like these [{low:{sign}.3f}, {high:{sign}.3f}]{verdict} (95%, the people's own t interval over the {queries} queries)"


def _census(judge: Mapping[str, float], human: Mapping[str, float], bounds: tuple[float, float]) -> MeanEstimate | None:
    """The people's own t interval in a census (:func:`~judge_runner.measures.ppi.tuned_mean` at weight 0); None
    below the minimum."""
    qids = list(judge)
    return tuned_mean([judge[q] for q in qids], [judge[q] for q in qids], [human[q] for q in qids], bounds=bounds, weight=0.0)


def is_census(values: Mapping[str, float], human: Mapping[str, float], probabilities: Mapping[str, float]) -> bool:
    """Every unit of ``values`` has the people's value, at probability 1."""
    return bool(values) and all(u in human and probabilities.get(u, 0.0) >= 1 for u in values)


def recorded_known(record: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """The people's grades a draw counted as known from outside its run file."""
    return {(str(q), str(d)): int(g) for q, d, g in record.get("known") or []}


def _queries(run: RunFile, q: Question, record: Mapping[str, Any], given: Mapping[tuple[str, str], int]) -> BudgetEstimate:
    pool = pool_of(run, q, recorded_known(record))
    probabilities: dict[str, float] = {str(k): float(v) for k, v in record["probabilities"].items()}
    drawn = {str(u) for u in record["drawn"]}
    judge, people = query_values(pool, q, {**pool.human, **given})
    complete = {u for u in drawn if u in people}
    share = len(complete) / len(drawn) if drawn else 1.0
    judge = {u: v for u, v in judge.items() if u in probabilities}
    human = {u: v for u, v in people.items() if u in judge and (u in complete or (probabilities[u] >= 1 and u not in drawn))}
    scaled = {u: (p * share if u in drawn else p) for u, p in probabilities.items()}
    free = sum(1 for u in human if u not in complete)
    if is_census(judge, human, scaled):
        exact = float(sum(human[u] for u in judge) / len(judge))
        return BudgetEstimate(
            q, _census(judge, human, q.bounds), str(record["design"]), len(drawn), len(complete), free, share, True, exact
        )
    found = planned_mean(str(record["design"]), judge, human, scaled, bounds=q.bounds)
    whole = all(p >= 1 for p in probabilities.values())
    return BudgetEstimate(q, found, str(record["design"]), len(drawn), len(complete), free, share, whole=whole)


def _pairs(run: RunFile, q: Question, record: Mapping[str, Any], given: Mapping[tuple[str, str], int]) -> BudgetEstimate:
    pool = pool_of(run, q, recorded_known(record))
    probabilities: dict[str, float] = {str(k): float(v) for k, v in record["probabilities"].items()}
    drawn = {str(u) for u in record["drawn"]}
    complete = {u for u in drawn if tuple(u.split("\t", 1)) in given}
    share = len(complete) / len(drawn) if drawn else 1.0
    grades = judge_grades(pool)
    terms, free = [], 0
    for (qid, doc), c in pair_coefficients(pool, q).items():
        if not c:
            continue
        uid = pair_id(qid, doc)
        human: float | None = None
        probability = probabilities.get(uid, 0.0)
        if (qid, doc) in pool.human:
            human, probability, free = float(pool.human[(qid, doc)]), 1.0, free + 1
        elif uid in complete:
            human, probability = float(given[(qid, doc)]), probability * share
        terms.append(PairTerm(qid, c, float(grades[(qid, doc)]), human, probability))
    if terms and all(t.human is not None and t.probability >= 1 for t in terms):
        judge_totals = dict.fromkeys(pool.qids, 0.0)
        human_totals = dict.fromkeys(pool.qids, 0.0)
        for t in terms:
            judge_totals[t.qid] += t.coefficient * t.judge
            human_totals[t.qid] += t.coefficient * float(t.human or 0.0)
        exact = sum(human_totals.values()) / len(human_totals)
        census = _census(judge_totals, human_totals, q.bounds)
        return BudgetEstimate(q, census, str(record["design"]), len(drawn), len(complete), free, share, True, exact)
    found = ipw_pair_mean(terms, len(pool.qids), bounds=q.bounds)
    whole = all(p >= 1 for p in probabilities.values())
    return BudgetEstimate(q, found, str(record["design"]), len(drawn), len(complete), free, share, whole=whole)


def estimate_budget(run: RunFile, record: Mapping[str, Any], given: Mapping[tuple[str, str], int]) -> BudgetEstimate | RankingEstimate:
    """The estimate of a budgeted session: ``record`` is its plan line's ``budget``, ``given`` its grades
    ``{(qid, document): 0-3}``. Raises KeyError or ValueError for a record that is not one."""
    if record.get("question") == "ranking":
        return estimate_ranking(run, record, given)
    q = Question(str(record["question"]), tuple(record["systems"]), str(record["unit"]))
    return _queries(run, q, record, given) if q.unit == "queries" else _pairs(run, q, record, given)
