"""Corrected estimates per system in compare runs, small-sample honesty (t quantiles, a minimum
of labelled queries said, intervals in the metric's range, never wider than the labels alone), the corrected line
in the ``evaluate`` console, and label changes named as a cause in ``trend`` and ``report``.

Each reproduction of the issue is a test here (the numbers in the names are the issue's)."""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import build_trend
from judge_runner.analysis.trend_render import print_table, trend_rows
from judge_runner.core.printer import Printer
from judge_runner.measures.ppi import MIN_LABELLED, ppi_mean, t_quantile
from judge_runner.runs.corrected import bias_corrected
from tests.support.corrected_runs import evaluation, graded_answers, write_run


def table_text(folder) -> str:
    trend = build_trend(folder)
    console = Console(width=100, record=True, force_terminal=False)
    print_table(trend, trend_rows(trend), console)
    return " ".join(console.export_text().split())


def test_a_compare_runs_corrected_figures_are_per_system_never_pooled_by_query_id(tmp_path):
    """Issue: keyed by query id only, the last system overwrote the others while the counts were pooled
    ("16 of 39"), and trend and report printed it as the reference system's."""
    rng = np.random.default_rng(4)
    reference = graded_answers(rng, 20, 12)  # 12 of 20 wholly labelled
    other = graded_answers(rng, 20, 15, shift=-1, prefix="e")  # another system: 15 of 20, other documents
    path = write_run(tmp_path / "runs", "20261201T090000Z", {"hybrid": reference, "fts": other})
    lines = [__import__("json").loads(line) for line in path.read_text().splitlines()]
    summary = lines[-1]
    block = summary["biasCorrected"]
    assert block["version"] == 2 and block["system"] == "hybrid"
    assert (block["labelledQueries"], block["scoredQueries"]) == (12, 20)  # not 27 of 40
    alone = bias_corrected([e for e in lines if e.get("type") == "evaluation" and e.get("system") == "hybrid"])
    assert block["nDCG@10"] == alone["nDCG@10"]  # the reference's own, not the last system's
    by_name = {s["name"]: s for s in block["systems"]}
    assert (by_name["fts"]["labelledQueries"], by_name["fts"]["scoredQueries"]) == (15, 20)
    assert by_name["fts"]["nDCG@10"]["estimate"] != block["nDCG@10"]["estimate"]
    text = table_text(tmp_path / "runs")
    assert "12 of 20 queries human-labelled" in text and "15 of 20 queries human-labelled" in text
    assert "27 of 40" not in text
    md = build_report(tmp_path / "runs", tmp_path / "reports").markdown.read_text(encoding="utf-8")
    assert "12 of the 20 scored queries of hybrid" in md and "| fts | 15 of 20 |" in md


def test_two_labelled_queries_that_agree_with_the_judge_give_no_interval_and_say_why():
    """Issue: [0.805, 0.988] corrected and [0.454, 1.177] for the labels alone, past 1 (normal quantile at n = 2)."""
    judge = {"a": 0.9, "b": 0.85, "c": 0.95, "d": 0.9}
    assert ppi_mean(judge, {"a": 0.9, "b": 0.85}) is None
    lines = [evaluation("r", q, [(f"{q}-1", 3, 3 if q in "ab" else None), (f"{q}-2", 1, 1 if q in "ab" else None)]) for q in "abcd"]
    block = bias_corrected(lines)
    assert block["labelledQueries"] == 2 and block["nDCG@10"] is None and block["minimumLabelled"] == MIN_LABELLED
    from judge_runner.analysis.corrected_report import corrected_markdown, corrected_text

    assert (
        corrected_text(block)
        == f"bias-corrected nDCG@10 not shown: 2 labelled queries, a corrected figure needs at least {MIN_LABELLED} (of 4 scored)"
    )
    assert any("needs at least 10" in line for line in corrected_markdown(block))


def test_the_labels_alone_use_a_t_quantile():
    rng = np.random.default_rng(0)
    y = rng.uniform(0.2, 0.8, 12)
    found = ppi_mean({str(i): 0.5 for i in range(30)} | {str(i): float(y[i]) for i in range(12)}, {str(i): float(y[i]) for i in range(12)})
    half = t_quantile(11) * np.sqrt(y.var(ddof=1) / 12)
    assert found.human_ci95 == pytest.approx((y.mean() - half, y.mean() + half))
    assert t_quantile(11) > 2.2  # not 1.96


