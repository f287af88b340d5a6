"""Deciding between two searches with the people's labels. The corrected difference of two
systems covers the true difference at the nominal rate, its verdict says "cannot tell" exactly when its interval
holds 0 (with an honest number of queries, or how far from 0 it sits), the gate follows it, and three or more
systems get a ranking with rank sets; shown in the summary, the console, trend, the report and the compare
report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rich.console import Console

from judge_runner.measures.ppi import MIN_LABELLED, ppi_mean
from judge_runner.measures.ppi_compare import Arm, corrected_difference, corrected_ranking, more_to_decide
from tests.support.corrected_runs import graded_answers, write_run


def population(rng: np.random.Generator, queries: int, delta: float, judge_bias: float):
    """Per-query people's values of A and B (B better by ``delta`` on average, in [0, 1]) and a judge that
    tracks them loosely and favours B by ``judge_bias``."""
    a = rng.beta(2, 2, queries)
    b = np.clip(a + delta + rng.normal(0, 0.15, queries), 0, 1)
    fa = np.clip(a + rng.normal(0.1, 0.12, queries), 0, 1)
    fb = np.clip(b + judge_bias + rng.normal(0.1, 0.12, queries), 0, 1)
    return a, b, fa, fb


def true_difference(delta: float) -> float:
    """E[clip(a + delta + e, 0, 1) - a] for a ~ Beta(2, 2), e ~ N(0, 0.15): by a large sample, once."""
    rng = np.random.default_rng(12345)
    a = rng.beta(2, 2, 2_000_000)
    return float(np.mean(np.clip(a + delta + rng.normal(0, 0.15, a.size), 0, 1) - a))


@pytest.mark.parametrize("delta", [0.04, 0.0])
def test_the_corrected_difference_covers_the_true_difference_at_the_nominal_rate(delta):
    truth = true_difference(delta)
    seeds, covered, judge_covered = 300, 0, 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        a, b, fa, fb = population(rng, 150, delta, judge_bias=0.08)  # the judge favours B
        ids = [f"q{i}" for i in range(150)]
        labelled = rng.choice(150, 40, replace=False)
        diff = corrected_difference(
            Arm("A", dict(zip(ids, fa)), {ids[i]: a[i] for i in labelled}), Arm("B", dict(zip(ids, fb)), {ids[i]: b[i] for i in labelled})
        )
        low, high = diff.found.ci95
        covered += low <= truth <= high
        judge_covered += abs(diff.found.judge_mean - truth) < (high - low) / 2
    rate = covered / seeds
    assert rate >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / seeds)  # nominal within binomial noise
    assert judge_covered / seeds < 0.5  # the judge alone is off by its bias: what the correction removes


def test_the_verdict_says_cannot_tell_exactly_when_the_interval_holds_zero():
    seen = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        a, b, fa, fb = population(rng, 120, 0.03 * (seed % 3 - 1), judge_bias=0.0)
        ids = [f"q{i}" for i in range(120)]
        lab = rng.choice(120, 30, replace=False)
        diff = corrected_difference(
            Arm("A", dict(zip(ids, fa)), {ids[i]: a[i] for i in lab}), Arm("B", dict(zip(ids, fb)), {ids[i]: b[i] for i in lab})
        )
        low, high = diff.found.ci95
        if low <= 0 <= high:
            assert diff.outcome == "cannot tell" and diff.verdict.startswith("cannot tell yet: ") and diff.decision is not None
        elif low > 0:
            assert (diff.outcome, diff.verdict, diff.decision) == ("better", "B better", None)
        else:
            assert (diff.outcome, diff.verdict, diff.decision) == ("worse", "A better", None)
        seen.add(diff.outcome)
    assert seen == {"better", "worse", "cannot tell"}


def test_more_labelled_queries_is_honest_near_zero():
    rng = np.random.default_rng(1)
    judge = {f"q{i}": float(v) for i, v in enumerate(rng.normal(0, 0.2, 300))}
    human = {q: judge[q] + float(e) for q, e in zip(list(judge)[:30], rng.normal(0, 0.1, 30))}
    shift = np.mean([human[q] for q in human]) - 0.0015  # put the estimate 0.0015 from 0
    found = ppi_mean(judge, {q: v - shift for q, v in human.items()}, bounds=(-1, 1), weight=0.0)
    decision = more_to_decide(found)
    assert decision.more is None and "sits 0.0015 from 0" in decision.text and "too small to decide on this query set" in decision.text
    far = ppi_mean(judge, {q: v - shift + 0.06 for q, v in human.items()}, bounds=(-1, 1), weight=0.0)
    if far.ci95[0] <= 0:
        decided = more_to_decide(far)
        assert decided.more is not None and decided.more <= 300 - 30 and f"about {decided.more} more labelled" in decided.text


def test_three_systems_get_rank_sets_and_the_clearly_worse_one_is_never_first():
    rng = np.random.default_rng(5)
    ids = [f"q{i}" for i in range(200)]
    base = rng.beta(2, 2, 200)
    human = {"hybrid": base, "vector": np.clip(base + rng.normal(0, 0.05, 200), 0, 1), "broken": np.clip(base - 0.35, 0, 1)}
    judge = {s: dict(zip(ids, np.clip(v + 0.1 + rng.normal(0, 0.1, 200), 0, 1))) for s, v in human.items()}
    lab = rng.choice(200, 40, replace=False)
    ranking = corrected_ranking(judge, {s: {ids[i]: float(v[i]) for i in lab} for s, v in human.items()}, ["hybrid", "vector", "broken"])
    by = {s.name: s for s in ranking.systems}
    assert by["broken"].rank_set == (3, 3) and not by["broken"].could_be_first
    assert by["hybrid"].rank_set == (1, 2) and by["vector"].rank_set == (1, 2)
    assert set(ranking.could_be_first) == {"hybrid", "vector"}
    assert ranking.pair_confidence == pytest.approx(1 - 0.05 / 3)
    data = ranking.as_dict()
    assert data["couldBeFirst"] == ranking.could_be_first and len(data["pairs"]) == 3


def gated(tmp_path, old, new):
    from judge_runner.app.history import TrendView, show_trend
    from judge_runner.core.failures import GateFailedError
    from judge_runner.core.printer import Printer

    write_run(tmp_path, "20261201T090000Z", {"": old}, minute=0)
    write_run(tmp_path, "20261208T090000Z", {"": new}, minute=1)
    try:
        show_trend(tmp_path, TrendView(fmt="json", fail_on_regression=True), Printer(out=lambda m: None, err=lambda m: None))
    except GateFailedError as exc:
        return str(exc)
    return None


def test_the_gate_follows_the_corrected_difference_not_the_judge(tmp_path):
    """The judge rates the new run's documents higher (it favours that kind of system) but the people's labels say
    it is worse: the gate fails on the corrected nDCG@10."""
    from judge_runner.analysis.trend import build_trend

    rng = np.random.default_rng(3)
    old = graded_answers(rng, 30, 30)
    new = {}
    for q, answer in old.items():  # the same documents, people now put the good ones lower; the judge sees them higher
        flipped = list(reversed(answer))
        new[q] = [(s, min(3, j + 1), h) for s, j, h in flipped]
    message = gated(tmp_path, old, new)
    trend = build_trend(tmp_path)
    latest = trend.latest_verdict
    corrected = latest["corrected"]["nDCG@10"]
    assert corrected["outcome"] == "worse" and corrected["estimate"] <= -0.03
    assert message is not None and "nDCG@10 (corrected with people's labels)" in message


def test_the_gate_ignores_a_judge_side_ndcg_regression_the_people_do_not_see(tmp_path):
    rng = np.random.default_rng(8)
    old = graded_answers(rng, 30, 30)
    new = {q: [(s, max(0, j - 2), h) for s, j, h in answer] for q, answer in old.items()}  # the judge now grades lower; people alike
    gated(tmp_path, old, new)
    from judge_runner.analysis.trend import build_trend

    latest = build_trend(tmp_path).latest_verdict
    # both runs are scored against one set of pooled qrels: the same documents, the same figures
    assert latest["comparisons"]["nDCG@10"]["delta"] == 0.0 and latest["corrected"]["nDCG@10"]["outcome"] == "same"
    assert not any(r.startswith("nDCG@10") for r in latest["regressions"])


def test_an_older_run_is_compared_on_the_labels_given_since(tmp_path):
    """A label belongs to a (query, document): the new run's people's labels count for the old run's results."""
    from judge_runner.analysis.trend import build_trend

    rng = np.random.default_rng(6)
    new = graded_answers(rng, 20, 20)
    old = {q: [(s, j, None) for s, j, _ in reversed(answer)] for q, answer in new.items()}  # not labelled then, ranked worse
    write_run(tmp_path, "20261201T090000Z", {"": old}, minute=0)
    write_run(tmp_path, "20261208T090000Z", {"": new}, minute=1)
    change = build_trend(tmp_path).groups[0]["runs"][1]["vsPrevious"]["corrected"]["nDCG@10"]
    assert change["labelled"] == 20 and change["queries"] == 20


