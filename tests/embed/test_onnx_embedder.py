"""The ONNX Runtime embedder: the same model's vectors without torch, exported once
into a cache outside the repository, recorded in the index it builds, refused by another embedder, each
query embedded alone; a cold hybrid search with it imports neither torch, scikit-learn nor SciPy."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3

import numpy as np
import pytest

from judge_runner.embed import onnx_export, openvino_model, registry
from judge_runner.embed.base import EmbeddingModelError, encode_each
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.embed.minilm import MiniLMEmbedder, OnnxMiniLMEmbedder, OpenVinoMiniLMEmbedder
from judge_runner.embed.onnx_model import OnnxModelError
from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV
from judge_runner.embed.registry import instance
from judge_runner.search.base import IndexMismatchError
from judge_runner.search.indexer import index_tree
from judge_runner.search.sqlite import SQLiteIndex
from tests.support.search_checks import holds_a_document, imported_after

TEXTS = [
    "A man is eating food.",
    "how do I drain a kubernetes node before maintenance",
    "索引の再構築",
    "Vitamin D deficiency and multiple sclerosis. " * 60,  # past 256 tokens: truncated as sentence-transformers does
    "",
]
DOCS = {
    "runbooks/drain-node.md": "# Draining a node\n\nCordon the node, then drain it with kubectl drain before maintenance.\n",
    "runbooks/postgres-credentials.md": "# Rotating credentials\n\nRotate the postgres password every quarter with vault.\n",
    "decisions/dec-0054.md": "# DEC-0054 real-time indexing\n\nWe index documents as they change instead of nightly.\n",
}


@pytest.fixture
def cached(onnx_cache, monkeypatch):
    monkeypatch.setenv(onnx_export.CACHE_ENV, str(onnx_cache))
    return onnx_cache


def test_kinds_and_the_former_name():
    assert registry.choose(None).kind == registry.DEFAULT_KIND
    assert registry.normalize_kind("minilm") == "torch"
    assert registry.normalize_kind(" ONNX-int8 ") == "onnx-int8"
    with pytest.raises(EmbeddingModelError, match="torch, onnx, onnx-int8, openvino, hash"):
        registry.get_spec("onnx-int4")
    names = {
        MiniLMEmbedder().name,
        OnnxMiniLMEmbedder("fp32").name,
        OnnxMiniLMEmbedder("int8").name,
        OpenVinoMiniLMEmbedder().name,
        HashEmbedder().name,
    }
    assert len(names) == 5, "each embedder records its own model name, so none reads another's index"


def test_cache_folder_is_outside_the_repository_and_overridable(tmp_path):
    assert onnx_export.cache_root({onnx_export.CACHE_ENV: str(tmp_path)}) == tmp_path
    assert onnx_export.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "judge-runner"
    assert str(onnx_export.cache_root({})).endswith(".cache/judge-runner")


@pytest.mark.parametrize(
    ("built_by", "opened_by", "advice"),
    [
        (MiniLMEmbedder, lambda: OnnxMiniLMEmbedder("int8"), "JUDGE_RUNNER_EMBEDDER=torch"),
        (lambda: OnnxMiniLMEmbedder("int8"), MiniLMEmbedder, "JUDGE_RUNNER_EMBEDDER=onnx-int8"),
        (lambda: OnnxMiniLMEmbedder("fp32"), lambda: OnnxMiniLMEmbedder("int8"), "--embedder onnx (or JUDGE_RUNNER_EMBEDDER=onnx),"),
        (HashEmbedder, lambda: OnnxMiniLMEmbedder("fp32"), "JUDGE_RUNNER_EMBEDDER=hash"),
        (OpenVinoMiniLMEmbedder, lambda: OnnxMiniLMEmbedder("int8"), "JUDGE_RUNNER_EMBEDDER=openvino"),
        (lambda: OnnxMiniLMEmbedder("fp32"), OpenVinoMiniLMEmbedder, "--embedder onnx (or JUDGE_RUNNER_EMBEDDER=onnx),"),
    ],
)
def test_an_index_refuses_another_embedder_and_says_how_to_read_or_rebuild_it(tmp_path, built_by, opened_by, advice):
    """Opening checks the recorded model name only: no model is loaded or exported."""
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db, embedder=built_by()) as index:
        holds_a_document(index)  # an index that never got one is taken over instead
    with pytest.raises(IndexMismatchError) as caught:
        SQLiteIndex(db, embedder=opened_by())
    message = str(caught.value)
    assert advice in message and "run `judge-runner index` again" in message, message
    SQLiteIndex(db, embedder=built_by()).close()  # its own embedder still reads it


def test_the_onnx_vectors_are_the_torch_vectors(cached, embedder):
    """fp32 through ONNX Runtime: the torch model's vectors to float noise, truncation and all; int8 close;
    the export lands in the cache (outside the repository) with its record."""
    fp32, int8 = OnnxMiniLMEmbedder("fp32"), OnnxMiniLMEmbedder("int8")
    want = encode_each(embedder, TEXTS)
    got = encode_each(fp32, TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert ((encode_each(int8, TEXTS) * want).sum(axis=1) > 0.98).all()
    folder = onnx_export.export_dir()
    assert folder.is_relative_to(cached)
    for quantization in ("fp32", "int8"):
        record = json.loads((folder / f"model-{quantization}.json").read_text())
        assert record["quantization"] == quantization and len(record["sha256"]) == 64
    assert int8.describe()["sha256"] == json.loads((folder / "model-int8.json").read_text())["sha256"]


def test_the_openvino_vectors_are_the_torch_vectors_and_a_lone_text_is_embedded_alike(cached, embedder):
    """OpenVINO runs the fp32 export, in bf16 on a CPU that has it: cosine to the torch model's vectors at
    least 0.9999 per text (0.99998 on SciFact chunks; int8 ONNX Runtime is 0.997), rows normalised, in
    the order given whatever the batch; a lone text gives the same vector whatever was embedded before
    it, and the index records the backend and the precision."""
    openvino = OpenVinoMiniLMEmbedder()
    want = encode_each(embedder, TEXTS)
    got = encode_each(openvino, TEXTS)
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert ((got * want).sum(axis=1) > 0.9999).all(), (got * want).sum(axis=1)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    batched = openvino.encode(list(TEXTS) * 40)  # a large input: the session of one thread per core
    assert ((batched[: len(TEXTS)] * want).sum(axis=1) > 0.9999).all()
    assert np.array_equal(encode_each(openvino, TEXTS[:1]), got[:1])
    described = openvino.describe()
    assert described["backend"] == "openvino" and described["precision"] in ("bf16", "f32") and len(described["sha256"]) == 64


def test_the_int8_model_keeps_the_first_feed_forward_output_projections_in_fp32(cached):
    """The recipe as recorded and as the graph holds it: the three projections named in the record stay
    fp32 MatMuls with float weights; every other weight matrix is quantized."""
    import onnx

    path, record = onnx_export.exported_model("int8")
    assert record["method"] == onnx_export.INT8_METHOD
    assert record["keptFloat"] == [f"/bert/encoder/layer.{i}/output/dense/MatMul" for i in range(3)]
    graph = onnx.load(str(path)).graph
    float_matmuls = sorted(n.name for n in graph.node if n.op_type == "MatMul" and "/dense/" in n.name)
    assert float_matmuls == record["keptFloat"]
    quantized = [n for n in graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul", "QAttention")]
    assert len(quantized) >= 15  # 12 other dense layers and the 6 attention blocks, in whatever fused form


def test_a_cached_int8_model_of_another_recipe_is_exported_again(cached):
    """A cache written by an earlier recipe (every matrix int8) is not reused: the index would record
    the same kind for other vectors."""
    path, record = onnx_export.exported_model("int8")
    record_path = path.with_suffix(".json")
    stale = dict(record, method="fused (onnxruntime.transformers.optimizer), dynamic int8 per-channel weights (onnxruntime.quantization)")
    record_path.write_text(json.dumps(stale), encoding="utf-8")
    notes: list[str] = []
    again, fresh = onnx_export.exported_model("int8", notes.append)
    assert again == path and fresh["method"] == onnx_export.INT8_METHOD
    assert any("exporting all-MiniLM-L6-v2 to ONNX (int8)" in n for n in notes)
    assert json.loads(record_path.read_text(encoding="utf-8"))["method"] == onnx_export.INT8_METHOD


def test_a_lone_text_is_embedded_alike_whatever_came_before(cached):
    """Lone texts run on their own one-thread session: the same bits before and after large batches."""
    embedder = OnnxMiniLMEmbedder("int8")
    before = encode_each(embedder, TEXTS[:3])
    embedder.encode([TEXTS[3]] * 40 + TEXTS)  # a large input: the other session, several padded batches
    assert np.array_equal(encode_each(embedder, TEXTS[:3]), before)
    assert np.array_equal(encode_each(embedder, TEXTS[2::-1]), before[::-1])


@pytest.fixture
def onnx_index(cached, tmp_path):
    """A small knowledge base indexed with the int8 ONNX embedder."""
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db, embedder=instance("onnx-int8")) as index:
        index_tree(index, small_kb(tmp_path))
        recorded = json.loads(index.get_meta("embedder") or "{}")
    assert recorded["kind"] == "onnx-int8" and recorded["quantization"] == "int8" and recorded["sha256"]
    return db


def small_kb(tmp_path):
    """:data:`DOCS` written under ``tmp_path/kb``; returns the folder."""
    kb = tmp_path / "kb"
    for source, text in DOCS.items():
        (kb / source).parent.mkdir(parents=True, exist_ok=True)
        (kb / source).write_text(text, encoding="utf-8")
    return kb


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_prepared_onnx_search_gives_the_unprepared_results(onnx_index, mode):
    queries = ["drain a node before maintenance", "rotate the postgres password", "DEC-0054", "what is the capital of Australia"]
    with SQLiteIndex(onnx_index, embedder=instance("onnx-int8"), readonly=True) as index:
        lone = [index.search(q, mode=mode).model_dump(exclude={"latencyMs"}) for q in queries]
        assert lone[0]["results"][0]["source"] == "runbooks/drain-node.md"
        index.prepare_queries(queries[::-1], mode)
        assert [index.search(q, mode=mode).model_dump(exclude={"latencyMs"}) for q in queries] == lone
        index.forget_queries()


def test_a_cold_hybrid_search_with_onnx_imports_no_torch_sklearn_nor_scipy(onnx_index, cached):
    seen = imported_after(
        ["search", "drain a node before maintenance", "--mode", "hybrid", "--db", str(onnx_index), "--json"],
        {EMBEDDER_ENV: "onnx-int8", onnx_export.CACHE_ENV: str(cached)},
    )
    assert seen["code"] in (0, None), seen
    assert not any(seen[m] for m in ("torch", "sentence_transformers", "transformers", "scipy", "sklearn")), seen


def test_the_default_indexes_with_openvino_and_searches_cold_without_torch_sklearn_nor_scipy(cached, tmp_path):
    """With JUDGE_RUNNER_EMBEDDER unset (and the export cached): `index` builds with openvino and records
    it, and a cold hybrid search of that index loads neither torch, scikit-learn nor SciPy."""
    onnx_export.exported_model("fp32")  # exported first (that needs torch), as a first run does once
    db = tmp_path / "default.sqlite"
    unset = {EMBEDDER_ENV: "", onnx_export.CACHE_ENV: str(cached)}
    heavy = ("torch", "sentence_transformers", "transformers", "scipy", "sklearn")
    seen = imported_after(["index", str(small_kb(tmp_path)), "--db", str(db), "--json"], unset)
    assert seen["code"] in (0, None) and not any(seen[m] for m in heavy), seen
    with contextlib.closing(sqlite3.connect(db)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["embedding_model"] == "all-MiniLM-L6-v2+openvino" and json.loads(meta["embedder"])["backend"] == "openvino"
    seen = imported_after(["search", "drain a node before maintenance", "--mode", "hybrid", "--db", str(db), "--json"], unset)
    assert seen["code"] in (0, None) and not any(seen[m] for m in heavy), seen


def test_an_index_built_by_torch_is_searched_with_torch_without_a_setting(fixtures_index, tmp_path):
    """The session index was built by the torch embedder (the former default): a hybrid search
    of it from the shell, with JUDGE_RUNNER_EMBEDDER unset, embeds its query with torch and succeeds."""
    import sqlite3

    index, _ = fixtures_index
    db = tmp_path / "torch.sqlite"
    copy = sqlite3.connect(db)
    index.conn.backup(copy)
    copy.close()
    seen = imported_after(["search", "drain a kubernetes node", "--mode", "hybrid", "--db", str(db), "--json"], {EMBEDDER_ENV: ""})
    assert seen["code"] in (0, None) and seen["torch"], seen


def test_the_torch_embedder_is_refused_on_an_onnx_index_from_the_shell(onnx_index, cached):
    seen = imported_after(["search", "drain", "--mode", "fts", "--db", str(onnx_index)], {EMBEDDER_ENV: "torch"})
    assert seen["code"] in (2, "UsageError"), seen  # refused as a usage error (exit code 2), before any model loads
    assert not seen["torch"], seen


def test_a_damaged_cached_export_is_exported_again_saying_so(cached, tmp_path, monkeypatch):
    """A cached graph is used only while it is the one its record describes. A copy of the cache (sizes
    and times kept) is used as is; a record of an older judge-runner (no size or time) is checked by
    sha256 once and stamped; bytes overwritten inside the weights (same size: the graph still parses and
    would give wrong vectors) fail the check, and the graph is exported again, saying so."""
    import shutil
    import subprocess
    import sys

    onnx_export.exported_model("fp32")
    copy = tmp_path / "cache"
    shutil.copytree(cached, copy)
    monkeypatch.setenv(onnx_export.CACHE_ENV, str(copy))
    notes: list[str] = []
    path, record = onnx_export.exported_model("fp32", notes.append)
    assert path.is_relative_to(copy) and notes == []
    record_path = path.with_suffix(".json")
    old = {k: v for k, v in json.loads(record_path.read_text()).items() if k not in ("bytes", "mtimeNs")}
    record_path.write_text(json.dumps(old))
    onnx_export.exported_model("fp32", notes.append)
    assert notes == [] and json.loads(record_path.read_text())["bytes"] == path.stat().st_size  # checked by sha256, stamped
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(b"X" * 40_000)
    repaired, _ = onnx_export.exported_model("fp32", notes.append)
    assert "is not the one exported" in notes[0] and "exporting all-MiniLM-L6-v2" in notes[1], notes
    assert onnx_export.intact(repaired, json.loads(record_path.read_text()))
    vectors = OpenVinoMiniLMEmbedder().encode(["drain a node before maintenance"])
    assert vectors.shape == (1, 384) and abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5

    # a cache folder that cannot be written: exit 2 (the user's setup, not a bug), saying what to set
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    done = subprocess.run(
        [sys.executable, "-m", "judge_runner.cli", "index", str(small_kb(tmp_path)), "--db", str(tmp_path / "x.sqlite")],
        capture_output=True,
        text=True,
        env={**os.environ, onnx_export.CACHE_ENV: str(blocked), EMBEDDER_ENV: "", "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "set JUDGE_RUNNER_CACHE_DIR to a folder you can write" in done.stderr and "internal error" not in done.stderr


# -- OpenVINO: the compiled model checked at load against an fp32 reference -------------------
def openvino_session(**kwargs):
    path, record = onnx_export.exported_model("fp32")
    reference = onnx_export.reference_vector(path, record, openvino_model.REFERENCE_TEXT)
    return openvino_model.OpenVinoSession(path, onnx_export.source_dir(), threads=1, reference=reference, **kwargs), reference


def broken_in(precisions, monkeypatch):
    """Make the compiled model's output garbage (a broken kernel) whenever it computes in one of ``precisions``."""
    real = openvino_model.OpenVinoSession._infer

    def infer(self, feed):
        out = real(self, feed)
        return np.random.default_rng(0).standard_normal(out.shape).astype(np.float32) if self.precision in precisions else out

    monkeypatch.setattr(openvino_model.OpenVinoSession, "_infer", infer)


