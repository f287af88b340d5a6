"""The embedder seam through the CLI: with the hash embedder the whole offline job runs and MiniLM is
never loaded (what lets CLI tests that do not measure search quality run fast)."""

from __future__ import annotations

import pytest

from judge_runner.search.embedding import EmbeddingModelError, MiniLMEmbedder
from tests.support.clitools import invoke, run_lines


@pytest.mark.hash_embedder
def test_offline_main_job_with_the_hash_embedder_never_loads_minilm(fixtures_root, tmp_path, monkeypatch):
    loads: list[str] = []

    def no_model(self):
        loads.append("MiniLM")
        raise EmbeddingModelError("this test must not load MiniLM")

    monkeypatch.setattr(MiniLMEmbedder, "_load", no_model)
    out, db = tmp_path / "results", tmp_path / "index.sqlite"
    args = ["generate-and-evaluate", "--fixtures", str(fixtures_root), "--db", str(db), "--out-dir", str(out), "--count", "4"]
    result = invoke([*args, "--keep-unverified"])  # the 4 written queries kept: phase one's check uses the hash embedder too
    assert result.exit_code == 0, result.output
    assert loads == []
    lines = run_lines(out)
    assert [line["type"] for line in lines] == ["run_start"] + ["evaluation"] * 4 + ["summary"]
    provenance = lines[0]["provenance"]
    assert (provenance["provider"], provenance["judgeModel"], provenance["generatorModel"], provenance["heuristicJudge"]) == (
        "offline",
        "offline-heuristic-v1",
        "offline-heuristic-v1",
        True,
    )
    assert "HEURISTIC" in result.output
