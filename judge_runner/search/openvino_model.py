"""The exported all-MiniLM-L6-v2 ONNX graph run by OpenVINO instead of ONNX Runtime, in bfloat16 where
the CPU computes it natively.

:class:`OpenVinoSession` is :class:`~judge_runner.search.onnx_model.OnnxSession` (the model's own
tokenizer, truncation, mean pooling and normalisation) with OpenVINO's CPU plugin running the graph: the
fp32 export of :mod:`judge_runner.search.onnx_export` (OpenVINO's ONNX front end reads its fused
``com.microsoft`` operators), compiled with ``INFERENCE_PRECISION_HINT`` ``bf16`` when the CPU lists
``BF16`` among its optimisation capabilities (AVX512_BF16 or AMX), else ``f32``. bfloat16 keeps fp32's
exponent with an 8-bit mantissa, and OpenVINO accumulates in fp32: on 300 SciFact chunks the vectors'
cosine to the torch model's is 0.99998 on average (least 0.99997), against 0.997 for ONNX Runtime's int8
model. Imports ``openvino``, ``numpy`` and ``tokenizers``: never torch, scikit-learn or SciPy, nor ONNX
Runtime (which only exports the graph, once).

OpenVINO documentation: "Inference precision" (``ov::hint::inference_precision``) and "CPU device"
(bf16 on processors with AVX512_BF16/AMX), https://docs.openvino.ai/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from judge_runner.search.onnx_model import OnnxModelError, OnnxSession


def cpu_precision(core: Any = None) -> str:
    """``"bf16"`` when OpenVINO's CPU plugin (of ``core``, an ``openvino.Core``; default: a new one) reports
    ``BF16`` in ``OPTIMIZATION_CAPABILITIES``, else ``"f32"``. Raises OnnxModelError when ``openvino`` is
    missing."""
    core = core or _core()
    return "bf16" if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"


def _core() -> Any:
    try:
        import openvino
    except ImportError as exc:
        raise OnnxModelError(f"the OpenVINO embedder needs openvino: {exc}") from exc
    return openvino.Core()


class OpenVinoSession(OnnxSession):
    """One OpenVINO compiled model over ``model_path`` (an ONNX graph) with the tokenizer and pooling of
    ``model_dir``: ``encode(texts, batch_size) -> np.ndarray`` of shape ``(len(texts), dimension)``,
    float32, as :class:`OnnxSession`.

    ``threads``: OpenVINO's ``INFERENCE_NUM_THREADS`` (None: its default, one per core); one stream
    (``PERFORMANCE_HINT`` ``LATENCY``), so a batch's result does not depend on what else runs.
    ``precision``: ``bf16`` or ``f32`` (default: :func:`cpu_precision`). Raises OnnxModelError when the
    files cannot be read or compiled, or ``openvino``/``tokenizers`` are missing.
    """

    def __init__(self, model_path: Path, model_dir: Path, threads: int | None = None, precision: str | None = None):
        self.precision = precision
        super().__init__(model_path, model_dir, threads)

    def _open(self, model_path: Path, threads: int | None) -> None:
        core = _core()
        self.precision = self.precision or cpu_precision(core)
        properties: dict[str, object] = {"INFERENCE_PRECISION_HINT": self.precision, "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            properties["INFERENCE_NUM_THREADS"] = threads
        try:
            compiled = core.compile_model(core.read_model(str(model_path)), "CPU", properties)
        except Exception as exc:  # OpenVINO raises RuntimeError subclasses of its own for an unreadable graph
            raise OnnxModelError(f"cannot compile the ONNX model {model_path} with OpenVINO: {exc}") from exc
        self.inputs = {port.get_any_name() for port in compiled.inputs}
        self._output = compiled.outputs[0]
        self._request = compiled.create_infer_request()

    def _infer(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._request.infer(feed)[self._output])
