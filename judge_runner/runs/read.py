"""The one reader of run files: trend, report, resume, prune and baseline all read through here, line by line.
:func:`read_run_file` keeps every line as written, :func:`read_run_records` only the figures. A damaged line or
value is dropped or left unscored with a warning naming file and line; older formats are adapted
(docs/run-file.md, "What the reader tolerates")."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from judge_runner.core.failures import UsageError
from judge_runner.core.ids import unique_name
from judge_runner.core.models import DIMENSIONS
from judge_runner.measures.ir import canonical_metric_name
from judge_runner.runs.lines import (
    FORMAT_VERSION,
    MODELS,
    BatchLine,
    ErrorLine,
    EvaluationLine,
    Provenance,
    RunStartLine,
    SummaryLine,
)
from judge_runner.runs.records import LINE_DROP, RESULT_KEEP, Record

LEGACY_TYPES = ("query_evaluation", "run_summary")


@dataclass
class RunLines:
    """One run file as read: typed lines, the reader's warnings (``"<file>:<line>: ..."``), and whether it is in
    the original search-quality format (``legacy``)."""

    path: Path
    run_start: RunStartLine | None = None
    evaluations: Sequence[Any] = field(default_factory=list)
    errors: list[ErrorLine] = field(default_factory=list)
    summary: SummaryLine | None = None
    warnings: list[str] = field(default_factory=list)
    legacy: bool = False
    batches: list[BatchLine] = field(default_factory=list)
    torn_last_line: bool = False
    recognised: bool = False

    @property
    def run_id(self) -> str:
        """``run_start``'s, else the first evaluation's, error's or summary's, else the file's stem."""
        for line in (self.run_start, *self.evaluations, *self.errors, self.summary):
            if line is not None and line.runId:
                return str(line.runId)
        return self.path.stem

    @property
    def identity(self) -> tuple[str, str]:
        """What makes two files one run: ``(run id, start time)``; a file without ``run_start`` stands for
        itself (its path). Two runs sharing an old-format id stay two."""
        if self.run_start is not None and self.run_start.timestamp:
            return self.run_id, self.run_start.timestamp
        return self.run_id, str(self.path)

    @property
    def format_version(self) -> int:
        """1 for a file without ``formatVersion`` or ``run_start``."""
        return self.run_start.formatVersion if self.run_start is not None else 1

    @property
    def provenance(self) -> Provenance | None:
        """``run_start``'s; for a legacy file, one naming the judge model of its summary."""
        if self.run_start is not None and self.run_start.provenance is not None:
            return self.run_start.provenance
        if self.legacy:
            model = (self.summary.model_extra or {}).get("model") if self.summary is not None else None
            return Provenance(provider="legacy", judgeModel=model if isinstance(model, str) and model else "unknown")
        return None

    @property
    def is_run(self) -> bool:
        """A judge-runner run: a recognised line type and an evaluation, an error or provenance."""
        return self.recognised and bool(self.evaluations or self.errors or self.provenance is not None)

    @property
    def timestamp(self) -> str:
        """When the run started, else ended, else the file's mtime (UTC ISO 8601)."""
        if self.run_start is not None and self.run_start.timestamp:
            return self.run_start.timestamp
        if self.summary is not None and self.summary.timestamp:
            return self.summary.timestamp
        return datetime.fromtimestamp(self.path.stat().st_mtime, UTC).isoformat()


@dataclass
class RunFile(RunLines):
    """A run file read whole: every evaluation line as written."""

    evaluations: list[EvaluationLine] = field(default_factory=list)


@dataclass
class RunRecords(RunLines):
    """A run file read for its figures: each evaluation a :class:`~judge_runner.runs.records.Record`."""

    evaluations: list[Record] = field(default_factory=list)
    qrels: dict[str, Any] | None = None
    """The qrels its records were re-scored against; None before."""


# -- lines -------------------------------------------------------------------------------------------


IDENTITY = ("queryId", "query")
"""What every evaluation line since the first format names its query by; a line without them is dropped."""


