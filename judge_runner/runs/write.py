"""The run file: one JSONL line per event, written so that nothing finished is ever lost.

Each line is one complete JSON object plus ``\\n``, written and fsynced before the next is recorded; the
file is created exclusively, so two runs never share a file. A line that cannot be written whole (a full
disk) is taken back out, so the file holds complete lines only, and the writer raises
:class:`~judge_runner.core.failures.StorageError` naming the file (exit 3, not a bug). Readers tolerate a
torn last line all the same (a kill, a crash). Line types follow docs/run-file.md.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_runner.core.failures import StorageError
from judge_runner.core.ids import time_id
from judge_runner.core.models import DIMENSIONS
from judge_runner.core.textproc import clean_text
from judge_runner.measures.agreement import trials_alpha
from judge_runner.measures.ir import METRIC_NAMES, canonical_metric_name
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.lines import SummaryLine
from judge_runner.runs.read import decode_line, iter_raw_lines, resume_state
from judge_runner.runs.summary_blocks import Abstention, Issue, RunUsage


def utc_now() -> str:
    """Current UTC time as ISO 8601 with milliseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RunWriter:
    """Appends JSONL lines to a new run file in ``out_dir`` named ``<run id>.jsonl``, the run id a
    time-ordered name unique across folders and machines (:func:`judge_runner.core.ids.time_id`:
    ``20261129T231500.123Z-3f9a0c``, the UTC millisecond plus six random hex digits; the file is created
    exclusively, a clash in the folder draws another suffix). The run id is the file's stem unless
    ``run_id`` is given (a resumed run keeps its id, whatever its format). Raises OSError when the folder
    cannot be written. ``failure``: the first :class:`~judge_runner.core.failures.StorageError` a write
    raised (None while every line was written), which the run loop checks to stop the run."""

    ATTEMPTS = 100
    """Names tried before giving up (each clash in one folder is one chance in 16.8 million)."""

    def __init__(self, out_dir: Path, run_id: str | None = None):
        self._lock = threading.Lock()
        self.failure: StorageError | None = None
        self._size = 0  # bytes of complete lines written
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(self.ATTEMPTS):
            name = time_id(datetime.now(UTC))
            path = out_dir / f"{name}.jsonl"
            try:
                self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o666)
            except FileExistsError:
                continue
            self.path = path
            self.run_id = run_id or name
            break
        else:
            raise FileExistsError(f"cannot find a free run file name in {out_dir} ({self.ATTEMPTS} names taken)")

    def write(self, line: dict[str, Any]) -> None:
        """Write one line (``type`` and ``runId`` are required) and make it durable. Text that cannot be
        encoded (a lone surrogate in a model's reason or suggestion, say) is written as U+FFFD
        (:func:`judge_runner.core.textproc.clean_text`): one odd reply never loses a judged line. Raises
        StorageError (and keeps it as :attr:`failure`) when the line cannot be written whole: what was
        written of it is truncated away, so the file keeps complete lines only."""
        if "type" not in line or "runId" not in line:
            raise ValueError("every line needs 'type' and 'runId'")
        data = (clean_text(json.dumps(line, ensure_ascii=False, allow_nan=False, separators=(",", ":"))) + "\n").encode("utf-8")
        with self._lock:  # a --batch run writes its batch lines from a worker thread
            if self._fd is None:
                raise ValueError(f"the run file {self.path} is closed")
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
                os.fsync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, self._size)  # no half line: the file ends with the last complete one
                except OSError:
                    pass
                error = StorageError("the run file", self.path, exc)
                self.failure = self.failure or error
                raise error from exc
            self._size += len(data)

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read_run(path: Path) -> Iterator[dict[str, Any]]:
    """The raw lines of a run file as dicts, untyped and unchecked (tests and debugging; consumers use
    :func:`judge_runner.runs.read.read_run_file`). Lines split on ``\\n`` only (U+2028 inside text is
    not a line break); a torn, undecodable or non-object line is skipped."""
    for number, raw, _ in iter_raw_lines(Path(path).read_bytes()):
        if not raw.strip():
            continue
        try:
            value = decode_line(raw, first=number == 1)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def judged_lines(path: Path) -> tuple[dict | None, list[dict]]:
    """``(run_start, evaluation lines)`` of a run file to resume, as written today (dicts by alias; older
    metric keys mapped), one evaluation per (system, query id), the first. ``run_start`` is None when the file
    is not a run. A thin wrapper of :func:`judge_runner.runs.read.resume_state`."""
    state = resume_state(path)
    start = state.run_start.line() if state.run_start is not None else None
    return start, [line.line() for line in state.evaluations]


