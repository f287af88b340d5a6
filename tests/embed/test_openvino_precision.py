"""OpenVINO's precision, chosen where bf16 pays (no model needed: the CPU is injected).

bf16 on a CPU with AMX; f32 on one without BF16; on AVX512_BF16 without AMX, bf16 only when a measurement
finds it at least ``BF16_GAIN`` times as fast (it was 1.7 times as fast on an AMD EPYC, and slower than
f32 on the CPU it was reported from). The model-backed half (the check against a reference vector at
load, a bad compiled output) is in tests/embed/test_onnx_embedder.py.
"""

from __future__ import annotations

import pytest

from judge_runner.embed import openvino_model
from judge_runner.embed.openvino_model import BF16_GAIN, choose_precision, cpu_flags, cpu_precision

SAPPHIRE_RAPIDS = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"})
ZEN4 = frozenset({"avx512f", "avx512_bf16", "avx512_vnni"})
SKYLAKE = frozenset({"avx512f", "avx2"})
WITH_BF16 = ["BF16", "WINOGRAD", "FP32", "INT8", "BIN", "EXPORT_IMPORT"]
WITHOUT_BF16 = ["WINOGRAD", "FP32", "INT8", "BIN", "EXPORT_IMPORT"]


class Measure:
    """A measurement that returns ``speeds`` and counts its calls."""

    def __init__(self, f32: float, bf16: float):
        self.speeds, self.calls = {"f32": f32, "bf16": bf16}, 0

    def __call__(self) -> dict[str, float]:
        self.calls += 1
        return self.speeds


def test_amx_is_bf16_without_measuring_and_no_bf16_is_f32():
    measure = Measure(f32=10.0, bf16=1.0)
    assert choose_precision(WITH_BF16, SAPPHIRE_RAPIDS, measure) == "bf16"
    assert choose_precision(WITHOUT_BF16, SKYLAKE, measure) == "f32"
    assert choose_precision(WITHOUT_BF16, SAPPHIRE_RAPIDS, measure) == "f32"  # OpenVINO cannot use it
    assert measure.calls == 0


@pytest.mark.parametrize(
    ("f32", "bf16", "expected"),
    [(5.6, 9.3, "bf16"), (10.0, 8.0, "f32"), (10.0, 10.0, "f32"), (10.0, 10.0 * BF16_GAIN, "bf16"), (10.0, 11.0, "f32")],
)
def test_avx512_bf16_without_amx_is_bf16_only_where_it_was_measured_to_pay(f32, bf16, expected):
    measure = Measure(f32=f32, bf16=bf16)
    assert choose_precision(WITH_BF16, ZEN4, measure) == expected and measure.calls == 1
    assert choose_precision(WITH_BF16, ZEN4) == "f32"  # nothing measured: the safe choice


def test_cpu_flags_come_from_the_first_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx512_bf16 amx_bf16\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert cpu_flags(cpuinfo) == frozenset({"fpu", "avx512_bf16", "amx_bf16"})
    assert cpu_flags(tmp_path / "missing") == frozenset()  # another system: bf16 is then never chosen by flags


class FakeCore:
    def __init__(self, capabilities):
        self.capabilities = capabilities

    def get_property(self, device, name):
        assert (device, name) == ("CPU", "OPTIMIZATION_CAPABILITIES")
        return self.capabilities


def test_cpu_precision_reads_the_plugin_and_the_flags(monkeypatch):
    assert cpu_precision(FakeCore(WITH_BF16), flags=SAPPHIRE_RAPIDS) == "bf16"
    assert cpu_precision(FakeCore(WITH_BF16), flags=ZEN4, measure=Measure(f32=10.0, bf16=5.0)) == "f32"
    monkeypatch.setattr(openvino_model, "cpu_flags", lambda: SAPPHIRE_RAPIDS)
    assert cpu_precision(FakeCore(WITH_BF16)) == "bf16"