def test_the_reference_vector_is_the_fp32_exports_and_is_computed_once_per_export(cached, embedder, monkeypatch):
    path, record = onnx_export.exported_model("fp32")
    vector = onnx_export.reference_vector(path, record, openvino_model.REFERENCE_TEXT)
    assert vector.shape == (384,) and float(np.dot(vector, embedder.encode([openvino_model.REFERENCE_TEXT])[0])) > 0.9999
    assert path.with_suffix(".reference.json").is_file()
    monkeypatch.setattr(onnx_export, "OnnxSession", None)  # read from beside the export, never computed again
    assert np.array_equal(onnx_export.reference_vector(path, record, openvino_model.REFERENCE_TEXT), vector)
    with pytest.raises(TypeError):  # another export (another sha256): computed again
        onnx_export.reference_vector(path, {**record, "sha256": "0" * 64}, openvino_model.REFERENCE_TEXT)


@pytest.mark.parametrize("precision", ["bf16", "f32"])
def test_a_compiled_model_that_agrees_with_the_reference_is_kept_in_its_precision(cached, precision):
    session, _ = openvino_session(precision=precision)
    assert session.precision == precision and session.reference_cosine >= openvino_model.MIN_REFERENCE_COSINE


def test_a_bad_bf16_output_falls_back_to_f32_saying_so(cached, monkeypatch):
    broken_in({"bf16"}, monkeypatch)
    notes: list[str] = []
    session, reference = openvino_session(precision="bf16", note=notes.append)
    assert session.precision == "f32" and session.reference_cosine >= openvino_model.MIN_REFERENCE_COSINE
    [note] = notes
    assert "bf16 model" in note and "disagrees with the fp32 reference" in note and "computing in f32 instead" in note
    assert float(np.dot(session.encode([openvino_model.REFERENCE_TEXT])[0], reference)) > 0.9999


