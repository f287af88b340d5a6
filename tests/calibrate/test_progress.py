"""``calibrate`` a person can wait for: it says what it will index and about how long,
that the index is kept and that --queries-sample does not shrink it, names --corpus-scope candidates, and
prints a progress line with a rate and an ETA at least every interval while indexing and labelling, even
when one step (a batch of chunks, a judge call) takes longer than that."""

from __future__ import annotations

import io
import re
import time

import pytest

from judge_runner.app.calibrate_job import CalibrateRequest, Source, calibrate_job
from judge_runner.calibrate.labeling import LabelResult
from judge_runner.calibrate.run import CalibrationConfig
from judge_runner.config import load_settings
from judge_runner.core.printer import Printer
from judge_runner.embed import registry
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.search import progress as progress_mod
from judge_runner.search.progress import IndexProgress
from tests.support.calibration_data import write_collection

pytestmark = pytest.mark.hash_embedder
INTERVAL = 0.3


class TimedStream(io.StringIO):
    """stderr that remembers when each line was written."""

    def __init__(self):
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, text):
        for line in text.splitlines():
            if line.strip():
                self.lines.append((time.monotonic(), line))
        return super().write(text)

    def isatty(self):
        return False


class SlowEmbedder(HashEmbedder):
    """The hashing embedder at ``seconds`` per text: one batch of the synthetic corpus takes seconds."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def encode(self, texts, batch_size=32):
        time.sleep(self.seconds * len(texts))
        return super().encode(texts, batch_size)


class SlowLabeler:
    """A labeller taking ``seconds`` per document (label 1 for every document)."""

    name, model, heuristic, deterministic = "slow", "slow-1", False, False

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, query, docs, mode, trial):
        time.sleep(self.seconds * len(docs))
        return [LabelResult(1, reason="slow") for _ in docs]


def gaps(lines: list[tuple[float, str]], pattern: str) -> list[float]:
    """Seconds between successive lines matching ``pattern``."""
    times = [t for t, line in lines if re.search(pattern, line)]
    return [b - a for a, b in zip(times, times[1:])]


def test_calibrate_says_what_it_indexes_and_shows_progress_while_indexing_and_labelling(tmp_path, monkeypatch):
    monkeypatch.setenv(progress_mod.INTERVAL_ENV, str(INTERVAL))
    stream = TimedStream()
    monkeypatch.setattr("sys.stderr", stream)
    data = write_collection(tmp_path / "beir")
    said: list[tuple[float, str]] = []
    printer = Printer(out=lambda m: None, err=lambda m: (said.append((time.monotonic(), m)), stream.write(m + "\n")))
    config = CalibrationConfig(probes=(), resamples=20)
    # the process's hash embedder is a slow one here: 72 documents in one batch, about 2 s in one encode call
    monkeypatch.setitem(registry._instances, "hash", SlowEmbedder(0.03))
    calibrate_job(
        load_settings({"embedder": "hash"}),
        CalibrateRequest(
            source=Source(beir=data),
            config=config,
            systems=("fts", "vector", "hybrid"),
            db=tmp_path / "idx.sqlite",
            out=tmp_path / "calibration.json",
        ),
        printer,
        labeler=SlowLabeler(0.01),
    )
    text = "\n".join(line for _, line in stream.lines)
    plan = next(line for _, line in stream.lines if line.startswith("indexing the full corpus"))
    assert "72 documents" in plan and "kept" in plan and "--queries-sample" in plan and "does not shrink" in plan, plan
    assert "--corpus-scope candidates" in plan, plan
    assert re.search(r"embedding 72 chunks with the hash embedder: about \d+s", text), text
    embedding = [line for _, line in stream.lines if re.match(r"\s*embedding \d+/72 chunks", line)]
    assert len(embedding) >= 3, "the heartbeat repeats the line while the one slow batch is embedded"
    assert re.search(r"embedding 72/72 chunks \(100%\), [\d.]+ chunks/s, took", text), text
    assert max(gaps(stream.lines, r"^\s*embedding \d")) < INTERVAL + 0.8
    labelling = [line for _, line in stream.lines if re.match(r"\s*labelling pointwise \d+/\d+ labels", line)]
    assert len(labelling) >= 3 and any("labels/s, ETA" in line for line in labelling), labelling
    assert max(gaps(stream.lines, r"^\s*labelling pointwise")) < INTERVAL + 0.8
    assert re.search(r"searching \d+/\d+ searches", text) and re.search(r"statistics \d+ resamples", text), text

    # the second calibration of the same corpus embeds nothing, and says so
    stream.lines.clear()
    calibrate_job(
        load_settings({"embedder": "hash"}),
        CalibrateRequest(
            source=Source(beir=data),
            config=config,
            sample=4,
            systems=("fts", "hybrid"),
            db=tmp_path / "idx.sqlite",
            out=tmp_path / "calibration2.json",
        ),
        printer,
        labeler=SlowLabeler(0.0),
    )
    assert any("up to date (72 documents): nothing to embed" in line for _, line in stream.lines)
    assert not any(re.match(r"\s*embedding \d", line) for _, line in stream.lines)


def test_the_heartbeat_speaks_when_a_step_is_slow_and_stops_with_the_stage():
    stream = TimedStream()
    meter = IndexProgress(stream=stream, interval_s=0.2)
    meter("labelling pointwise", 0, 10)
    time.sleep(0.75)  # one judge call that takes long: nothing reports
    meter("labelling pointwise", 10, 10)
    count = len(stream.lines)
    time.sleep(0.5)
    meter.close()
    assert count >= 4, stream.lines  # the start, two or three beats, the end
    assert len(stream.lines) == count, "no beat once the stage is done"
    assert stream.lines[-1][1].strip().startswith("labelling pointwise 10/10 labels (100%)")


def test_the_default_period_is_under_ten_seconds_and_configurable():
    assert progress_mod.DEFAULT_INTERVAL_S <= 10
    assert IndexProgress(stream=io.StringIO()).interval_s == progress_mod.default_interval()
    assert progress_mod.default_interval({progress_mod.INTERVAL_ENV: "0.5"}) == 0.5
    assert progress_mod.default_interval({progress_mod.INTERVAL_ENV: "nan"}) == progress_mod.DEFAULT_INTERVAL_S
    assert progress_mod.default_interval({progress_mod.INTERVAL_ENV: "-3"}) == progress_mod.DEFAULT_INTERVAL_S


def test_unknown_totals_show_a_count_and_a_rate():
    clock = iter([0.0, 0.0, 2.0, 2.0]).__next__
    meter = IndexProgress(stream=io.StringIO(), interval_s=0.0, clock=clock)
    meter("statistics", 0, 0)
    assert meter.line("statistics", 100, 0) == "statistics 100 resamples, 50.0 resamples/s"
