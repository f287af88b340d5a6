"""judge_runner.embed: the deterministic hashing embedder, the registry of embedder kinds, and the one
embedder a command chooses (the ``embedder`` setting, else the index's own, else the default)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judge_runner.app.indexing import open_index
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.core.failures import UsageError
from judge_runner.embed import registry
from judge_runner.embed.base import EmbeddingModelError
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.embed.minilm import MiniLMEmbedder, OpenVinoMiniLMEmbedder
from judge_runner.embed.registry import EMBEDDER_KINDS, EMBEDDERS, SETTING_ENV, choose, instance
from judge_runner.search.base import IndexMismatchError
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
    code = "from judge_runner.embed.hashing import HashEmbedder; print(repr(HashEmbedder().encode(['rotate the log files'])[0].tolist()))"
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


def test_every_kind_records_its_own_model_name_and_makes_its_embedder_without_loading_it():
    """The registry is the one table of kinds: each spec's model name is the one its embedder records, and
    no two kinds share one (so an index built by one is refused by another). Making one loads nothing."""
    assert EMBEDDER_KINDS == ("torch", "onnx", "onnx-int8", "openvino", "hash")
    for kind, spec in EMBEDDERS.items():
        made = spec.new()
        assert (made.kind, made.name, made.dimension) == (kind, spec.model_name, 384)
        assert registry.kind_of_model(spec.model_name) == kind
    assert len({spec.model_name for spec in EMBEDDERS.values()}) == len(EMBEDDERS)
    assert registry.kind_of_model("another-model") is None
    assert EMBEDDERS["hash"].missing() == () and EMBEDDERS["hash"].tests_only
    assert EMBEDDERS["torch"].missing() == ()  # installed with the package


def test_one_instance_per_kind_and_the_choice_setting_then_index_then_default():
    first = instance("hash")
    assert isinstance(first, HashEmbedder) and instance(" HASH ") is first
    assert instance("minilm") is instance("torch") and isinstance(instance("torch"), MiniLMEmbedder)  # the former name
    assert choose("hash", "all-MiniLM-L6-v2") is first  # the setting wins over the index's own
    assert choose(None, "all-MiniLM-L6-v2") is instance("torch")  # else the kind that built the index
    assert choose(None, None) is instance("openvino") and choose(None, "unknown-model") is instance("openvino")  # else the default
    assert isinstance(choose(None), OpenVinoMiniLMEmbedder) and registry.DEFAULT_KIND == "openvino"
    with pytest.raises(EmbeddingModelError, match="'bert-large' is not an embedder; use one of torch, onnx, onnx-int8, openvino, hash"):
        instance("bert-large")


@pytest.mark.parametrize("value", ["", None])
def test_an_empty_or_unset_variable_leaves_the_setting_unset(value, tmp_path):
    environ = {} if value is None else {SETTING_ENV: value}
    assert load_settings({}, cwd=tmp_path, environ=environ).embedder is None  # the index's own, else openvino
    assert load_settings({}, cwd=tmp_path, environ={SETTING_ENV: "minilm"}).embedder == "torch"  # the former name


def test_the_setting_comes_from_the_file_the_variable_and_the_flag_in_that_order(tmp_path):
    """``embedder`` is a setting like the others: the config file, then JUDGE_RUNNER_EMBEDDER,
    then --embedder, each overriding the one before, each checked the same way and named when wrong."""
    (tmp_path / "judge-runner.toml").write_text('embedder = "onnx"\n', encoding="utf-8")
    assert load_settings({}, cwd=tmp_path, environ={}).embedder == "onnx"
    assert load_settings({}, cwd=tmp_path, environ={SETTING_ENV: " Torch "}).embedder == "torch"
    assert load_settings({"embedder": "hash"}, cwd=tmp_path, environ={SETTING_ENV: "torch"}).embedder == "hash"
    for flags, environ, where in (
        ({}, {SETTING_ENV: "bert-large"}, "JUDGE_RUNNER_EMBEDDER"),
        ({"embedder": "bert-large"}, {}, "--embedder"),
    ):
        with pytest.raises(ConfigError, match=f"{where}: not an embedder; use one of torch, onnx, onnx-int8, openvino, hash"):
            load_settings(flags, cwd=tmp_path, environ=environ)
    (tmp_path / "judge-runner.toml").write_text('embedder = "onnx-int4"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="embedder in judge-runner.toml: not an embedder"):
        load_settings({}, cwd=tmp_path, environ={})


@pytest.mark.hash_embedder
def test_marked_test_gets_the_hash_embedder(tmp_path):
    assert load_settings({}, cwd=tmp_path).embedder == "hash"


def test_index_records_the_hash_embedder_and_minilm_refuses_it(tmp_path, hash_embedder):
    """An index built for tests can never be mistaken for a MiniLM index."""
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db, embedder=hash_embedder) as index:
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


def test_an_index_is_opened_with_the_kind_that_built_it_unless_a_kind_is_asked_for(tmp_path):
    """New indexes get the default kind (openvino); an index built by another kind (torch, the
    former default) opens with that kind when nothing asks for one, read-only or not, and is refused, with
    the setting that reads it, when the ``embedder`` setting asks for another (it reaches the index through
    ``app/indexing.open_index``). Only names are compared here: no model is loaded or exported."""
    new = tmp_path / "new.sqlite"
    with SQLiteIndex(new) as index:
        assert index.get_meta("embedding_model") == "all-MiniLM-L6-v2+openvino"
        assert index.embedder is instance("openvino")
    old = tmp_path / "old.sqlite"
    with SQLiteIndex(old, embedder=instance("torch")) as index:
        holds_a_document(index)
    for readonly in (False, True):
        with SQLiteIndex(old, readonly=readonly) as index:
            assert index.embedder is instance("torch")
            assert index.get_meta("embedding_model") == "all-MiniLM-L6-v2"
    with pytest.raises(UsageError, match="JUDGE_RUNNER_EMBEDDER=torch"):
        open_index(Settings(db=old, embedder="onnx"), must_exist=True)
    with pytest.raises(UsageError, match="hash-384-v1"):
        open_index(Settings(db=old, embedder="hash"), must_exist=True)
    with open_index(Settings(db=old, embedder="torch"), must_exist=True) as index:
        assert index.embedder is instance("torch")


def test_indexing_into_a_read_only_index_file_is_a_clear_error(tmp_path, monkeypatch, hash_embedder):
    """An index file the process may not write (a read-only mount; root ignores file modes, so the check
    is os.access) is refused when opened for indexing, naming the file; searching it still works."""
    db = tmp_path / "index.sqlite"
    SQLiteIndex(db, embedder=hash_embedder).close()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: False if Path(path) == db and mode == os.W_OK else real_access(path, mode, **kw)
    )
    with pytest.raises(PermissionError, match=r"index\.sqlite is read-only"):
        SQLiteIndex(db)
    SQLiteIndex(db, readonly=True).close()