def iter_raw_lines(data: bytes) -> list[tuple[int, bytes, bool]]:
    r"""``(line number from 1, bytes, terminated)`` per line, split on ``\n`` only."""
    parts = data.split(b"\n")
    out = [(i + 1, part, True) for i, part in enumerate(parts[:-1])]
    if parts[-1]:
        out.append((len(parts), parts[-1], False))
    return out


def decode_line(raw: bytes, first: bool) -> Any:
    """Raises ValueError (UnicodeDecodeError or JSONDecodeError) for a damaged line."""
    text = raw.decode("utf-8-sig" if first else "utf-8")
    return json.loads(text)


def _is_unit(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


_PLAIN = re.compile(r"[\w .,:;+\-@()/]{0,40}")


def _short(value: Any) -> str:
    """A value for a warning: numbers and short plain strings as JSON, anything else only described, so a
    warning never carries markup or a long text into a report."""
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value, allow_nan=True)
    if isinstance(value, str) and _PLAIN.fullmatch(value):
        return json.dumps(value, ensure_ascii=False)
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "an object"}
    kind = kinds.get(type(value), type(value).__name__)
    return f"{kind} of {len(value)} {'characters' if isinstance(value, str) else 'items'}" if isinstance(value, (str, list, dict)) else kind


NULLABLE = frozenset({"gradedPrecision", "judgeRelevance", "judgeRanking", "judgeOverall"})
"""Scores a valid line may leave null (older files; no list-level call)."""

SAID_WARNINGS = 10
"""The reader's warnings said per file; the rest are counted."""


def _units(
    value: Any, name: str, where: str, warnings: list[str], null_ok: bool, keys: Callable[[str], str] = lambda k: k
) -> dict[str, float | None] | None:
    """``{name: value in [0, 1]}``, every other value set to None (unscored) with a warning."""
    if value is None:
        return None
    if not isinstance(value, dict):
        warnings.append(f"{where}: {name} is {_short(value)}, not an object; left unscored")
        return None
    out: dict[str, float | None] = {}
    for key, item in value.items():
        key = keys(str(key))
        if item is None and (null_ok or key in NULLABLE):
            out[key] = None
        elif _is_unit(item):
            out[key] = float(item)
        else:
            warnings.append(f"{where}: {name}.{key} = {_short(item)} is not a number in [0, 1]; left unscored")
            out[key] = None
    return out


def _validate(model: type[BaseModel], data: dict[str, Any], where: str, warnings: list[str]) -> BaseModel | None:
    """``model`` from ``data``, each field that does not fit dropped with a warning; None when the line cannot
    be read at all."""
    data = dict(data)
    for _ in range(len(data) + 1):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
            if not bad or "type" in bad or not bad <= set(data):
                warnings.append(f"{where}: damaged {data.get('type')} line dropped ({exc.errors()[0]['msg']})")
                return None
            for name in sorted(bad):
                warnings.append(f"{where}: field {name} = {_short(data.pop(name))} does not fit the run-file contract; dropped")
    return None  # pragma: no cover - every pass removes a field


def _legacy_evaluation(line: dict[str, Any]) -> dict[str, Any]:
    scores = line.get("scores")
    if isinstance(scores, dict) and "overall" not in scores and all(_is_unit(scores.get(d)) for d in DIMENSIONS):
        scores = {**scores, "overall": sum(scores[d] for d in DIMENSIONS) / len(DIMENSIONS)}
    query_id = line.get("queryId") or line.get("query_id") or line.get("id") or line.get("query")
    return {**line, "type": "evaluation", "queryId": str(query_id), "scores": scores}


