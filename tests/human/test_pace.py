"""What a budget buys, said before the page opens: a draw of whole queries that takes more labels than the
budget says so, how many and why."""

from __future__ import annotations

import json
import signal

import pytest

from judge_runner.core.failures import UsageError
from judge_runner.human.estimate import estimate_budget
from judge_runner.human.options import Sampling
from judge_runner.human.pace import prepare_budget
from judge_runner.measures.ppi import MIN_LABELLED
from judge_runner.runs.read import read_run_file
from tests.support.budget_runs import write_compare_run
from tests.support.clitools import invoke
from tests.support.label_client import spawn_label, stop_process


# seed 13 on this run: whole queries of unequal cost put the first two draws past their budget, the third on it
@pytest.mark.parametrize(("budget", "question", "over"), [(88, "ranking", True), (55, "mean", True), (50, "difference", False)])
def test_a_draw_past_its_budget_says_so_before_the_url(tmp_path, budget, question, over):
    run_file = write_compare_run(tmp_path / "runs", 40, human_queries=3)
    proc = spawn_label(tmp_path, str(run_file), "--budget", str(budget), "--for", question)
    before: list[str] = []
    try:
        while not (line := proc.stdout.readline()).startswith("  http://127.0.0.1:"):
            assert line or proc.poll() is None, proc.stderr.read()
            before.append(line.strip())
    finally:
        stop_process(proc, signal.SIGINT)
    labels = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])["budget"]["labelsToGive"]
    said = [b for b in before if b.startswith("this draw takes")]
    assert (labels > budget) is over
    if over:
        assert said == [
            f"this draw takes {labels} labels, {labels - budget} more than --budget {budget}: a fixed number of queries drawn at "
            "random, whole (its documents not graded before each), so a draw's labels vary around the budget; cutting it to "
            "fit would bias the estimate"
        ], before
    else:
        assert said == [], before  # within the budget: nothing to explain


ASKED = [("mean", "queries"), ("difference", "queries"), ("ranking", "queries"), ("mean", "pairs"), ("difference", "pairs")]


# a new user's trial: --budget 30 named --budget 45 as the smallest that works, which then drew about 9 queries, said
# "too few for an interval", and on stop asked for 10 drawn queries of a draw that held 9
@pytest.mark.parametrize("queries", [12, 40])
@pytest.mark.parametrize(("question", "unit"), ASKED)
def test_the_smallest_budget_named_is_one_the_draw_accepts_without_a_warning(tmp_path, queries, question, unit):
    run_file = write_compare_run(tmp_path / "runs", queries, human_queries=3)
    folder = tmp_path / "labels"
    args = ["label", str(run_file), "--name", "w", "--folder", str(folder), "--no-cache", "--for", question, "--sample", unit]
    result = invoke([*args, "--budget", "3"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "nothing was started" in said, said
    runs = [read_run_file(run_file)]
    if "no budget gives one" in said:
        assert "smallest budget" not in said, said
        census = prepare_budget(runs, Sampling(kind=unit, budget=10**6, question=question), "ada", folder).draw
        assert census.census and census.units_drawn < MIN_LABELLED, said
        stop = " ".join(estimate_budget(runs[0], census.record(13, 10.0, "test"), {}).lines())
        assert f"this draw holds only {len(census.drawn)} {unit}" in stop and "run the same command" not in stop, stop
        assert "labelling them all gives the people's exact figure" in stop, stop
        return
    smallest = int(said.split("the smallest budget that works here is --budget ")[1].split()[0])
    draw = prepare_budget(runs, Sampling(kind=unit, budget=smallest, question=question), "ada", folder).draw
    assert "too few" not in draw.text and draw.units_drawn >= MIN_LABELLED - 1e-9, (smallest, draw.text)
    with pytest.raises(UsageError, match=f"--budget {smallest} "):
        prepare_budget(runs, Sampling(kind=unit, budget=smallest - 1, question=question), "ada", folder)
