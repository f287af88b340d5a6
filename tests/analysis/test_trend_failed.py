"""trend compares a run with the previous one counting the queries either failed: a run that answered 15 of
the previous run's 20 queries better, and failed the 5 the previous run did best, is no improvement until its
failures are known (a failed query's type read from the previous run's line of it), on the judge's figures and
on the change corrected with people's labels."""

from __future__ import annotations

import json

from judge_runner.analysis.corrected_change import corrected_change
from judge_runner.analysis.trend import build_trend, read_runs
from judge_runner.analysis.trend_render import trend_rows
from judge_runner.measures.paired import compare_values
from tests.support.clitools import invoke
from tests.support.corrected_runs import write_run as write_corrected
from tests.support.trend_runs import write_run


def test_a_run_better_where_it_answered_but_failing_where_the_last_one_was_best_is_cannot_tell(tmp_path):
    before = [0.5 + 0.01 * i for i in range(15)] + [1.0] * 5
    write_run(tmp_path, "r1", before, day=1)
    after = [v + 0.1 for v in before[:15]]
    write_run(tmp_path, "r2", after, day=2, errors=5, error_ids=[f"q{i:02d}" for i in range(15, 20)])
    old = {f"q{i:02d}": v for i, v in enumerate(before)}
    new = {f"q{i:02d}": v for i, v in enumerate(after)}
    assert compare_values(old, new, "overall", paired=True).verdict == "improvement"  # the 5 failures dropped
    rows = {r["runId"]: r for g in build_trend(tmp_path).groups for r in g["runs"]}
    change = rows["r2"]["vsPrevious"]["comparisons"]["overall"]
    assert change["verdict"] == "cannot tell" and change["n"] == 20
    assert change["failed"]["system"] == {"name": "this run", "failed": 5, "onTopic": 5, "of": 20, "counted": 5}
    assert change["failed"]["text"] == "cannot tell: this run failed 5 of 20 queries (5 on-topic)"
    assert rows["r2"]["vsPrevious"]["regressions"] == []  # not a regression either: the gate does not fail on a guess
    note = next(r["note"] for r in trend_rows(build_trend(tmp_path)) if r["run"] == "r2")
    assert "cannot tell: this run failed 5 of 20 queries" in note
    assert invoke(["trend", str(tmp_path), "--fail-on-regression"]).exit_code == 0


def test_the_change_corrected_with_peoples_labels_counts_the_failed_queries_too(tmp_path):
    # the older run put a 2 above a 3 on 24 queries and was right on 6 more; the newer one fixed the order on
    # the 24 and failed the 6: every result labelled by people, who agree with the judge
    old = {f"q{i:03d}": [(f"a{i}", 2, 2), (f"b{i}", 3, 3)] for i in range(24)} | {f"f{i}": [(f"c{i}", 3, 3)] for i in range(6)}
    new = {f"q{i:03d}": [(f"b{i}", 3, 3), (f"a{i}", 2, 2)] for i in range(24)}
    write_corrected(tmp_path, "r1", {"": old}, minute=1)
    path = write_corrected(tmp_path, "r2", {"": new}, minute=2)
    lines = path.read_text(encoding="utf-8").splitlines()
    errors = [json.dumps({"type": "error", "runId": "r2", "queryId": f"f{i}", "query": "q", "stage": "search"}) for i in range(6)]
    path.write_text("\n".join([*lines[:-1], *errors, lines[-1]]) + "\n", encoding="utf-8")
    runs, _ = read_runs(tmp_path)
    change = corrected_change(runs[0], runs[1])["nDCG@10"]
    assert change["outcome"] == "cannot tell" and change["failed"]["secondFigure"]["outcome"] == "better"
    assert change["verdict"] == "cannot tell: this run failed 6 of 30 queries (6 on-topic)"
    assert change["labelled"] == 30  # the failed queries at 0 for the people too: a failed search returned nothing