def _adapt(line: dict[str, Any], where: str, warnings: list[str]) -> tuple[dict[str, Any] | None, bool]:
    """``(line in today's shape, legacy)``, scores and metrics cleaned; None for a line that is not ours."""
    kind = line.get("type")
    legacy = False
    if kind in LEGACY_TYPES or (kind is None and "scores" in line and "query" in line):
        legacy = True
        line = {**line, "type": "summary"} if kind == "run_summary" else _legacy_evaluation(line)
        kind = line["type"]
    if kind not in MODELS:
        return None, False
    if kind == "evaluation":
        label = f"{where}: query {_short(line.get('queryId'))}"
        # an off-topic query is scored on abstention, not on the dimensions: its scores are null (format 2)
        off_topic = line.get("queryType") == "off-topic"
        line = {**line, "scores": _units(line.get("scores"), "scores", label, warnings, null_ok=off_topic) or {}}
        if "metrics" in line:
            line["metrics"] = _units(line["metrics"], "metrics", label, warnings, null_ok=True, keys=canonical_metric_name)
    elif kind == "summary":
        for name, keys in (("averageScores", str), ("averageMetrics", canonical_metric_name)):
            if name in line:
                line = {**line, name: _units(line[name], name, where, warnings, null_ok=True, keys=keys)}
    return line, legacy


# -- files -------------------------------------------------------------------------------------------


