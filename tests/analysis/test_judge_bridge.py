"""A judge change bridged by a re-judged run (analysis/judge_bridge.py): the step A -> A' is the judge's,
the new judge's runs are compared against A', the baseline is carried over, A' is never the latest run."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.judge_bridge import step_lines
from judge_runner.analysis.trend import build_trend, latest_group, read_runs
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

pytestmark = pytest.mark.hash_embedder

BASE = noisy(0.70, 3)
HARSHER = [max(0.0, v - 0.10) for v in BASE]  # the new judge labels the same results 0.10 lower
WORSE = [max(0.0, v - 0.08) for v in HARSHER]  # then the search regresses by 0.08 under the new judge


def rejudge_of(run_id: str, day: int, judge: str = "anthropic/old-model") -> dict:
    return {"rejudgeOf": {"runId": run_id, "file": f"{run_id}.jsonl", "timestamp": f"2026-11-{day:02d}T10:00:00.000Z", "judge": judge}}


def upgraded(folder, *, source: bool = True, later: bool = True) -> None:
    """A (old judge, day 1); A' = A re-judged by the new judge, written on day 9; B (new judge, day 3), worse."""
    if source:
        write_run(folder, "a", BASE, judge_model="old-model", day=1)
    write_run(folder, "a-rejudged", HARSHER, judge_model="new-model", day=9, provenance=rejudge_of("a", 1))
    if later:
        write_run(folder, "b", WORSE, judge_model="new-model", day=3)


def group_of(trend, run_id: str) -> dict:
    return next(g for g in trend.groups if any(r["runId"] == run_id for r in g["runs"]))


def row_of(trend, run_id: str) -> dict:
    return next(r for g in trend.groups for r in g["runs"] if r["runId"] == run_id)


def test_the_new_judge_s_run_is_compared_through_the_re_judged_run(tmp_path):
    upgraded(tmp_path)
    trend = build_trend(tmp_path)
    new = group_of(trend, "b")
    assert [r["runId"] for r in new["runs"]] == ["a-rejudged", "b"]  # A' stands at A's time, before B
    against = row_of(trend, "b")["vsPrevious"]
    assert against["runId"] == "a-rejudged" and against["comparisons"]["overall"]["verdict"] == "regression"
    assert against["comparisons"]["overall"]["delta"] == pytest.approx(-0.08, abs=0.01)
    assert against["changes"][0].startswith("compared through a-rejudged: run a (anthropic/old-model) re-judged by this judge")
    latest = trend.latest_verdict
    assert latest["runId"] == "b" and latest["against"] == "a-rejudged" and latest["regression"]


def test_the_judge_change_is_a_step_of_its_own_not_a_change_of_the_search(tmp_path):
    upgraded(tmp_path)
    trend = build_trend(tmp_path)
    [step] = trend.judge_changes
    assert (step["from"], step["to"], step["found"], step["sameJudge"]) == ("a", "a-rejudged", True, False)
    overall = step["comparisons"]["overall"]
    assert overall["paired"] and overall["delta"] == pytest.approx(-0.10, abs=0.01) and overall["n"] == len(BASE)
    assert overall["oldMean"] == pytest.approx(sum(BASE) / len(BASE)) and overall["newMean"] == pytest.approx(sum(HARSHER) / len(HARSHER))
    [text] = step_lines(trend.judge_changes)
    assert "run a (anthropic/old-model) re-judged as a-rejudged (anthropic/new-model)" in text
    assert "this step is the judge's, not the search's" in text
    assert row_of(trend, "a-rejudged")["rejudgeOf"]["runId"] == "a"
    assert "vsPrevious" not in row_of(trend, "a-rejudged")  # the first run of its judge: the step is not a comparison


def test_a_baseline_pinned_before_the_judge_change_is_carried_over(tmp_path):
    upgraded(tmp_path)
    (tmp_path / "baseline.json").write_text(json.dumps({"runId": "a"}))
    trend = build_trend(tmp_path)
    assert group_of(trend, "b")["baseline"] == "a-rejudged" and group_of(trend, "a")["baseline"] == "a"
    assert row_of(trend, "b")["vsBaseline"]["runId"] == "a-rejudged"
    assert trend.latest_verdict["against"] == "a-rejudged" and trend.latest_verdict["regression"]


def test_a_re_judged_run_is_never_the_latest_run_of_its_time(tmp_path):
    upgraded(tmp_path, later=False)
    trend = build_trend(tmp_path)
    assert trend.latest_verdict["runId"] == "a"
    assert [g["judge"] for g in trend.groups][0].endswith("old-model")  # the old judge's series comes first


def test_a_step_whose_re_judged_run_is_gone_is_named_not_measured(tmp_path):
    upgraded(tmp_path, source=False)
    trend = build_trend(tmp_path)
    [step] = trend.judge_changes
    assert not step["found"] and step["comparisons"] == {}
    assert "run a is not in this folder, so the step cannot be measured" in step_lines(trend.judge_changes)[0]
    assert row_of(trend, "b")["vsPrevious"]["runId"] == "a-rejudged"  # still the bridge for the new judge's runs


def test_the_trend_command_shows_the_step_and_gates_through_it(tmp_path):
    upgraded(tmp_path)
    shown = invoke(["trend", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "judge change at 2026-11-01 10:00: run a" in shown.output and "re-judges run a" in shown.output
    as_json = json.loads(invoke(["trend", str(tmp_path), "--format", "json"]).output)
    assert [s["to"] for s in as_json["judgeChanges"]] == ["a-rejudged"]
    assert "### Judge changes" in invoke(["trend", str(tmp_path), "--format", "markdown"]).output
    gated = invoke(["trend", str(tmp_path), "--fail-on-regression"])
    assert gated.exit_code == 1 and "worse than a-rejudged" in gated.output


def test_the_report_s_series_is_the_newest_run_s_judge_with_the_re_judged_run_in_its_place(tmp_path):
    upgraded(tmp_path)
    assert [r.run_id for r in latest_group(read_runs(tmp_path)[0])] == ["a-rejudged", "b"]
    (tmp_path / "b.jsonl").unlink()  # the re-judged run, written last, is not the newest run: a is
    assert [r.run_id for r in latest_group(read_runs(tmp_path)[0])] == ["a"]
