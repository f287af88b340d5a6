"""What a budget buys, said before the page opens: a draw of whole queries that takes more labels than the
budget says so, how many and why."""

from __future__ import annotations

import json
import signal

import pytest

from tests.support.budget_runs import write_compare_run
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