def stream_raw_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """:func:`iter_raw_lines` of a file, never read whole."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            terminated = raw.endswith(b"\n")
            yield number, raw[:-1] if terminated else raw, terminated


def _slim(value: dict[str, Any], where: str, warnings: list[str]) -> dict[str, Any]:
    """An evaluation line cut to what a :class:`~judge_runner.runs.records.Record` keeps; what it drops is still
    checked for its shape."""
    for name, fits in (
        ("analysis", lambda v: isinstance(v, dict) and all(isinstance(t, str) for t in v.values())),
        ("suggestions", lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v)),
    ):
        if name in value and not fits(value[name]):
            warnings.append(f"{where}: field {name} = {_short(value[name])} does not fit the run-file contract; dropped")
    results = value.get("results")
    if isinstance(results, list):
        results = [{k: v for k, v in r.items() if k in RESULT_KEEP} if isinstance(r, dict) else r for r in results]
    return {k: v for k, v in value.items() if k not in LINE_DROP} | ({"results": results} if "results" in value else {})


def _read(run: RunLines, keep: Callable[[EvaluationLine], None], slim: bool) -> None:
    """Read ``run.path`` into ``run``, each evaluation handed to ``keep``. Raises OSError."""
    path = run.path
    for number, raw, terminated in stream_raw_lines(path):
        if not raw.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            value = decode_line(raw, first=number == 1)
        except ValueError as exc:
            if not terminated:
                run.torn_last_line = True  # a run being written, or killed mid-line: nothing to warn about
            else:
                run.warnings.append(f"{where}: damaged line dropped ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        if not isinstance(value, dict):
            run.warnings.append(f"{where}: damaged line dropped (a JSON {type(value).__name__}, not an object)")
            continue
        if slim and value.get("type") == "evaluation":
            value = _slim(value, where, run.warnings)
        adapted, legacy = _adapt(value, where, run.warnings)
        if adapted is None:
            continue
        if adapted["type"] == "evaluation" and not all(isinstance(adapted.get(k), str) and adapted[k] for k in IDENTITY):
            run.warnings.append(f"{where}: evaluation line without {' and '.join(IDENTITY)} dropped: it names no query")
            continue
        model = _validate(MODELS[adapted["type"]], adapted, where, run.warnings)
        if model is None:
            continue
        run.recognised = True
        run.legacy = run.legacy or legacy
        if isinstance(model, RunStartLine):
            if run.run_start is None:
                run.run_start = model
        elif isinstance(model, EvaluationLine):
            keep(model)
        elif isinstance(model, ErrorLine):
            run.errors.append(model)
        elif isinstance(model, BatchLine):
            if not model.batchId:
                run.warnings.append(f"{where}: batch line without batchId dropped: its requests cannot be picked up and are sent again")
            else:
                run.batches.append(model)
        elif isinstance(model, SummaryLine):
            run.summary = model


def read_run_file(path: Path) -> RunFile:
    """One run file as typed lines: the first ``run_start`` and the last ``summary`` count, every evaluation and
    error is kept in order. Raises OSError."""
    run = RunFile(path=Path(path))
    _read(run, run.evaluations.append, slim=False)
    return run


def read_run_records(path: Path) -> RunRecords:
    """As :func:`read_run_file`, each evaluation kept as a :class:`~judge_runner.runs.records.Record` (no texts,
    reasons or snippets). Raises OSError."""
    run = RunRecords(path=Path(path))
    _read(run, lambda line: run.evaluations.append(Record.of(line)), slim=True)
    return run


def read_judged_runs(paths: Sequence[Path], say: Callable[[str], None] | None = None) -> list[RunFile]:
    """The run files ``paths``, each reader's warning (a line dropped, naming file and line) to ``say``. Raises
    UsageError for a file that cannot be read or holds no judged query."""
    runs = []
    for path in paths:
        try:
            run = read_run_file(path)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc}") from None
        if say is not None:
            for warning in run.warnings[:SAID_WARNINGS]:
                say(f"warning: {warning}")
            if len(run.warnings) > SAID_WARNINGS:
                say(f"warning: and {len(run.warnings) - SAID_WARNINGS} more about {path}")
        if not run.is_run or not run.evaluations:
            raise UsageError(f"{path} is not a run file with judged queries")
        runs.append(run)
    return runs


def run_names(runs: Sequence[RunLines]) -> list[str]:
    """A name per run file for showing runs side by side: its run id, or ``<id>#2`` ... for a different run
    sharing it. Files of one run share one name."""
    taken: set[str] = set()
    named: dict[tuple[str, str], str] = {}
    for run in runs:
        if run.identity not in named:
            named[run.identity] = unique_name(run.run_id, taken)
    return [named[run.identity] for run in runs]


def read_run_folder(folder: Path) -> tuple[list[RunRecords], list[str]]:
    """Every run in ``folder`` for its figures, oldest first, and the warnings. Per run only the file with the
    most evaluations is kept (a resumed run writes a second file)."""
    warnings: list[str] = []
    by_id: dict[tuple[str, str], RunRecords] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        try:
            run = read_run_records(path)
        except OSError as exc:
            warnings.append(f"skipped {path.name}: unreadable ({exc})")
            continue
        if not run.is_run:
            warnings.append(f"skipped {path.name}: not a judge-runner run file")
            continue
        warnings.extend(run.warnings)
        kept = by_id.get(run.identity)
        if kept is None or len(run.evaluations) > len(kept.evaluations):
            by_id[run.identity] = run
    return sorted(by_id.values(), key=lambda r: (r.timestamp, r.run_id)), warnings


# -- what resume, prune and baseline need --------------------------------------------------------------


@dataclass
class ResumeState:
    """What ``evaluate --resume OLD.jsonl`` needs: OLD's ``run_start`` (None when OLD is not a run), its first
    judged evaluation per (system, query id), the reader's warnings, and the ``batch`` lines whose results a resumed
    ``--batch`` run picks up instead of submitting again."""

    run_start: RunStartLine | None
    evaluations: list[EvaluationLine]
    warnings: list[str]
    batches: list[BatchLine] = field(default_factory=list)


def resume_state(path: Path) -> ResumeState:
    """Raises OSError when the file cannot be read."""
    run = read_run_file(path)
    start = run.run_start if run.run_start is not None and run.run_start.provenance is not None else None
    first: dict[tuple[str | None, str], EvaluationLine] = {}
    for line in run.evaluations:
        if line.queryId:
            first.setdefault((line.system, line.queryId), line)
    return ResumeState(start, list(first.values()), run.warnings, list(run.batches))


def run_id_of(path: Path) -> str | None:
    """The run id a run file records, or None when it is unreadable or not a run."""
    try:
        run = read_run_file(path)
    except OSError:
        return None
    return run.run_id if run.is_run else None


def is_baseline(path: Path, baseline_id: str | None) -> bool:
    """Whether ``path`` holds the run ``baseline_id``, by file name or recorded run id (a resumed run's second
    file keeps the id)."""
    if not baseline_id:
        return False
    return Path(path).stem == baseline_id or run_id_of(path) == baseline_id


__all__ = [
    "FORMAT_VERSION",
    "ResumeState",
    "RunFile",
    "RunLines",
    "RunRecords",
    "is_baseline",
    "read_run_file",
    "read_run_folder",
    "read_run_records",
    "resume_state",
    "run_id_of",
    "run_names",
]
