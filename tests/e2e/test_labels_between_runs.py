"""Grades people give between two runs never show as a change of the search: the list-level call (coverage,
snippetQuality) sees only the judge's own labels, so two compare runs on the same results agree on every figure
the grades do not enter, ``trend --fail-on-regression`` passes, and the GitHub summary calls nothing a
regression. People's grades enter the qrels-based measures only."""

from __future__ import annotations

import json

import pytest

from tests.support.clitools import invoke
from tests.support.rejudge_runs import evaluations, judged_run

pytestmark = pytest.mark.hash_embedder


def test_grades_given_between_two_runs_change_no_list_level_figure_and_fail_no_gate(query_set, db_copy, tmp_path):
    out, cache = tmp_path / "results", tmp_path / "judgments.sqlite"
    first = judged_run(query_set, db_copy, out, cache, "--search-mode", "fts,hybrid")
    graded = {(e["queryId"], r["source"]): 3 - r["relevance"] for e in evaluations(first) if e["metrics"] for r in e["results"]}
    (tmp_path / "people.qrels").write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in graded.items()), encoding="utf-8")
    args = ["qrels", "import", str(tmp_path / "people.qrels"), "--name", "ab", "--rescale", "1=1", "--cache", str(cache)]
    assert invoke([*args, "--queries", str(query_set)]).exit_code == 0
    second = judged_run(query_set, db_copy, out, cache, "--search-mode", "fts,hybrid")

    def listed(path):
        return {
            (e["system"], e["queryId"]): (e["scores"]["coverage"], e["scores"]["snippetQuality"]) for e in evaluations(path) if e["scores"]
        }

    assert any(r.get("labelOrigin") == "human" for e in evaluations(second) for r in e["results"])
    assert listed(second) == listed(first)
    gated = invoke(["trend", str(out), "--fail-on-regression", "--cache", str(cache)])
    assert gated.exit_code == 0, gated.output
    latest = json.loads(invoke(["trend", str(out), "--format", "json", "--cache", str(cache)]).output)["latest"]
    assert not latest["regression"]
    summary = invoke(["report", str(out), "--format", "github", "--cache", str(cache)])
    assert summary.exit_code == 0 and "regression" not in summary.output.lower(), summary.output
