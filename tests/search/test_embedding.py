"""judge_runner.search.embedding: the deterministic hashing embedder and the seam that hands out embedders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judge_runner.search import embedding
from judge_runner.search.base import IndexMismatchError
from judge_runner.search.embedding import (
    EMBEDDER_ENV,
    EmbeddingModelError,
    HashEmbedder,
    MiniLMEmbedder,
    OpenVinoMiniLMEmbedder,
    embedder_kind,
    get_embedder,
    set_embedder,
    use_embedder,
)
from judge_runner.search.sqlite import SQLiteIndex
from tests.support.search_checks import holds_a_document

TEXTS = ["rotate the log files every night", "", "   ", "!!! ???", "索引服务", "Kündigung des Vertrags", "x" * 5000]


def test_hash_vectors_have_the_contract_shape_and_unit_length():
    vectors = HashEmbedder().encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # also the empty and punctuation-only texts
    assert HashEmbedder().encode([]).shape == (0, 384)


def test_hash_vectors_are_identical_in_another_process():
    """Python's hash() is salted per process; the embedder must not depend on it."""
    here = HashEmbedder().encode(["rotate the log files"])[0]
    code = (
        "from judge_runner.search.embedding import HashEmbedder; print(repr(HashEmbedder().encode(['rotate the log files'])[0].tolist()))"
    )
    env = {"PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert np.allclose(here, np.array(eval(out), dtype=np.float32))


def test_hash_cosine_follows_shared_words():
    e = HashEmbedder()
    q, near, far = e.encode(["rotate log files", "how we rotate the log files nightly", "sourdough bread recipe"])
    assert float(q @ near) > 0.4 > float(q @ far)
    assert abs(float(q @ far)) < 0.3


def test_hash_embedder_rejects_a_zero_dimension():
    with pytest.raises(ValueError):
        HashEmbedder(0)


def test_seam_reads_the_environment_at_each_call(monkeypatch):
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    default = get_embedder()  # lazily loaded: nothing is loaded or exported by asking
    assert isinstance(default, OpenVinoMiniLMEmbedder) and default.kind == "openvino"
    monkeypatch.setenv(EMBEDDER_ENV, "hash")
    first = get_embedder()
    assert isinstance(first, HashEmbedder) and get_embedder() is first  # one instance per kind
    monkeypatch.setenv(EMBEDDER_ENV, " HASH ")
    assert get_embedder() is first
    assert embedding.minilm_embedder("torch") is embedding._cached("minilm")  # MiniLM whatever the variable says
    assert isinstance(embedding.minilm_embedder("torch"), MiniLMEmbedder)


@pytest.mark.parametrize("value", ["", None])
def test_empty_or_unset_variable_means_the_openvino_minilm(value):
    environ = {} if value is None else {EMBEDDER_ENV: value}
    assert embedder_kind(environ) == "openvino"  # the default for new indexes since issue 23
    assert embedder_kind({EMBEDDER_ENV: "minilm"}) == "torch"  # the former name of the torch path


def test_unknown_embedder_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(EMBEDDER_ENV, "bert-large")
    with pytest.raises(EmbeddingModelError, match="JUDGE_RUNNER_EMBEDDER='bert-large'.*torch, onnx, onnx-int8, openvino, hash"):
        get_embedder()


def test_override_wins_and_is_restored(monkeypatch):
    monkeypatch.setenv(EMBEDDER_ENV, "hash")
    mine = HashEmbedder(16)
    with use_embedder(mine):
        assert get_embedder() is mine
    assert get_embedder() is not mine
    previous = set_embedder(mine)
    try:
        assert previous is None and get_embedder() is mine
    finally:
        set_embedder(previous)


@pytest.mark.hash_embedder
def test_marked_test_gets_the_hash_embedder():
    assert isinstance(get_embedder(), HashEmbedder)


def test_index_records_the_hash_embedder_and_minilm_refuses_it(tmp_path, hash_embedder):
    """An index built for tests can never be mistaken for a MiniLM index."""
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db) as index:  # the default embedder comes from the seam
        assert index.embedder is hash_embedder
        assert index.get_meta("embedding_model") == "hash-384-v1"
        holds_a_document(index)
    with pytest.raises(IndexMismatchError, match="hash-384-v1"):
        SQLiteIndex(db, embedder=MiniLMEmbedder())  # opening checks the name only: no model is loaded