def test_a_bad_f32_output_is_a_clear_embedding_model_error(cached, monkeypatch):
    broken_in({"bf16", "f32"}, monkeypatch)
    with pytest.raises(OnnxModelError, match=r"disagrees with the fp32 reference in bf16 and in f32 \(cosines"):
        openvino_session(precision="bf16", note=lambda message: None)
    with pytest.raises(OnnxModelError, match="f32 model of .* disagrees with the fp32 reference"):
        openvino_session(precision="f32")
    monkeypatch.setattr(openvino_model, "cpu_precision", lambda *args, **kwargs: "f32")
    with pytest.raises(EmbeddingModelError, match="cannot load the openvino embedding model: OpenVINO's f32 model"):
        OpenVinoMiniLMEmbedder().encode(["a query"])


def test_the_cpu_decides_the_precision_and_a_measurement_is_made_once(cached, monkeypatch):
    monkeypatch.setattr(openvino_model, "cpu_flags", lambda *args: frozenset({"avx512_bf16", "amx_bf16"}))
    listed = "BF16" in openvino_model._core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    assert openvino_session()[0].precision == ("bf16" if listed else "f32")  # AMX: bf16 where OpenVINO computes it
    if not listed:
        return  # no BF16 here: nothing to measure
    monkeypatch.setattr(openvino_model, "cpu_flags", lambda *args: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(openvino_model, "_machine", lambda core: {"cpu": "simulated", "flags": "x", "openvino": "y"})
    session, _ = openvino_session()
    path, _ = onnx_export.exported_model("fp32")
    stored = json.loads(path.with_suffix(".precision.json").read_text())
    speeds = stored["speeds"]
    assert stored["machine"]["cpu"] == "simulated" and speeds["f32"] > 0 and speeds["bf16"] > 0
    expected = "bf16" if speeds["bf16"] >= openvino_model.BF16_GAIN * speeds["f32"] else "f32"
    assert session.precision == expected
    monkeypatch.setattr(openvino_model, "OpenVinoSession", None)  # measured once: read back, never timed again
    assert openvino_model.measured_speeds(path, onnx_export.source_dir(), object()) == speeds
