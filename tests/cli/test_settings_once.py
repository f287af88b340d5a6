"""Each command builds its Settings once (docs/design.md, "Settings: built once, never changed"): the
config file, the environment and the flags are read by one ``load_settings`` per invocation, and every
job and report of the command gets that one object. The jobs are replaced by stubs that record what they
were given, so nothing is indexed, judged or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from judge_runner.cli import main
from judge_runner.config import Settings
from judge_runner.core.failures import RunStatus
from judge_runner.evaluation.state import RunEnd, RunOutcome
from judge_runner.querygen.protocol import GenerationResult

NO_ENV = {"ANTHROPIC_API_KEY": None, "OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "ANTHROPIC_BASE_URL": None, "JUDGE_RUNNER_DB": None}


class Seen:
    """The Settings built (``loads``) and those the stubbed jobs received (``given``)."""

    def __init__(self) -> None:
        self.loads: list[Settings] = []
        self.given: list[Settings] = []

    def job(self, returns: Any = None):
        def stub(*args: Any, **kwargs: Any) -> Any:
            self.given += [a for a in (*args, *kwargs.values()) if isinstance(a, Settings)]
            return returns

        return stub


@pytest.fixture
def seen(monkeypatch) -> Seen:
    import judge_runner.app.inputs as inputs

    record = Seen()
    real = inputs.load_settings

    def counting(flags, **where):
        settings = real(flags, **where)
        record.loads.append(settings)
        return settings

    monkeypatch.setattr(inputs, "load_settings", counting)
    return record


def _files(tmp: Path) -> dict[str, str]:
    (tmp / "beir").mkdir()
    (tmp / "kb").mkdir()
    (tmp / "q.json").write_text("{}")
    (tmp / "run.jsonl").write_text("")
    return {"tmp": str(tmp)}


DONE = RunOutcome({"runId": "r"}, RunEnd(RunStatus.OK), "r.jsonl")
WRITTEN = GenerationResult(queries=[], generated=0)

# (command line, {module attribute of the command: what its stub returns})
CASES = {
    "calibrate --dry-run": (
        ["calibrate", "--beir", "{tmp}/beir", "--dry-run"],
        {
            "cli.calibrate.calibrate_job": None,
            "cli.calibrate.calibrate_labeler": (object(), object()),
            "cli.calibrate.calibrate_report": None,
        },
    ),
    "calibrate": (["calibrate", "--beir", "{tmp}/beir"], {"cli.calibrate.calibrate_job": None}),
    "calibrate --results": (
        ["calibrate", "--results", "{tmp}/run.jsonl", "--human-qrels", "team"],
        {"cli.calibrate.calibrate_runs_job": None},
    ),
    "generate": (["generate", "--fixtures", "{tmp}/kb", "--out", "{tmp}/out.json"], {"api.generate_job": WRITTEN}),
    "evaluate": (["evaluate", "--queries", "{tmp}/q.json"], {"api.evaluate_job": None}),
    "evaluate --dry-run": (["evaluate", "--queries", "{tmp}/q.json", "--dry-run"], {"cli.evaluation.evaluate_dry_run": None}),
    "generate-and-evaluate": (["generate-and-evaluate", "--fixtures", "{tmp}/kb"], {"api.main_job": DONE}),
    "generate-and-evaluate --dry-run": (
        ["generate-and-evaluate", "--fixtures", "{tmp}/kb", "--dry-run"],
        {"cli.evaluation.main_dry_run": None},
    ),
    "rejudge": (["rejudge", "{tmp}/run.jsonl"], {"api.rejudge_job": DONE}),
    "rejudge --dry-run": (["rejudge", "{tmp}/run.jsonl", "--dry-run"], {"cli.evaluation.rejudge_dry_run": None}),
    "weekly --dry-run": (["weekly", "--fixtures", "{tmp}/kb", "--dry-run"], {"cli.weekly.weekly_dry_run": None}),
    "index": (["index", "{tmp}/kb"], {"cli.indexing.index_job": None}),
}


def run_counting(seen: Seen, monkeypatch, tmp_path: Path, args: list[str], stubs: dict[str, Any]) -> Any:
    import importlib

    names = _files(tmp_path)
    for target, returns in stubs.items():
        module, attr = target.rsplit(".", 1)
        monkeypatch.setattr(importlib.import_module(f"judge_runner.{module}"), attr, seen.job(returns))
    monkeypatch.chdir(tmp_path)
    return CliRunner().invoke(main, [a.format(**names) for a in args], env=NO_ENV, catch_exceptions=False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_command_builds_its_settings_once(case, seen, monkeypatch, tmp_path):
    args, stubs = CASES[case]
    result = run_counting(seen, monkeypatch, tmp_path, args, stubs)
    assert result.exit_code == 0, result.output
    assert len(seen.loads) == 1, f"{case}: Settings built {len(seen.loads)} times"
    assert seen.given and all(given is seen.loads[0] for given in seen.given), case
