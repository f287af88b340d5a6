"""Driving ``evaluate`` with ``--batch`` through the CLI against the loopback fake's batch APIs: the environment
for a provider, the run's lines, what is comparable between two runs, the judge's requests, and a run cut as a
SIGKILL leaves it then resumed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer, offered_tools

ROOT = Path(__file__).resolve().parents[2]


JUDGE_TOOLS = {"record_label", "record_labels", "record_list_verdict"}


VOLATILE = {"runId", "timestamp", "latencyMs", "usage"}


def env_for(server: FakeLLMServer, api: str) -> dict[str, str]:
    """The environment that points ``api``'s SDK at the fake ``server``, with batches polled every 50 ms."""
    if api == "anthropic":
        return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url, "JUDGE_RUNNER_BATCH_POLL": "0.05"}
    return {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.openai_base_url, "JUDGE_RUNNER_BATCH_POLL": "0.05"}


def lines_of(folder: Path) -> list[dict]:
    """The lines of the one run file in ``folder``."""
    files = sorted(folder.glob("*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[-1].read_text(encoding="utf-8").splitlines()]


def comparable(evaluation: dict) -> dict:
    """An evaluation line without what differs between two runs of the same queries (ids, times, usage)."""
    return {k: v for k, v in evaluation.items() if k not in VOLATILE}


def evaluate(server, api, query_set, db, out, *extra: str):
    """``judge-runner evaluate`` of ``query_set`` on ``db`` against the fake, no judgment cache; the click result."""
    args = ["evaluate", "--queries", str(query_set), "--db", str(db), "--out-dir", str(out), "--provider", api, "--no-cache", *extra]
    return invoke(args, env_for(server, api))


def judge_requests(server, api) -> list:
    """The requests the fake received that offered a judge tool (phase two's calls)."""
    return [r for r in server.requests if set(offered_tools(api, r.body)) & JUDGE_TOOLS]


def cut_run(folder, keep_evaluations: int = 0, keep_batches: bool = True):
    """The run file in ``folder`` cut as a SIGKILL would leave it: run_start, its batch lines (if kept)
    and the first ``keep_evaluations`` evaluation lines; no summary."""
    [path] = sorted(folder.glob("*.jsonl"))
    kept, evaluations = [], 0
    for text in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(text)
        if line["type"] == "run_start" or (line["type"] == "batch" and keep_batches):
            kept.append(text)
        elif line["type"] == "evaluation" and evaluations < keep_evaluations:
            kept.append(text)
            evaluations += 1
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def resume(server, api, run, out, *extra: str):
    """``judge-runner evaluate --resume RUN`` against the fake, with the index beside the run's folder."""

    from tests.support.clitools import invoke

    return invoke(
        [
            "evaluate",
            "--resume",
            str(run),
            "--out-dir",
            str(out),
            "--db",
            str(run.parent.parent / "db.sqlite"),
            "--provider",
            api,
            "--no-cache",
            *extra,
        ],
        env_for(server, api),
    )