def test_a_compare_run_shows_corrected_differences_and_ranking_everywhere(tmp_path):
    from judge_runner.analysis.compare_report import comparison_markdown
    from judge_runner.analysis.report import build_report
    from judge_runner.analysis.trend import build_trend
    from judge_runner.analysis.trend_render import print_table, trend_rows
    from judge_runner.app.console import print_summary
    from judge_runner.core.failures import RunStatus
    from judge_runner.core.printer import Printer
    from judge_runner.evaluation.state import RunEnd, RunOutcome
    from judge_runner.runs.summary_blocks import ComparisonBlock

    rng = np.random.default_rng(11)
    good = {q: sorted(a, key=lambda r: -(r[2] or 0)) for q, a in graded_answers(rng, 24, 24).items()}  # the best first
    worse = {q: list(reversed(a)) for q, a in good.items()}
    broken = {q: [(f"x{q}-{i}", 3, 0) for i in range(5)] for q in good}  # the judge loves it, people find nothing
    path = write_run(tmp_path / "runs", "20261201T090000Z", {"hybrid": good, "fts": worse, "broken": broken})
    summary = json.loads(path.read_text().splitlines()[-1])
    block = summary["biasCorrected"]
    ndcg = [d for d in block["differences"] if d["column"] == "nDCG@10"]
    assert {d["system"] for d in ndcg} == {"fts", "broken"} and all(d["against"] == "hybrid" for d in ndcg)
    assert next(d for d in ndcg if d["system"] == "broken")["verdict"] == "hybrid better"
    assert block["ranking"]["systems"][0]["name"] == "hybrid" and "broken" not in block["ranking"]["couldBeFirst"]
    said: list[str] = []
    print_summary(RunOutcome(summary=summary, end=RunEnd(RunStatus.OK), path=str(path)), Printer(out=said.append, err=said.append))
    assert any("corrected nDCG@10 broken - hybrid" in s and "hybrid better" in s for s in said)
    assert any(s.strip().startswith("corrected ranking by nDCG@10") for s in said)
    console = Console(width=100, record=True, force_terminal=False)
    trend = build_trend(tmp_path / "runs")
    print_table(trend, trend_rows(trend), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = " ".join(text.split())
    assert "corrected nDCG@10 broken - hybrid" in flat and "could be first: hybrid" in flat
    report = build_report(tmp_path / "runs", tmp_path / "reports")
    md = report.markdown.read_text(encoding="utf-8")
    assert "| broken − hybrid | nDCG@10 |" in md and "hybrid better" in md and "Corrected ranking by nDCG@10" in md
    page = report.html.read_text(encoding="utf-8")
    assert "<h2>Bias-corrected estimate</h2>" in page and "<td>broken − hybrid</td>" in page and "could be first: hybrid" in page
    compare_md = "\n".join(comparison_markdown(ComparisonBlock.model_validate(summary["comparison"]), None, block))
    assert "Corrected with the people's labels" in compare_md and "hybrid better" in compare_md


def test_too_few_labels_for_a_difference_are_said(tmp_path):
    from judge_runner.analysis.corrected_report import corrected_markdown

    rng = np.random.default_rng(2)
    path = write_run(tmp_path, "20261201T090000Z", {"a": graded_answers(rng, 20, 12), "b": graded_answers(rng, 20, 4, prefix="e")})
    block = json.loads(path.read_text().splitlines()[-1])["biasCorrected"]
    assert block["differences"] == []
    assert any(f"fewer than {MIN_LABELLED} queries are labelled for both systems" in line for line in corrected_markdown(block))
