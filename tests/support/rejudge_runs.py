"""Runs for the ``rejudge`` tests: a run judged offline on the loopback fake's query set, judged again."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tests.support.clitools import SCHEMAS, invoke


def lines(path: Path) -> list[dict]:
    """The lines of a run file, each validated against its schema."""
    out = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    for line in out:
        jsonschema.validate(line, SCHEMAS[line["type"]])
    return out


def new_file(folder: Path, before: set[Path]) -> Path:
    """The one run file in ``folder`` that is not in ``before``."""
    [made] = sorted(set(folder.glob("*.jsonl")) - before)
    return made


def judged_run(query_set: Path, db: Path, out: Path, cache: Path, *extra: str) -> Path:
    """``evaluate`` of ``query_set`` on ``db`` with the offline judge into ``out``, labels kept in ``cache``."""
    before = set(out.glob("*.jsonl"))
    args = ["evaluate", "--queries", str(query_set), "--db", str(db), "--out-dir", str(out), "--provider", "offline", "--cache", str(cache)]
    result = invoke([*args, *extra])
    assert result.exit_code == 0, result.output
    return new_file(out, before)


def rejudge(run: Path, out: Path, cache: Path, *extra: str, env: dict | None = None):
    """``judge-runner rejudge RUN`` into ``out`` with no index at all (nothing is searched) and ``cache``."""
    args = ["rejudge", str(run), "--out-dir", str(out), "--db", str(out / "no-index.sqlite"), "--cache", str(cache), *extra]
    return invoke(args, env)


def evaluations(path: Path) -> list[dict]:
    """The evaluation lines of a run file."""
    return [line for line in lines(path) if line["type"] == "evaluation"]


def rewrite(path: Path, change) -> Path:
    """Apply ``change(line) -> line or None`` (None drops it) to every line of the run file ``path``."""
    kept = [change(json.loads(text)) for text in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps(line) + "\n" for line in kept if line is not None), encoding="utf-8")
    return path
