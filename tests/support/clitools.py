"""Helpers for tests that drive the CLI in-process."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from click.testing import CliRunner

from judge_runner.cli import main
from judge_runner.core.resources import load_schema

SCHEMAS = {t: load_schema(f"{t}.schema.json") for t in ("run_start", "evaluation", "error", "batch", "summary")}
NO_KEYS = {
    "ANTHROPIC_API_KEY": None,
    "OPENAI_API_KEY": None,
    "OPENAI_BASE_URL": None,
    "ANTHROPIC_BASE_URL": None,
    "JUDGE_RUNNER_DB": None,
    "JUDGE_RUNNER_MIN_OVERALL": None,
    "JUDGE_RUNNER_EXTENSIONS": None,
}


KEEP_ALL = ["--keep-unverified", "--no-cache"]
"""Flags for a ``generate`` that sets up a test of phase two: keep the queries the judge does not verify
(phase one's answerability check), so the set keeps its written size, and store no judgment
(``generate`` has no ``--db``: its default cache is under the current folder)."""


def invoke(args: list[str], env: dict | None = None):
    """Run ``judge-runner ARGS`` with no provider keys in the environment (plus ``env``)."""
    return CliRunner().invoke(main, args, env={**NO_KEYS, **(env or {})}, catch_exceptions=False)


def run_lines(out_dir: Path) -> list[dict]:
    """The lines of the one run file in ``out_dir``, each validated against its schema."""
    files = sorted(out_dir.glob("*.jsonl"))
    assert len(files) == 1, files
    lines = [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines()]
    for line in lines:
        jsonschema.validate(line, SCHEMAS[line["type"]])
    return lines
