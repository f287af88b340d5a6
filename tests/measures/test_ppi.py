"""Prediction-powered inference (Angelopoulos et al. 2023) for mean nDCG@10 and relevance.

The estimator's arithmetic on known numbers; its coverage and width on a synthetic population (the SciFact
figures are the benchmark's, benchmarks/ppi_scifact.py); the summary's ``biasCorrected`` block from run
lines; and a real run whose queries carry human labels for every result.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from judge_runner.measures.ppi import MIN_LABELLED, Z95, ppi_mean, queries_for_width, t_quantile
from judge_runner.runs.corrected import bias_corrected


def test_plain_ppi_is_the_judge_mean_corrected_by_the_labelled_differences():
    judge = {f"q{i}": 0.9 - 0.02 * i for i in range(16)}
    human = {f"q{i}": judge[f"q{i}"] - (0.4 if i % 2 else 0.2) for i in range(12)}  # the judge over-rates by 0.4 and 0.2
    found = ppi_mean(judge, human, weight=1.0)
    assert found.judge_mean == pytest.approx(np.mean(list(judge.values())))
    assert found.correction == pytest.approx(-0.3)
    assert found.estimate == pytest.approx(found.judge_mean - 0.3)
    assert (found.queries, found.labelled, found.weight) == (16, 12, 1.0)
    assert found.ci95[0] < found.estimate < found.ci95[1]
    assert ppi_mean(judge, dict(list(human.items())[: MIN_LABELLED - 1])) is None  # too few to estimate a variance honestly


def test_with_every_query_labelled_the_interval_is_the_classical_one():
    rng = np.random.default_rng(3)
    y = rng.uniform(0, 1, 40)
    f = np.clip(y + rng.normal(0.1, 0.2, 40), 0, 1)
    judge = {str(i): float(v) for i, v in enumerate(f)}
    human = {str(i): float(v) for i, v in enumerate(y)}
    found = ppi_mean(judge, human)
    half = t_quantile(39) * np.sqrt(y.var(ddof=1) / 40)
    assert found.estimate == pytest.approx(y.mean())
    assert not found.judge_informative and found.weight == 0  # labelling everything leaves the judge nothing to add
    assert found.ci95 == pytest.approx((y.mean() - half, y.mean() + half), abs=1e-9)
    assert found.human_ci95 == pytest.approx(found.ci95, abs=1e-9)


@pytest.mark.parametrize("bias", [0.25, -0.1])
def test_coverage_and_width_on_a_population_with_a_biased_judge(bias):
    """100 queries, 30 labelled, 400 draws: the interval covers the population's human mean in >= 90% of draws
    (nominally 95%), is narrower than the 30 labelled queries' own interval, and the judge alone is off by
    the bias."""
    rng = np.random.default_rng(11)
    y = rng.beta(2, 2, 100)
    f = np.clip(y + bias + rng.normal(0, 0.08, 100), 0, 1)
    judge = {str(i): float(v) for i, v in enumerate(f)}
    truth = float(y.mean())
    draws, covered, narrower = 400, 0, 0
    picker = random.Random(5)
    for _ in range(draws):
        sample = picker.sample(sorted(judge), 30)
        found = ppi_mean(judge, {q: float(y[int(q)]) for q in sample})
        covered += found.ci95[0] <= truth <= found.ci95[1]
        narrower += (found.ci95[1] - found.ci95[0]) < (found.human_ci95[1] - found.human_ci95[0])
    assert covered / draws >= 0.9
    assert narrower == draws
    assert abs(float(f.mean()) - truth) > abs(bias) / 2  # what the correction removes


def test_queries_for_width():
    n0 = (2 * Z95 * 0.3 / 0.1) ** 2  # 138.3
    assert queries_for_width(0.3, 0.1) == int(np.ceil(n0))
    assert queries_for_width(0.3, 0.1, 100) == int(np.ceil(n0 / (1 + n0 / 100)))
    assert queries_for_width(0.0, 0.1, 100) == MIN_LABELLED
    assert queries_for_width(5.0, 0.01, 40) == 40
    with pytest.raises(ValueError):
        queries_for_width(0.3, 0)


def line(qid, ndcg, relevance, origins, judge_only=None, query_type="natural-language"):
    results = [{"source": f"d{i}", "labelOrigin": o, "relevance": 0} for i, o in enumerate(origins)]
    return {
        "type": "evaluation",
        "queryId": qid,
        "queryType": query_type,
        "metrics": None if query_type == "off-topic" else {"nDCG@10": ndcg, "R@10": None, "RR(rel=2)": 0.0},
        "scores": {"relevance": relevance},
        "results": results,
        "humanLabels": sum(o == "human" for o in origins),
        "judgeOnly": judge_only,
    }


def test_summary_block_from_run_lines():
    lines = [line(f"h{i}", 0.2 + 0.05 * i, 0.3, ["human", "human"], {"nDCG@10": 0.6 + 0.03 * i, "relevance": 0.5}) for i in range(11)]
    lines += [
        line("q3", 0.9, 0.8, ["judge", "judge"]),
        line("q4", 0.7, 0.7, ["human", "judge"], {"nDCG@10": 0.8, "relevance": 0.9}),  # partly: judge's own values
        line("x1", None, None, ["judge"], query_type="off-topic"),
    ]
    block = bias_corrected(lines)
    assert (block["labelledQueries"], block["partlyLabelledQueries"], block["scoredQueries"]) == (11, 1, 13)
    ndcg = block["nDCG@10"]
    assert ndcg["judgeMean"] == pytest.approx((sum(0.6 + 0.03 * i for i in range(11)) + 0.9 + 0.8) / 13)
    assert ndcg["estimate"] == pytest.approx(ndcg["judgeMean"] + ndcg["correction"], abs=1e-6)
    assert ndcg["humanOnly"]["mean"] == pytest.approx(np.mean([0.2 + 0.05 * i for i in range(11)]))
    assert 0 <= ndcg["weight"] <= 1 and isinstance(ndcg["judgeInformative"], bool)
    assert block["version"] == 2 and block["minimumLabelled"] == MIN_LABELLED
    assert "PPI++" in block["method"]
    assert bias_corrected(lines[11:]) is None  # no wholly labelled query
    old = line("q9", 0.5, 0.5, ["human"], None)  # a line written before the judge's own values were recorded
    assert bias_corrected([*lines, old]) is None


@pytest.mark.hash_embedder
def test_a_run_with_wholly_labelled_queries_writes_the_corrected_means(tmp_path):
    from judge_runner.embed.registry import instance
    from judge_runner.judging.cache import JudgmentCache
    from judge_runner.judging.heuristic import HeuristicJudge
    from judge_runner.judging.qrels import import_human_qrels
    from tests.support.protocol_runs import DOCS, queries, run

    qrels = tmp_path / "human.qrels"
    # q1-q11 wholly labelled (all three results), q12 partly, q13 not at all
    rows = [f"q{q} 0 {s.replace(' ', '%20')} {g}" for q in range(1, 12) for (s, _, _), g in zip(DOCS[:3], (3, q % 3, q % 2))]
    qrels.write_text("\n".join([*rows, "q12 0 notes/lunch.md 1"]) + "\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "team")
        outcome, lines = run(tmp_path, HeuristicJudge(instance("hash")), queries(13), cache=cache)
    block = outcome.summary["biasCorrected"]
    assert (block["labelledQueries"], block["partlyLabelledQueries"], block["scoredQueries"]) == (11, 1, 13)
    evaluations = {ev["queryId"]: ev for ev in lines if ev["type"] == "evaluation"}
    judge_ndcg = [
        evaluations[q]["judgeOnly"]["nDCG@10"] if evaluations[q]["judgeOnly"] else evaluations[q]["metrics"]["nDCG@10"] for q in evaluations
    ]
    assert block["nDCG@10"]["judgeMean"] == pytest.approx(float(np.mean(judge_ndcg)), abs=1e-6)
    human = {q: evaluations[q]["metrics"]["nDCG@10"] for q in evaluations if q not in ("q12", "q13")}
    assert block["nDCG@10"]["humanOnly"]["mean"] == pytest.approx(float(np.mean(list(human.values()))), abs=1e-6)
    judge = {q: v["judgeOnly"]["nDCG@10"] if v["judgeOnly"] else v["metrics"]["nDCG@10"] for q, v in evaluations.items()}
    assert block["nDCG@10"] == ppi_mean(judge, human).as_dict()  # the summary's figure is the estimator's
    assert evaluations["q13"]["judgeOnly"] is None


@pytest.mark.hash_embedder
def test_trend_and_report_say_how_many_queries_were_labelled_and_the_correction(tmp_path):
    from judge_runner.analysis.report import build_report
    from judge_runner.analysis.trend import build_trend
    from judge_runner.analysis.trend_render import print_table, render_markdown, trend_rows
    from judge_runner.embed.registry import instance
    from judge_runner.judging.cache import JudgmentCache
    from judge_runner.judging.heuristic import HeuristicJudge
    from judge_runner.judging.qrels import import_human_qrels
    from tests.support.protocol_runs import DOCS, queries, run

    qrels = tmp_path / "human.qrels"
    rows = [f"q{q} 0 {s.replace(' ', '%20')} {g}" for q in range(1, 13) for (s, _, _), g in zip(DOCS[:3], (3, q % 3, q % 2))]
    qrels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "team")
        outcome, _ = run(tmp_path, HeuristicJudge(instance("hash")), queries(14), cache=cache)
    block = outcome.summary["biasCorrected"]
    f = block["nDCG@10"]
    expected = f"bias-corrected nDCG@10 {f['estimate']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]"
    trend = build_trend(tmp_path / "runs")
    assert trend.groups[0]["runs"][0]["biasCorrected"] == block
    rows_ = trend_rows(trend)
    from rich.console import Console

    console = Console(width=100, record=True, force_terminal=False)
    print_table(trend, rows_, console)
    text = " ".join(console.export_text().split())  # as read: a note longer than 100 columns wraps onto the next line
    assert expected in text and "12 of 14 queries human-labelled" in text and f"correction {f['correction']:+.3f}" in text
    from judge_runner.core.mdtext import md_text

    assert md_text(expected) in render_markdown(trend, rows_)  # literal text in Markdown
    report = build_report(tmp_path / "runs", tmp_path / "reports")
    md = report.markdown.read_text(encoding="utf-8")
    assert "## Bias-corrected estimate" in md and "12 of the 14 scored queries have every result labelled by a person" in md
    assert f"| nDCG@10 | {f['judgeMean']:.3f} | {f['correction']:+.3f} | {f['estimate']:.3f} [" in md
    assert "Bias-corrected estimate" in report.html.read_text(encoding="utf-8")


def test_the_t_quantile_rests_on_the_values_off_a_value_most_labelled_queries_share():
    from judge_runner.measures.ppi import effective_n, tuned_mean

    assert effective_n([0.1 * i for i in range(12)]) == 12
    assert effective_n([0.0] * 10 + [0.2, -0.1]) == 2  # two systems ranking most queries alike: the spread rests on 2
    assert effective_n([1.0] * 8 + [0.5, 0.2, 0.3, 0.6]) == 12  # two thirds at one value: not bunched
    # a difference 0 on most labelled queries: the interval widens with the few values off 0 (df 1, not 10)
    rng = np.random.default_rng(3)
    judge = rng.normal(0, 0.05, 200)
    found = tuned_mean(judge, judge[:12], [0.0] * 10 + [0.2, -0.1], bounds=(-1, 1))
    assert found.df == 1 and found.half_width == pytest.approx(t_quantile(1) * np.sqrt(found.variance))


def test_lines_with_and_without_a_system_are_not_corrected_and_do_not_crash():
    lines = [line(f"h{i}", 0.4, 0.5, ["human", "human"], {"nDCG@10": 0.5, "relevance": 0.5}) for i in range(4)]
    mixed = [{**one, "system": "command:search"} for one in lines[:2]] + lines[2:]
    block = bias_corrected(mixed)
    assert block is not None and "mixes two runs" in block["skipped"] and block["systems"] == []