def batch_lines(path: Path) -> list[dict]:
    """The ``batch`` lines of a run file to resume (dicts by alias; :func:`judge_runner.runs.read.resume_state`)."""
    return [line.line() for line in resume_state(path).batches]


def _normalise_issue(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s-]", "", text.lower())).strip()


def top_issues(evaluations: list[dict], limit: int | None = 5) -> list[dict]:
    """The judges' suggestions grouped by normalised wording, most frequent first (all of them when
    ``limit`` is None): ``[{"issue", "count", "queryIds"}]``, each in its most used wording."""
    groups: dict[str, list[str]] = defaultdict(list)
    wording: dict[str, Counter] = defaultdict(Counter)
    for ev in evaluations:
        for suggestion in ev.get("suggestions", []):
            key = _normalise_issue(suggestion)
            if not key:
                continue
            if ev["queryId"] not in groups[key]:
                groups[key].append(ev["queryId"])
            wording[key][suggestion.strip()] += 1
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    return [{"issue": wording[k].most_common(1)[0][0], "count": len(ids), "queryIds": ids} for k, ids in ranked]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def _numbers(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def is_judged(evaluation: Mapping[str, Any], legacy: bool = False) -> bool:
    """Whether an ``evaluation`` line (a dict by alias) made at least one judge call in its run: a label
    paid for (``labelsJudged`` > 0) or a list-level verdict not from the cache (``listCached`` false). A
    format-1 line (``legacy``) always did: that judge had no cache."""
    return legacy or int(evaluation.get("labelsJudged") or 0) > 0 or evaluation.get("listCached") is False


def cost_per_judged_query(evaluations: Sequence[Mapping[str, Any]], legacy: bool = False) -> tuple[int, float | None]:
    """``(judged queries, USD per judged query)`` of a run's evaluation lines (dicts by alias): the sum of
    the judged lines' ``usage.costUsd`` (the judge calls of that query, every trial and re-ask) over their
    number (:func:`is_judged`). The USD figure is None when no query was judged or any judged line's
    cost is unknown (null or no usage)."""
    judged = [ev for ev in evaluations if is_judged(ev, legacy)]
    costs = _numbers([(ev.get("usage") or {}).get("costUsd") for ev in judged])
    if not judged or len(costs) < len(judged):
        return len(judged), None
    return len(judged), round(sum(costs) / len(judged), 6)


@dataclass(frozen=True, kw_only=True)
class SummaryInputs:
    """What a run did beyond its evaluation lines: the rest of the summary's inputs. ``cost_usd`` and
    ``cache_saved_usd`` in USD (None: unknown; :func:`judge_runner.llm.pricing.cache_savings_usd`),
    ``usage`` the budget's token and call counts by alias, ``duration_s`` in seconds.
    ``recommended_focus`` and ``focus_evidence`` are the caller's
    (:func:`judge_runner.judging.advice.recommended_focus`: it needs scoring rules this layer does not know)."""

    interrupted: bool
    budget_exhausted: bool
    cost_usd: float | None
    usage: dict
    duration_s: float
    heuristic: bool
    stop_reason: str | None = None
    judge_mode: str | None = None
    trials: int = 1
    judge_is_generator: bool = False
    cache_saved_usd: float | None = None
    recommended_focus: str | None = None
    focus_evidence: dict | None = None


def build_summary(run_id: str, evaluations: list[dict], errors: list[dict], total_queries: int, run: SummaryInputs) -> dict:
    """The ``summary`` line (a :class:`~judge_runner.runs.lines.SummaryLine` by alias). Averages cover
    evaluated queries only (failures are never zeros); the dimensions and overall on-topic queries only
    (off-topic ones are scored on abstention); metrics over the queries that have them, by ir-measures
    name (:data:`METRIC_NAMES`). ``trialsAlpha``: Krippendorff's alpha between trials
    (:func:`judge_runner.measures.agreement.trials_alpha`); ``cachedInputShare``: cache-read over all input
    tokens; ``costPerJudgedQueryUsd``: :func:`cost_per_judged_query`; ``biasCorrected``:
    :func:`judge_runner.runs.corrected.bias_corrected`."""
    issues = top_issues(evaluations, limit=5)
    results = [r for ev in evaluations for r in ev.get("results") or []]
    alpha = (
        trials_alpha([r.get("trialLabels") or [] for r in results if r.get("labelOrigin", "judge") == "judge"]) if run.trials > 1 else None
    )
    models = sorted({m for ev in evaluations for m in ev.get("judgeModelsReturned") or []})
    judged, per_judged = cost_per_judged_query(evaluations)
    input_tokens = int(run.usage.get("inputTokens") or 0)
    cached_share = round(int(run.usage.get("cacheReadTokens") or 0) / input_tokens, 6) if input_tokens else None
    return SummaryLine(
        runId=run_id,
        timestamp=utc_now(),
        totalQueries=total_queries,
        evaluated=len(evaluations),
        failed=len(errors),
        interrupted=run.interrupted,
        budgetExhausted=run.budget_exhausted,
        stopReason=run.stop_reason,
        heuristicJudge=run.heuristic,
        averageScores=average_scores(evaluations),
        averageMetrics=average_metrics(evaluations),
        abstention=abstention_figures(evaluations),
        topIssues=[Issue(**issue) for issue in issues],
        recommendedFocus=run.recommended_focus,
        focusEvidence=run.focus_evidence,
        costUsd=run.cost_usd,
        usage=RunUsage(**run.usage),
        cachedInputShare=cached_share,
        cacheSavedUsd=None if run.cost_usd is None or run.cache_saved_usd is None else round(run.cache_saved_usd, 6),
        judgedQueries=judged,
        costPerJudgedQueryUsd=per_judged,
        durationS=round(run.duration_s, 3),
        judgeMode=run.judge_mode,
        trials=run.trials,
        trialsAlpha=alpha,
        labelsCached=sum(int(ev.get("labelsCached") or 0) for ev in evaluations),
        labelsJudged=sum(int(ev.get("labelsJudged") or 0) for ev in evaluations),
        humanLabels=sum(int(ev.get("humanLabels") or 0) for ev in evaluations),
        injectionSuspected=sum(1 for r in results if r.get("injectionSuspected")),
        expectedSourceDisagreements=sum(len(ev.get("expectedSourceDisagreements") or []) for ev in evaluations),
        judgeReturnedModels=models,
        judgeIsGenerator=run.judge_is_generator,
        biasCorrected=bias_corrected(evaluations),
    ).line()


def average_scores(evaluations: list[dict]) -> dict[str, float | None] | None:
    """``{dimension or "overall": mean}`` over the on-topic evaluations (0-1; ``gradedPrecision`` too when
    scored), None without any."""
    scored_evaluations = [ev for ev in evaluations if ev.get("queryType") != "off-topic"]
    if not scored_evaluations:
        return None
    averages = {d: _mean(_numbers([(ev.get("scores") or {}).get(d) for ev in scored_evaluations])) for d in (*DIMENSIONS, "overall")}
    precision = _mean(_numbers([(ev.get("scores") or {}).get("gradedPrecision") for ev in scored_evaluations]))
    if precision is not None:  # scoring version 2: the relevance of version 1, kept as its own figure
        averages["gradedPrecision"] = precision
    return averages


def average_metrics(evaluations: list[dict]) -> dict[str, float | None] | None:
    """``{ir-measures name: mean}`` over the evaluations that have the metric (older keys mapped), None without any."""
    averages: dict[str, float | None] = {}
    for name in METRIC_NAMES:
        values = _numbers([v for ev in evaluations for k, v in (ev.get("metrics") or {}).items() if canonical_metric_name(k) == name])
        if values:
            averages[name] = _mean(values)
    return averages or None


def abstention_figures(evaluations: list[dict]) -> Abstention:
    """How the search abstained: correctly on off-topic queries, wrongly (not confident) on on-topic ones."""
    off_topic = [ev for ev in evaluations if ev.get("queryType") == "off-topic"]
    on_topic = [ev for ev in evaluations if ev.get("queryType") != "off-topic"]
    correct = sum(1 for ev in off_topic if ev.get("abstained"))
    false_abstentions = sum(1 for ev in on_topic if not ev.get("confident", True))
    return Abstention(
        offTopic=len(off_topic),
        correct=correct,
        falseAbstentions=false_abstentions,
        accuracy=round(correct / len(off_topic), 6) if off_topic else None,
        falseAbstentionRate=round(false_abstentions / len(on_topic), 6) if on_topic else None,
    )
