"""Resuming a label session with the command that started it: the options as given, not the values the draw
made of them (a budget past every open unit, a system named twice), go on with the session."""

from __future__ import annotations

import json
import signal

import pytest

from judge_runner.human.options import Sampling, conflicts
from tests.support.budget_runs import write_compare_run
from tests.support.label_client import Job, spawn_label, stop_process, wait_url


@pytest.mark.parametrize(
    "options",
    [
        ["--budget", "1000", "--for", "difference"],  # more than every open label: the draw records fewer
        ["--budget", "1000", "--for", "ranking", "--systems", "hybrid,fts,hybrid"],  # a system named twice
        ["--budget-minutes", "500", "--for", "mean", "--sample", "pairs", "--seed", "7"],
    ],
)
def test_the_identical_command_resumes_a_session_whose_draw_normalised_its_options(tmp_path, options):
    run_file = write_compare_run(tmp_path / "runs", 12)
    said = []
    for _ in range(2):
        proc = spawn_label(tmp_path, str(run_file), *options)
        try:
            wait_url(proc)
        finally:
            out, err = stop_process(proc, signal.SIGINT)
        said.append(out + err)
        assert proc.returncode == 0, out + err
    assert "other sampling options" not in said[1] and "its own draw is kept" in said[1], said[1]
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    assert plan["budget"]["budget"] < 1000  # the draw's own figure is what it spent, kept beside what was asked


def test_a_journal_without_the_options_asked_resumes_with_any_budget_past_its_census(tmp_path):
    run_file = write_compare_run(tmp_path / "runs", 12)
    Job(tmp_path, run_file, sampling={"budget": 1000, "question": "difference"}).stop()
    plan = json.loads((tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()[0])
    del plan["asked"]  # written before the plan line kept the options as given
    recorded = plan["budget"]["budget"]
    given = frozenset({"budget", "question"})
    assert conflicts(plan, Sampling(budget=1000, question="difference", given=given)) == []
    assert conflicts(plan, Sampling(budget=recorded - 1, question="difference", given=given)) == [
        f"--budget {recorded - 1:g} (this session: {recorded:g})"
    ]
