"""The exported all-MiniLM-L6-v2 ONNX graph run by OpenVINO instead of ONNX Runtime, in bfloat16 where
it pays, and checked against a reference vector when it is loaded.

:class:`OpenVinoSession` is :class:`~judge_runner.embed.onnx_model.OnnxSession` (the model's own
tokenizer, truncation, mean pooling and normalisation) with OpenVINO's CPU plugin running the graph: the
fp32 export of :mod:`judge_runner.embed.onnx_export` (OpenVINO's ONNX front end reads its fused
``com.microsoft`` operators), compiled with ``INFERENCE_PRECISION_HINT`` ``bf16`` or ``f32``.

**Precision** (:func:`choose_precision`): ``f32`` unless OpenVINO lists ``BF16`` in the CPU plugin's
``OPTIMIZATION_CAPABILITIES``; ``bf16`` when the kernel also lists ``amx_bf16`` among the CPU's flags
(``/proc/cpuinfo``: Intel AMX multiplies bfloat16 matrices in its tiles, and OpenVINO's CPU documentation,
"CPU Device", inference precision, makes bf16 the default on processors with AMX). ``BF16`` without AMX
means AVX512_BF16, which adds only dot-product and conversion instructions: it is reported to be slower
than f32 on some such CPUs (issue 29) and was 1.7 times as fast on this one (an AMD EPYC with
AVX512_BF16 and no AMX, OpenVINO 2026.4, 64 fixture chunks of 900 characters, machine loaded: f32 5.6
chunks/s on one thread and 4.3 on two, bf16 9.3 and 7.4), so there it is measured once
(:func:`measured_speeds`, about two seconds, cached beside the export for that CPU and OpenVINO version)
and bf16 is kept only when it is at least :data:`BF16_GAIN` times as fast. bfloat16 keeps fp32's exponent
with an 8-bit mantissa, and OpenVINO accumulates in fp32: on 300 SciFact chunks the vectors' cosine to
the torch model's is 0.99998 on average (least 0.99997; 0.999958 least on the 64 chunks above), against
0.997 for ONNX Runtime's int8 model.

**The check at load** (:meth:`OpenVinoSession.check`): the compiled model embeds :data:`REFERENCE_TEXT`
(one short text, a few milliseconds) and its vector must have a cosine of at least
:data:`MIN_REFERENCE_COSINE` with the fp32 export's vector of that text on ONNX Runtime
(:func:`judge_runner.embed.onnx_export.reference_vector`, cached beside the export; that export agrees with
the torch model to 2e-7 per component). A bf16 model that fails it is compiled again in f32, with a note;
an f32 model that fails it is an OnnxModelError naming both cosines.

Imports ``openvino``, ``numpy`` and ``tokenizers``: never torch, scikit-learn or SciPy, nor ONNX
Runtime (which only exports the graph and computes the reference vector, once).

OpenVINO documentation: "Inference precision" (``ov::hint::inference_precision``), "CPU device"
(bf16 by default on processors with Intel AMX) and ``ov::device::capabilities``, https://docs.openvino.ai/.
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
"""The one short text the compiled model embeds at load (one of the export's probes)."""
MIN_REFERENCE_COSINE = 0.999
"""Least cosine between the compiled model's vector of :data:`REFERENCE_TEXT` and the fp32 reference: bf16
reaches 0.99997 or more (300 SciFact chunks), ONNX Runtime's int8 model 0.991 or more; a model that
computes wrongly (a broken kernel, a precision the CPU emulates badly) is far below."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as the Linux kernel lists them (the first ``flags`` line of ``cpuinfo``);
    empty where there is no such file (another system), so that bf16 is then never chosen."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


BF16_GAIN = 1.15
"""Where the CPU has BF16 but no AMX, bf16 is chosen only when it embeds at least this many times as fast as
f32 (a margin over the timing noise of a shared machine)."""
TIMING_TEXTS = tuple(
    f"{topic}: the service restarts the worker, rebuilds the index and reports the latency of every query, "
    "so that the on-call engineer can compare the numbers before and after the maintenance window." * 2
    for topic in ("Redis failover", "Postgres upgrade", "Kubernetes drain", "TLS rotation")
)
"""The texts a measurement embeds (four chunks of about a hundred tokens)."""


def choose_precision(capabilities: Sequence[str], flags: frozenset[str], measure: Callable[[], dict[str, float]] | None = None) -> str:
    """The precision to compile in: ``"f32"`` when OpenVINO's CPU ``capabilities`` (``OPTIMIZATION_CAPABILITIES``)
    lack ``BF16``; ``"bf16"`` when the CPU ``flags`` hold ``amx_bf16`` (Intel AMX, where OpenVINO itself
    defaults to bf16); else (BF16 through AVX512_BF16 alone, which pays on some CPUs and not on others)
    ``"bf16"`` only when ``measure()`` (``{"f32": chunks/s, "bf16": chunks/s}``) finds it at least
    :data:`BF16_GAIN` times as fast, and ``"f32"`` without a measurement."""
    if "BF16" not in capabilities:
        return "f32"
    if "amx_bf16" in flags:
        return "bf16"
    if measure is None:
        return "f32"
    speeds = measure()
    return "bf16" if speeds["bf16"] >= BF16_GAIN * speeds["f32"] else "f32"


def cpu_precision(core: Any = None, flags: frozenset[str] | None = None, measure: Callable[[], dict[str, float]] | None = None) -> str:
    """:func:`choose_precision` for this machine: the capabilities of ``core`` (an ``openvino.Core``; default:
    a new one), ``flags`` (default: :func:`cpu_flags`) and ``measure``. Raises OnnxModelError when
    ``openvino`` is missing."""
    core = core or _core()
    return choose_precision(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"), cpu_flags() if flags is None else flags, measure)


def _machine(core: Any) -> dict[str, str]:
    """What a measured precision holds for: the CPU's name and flags (a digest) and OpenVINO's version."""
    flags = " ".join(sorted(cpu_flags()))
    return {
        "cpu": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "openvino": str(_openvino_version()),
    }


def measured_speeds(model_path: Path, model_dir: Path, core: Any) -> dict[str, float]:
    """``{"f32": chunks/s, "bf16": chunks/s}`` of the model at ``model_path`` on one thread, each the best of
    three alternating rounds over :data:`TIMING_TEXTS` (about two seconds); cached beside the model in
    ``<name>.precision.json`` for this CPU and OpenVINO version (:func:`_machine`), so measured once."""
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
    """One OpenVINO compiled model over ``model_path`` (an ONNX graph) with the tokenizer and pooling of
    ``model_dir``: ``encode(texts, batch_size) -> np.ndarray`` of shape ``(len(texts), dimension)``,
    float32, as :class:`OnnxSession`.

    ``threads``: OpenVINO's ``INFERENCE_NUM_THREADS`` (None: its default, one per core); one stream
    (``PERFORMANCE_HINT`` ``LATENCY``), so a batch's result does not depend on what else runs.
    ``precision``: ``bf16`` or ``f32`` (default: :func:`cpu_precision`). ``reference``: the fp32 vector of
    :data:`REFERENCE_TEXT`, shape ``(dimension,)``, checked at load (:meth:`check`; None: not checked);
    ``note(message)`` hears of a fallback to f32 (default: a line on stderr). ``reference_cosine``: the
    check's cosine. Raises OnnxModelError when the files cannot be read or compiled, ``openvino`` or
    ``tokenizers`` are missing, or the f32 model fails the check.
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
        """Embed :data:`REFERENCE_TEXT` and compare it with ``reference`` (see the module docstring): below
        :data:`MIN_REFERENCE_COSINE` a bf16 model is compiled again in f32 (``note`` says so) and checked
        again. Sets ``reference_cosine``. Raises OnnxModelError when the f32 model fails too."""
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
