"""People's labels drawn by ``label --budget``: ``evaluate`` weights them by the probabilities they were drawn
with (a census gives the people's exact figure), and ``trend`` and ``report`` show those figures instead of
refusing them."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.corrected_report import block_lines, corrected_markdown
from judge_runner.analysis.trend import Run, build_trend
from judge_runner.embed.registry import instance
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.qrels import import_human_qrels
from judge_runner.measures.ipw import planned_mean
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.designed import LabelDesign, choose_design
from judge_runner.runs.read import read_run_file
from tests.support.protocol_runs import DOCS, queries, run


def _evaluate(tmp_path, n, labelled, marker):
    """``evaluate`` of ``n`` queries with people's grades on every result of the ``labelled`` ones, kept as the set
    'team' drawn with ``marker``: ``(biasCorrected, evaluation lines)``."""
    qrels = tmp_path / "team.qrels"
    rows = [f"{q} 0 {s.replace(' ', '%20')} {g}" for q in labelled for (s, _, _), g in zip(DOCS[:3], (3, int(q[1:]) % 3, int(q[1:]) % 2))]
    qrels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, qrels, "team")
        cache.set_label_design("team", marker)
        outcome, lines = run(tmp_path, HeuristicJudge(instance("hash")), queries(n), cache=cache)
    return outcome.summary["biasCorrected"], [line for line in lines if line["type"] == "evaluation"]


def _values(evaluations):
    judge = {e["queryId"]: (e.get("judgeOnly") or e["metrics"])["nDCG@10"] for e in evaluations}
    human = {e["queryId"]: e["metrics"]["nDCG@10"] for e in evaluations if e.get("judgeOnly")}
    return judge, human


def test_evaluate_weights_labels_drawn_with_unequal_probabilities_by_their_recorded_probabilities(tmp_path):
    # today: "drawn by `label --budget` with unequal probabilities", and no figure
    probabilities = {f"q{i}": (0.9 if i % 2 else 0.6) for i in range(1, 15)}
    drawn = [f"q{i}" for i in range(1, 12)]
    marker = {"design": "weighted", "unit": "queries", "uniform": False, "probabilities": probabilities, "drawn": drawn}
    block, evaluations = _evaluate(tmp_path, 14, drawn, marker)
    assert block.get("skipped") is None and block["design"]["set"] == "team" and block["design"]["census"] is False
    judge, human = _values(evaluations)
    expected = planned_mean("weighted", judge, human, probabilities)
    assert block["nDCG@10"]["estimate"] == pytest.approx(expected.estimate, abs=1e-6)
    assert block["nDCG@10"]["ci95"] == pytest.approx(list(expected.ci95), abs=1e-6)


def test_a_census_with_every_query_certain_is_the_peoples_exact_figure_not_refused(tmp_path):
    # a new user's trial: a session labelled all 12 on-topic queries (uniform, every document), and evaluate, trend and
    # report refused the corrected figure: "drawn by `label --budget` with unequal probabilities"
    qids = [f"q{i}" for i in range(1, 13)]
    marker = {"design": "uniform", "unit": "queries", "uniform": False, "probabilities": dict.fromkeys(qids, 1.0), "drawn": qids}
    block, evaluations = _evaluate(tmp_path, 12, qids, marker)
    _, human = _values(evaluations)
    exact = sum(human.values()) / len(human)
    assert block["design"]["census"] is True and block["nDCG@10"]["estimate"] == pytest.approx(exact, abs=1e-6)
    assert block["nDCG@10"]["weight"] == 0 and block["nDCG@10"]["labelled"] == 12
    # trend and report show the figure the summary holds
    [row] = [row for group in build_trend(tmp_path / "runs").groups for row in group["runs"]]
    shown = block_lines(row["biasCorrected"], others=False)
    assert shown[0].startswith(f"bias-corrected nDCG@10 {exact:.3f}") and "census" in shown[0] and "not shown" not in " ".join(shown)
    markdown = "\n".join(corrected_markdown(block))
    assert "Not shown" not in markdown and f"{exact:.3f}" in markdown and "census" in markdown


def test_a_difference_draw_leaves_the_systems_own_means_null_and_says_why_but_weights_the_difference(tmp_path):
    lines = [json.loads(raw) for raw in _compare_lines(tmp_path)]
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    qids = sorted({e["queryId"] for e in evaluations}, key=lambda q: int(q[1:]))
    alike = {q for q in qids if int(q[1:]) % 5 == 0}  # both systems ranked these alike: known, never labelled
    for e in evaluations:
        if e["queryId"] in alike:
            e.update(judgeOnly=None, humanLabels=0, metrics={**e["metrics"], "nDCG@10": e["judgeOnly"]["nDCG@10"]})
            e["results"] = [{**r, "labelOrigin": "judge", "relevance": r["judgeLabel"], "judgeLabel": None} for r in e["results"]]
    labelled = {(e["queryId"], r["source"]) for e in evaluations for r in e["results"] if r["labelOrigin"] == "human"}
    probabilities = {q: (1.0 if q in alike else 0.5) for q in qids}
    drawn = [q for q in qids if q not in alike and int(q[1:]) < 30]
    design = LabelDesign("ab", "weighted", "queries", probabilities, frozenset(drawn), frozenset(labelled), "2026-12-01T10:00:00Z")
    block = bias_corrected(evaluations, ["hybrid", "fts"], designs={"ab": design})
    assert block["nDCG@10"] is None and any("ranked alike" in note for note in block["design"]["notes"])
    [diff] = [d for d in block["differences"] if d["column"] == "nDCG@10"]
    assert diff["labelled"] == len(drawn) + len(alike)  # the alike queries count, at 0 and probability 1


def test_a_draw_of_single_pairs_is_not_a_per_query_sample_and_says_so(tmp_path):
    design = LabelDesign("p", "weighted", "pairs", {"q1\tdocs/a.md": 0.5}, frozenset(), frozenset({("q1", "docs/a.md")}))
    lines = [{"queryId": "q1", "results": [{"source": "docs/a.md", "labelOrigin": "human"}]}]
    assert choose_design(lines, {"p": design})[1].startswith("the people's labels of 'p' were drawn as single (query, document) pairs")


def _compare_lines(tmp_path):
    from tests.support.budget_runs import write_compare_run

    return write_compare_run(tmp_path / "cmp", 40, human_queries=40).read_text().splitlines()


def test_trend_shows_each_system_of_a_compare_run_weighted_by_the_draw_never_recomputed_as_uniform(tmp_path):
    lines = [json.loads(raw) for raw in _compare_lines(tmp_path)]
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    qids = sorted({e["queryId"] for e in evaluations}, key=lambda q: int(q[1:]))
    labelled = {(e["queryId"], r["source"]) for e in evaluations for r in e["results"]}
    probabilities = {q: (0.9 if int(q[1:]) % 2 else 0.4) for q in qids}
    design = LabelDesign("ab", "weighted", "queries", probabilities, frozenset(qids[:30]), frozenset(labelled), "2026-12-01T10:00:00Z")
    block = bias_corrected(evaluations, ["hybrid", "fts"], designs={"ab": design})
    lines[-1]["biasCorrected"] = block
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "20261201T100000Z.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    view = Run(read_run_file(folder / "20261201T100000Z.jsonl"), "fts")  # the fts row of trend and report
    fts = next(s for s in block["systems"] if s["name"] == "fts")
    uniform = bias_corrected([e for e in evaluations if e["system"] == "fts"])["nDCG@10"]
    assert view.bias_corrected["nDCG@10"] == fts["nDCG@10"] != uniform and view.bias_corrected["design"]["set"] == "ab"


def test_trend_weights_the_draw_by_the_grades_known_now_not_the_summarys(tmp_path):
    # a census labelled, evaluated, then the people changed their grades: trend's figure is the new exact one
    qids = [f"q{i}" for i in range(1, 13)]
    marker = {"design": "uniform", "unit": "queries", "uniform": False, "probabilities": dict.fromkeys(qids, 1.0), "drawn": qids}
    block, _ = _evaluate(tmp_path, 12, qids, marker)
    regraded = tmp_path / "regraded.qrels"
    regraded.write_text("".join(f"{q} 0 {DOCS[0][0].replace(' ', '%20')} 0\n" for q in qids), encoding="utf-8")
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        import_human_qrels(cache, regraded, "team")
        [row] = [row for group in build_trend(tmp_path / "runs", cache=cache).groups for row in group["runs"]]
        [run_] = [Run(read_run_file(p)) for p in (tmp_path / "runs").glob("*.jsonl")]
    exact = row["means"]["nDCG@10"]  # every query labelled: the people's exact mean, as trend re-scores it
    assert row["biasCorrected"]["design"]["census"] is True and run_.summary is not None
    assert row["biasCorrected"]["nDCG@10"]["estimate"] == pytest.approx(exact, abs=1e-6)
    assert block["nDCG@10"]["estimate"] != pytest.approx(exact, abs=1e-3)  # the summary's figure is another
