"""One path for settings: built once per command, validated once, never changed
afterwards (a job derives new settings instead); a job gets what it needs as arguments; resume reads
its run file once, into typed lines."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from judge_runner.app.resume import read_resume_point, resumed_settings
from judge_runner.config import ConfigError, derive, load_settings
from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.judging.scores import SCORING_VERSION
from judge_runner.runs import read as read_module
from judge_runner.runs.lines import EvaluationLine, RunStartLine


def test_settings_are_frozen_once_built(tmp_path):
    settings = load_settings({"trials": 2}, cwd=tmp_path, environ={})
    with pytest.raises(ValidationError, match="frozen"):
        settings.trials = 3  # type: ignore[misc]
    assert settings.trials == 2


def test_derived_settings_are_validated_and_keep_what_the_user_set(tmp_path):
    settings = load_settings({"trials": 2}, cwd=tmp_path, environ={})
    derived = derive(settings, {"judge_mode": "batched", "seed": 7}, "the resumed run's run_start")
    assert (derived.judge_mode, derived.seed, derived.trials) == ("batched", 7, 2)
    assert (settings.judge_mode, settings.seed) == ("pointwise", 20240701), "the original is untouched"
    assert derived.model_fields_set == {"trials"}, "a derived value is not one the user chose"
    with pytest.raises(ConfigError, match=r"trials in the resumed run's run_start: .*integer"):
        derive(settings, {"trials": "many"}, "the resumed run's run_start")
    with pytest.raises(ConfigError, match="judge-mode in x"):
        derive(settings, {"judge_mode": "listwise"}, "x")


def run_file(tmp_path, config: dict, evaluations: int = 2):
    start = RunStartLine.model_validate(
        {
            "type": "run_start",
            "runId": "r1",
            "timestamp": "2026-12-01T10:00:00Z",
            "formatVersion": 2,
            "config": config,
            "provenance": {"scoringVersion": SCORING_VERSION},
        }
    )
    lines = [start.line()]
    for i in range(evaluations):
        lines.append(EvaluationLine.model_validate({"type": "evaluation", "runId": "r1", "queryId": f"q{i}", "query": f"query {i}"}).line())
    path = tmp_path / "r1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_resume_reads_its_run_file_once_into_typed_lines(tmp_path, monkeypatch):
    path = run_file(tmp_path, {"judgeMode": "batched", "trials": 3})
    reads: list[str] = []
    real = read_module.read_run_file
    monkeypatch.setattr(read_module, "read_run_file", lambda p: reads.append(str(p)) or real(p))
    point = read_resume_point(path)
    assert reads == [str(path)]
    assert isinstance(point.start, RunStartLine) and all(isinstance(e, EvaluationLine) for e in point.evaluations)
    assert point.run_id == "r1" and point.judged_ids == {"q0", "q1"}


def test_a_resumed_run_derives_its_protocol_and_a_bad_value_in_the_file_is_a_usage_error(tmp_path):
    printer = Printer(quiet=True)
    settings = load_settings({"seed": 9}, cwd=tmp_path, environ={})
    point = read_resume_point(run_file(tmp_path, {"judgeMode": "batched", "trials": 3, "seed": 1, "batch": True}))
    resumed = resumed_settings(settings, point, printer)
    assert (resumed.judge_mode, resumed.trials, resumed.batch) == ("batched", 3, True)
    assert resumed.seed == 9, "a setting the user set is kept (and warned about)"
    assert (settings.judge_mode, settings.trials, settings.batch) == ("pointwise", 1, False), "never changed in place"
    broken = read_resume_point(run_file(tmp_path, {"trials": 0}))
    with pytest.raises(UsageError, match="trials in the resumed run's run_start"):
        resumed_settings(settings, broken, printer)
