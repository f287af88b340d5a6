"""The embedder through the CLI: with the hash embedder the whole offline job runs and MiniLM is never loaded
(what lets CLI tests that do not measure search quality run fast); on a torch-built index with nothing set,
one embedder instance serves the whole command."""

from __future__ import annotations

import contextlib

import pytest

from judge_runner.embed import minilm, registry
from judge_runner.embed.base import EmbeddingModelError
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.embed.minilm import MiniLMEmbedder, OnnxMiniLMEmbedder
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.querygen import review
from judge_runner.search.indexer import index_tree
from judge_runner.search.sqlite import SQLiteIndex
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


HASH_VECTORS = HashEmbedder.encode  # taken before a test records the embedders' encode calls


class FakeSentenceTransformer:
    """What the torch path's sentence-transformers model answers, with the hash embedder's vectors: the
    torch kind's code runs end to end without loading torch or the model."""

    def encode(self, texts, batch_size, normalize_embeddings, show_progress_bar):
        return HASH_VECTORS(HashEmbedder(), texts)


def test_on_a_torch_built_index_with_nothing_set_one_embedder_serves_the_index_search_judge_and_review(
    fixtures_root, tmp_path, monkeypatch
):
    """On an index built by torch (the former default), with no embedder setting, the
    command chooses torch once (the index's own) and that one instance serves the index, the search, the
    offline judge and phase one's review: one model load, no OpenVINO or ONNX Runtime session, no hash
    embedder. Counted by the loads and the instances that encode, not by timing."""
    loads: list[MiniLMEmbedder] = []
    encoders: list[object] = []

    def fake_load(self):
        loads.append(self)
        return FakeSentenceTransformer()

    def no_session(self, threads):
        raise EmbeddingModelError(f"this test must not start a {self.kind} session")

    monkeypatch.setattr(MiniLMEmbedder, "_load", fake_load)
    monkeypatch.setattr(minilm, "_intra_op_threads", lambda threads: contextlib.nullcontext())  # no torch import
    monkeypatch.setattr(OnnxMiniLMEmbedder, "_session", no_session)  # OpenVINO's too (a subclass)
    for cls in (MiniLMEmbedder, OnnxMiniLMEmbedder, HashEmbedder):
        monkeypatch.setattr(cls, "encode", _recording(cls.encode, encoders))
    db, out = tmp_path / "index.sqlite", tmp_path / "results"
    with SQLiteIndex(db, embedder=MiniLMEmbedder()) as index:  # built by torch, as in an earlier process
        index_tree(index, fixtures_root)
    assert len(loads) == 1
    loads.clear()
    encoders.clear()
    monkeypatch.setattr(registry, "_instances", {})  # a fresh process: no embedder made yet
    reviewed, judged = _spy_review_and_judge(monkeypatch)

    args = ["generate-and-evaluate", "--fixtures", str(fixtures_root), "--db", str(db), "--out-dir", str(out), "--count", "4"]
    result = invoke([*args, "--provider", "offline", "--keep-unverified"], {registry.SETTING_ENV: None})
    assert result.exit_code == 0, result.output

    assert len(loads) == 1, "one model load for the whole command"
    (one,) = loads
    assert reviewed == [one] and judged == [one], "the query review and the offline judge got the index's embedder"
    assert encoders and {id(e) for e in encoders} == {id(one)}, "every text was embedded by that one instance"
    assert len(encoders) > 4, "the search and the judge both embedded (4 queries searched, then labelled)"
    lines = run_lines(out)
    assert [line["type"] for line in lines] == ["run_start"] + ["evaluation"] * 4 + ["summary"]


def _recording(encode, calls: list[object]):
    """``encode`` that appends its embedder to ``calls`` first."""

    def recorded(self, texts, *args, **kwargs):
        calls.append(self)
        return encode(self, texts, *args, **kwargs)

    return recorded


def _spy_review_and_judge(monkeypatch) -> tuple[list[object], list[object]]:
    """The embedders handed to phase one's near-duplicate check and to each heuristic judge built."""
    reviewed: list[object] = []
    judged: list[object] = []
    find_duplicates = review.find_duplicates
    judge_init = HeuristicJudge.__init__

    def spied_find(queries, embedder):
        reviewed.append(embedder)
        return find_duplicates(queries, embedder)

    def spied_init(self, embedder):
        judged.append(embedder)
        judge_init(self, embedder)

    monkeypatch.setattr(review, "find_duplicates", spied_find)
    monkeypatch.setattr(HeuristicJudge, "__init__", spied_init)
    return reviewed, judged


def test_the_flag_and_the_config_file_choose_the_embedder_as_the_variable_does(tmp_path, monkeypatch):
    """``--embedder`` and ``embedder = "..."`` in judge-runner.toml are the setting JUDGE_RUNNER_EMBEDDER is
    (file < variable < flag): an index built with one records it, and another, asked for, is refused
    with the usual advice. Only the hash embedder embeds here; the refusals load nothing."""
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "backup.md").write_text("# Backup\n\nRotate the backup key every quarter.\n", encoding="utf-8")
    unset = {registry.SETTING_ENV: None}
    built = invoke(["index", str(kb), "--db", "flag.sqlite", "--embedder", "hash", "--json"], unset)
    assert built.exit_code == 0, built.output
    with SQLiteIndex(tmp_path / "flag.sqlite", readonly=True) as index:  # opened with its own: the hash embedder
        assert index.get_meta("embedding_model") == "hash-384-v1" and index.embedder is registry.instance("hash")
    refused = invoke(["search", "backup key", "--db", "flag.sqlite", "--embedder", "onnx"], unset)
    assert refused.exit_code == 2 and "search it with --embedder hash (or JUDGE_RUNNER_EMBEDDER=hash)" in refused.stderr, refused.output
    assert invoke(["search", "backup key", "--db", "flag.sqlite"], {registry.SETTING_ENV: "onnx"}).exit_code == 2  # so does the variable
    assert invoke(["search", "backup key", "--db", "flag.sqlite", "--embedder", "hash"], {registry.SETTING_ENV: "onnx"}).exit_code == 0

    (tmp_path / "judge-runner.toml").write_text('embedder = "hash"\n', encoding="utf-8")
    built = invoke(["index", str(kb), "--db", "file.sqlite"], unset)
    assert built.exit_code == 0, built.output
    with SQLiteIndex(tmp_path / "file.sqlite", readonly=True) as index:
        assert index.get_meta("embedding_model") == "hash-384-v1"
    refused = invoke(["search", "backup key", "--db", "file.sqlite"], {registry.SETTING_ENV: "torch"})  # the variable over the file
    assert refused.exit_code == 2 and "built by the hash embedder" in refused.stderr, refused.output
    bad = invoke(["search", "backup key", "--db", "file.sqlite", "--embedder", "bert"], unset)
    assert bad.exit_code == 2 and "--embedder: not an embedder; use one of torch, onnx, onnx-int8, openvino, hash" in bad.stderr