@pytest.mark.parametrize("seed", range(20))
def test_eleven_of_thirteen_labelled_never_wider_than_the_labels_alone_and_within_0_1(seed):
    """Issue: with 11 of 13 queries labelled the corrected interval was wider than the labels alone, and passed 1.0."""
    rng = np.random.default_rng(seed)
    y = np.clip(rng.normal(0.93, 0.08, 13), 0, 1)
    f = np.clip(y + rng.normal(0.02, 0.15, 13), 0, 1)  # a judge that tracks the people loosely
    found = ppi_mean({str(i): float(v) for i, v in enumerate(f)}, {str(i): float(y[i]) for i in range(11)})
    width, alone = found.ci95[1] - found.ci95[0], found.human_ci95[1] - found.human_ci95[0]
    assert width <= alone + 1e-12
    assert 0 <= found.ci95[0] <= found.estimate <= found.ci95[1] <= 1
    assert 0 <= found.human_ci95[0] <= found.human_ci95[1] <= 1
    if not found.judge_informative:
        assert found.weight == 0 and found.ci95 == found.human_ci95


def test_the_evaluate_console_prints_the_corrected_line(tmp_path):
    """Issue: the README says every run reports it; the console never printed it."""
    from judge_runner.app.console import print_summary
    from judge_runner.core.failures import RunStatus
    from judge_runner.core.printer import Printer
    from judge_runner.evaluation.state import RunEnd, RunOutcome

    rng = np.random.default_rng(2)
    path = write_run(tmp_path, "20261201T090000Z", {"": graded_answers(rng, 14, 12)})
    import json

    summary = json.loads(path.read_text().splitlines()[-1])
    said: list[str] = []
    print_summary(RunOutcome(summary=summary, end=RunEnd(RunStatus.OK), path=str(path)), Printer(out=said.append, err=said.append))
    f = summary["biasCorrected"]["nDCG@10"]
    line = next(s for s in said if "bias-corrected nDCG@10" in s)
    assert f"{f['estimate']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]" in line and "12 of 14 queries human-labelled" in line
    assert "people's labels alone" in line


def test_after_labelling_an_unchanged_search_shows_no_change_and_does_not_gate(tmp_path):
    """Issue: after labelling, an unchanged search showed "ranking ▼ regression" in the report. Both runs are now
    scored against the qrels known now, the people's grades given since included: the same results, the same
    figures."""
    from judge_runner.app.history import TrendView, show_trend

    rng = np.random.default_rng(9)
    labelled = graded_answers(rng, 14, 12, shift=1)  # the judge rates everything higher than the people
    unlabelled = {q: [(s, j, None) for s, j, _ in answer] for q, answer in labelled.items()}
    write_run(tmp_path, "20261201T090000Z", {"": unlabelled}, minute=0)
    write_run(tmp_path, "20261208T090000Z", {"": labelled}, minute=1)
    trend = build_trend(tmp_path)
    row = trend.groups[0]["runs"][1]
    assert all(c["delta"] == 0.0 and c["verdict"] != "regression" for c in row["vsPrevious"]["comparisons"].values())
    assert row["qrels"]["people"] == 12 * 5 and trend.groups[0]["runs"][0]["qrels"] == row["qrels"]
    assert trend.latest_verdict["regression"] is False
    show_trend(tmp_path, TrendView(fail_on_regression=True), Printer(out=lambda m: None, err=lambda m: None))  # no GateFailedError
    md = build_report(tmp_path, tmp_path / "reports").markdown.read_text(encoding="utf-8")
    assert "regression" not in md.split("## Headline numbers", 1)[1].split("##", 1)[0]


def test_labelled_queries_that_all_agree_give_the_rule_of_three_not_a_point():
    """15 labelled queries all at nDCG@10 1.0 do not prove the mean is 1.0: at most 3/15 of the queries could differ."""
    judge = {f"q{i}": 0.9 + 0.005 * (i % 5) for i in range(19)}
    found = ppi_mean(judge, {f"q{i}": 1.0 for i in range(15)})
    assert found.estimate == 1.0 and found.ci95 == pytest.approx((0.8, 1.0)) and found.human_ci95 == found.ci95
    same = ppi_mean({f"q{i}": 0.0 for i in range(19)}, {f"q{i}": 0.0 for i in range(15)}, bounds=(-1, 1))
    assert same.ci95 == (0.0, 0.0)  # nothing differs for the judge on any query, nor for the people
    from judge_runner.measures.ppi_compare import more_to_decide

    assert more_to_decide(same).text.startswith("no difference")
    from judge_runner.measures.ppi_compare import Arm, corrected_difference

    zeros = {f"q{i}": 0.5 for i in range(19)}
    diff = corrected_difference(Arm("A", zeros, dict(list(zeros.items())[:12])), Arm("B", zeros, dict(list(zeros.items())[:12])))
    assert (diff.outcome, diff.verdict) == (
        "same",
        "no difference: both give the same value on every query, for the judge and for the people",
    )
