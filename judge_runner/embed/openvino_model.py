"""The fp32 ONNX export of all-MiniLM-L6-v2 run by OpenVINO, in bfloat16 where it pays (:func:`choose_precision`),
and checked at load against an fp32 reference vector. Imports neither torch, scikit-learn, SciPy nor ONNX
Runtime. See docs/builtin-search.md, "Embedders"; OpenVINO documentation: "Inference precision", "CPU
device" (bf16 by default with Intel AMX), https://docs.openvino.ai/.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge_runner.embed.onnx_model import OnnxModelError, OnnxSession

REFERENCE_TEXT = "how do I drain a kubernetes node before maintenance"
"""The one short text the compiled model embeds at load."""
MIN_REFERENCE_COSINE = 0.999
"""Least cosine to the fp32 reference: bf16 reaches 0.99997, int8 0.991; a model that computes wrongly is
far below."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's flags from ``cpuinfo``; empty without the file, so bf16 is never chosen."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


BF16_GAIN = 1.15
"""Without AMX, bf16 must embed at least this many times as fast as f32 (a margin over timing noise)."""
TIMING_TEXTS = tuple(
    f"{topic}: the service restarts the worker, rebuilds the index and reports the latency of every query, "
    "so that the on-call engineer can compare the numbers before and after the maintenance window." * 2
    for topic in ("Redis failover", "Postgres upgrade", "Kubernetes drain", "TLS rotation")
)


def choose_precision(capabilities: Sequence[str], flags: frozenset[str], measure: Callable[[], dict[str, float]] | None = None) -> str:
    """``"f32"`` without ``BF16`` in ``capabilities``; ``"bf16"`` with ``amx_bf16`` in ``flags``; else
    ``"bf16"`` only when ``measure()`` (chunks/s by precision) finds it :data:`BF16_GAIN` times as fast."""
    if "BF16" not in capabilities:
        return "f32"
    if "amx_bf16" in flags:
        return "bf16"
    if measure is None:
        return "f32"
    speeds = measure()
    return "bf16" if speeds["bf16"] >= BF16_GAIN * speeds["f32"] else "f32"


def cpu_precision(core: Any = None, flags: frozenset[str] | None = None, measure: Callable[[], dict[str, float]] | None = None) -> str:
    """:func:`choose_precision` for this machine. Raises OnnxModelError when ``openvino`` is missing."""
    core = core or _core()
    return choose_precision(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"), cpu_flags() if flags is None else flags, measure)


def _machine(core: Any) -> dict[str, str]:
    """The CPU and OpenVINO version a measured precision holds for."""
    flags = " ".join(sorted(cpu_flags()))
    return {
        "cpu": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "openvino": str(_openvino_version()),
    }


def measured_speeds(model_path: Path, model_dir: Path, core: Any) -> dict[str, float]:
    """``{"f32": chunks/s, "bf16": chunks/s}`` on one thread, best of three rounds (about two seconds),
    cached beside the model per CPU and OpenVINO version."""
    cached, machine = model_path.with_suffix(".precision.json"), _machine(core)
    try:
        stored = json.loads(cached.read_text(encoding="utf-8"))
        if stored.get("machine") == machine:
            return {k: float(stored["speeds"][k]) for k in ("f32", "bf16")}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sessions = {p: OpenVinoSession(model_path, model_dir, threads=1, precision=p) for p in ("f32", "bf16")}
    best = {p: float("inf") for p in sessions}
    for session in sessions.values():
        session.encode(list(TIMING_TEXTS[:1]))  # warm up
    for _ in range(3):
        for precision, session in sessions.items():
            started = time.perf_counter()
            session.encode(list(TIMING_TEXTS), batch_size=len(TIMING_TEXTS))
            best[precision] = min(best[precision], time.perf_counter() - started)
    speeds = {p: round(len(TIMING_TEXTS) / seconds, 2) for p, seconds in best.items()}
    with contextlib.suppress(OSError):
        cached.write_text(json.dumps({"machine": machine, "speeds": speeds}, indent=1), encoding="utf-8")
    return speeds


def _openvino_version() -> str:
    try:
        import openvino
    except ImportError as exc:
        raise OnnxModelError(f"the OpenVINO embedder needs openvino: {exc}") from exc
    return str(openvino.__version__)


def _core() -> Any:
    try:
        import openvino
    except ImportError as exc:
        raise OnnxModelError(f"the OpenVINO embedder needs openvino: {exc}") from exc
    return openvino.Core()


class OpenVinoSession(OnnxSession):
    """An :class:`OnnxSession` whose graph OpenVINO compiles, one stream. ``reference``: the fp32 vector of
    :data:`REFERENCE_TEXT` checked at load (None: not checked). Raises OnnxModelError when the files cannot
    be read or compiled, ``openvino`` or ``tokenizers`` are missing, or the f32 model fails the check.
    """

    def __init__(
        self,
        model_path: Path,
        model_dir: Path,
        threads: int | None = None,
        precision: str | None = None,
        reference: np.ndarray | None = None,
        note: Callable[[str], None] | None = None,
    ):
        self.precision = precision
        self.model_dir = model_dir
        self.reference_cosine: float | None = None
        super().__init__(model_path, model_dir, threads)
        if reference is not None:
            self.check(model_path, threads, np.asarray(reference, dtype=np.float32), note or _stderr)

    def _open(self, model_path: Path, threads: int | None) -> None:
        core = _core()
        self.precision = self.precision or cpu_precision(core, measure=lambda: measured_speeds(model_path, self.model_dir, core))
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

    def _cosine(self, reference: np.ndarray) -> float:
        vector = self.encode([REFERENCE_TEXT])[0]
        norms = float(np.linalg.norm(vector) * np.linalg.norm(reference))
        return float(np.dot(vector, reference)) / norms if norms > 0 and np.isfinite(norms) else 0.0

    def check(self, model_path: Path, threads: int | None, reference: np.ndarray, note: Callable[[str], None]) -> None:
        """Below :data:`MIN_REFERENCE_COSINE` a bf16 model is compiled again in f32, saying so. Raises
        OnnxModelError when the f32 model fails too."""
        cosine = self._cosine(reference)
        if cosine >= MIN_REFERENCE_COSINE:
            self.reference_cosine = cosine
            return
        if self.precision == "bf16":
            note(
                f"note: OpenVINO's bf16 model of {model_path.name} disagrees with the fp32 reference (cosine {cosine:.5f} < "
                f"{MIN_REFERENCE_COSINE}); computing in f32 instead"
            )
            self.precision = "f32"
            self._open(model_path, threads)
            first, cosine = cosine, self._cosine(reference)
            if cosine >= MIN_REFERENCE_COSINE:
                self.reference_cosine = cosine
                return
            raise OnnxModelError(
                f"OpenVINO's model of {model_path} disagrees with the fp32 reference in bf16 and in f32 (cosines {first:.5f}, "
                f"{cosine:.5f} < {MIN_REFERENCE_COSINE}); use another embedder"
            )
        raise OnnxModelError(
            f"OpenVINO's f32 model of {model_path} disagrees with the fp32 reference (cosine {cosine:.5f} < {MIN_REFERENCE_COSINE}); "
            "use another embedder"
        )

    def _infer(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._request.infer(feed)[self._output])


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
