"""Phase one that keeps no query (every written query dropped) is one clear error with
one exit code (3, run incomplete) from every command that runs phase one: ``generate``,
``generate-and-evaluate`` and ``weekly``; never a pydantic traceback, never exit 1 (the gate's code)."""

from __future__ import annotations

import pytest

from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer

pytestmark = pytest.mark.hash_embedder


class MissingSourcesBrain(DefaultBrain):
    """Writes queries whose expected sources are all missing from the corpus: every one is dropped."""

    def queries(self, paths, n):
        return [
            {
                "id": f"q{i:02d}",
                "query": f"rotate the key {i}",
                "queryIntent": "Find the runbook.",
                "queryType": "keyword",
                "expectedSources": [f"nowhere/missing-{i}.md"],
            }
            for i in range(n)
        ]


class OnlyDuplicatesBrain(DefaultBrain):
    """Another member of the kind: every query names a folder, not a file (dropped as not in the corpus)."""

    def queries(self, paths, n):
        return [
            {
                "id": f"q{i:02d}",
                "query": "runbooks",
                "queryIntent": "Find the runbooks.",
                "queryType": "keyword",
                "expectedSources": ["runbooks/"],
            }
            for i in range(n)
        ]


def _kb(tmp_path):
    kb = tmp_path / "kb"
    (kb / "runbooks").mkdir(parents=True)
    (kb / "runbooks" / "backup.md").write_text("# Backup runbook\n\nRotate the backup key for postgres every 90 days.\n")
    (kb / "dns.md").write_text("# DNS\n\nChanging DNS records needs a ticket.\n")
    return kb


def _args(command, kb, tmp_path):
    db = ["--db", str(tmp_path / "i.sqlite")]
    return {
        "generate": ["generate", "--fixtures", str(kb), "--out", str(tmp_path / "q.json"), "--count", "3"],
        "generate-and-evaluate": ["generate-and-evaluate", "--fixtures", str(kb), "--out-dir", str(tmp_path / "out"), "--count", "3", *db],
        "weekly": [
            "weekly",
            "--fixtures",
            str(kb),
            "--results",
            str(tmp_path / "out"),
            "--reports",
            str(tmp_path / "rep"),
            "--count",
            "3",
            *db,
        ],
    }[command]


@pytest.mark.parametrize("brain", [MissingSourcesBrain, OnlyDuplicatesBrain])
@pytest.mark.parametrize("command", ["generate", "generate-and-evaluate", "weekly"])
def test_every_query_dropped_is_one_clear_error_with_exit_3(command, brain, tmp_path):
    kb = _kb(tmp_path)
    with FakeLLMServer(brain=brain()) as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(_args(command, kb, tmp_path), env)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and "validation error" not in result.output
    assert "error: phase one produced no usable query: all 3 written queries were dropped" in result.output
    assert "not in the corpus" in result.output  # the first reasons are named
    assert not (tmp_path / "q.json").exists()  # no empty query set that `evaluate` would refuse


def test_a_writer_that_wrote_nothing_gets_the_same_error():
    """Another member: the writer returned no query at all (nothing written, nothing dropped)."""
    from judge_runner.app.steps import require_queries
    from judge_runner.core.failures import IncompleteRunError
    from judge_runner.querygen.protocol import GenerationResult

    with pytest.raises(IncompleteRunError, match="phase one produced no usable query: the query writer wrote 0 queries") as caught:
        require_queries(GenerationResult([], 0))
    assert caught.value.exit_code == 3
    dropped = [{"id": f"q{i}", "query": "x", "reason": f"reason {i}"} for i in range(5)]
    with pytest.raises(
        IncompleteRunError, match=r"all 5 written queries were dropped \(q0: reason 0; q1: reason 1; q2: reason 2; 2 more\)"
    ):
        require_queries(GenerationResult([], 5, dropped))