def test_an_index_that_never_got_a_document_is_taken_over_by_the_embedder_that_indexes_into_it(tmp_path):
    """A first index that failed before its first document (its model could not be exported, say) leaves
    a file whose meta names the default embedder: another embedder, asked for, indexes into it instead of
    being refused; once it holds a document it is refused again. Read-only opens never rewrite it."""
    db = tmp_path / "index.sqlite"
    SQLiteIndex(db, embedder=OpenVinoMiniLMEmbedder()).close()
    with pytest.raises(IndexMismatchError):
        SQLiteIndex(db, embedder=MiniLMEmbedder(), readonly=True)
    with SQLiteIndex(db, embedder=MiniLMEmbedder()) as index:
        assert index.get_meta("embedding_model") == "all-MiniLM-L6-v2"
        holds_a_document(index)
    with pytest.raises(IndexMismatchError, match="built by the torch embedder"):
        SQLiteIndex(db, embedder=OpenVinoMiniLMEmbedder())


def test_an_index_is_opened_with_the_kind_that_built_it_unless_a_kind_is_asked_for(tmp_path, monkeypatch):
    """Issue 23: new indexes get the default kind (openvino); an index built by another kind (torch, the
    former default) opens with that kind when nothing asks for one, read-only or not, and is refused, with
    the setting that reads it, when JUDGE_RUNNER_EMBEDDER asks for another. Only names are compared here:
    no model is loaded or exported."""
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    previous = set_embedder(None)
    try:
        new = tmp_path / "new.sqlite"
        with SQLiteIndex(new) as index:
            assert index.get_meta("embedding_model") == "all-MiniLM-L6-v2+openvino"
            assert isinstance(index.embedder, OpenVinoMiniLMEmbedder)
        old = tmp_path / "old.sqlite"
        SQLiteIndex(old, embedder=embedding.minilm_embedder("torch")).close()
        for readonly in (False, True):
            with SQLiteIndex(old, readonly=readonly) as index:
                assert isinstance(index.embedder, MiniLMEmbedder)
                assert index.get_meta("embedding_model") == "all-MiniLM-L6-v2"
        monkeypatch.setenv(EMBEDDER_ENV, "onnx")
        with pytest.raises(IndexMismatchError, match="JUDGE_RUNNER_EMBEDDER=torch"):
            SQLiteIndex(old, readonly=True)
        monkeypatch.setenv(EMBEDDER_ENV, "torch")
        with SQLiteIndex(old, readonly=True) as index:
            assert isinstance(index.embedder, MiniLMEmbedder)
        with use_embedder(HashEmbedder()), pytest.raises(IndexMismatchError, match="hash-384-v1"):
            SQLiteIndex(old, readonly=True)  # an override wins over the index too
    finally:
        set_embedder(previous)


def test_indexing_into_a_read_only_index_file_is_a_clear_error(tmp_path, monkeypatch, hash_embedder):
    """An index file the process may not write (a read-only mount; root ignores file modes, so the check
    is os.access) is refused when opened for indexing, naming the file; searching it still works."""
    db = tmp_path / "index.sqlite"
    SQLiteIndex(db).close()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: False if Path(path) == db and mode == os.W_OK else real_access(path, mode, **kw)
    )
    with pytest.raises(PermissionError, match=r"index\.sqlite is read-only"):
        SQLiteIndex(db)
    SQLiteIndex(db, readonly=True).close()
