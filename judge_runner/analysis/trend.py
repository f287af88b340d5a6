"""Quality over time: read a folder of run files, group runs judged alike, and tell real changes from noise.

Every run is scored against the qrels known now, so weeks stay comparable. Scores are compared only
under the same judge (its fingerprint's comparability key); search, corpus and query-set changes are
listed beside a delta, never a barrier. Differences are bootstrapped over queries, paired on the same
query set, with ``scipy.stats.bootstrap`` (percentile, 95%, fixed seed; Efron and Tibshirani 1993); a
change counts only when its interval excludes zero *and* it is at least ``min_effect``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import numpy as np

from judge_runner.analysis.changes import (
    GATED,
    comparable_columns,
    failed_side,
    failure_counts,
    failure_words,
    lineup_change,
    what_changed,
)
from judge_runner.analysis.corrected_change import LABELS_CAUSE, corrected_change, corrected_regression, label_change, same_results
from judge_runner.analysis.judge_bridge import annotate, bridged_baseline, in_series_order, judge_steps, latest_key
from judge_runner.analysis.rescored import comparison_now
from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line
from judge_runner.core.models import DIMENSIONS
from judge_runner.evaluation.state import over_failed_share
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import comparability_key, fingerprint_key, legacy_key
from judge_runner.judging.pooled import Sources, build_pool, rescore_records
from judge_runner.judging.qrels import drawn_designs
from judge_runner.judging.scores import SCORING_VERSION
from judge_runner.measures.ir import METRIC_NAMES, NDCG10_NAME, RECALL10_NAME
from judge_runner.measures.paired import MIN_EFFECT, Comparison, compare_values
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.designed import LabelDesign, system_view
from judge_runner.runs.lines import ErrorLine, Provenance, SummaryLine
from judge_runner.runs.read import RunRecords, read_run_folder, run_names
from judge_runner.runs.records import Record
from judge_runner.runs.summary_blocks import ComparisonBlock
from judge_runner.runs.write import cost_per_judged_query

METRICS = METRIC_NAMES  # ir-measures names: nDCG@10, R@10, RR(rel=2)
COLUMNS = (*DIMENSIONS, "overall", NDCG10_NAME, RECALL10_NAME)
BASELINE_FILE = "baseline.json"


@dataclass
class Run:
    """One run as read from its file, its records re-scored against the pooled qrels by :func:`read_runs`.
    A compare run is seen as its reference system unless ``system`` names another
    (:meth:`system_views`: one Run per system)."""

    file: RunRecords
    system: str | None = None
    designs: dict[str, LabelDesign] | None = None
    """The ``label --budget`` draw its summary's corrected block was weighted by, as the cache holds it now."""

    @property
    def systems(self) -> list[str]:
        """The systems of a compare run, reference first ([] for a run of one system)."""
        summary = self.file.summary
        if summary is not None and summary.comparison is not None:
            return [s.name for s in summary.comparison.systems]
        seen = list(dict.fromkeys(e.system for e in self.file.evaluations if e.system))  # a partial compare run
        return seen if len(seen) > 1 else []

    @property
    def shown_system(self) -> str | None:
        """``system``, else a compare run's reference, else None (all)."""
        systems = self.systems
        return self.system or (systems[0] if systems else None)

    def system_views(self) -> list[Run]:
        """One Run per system of a compare run (reference first); [self] for any other run."""
        return [Run(self.file, name, self.designs) for name in self.systems] or [self]

    @property
    def run_id(self) -> str:
        return self.file.run_id

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def timestamp(self) -> str:
        return self.file.timestamp

    @property
    def provenance(self) -> Provenance:
        return self.file.provenance or Provenance()

    @property
    def evaluations(self) -> list[Record]:
        shown = self.shown_system
        return self.file.evaluations if shown is None else [e for e in self.file.evaluations if e.system == shown]

    @property
    def error_lines(self) -> list[ErrorLine]:
        shown = self.shown_system
        return self.file.errors if shown is None else [e for e in self.file.errors if e.system == shown]

    @property
    def summary(self) -> SummaryLine | None:
        return self.file.summary

    @cached_property
    def comparison(self) -> ComparisonBlock | None:
        """A compare run's ``comparison`` against the qrels known now (:func:`comparison_now`); None for others."""
        return comparison_now(self.file)

    @property
    def legacy(self) -> bool:
        return self.file.legacy

    @property
    def scoring_version(self) -> int:
        """The current version for a file of version 2 or later (re-scored when read), else
        ``provenance.scoringVersion`` (1 without it)."""
        version = self.provenance.scoringVersion
        return SCORING_VERSION if version >= 2 else version

    @property
    def qrels(self) -> dict | None:
        """The qrels its figures were computed against (:meth:`judge_runner.judging.pooled.Pool.block`)."""
        return self.file.qrels

    @property
    def errors(self) -> int:
        return len(self.error_lines)

    @property
    def partial(self) -> bool:
        """A run without a summary line (still running, or killed) is left out of comparisons."""
        return self.summary is None

    @property
    def comparable(self) -> bool:
        """Complete with at least one judged query; else never the latest nor the baseline."""
        return not self.partial and bool(self.evaluations)

    @property
    def failed(self) -> bool:
        """Complete but failed: the system shown judged no query, or more than ``MAX_FAILED_SHARE`` of one of its
        systems' queries failed (the gate at which the run itself ends incomplete)."""
        if self.partial:
            return False
        return not self.evaluations or bool(over_failed_share(failure_counts(self.file)))

    @property
    def failure(self) -> str | None:
        """Why a failed run failed, in words; None when it did not."""
        if not self.failed:
            return None
        text = failure_words(self.file)
        stop = self.summary.stopReason if self.summary is not None else None
        return text + (f"; stopped: {stop}" if stop else "")

    @property
    def cut_short(self) -> str | None:
        """The summary's ``stopReason`` when it stopped before its last query, else None."""
        summary = self.summary
        if summary is None:
            return None
        if summary.stopReason:
            return summary.stopReason
        return "interrupted" if summary.interrupted else "budget_exhausted" if summary.budgetExhausted else None

    @property
    def judge(self) -> str:
        """What must be equal for scores to be comparable: the judge fingerprint's key with the returned model
        ids (format 2), else the version-1 key."""
        p = self.provenance
        if p.judgeFingerprint:
            returned = self.summary.judgeReturnedModels if self.summary is not None else []
            return comparability_key(p.judgeFingerprint, returned)
        return legacy_key(p.model_dump(by_alias=True))

    @property
    def judge_label(self) -> str:
        p = self.provenance
        label = f"{p.provider or '?'}/{p.judgeModel or '?'}"
        if p.judgeFingerprint:
            label += f" {p.judgeFingerprint.get('mode', '?')}"
        return label + (" (heuristic)" if p.heuristicJudge else "")

    def values(self, column: str) -> dict[str, float]:
        """``{queryId: value}`` of a dimension, ``overall`` or an IR metric (ir-measures name, or an older key
        such as ``Recall@10``) against the pooled qrels; queries without it left out."""
        out: dict[str, float] = {}
        for ev in self.evaluations:
            value = ev.value(column)
            if value is not None:
                out[ev.queryId] = value
        return out

    def mean(self, column: str) -> float | None:
        values = list(self.values(column).values())
        return float(np.mean(values)) if values else None

    @property
    def abstention_accuracy(self) -> float | None:
        """The share of the shown system's off-topic queries on which the search abstained; None without any."""
        off_topic = [e for e in self.evaluations if e.queryType == "off-topic" and e.abstained is not None]
        return sum(1 for e in off_topic if e.abstained) / len(off_topic) if off_topic else None

    @property
    def bias_corrected(self) -> dict | None:
        """Mean nDCG@10 and relevance corrected by the graded queries of the system shown, against the qrels known
        now; the summary's block when it was skipped (unequal draw probabilities); None without graded queries."""
        summary = self.summary
        block = summary.biasCorrected if summary is not None else None
        if block is not None and block.skipped:  # labels drawn with unequal probabilities: never recomputed as uniform
            return block.model_dump(by_alias=True, mode="json")
        if block is not None and block.design is not None:  # labels drawn by a budget: weighted by the draw
            dumped = block.model_dump(by_alias=True, mode="json")
            if self.designs:  # the draw with the grades known now, as the records were re-scored
                errors = [e.line() for e in self.file.errors] if self.systems else ()
                dumped = bias_corrected(self.file.evaluations, self.systems or None, errors=errors, designs=self.designs) or dumped
            return dumped if dumped.get("system") == self.shown_system else system_view(dumped, self.shown_system)
        if self.systems and self.shown_system == self.systems[0]:  # a compare run's reference: every system's, with differences
            return bias_corrected(self.file.evaluations, self.systems, errors=[e.line() for e in self.file.errors])
        return bias_corrected(self.evaluations)

    @property
    def cost(self) -> float | None:
        return self.summary.costUsd if self.summary is not None else None

    @property
    def batch(self) -> bool:
        """Whether the run used a batch API: its cost is at batch prices, so trend marks it."""
        config = self.file.run_start.config if self.file.run_start is not None else {}
        return bool(self.file.batches) or bool((config or {}).get("batch"))

    @property
    def cost_per_judged_query(self) -> float | None:
        """USD per judged query: the summary's figure, else from the evaluation lines, else ``costUsd`` over
        the evaluated queries; None when unknown."""
        summary = self.summary
        if summary is not None and "costPerJudgedQueryUsd" in summary.model_fields_set:
            return summary.costPerJudgedQueryUsd
        legacy = self.legacy or self.file.format_version < 2
        judged, per = cost_per_judged_query(self.file.evaluations, legacy=legacy)
        if per is not None or judged == 0:
            return per
        if summary is not None and summary.costUsd is not None and summary.evaluated:
            return round(summary.costUsd / summary.evaluated, 6)
        return None


def read_runs(folder: Path, cache: JudgmentCache | None = None) -> tuple[list[Run], list[str]]:
    """Every run in ``folder`` (``*.jsonl``), oldest first, scored against the qrels known now, and the
    reader's warnings. Per run id only the file with most evaluations is kept (a resumed run writes two).
    """
    files, warnings = read_run_folder(folder)
    runs = [Run(f) for f in files]
    pool_metrics(runs, cache)
    return runs, warnings


def pool_metrics(runs: list[Run], cache: JudgmentCache | None = None) -> None:
    """Score every run in place against the qrels known now: per judge, the labels of all its runs pooled with
    the ``cache``'s labels and people's grades, so runs are compared on one set of grades."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.judge, []).append(run)
    for members in groups.values():
        fingerprint = next((r.provenance.judgeFingerprint for r in members if r.provenance.judgeFingerprint), None)
        models = {m for r in members if r.summary is not None for m in r.summary.judgeReturnedModels}
        sources = Sources(cache, None, fingerprint_key(fingerprint) if fingerprint else None)
        names = run_names([r.file for r in members])
        pool = build_pool(((name, r.file.evaluations) for name, r in zip(names, members)), sources, models)
        for run in members:
            config = (run.file.run_start.config if run.file.run_start is not None else None) or {}
            run.file.qrels = rescore_records(run.file.evaluations, pool, config, scores=run.provenance.scoringVersion >= 2)
            drawn = run.summary.biasCorrected.design if run.summary is not None and run.summary.biasCorrected is not None else None
            if drawn is not None and cache is not None:
                run.designs = drawn_designs(cache, [drawn.set]) or None


def compare(old: Run, new: Run, column: str, min_effect: float = MIN_EFFECT, seed: int = 0) -> Comparison:
    """Compare ``column`` of two runs: paired on the same query set, failed queries by
    :mod:`judge_runner.measures.failed`."""
    same_set = bool(old.provenance.querySetSha256) and old.provenance.querySetSha256 == new.provenance.querySetSha256
    failed = (failed_side(old, f"run {old.run_id}", new), failed_side(new, "this run", old))
    return compare_values(old.values(column), new.values(column), column, paired=same_set, min_effect=min_effect, seed=seed, failed=failed)


def comparisons(old: Run, new: Run, min_effect: float = MIN_EFFECT) -> dict[str, dict]:
    """``{column: comparison}`` of the gated columns; each marked ``cause``
    :data:`judge_runner.analysis.corrected_change.LABELS_CAUSE` when only the grades changed."""
    out = {c: compare(old, new, c, min_effect).as_dict() for c in comparable_columns(old, new)}
    if same_results(old, new) and label_change(old, new):
        for entry in out.values():
            entry["cause"] = LABELS_CAUSE
    return out


def versus(old: Run, new: Run, min_effect: float = MIN_EFFECT) -> dict[str, Any]:
    """``new`` against ``old``: ``runId``, ``changes``, the judge-side ``comparisons``, the ``corrected`` change
    with people's grades, and the gate's ``regressions`` (on the corrected change where there is one, else on
    the judge's verdict unless the grades caused it)."""
    changes = what_changed(old, new)
    labels = label_change(old, new)
    if labels:
        changes.append(labels + (f" ({LABELS_CAUSE}: both returned the same results on every query)" if same_results(old, new) else ""))
    judged = comparisons(old, new, min_effect)
    corrected = corrected_change(old, new)
    regressions = []
    for column, comparison in judged.items():
        if column in corrected:
            if corrected_regression(corrected[column], min_effect):
                regressions.append(f"{column} (corrected with people's labels)")
        elif comparison["verdict"] == "regression" and comparison.get("cause") != LABELS_CAUSE:
            regressions.append(column)
    if lineup_change(old, new):  # two searches side by side, not one search changed
        regressions = []
    return {"runId": old.run_id, "changes": changes, "comparisons": judged, "corrected": corrected, "regressions": regressions}


def read_baseline(folder: Path) -> str | None:
    path = Path(folder) / BASELINE_FILE
    try:
        return cast(str | None, json.loads(path.read_text(encoding="utf-8")).get("runId"))
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def set_baseline(folder: Path, run_id: str) -> Run:
    """Pin ``run_id`` (or ``"latest"``) as the baseline. Raises ValueError when no such complete run exists."""
    runs, _ = read_runs(folder)
    complete = [r for r in runs if r.comparable]
    chosen: Run | None
    if run_id == "latest":
        if not complete:
            raise ValueError(f"no complete run with judged queries in {folder}")
        chosen = complete[-1]
    else:
        chosen = next((r for r in complete if r.run_id == run_id), None)
        if chosen is None:
            known = ", ".join(r.run_id for r in complete[-5:]) or "none"
            raise ValueError(f"no complete run with judged queries {run_id!r} in {folder} (latest: {known})")
    (Path(folder) / BASELINE_FILE).write_text(
        json.dumps({"runId": chosen.run_id, "setAt": datetime.now(UTC).isoformat(timespec="seconds")}, indent=2) + "\n", encoding="utf-8"
    )
    return chosen


@dataclass
class Trend:
    """Runs grouped by judge, each complete run compared with the previous comparable run and the baseline.
    ``latest_verdict``: the newest complete run, judged or failed, and whether it regressed."""

    groups: list[dict]
    warnings: list[str]
    baseline: str | None
    latest_verdict: dict | None = None
    judge_changes: list[dict] = field(default_factory=list)


def build_trend(folder: Path, min_effect: float = MIN_EFFECT, cache: JudgmentCache | None = None) -> Trend:
    """Everything ``judge-runner trend`` shows, as plain data."""
    runs, warnings = read_runs(folder, cache)
    runs = in_series_order(runs)  # a re-judged run stands in the place of the run it re-judges
    baseline_id = read_baseline(folder)
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.judge, []).append(run)
    out_groups: list[dict[str, Any]] = []
    latest_verdict = None
    # the newest complete run is the latest, judged or failed: a bad week is never hidden behind an older run
    latest_complete = max((r for r in runs if not r.partial), key=latest_key, default=None)
    for judge, members in groups.items():
        baseline = bridged_baseline(members, baseline_id)
        rows, verdict = group_rows(members, baseline, latest_complete, min_effect)
        if verdict is not None:
            latest_verdict = verdict
        reason = None
        if len(groups) > 1:
            reason = "runs judged by another provider, model or judge prompt (or another judge protocol) are not comparable with the others"
        label = members[0].judge_label
        if any(g["judge"] == label for g in out_groups):  # two fingerprints, one name: tell them apart
            label += f" [{judge.removeprefix('v1:')[:8]}]"
            for row in rows:
                row["judge"] = label

        calibration = calibration_for_provenance(calibration_folder(folder), members[-1].provenance.model_dump())
        out_groups.append(
            {
                "judge": label,
                "judgeKey": judge,
                "reason": reason,
                "runs": rows,
                "baseline": baseline.run_id if baseline else None,
                "calibration": calibration_line(calibration),
                "qrels": members[-1].qrels,
            }
        )
    annotate(out_groups, runs)
    return Trend(out_groups, warnings, baseline_id, latest_verdict, judge_steps(runs, min_effect))


def group_rows(
    members: list[Run], baseline: Run | None, latest_complete: Run | None, min_effect: float
) -> tuple[list[dict[str, Any]], dict | None]:
    """``(rows, latest verdict)`` of one judge's runs, oldest first; the verdict only when the group holds the
    newest complete run."""
    rows = []
    previous: Run | None = None
    verdict = None
    for run in members:
        row = run_row(run)
        if run.comparable:
            if previous is not None:
                row["vsPrevious"] = versus(previous, run, min_effect)
            if baseline is not None and baseline is not run:
                row["vsBaseline"] = versus(baseline, run, min_effect)
            previous = run
        if run is latest_complete:
            verdict = latest_verdict_of(run, row)
        rows.append(row)
        rows.extend(system_rows(run))
    return rows, verdict


def run_row(run: Run) -> dict[str, Any]:
    """A run's row before its comparisons."""
    row: dict[str, Any] = {
        "runId": run.run_id,
        "timestamp": run.timestamp,
        "file": run.path.name,
        "judge": run.judge_label,
        "evaluated": len(run.evaluations),
        "failed": run.errors,
        "partial": run.partial,
        "comparable": run.comparable,
        "means": {c: run.mean(c) for c in COLUMNS},
        "costUsd": run.cost,
        "costPerJudgedQueryUsd": run.cost_per_judged_query,
        "batch": run.batch,
        "abstentionAccuracy": run.abstention_accuracy,
        "runFailed": run.failed,  # the run failed (Run.failed); "failed" counts its failed queries
        "failure": run.failure,
        "stopReason": run.cut_short,
        "totalQueries": run.summary.totalQueries if run.summary is not None else None,
        "biasCorrected": run.bias_corrected,
        "qrels": run.qrels,
    }
    if run.systems:
        row["system"] = run.shown_system
    return row


def latest_verdict_of(run: Run, row: dict[str, Any]) -> dict[str, Any]:
    """The newest complete run's verdict against its baseline, else its previous run."""
    # a complete run that is not comparable judged nothing: its row has no comparison and run.failed is True
    against = row.get("vsBaseline") or row.get("vsPrevious")
    return {
        "runId": run.run_id,
        "against": against["runId"] if against else None,
        "regression": bool(against and against["regressions"]),
        "regressions": against["regressions"] if against else [],
        "comparisons": against["comparisons"] if against else {},
        "corrected": against["corrected"] if against else {},
        "failed": run.failed,
        "failure": run.failure,
    }


def system_rows(run: Run) -> list[dict[str, Any]]:
    """The rows of a compare run's other systems with their differences to the reference (``vsReference``);
    never chained over time nor gated."""
    block = run.comparison
    if block is None:
        return []
    rows = []
    for view in run.system_views()[1:]:
        diffs = {
            d.column: {
                **{"column": d.column, "delta": d.delta, "ci95": d.ci95, "n": d.n, "paired": True, "verdict": d.verdict},
                "failed": d.failed.model_dump(mode="json") if d.failed is not None else None,
            }
            for d in block.differences
            if d.system == view.system
        }
        rows.append(
            {
                "runId": run.run_id,
                "timestamp": run.timestamp,
                "file": run.path.name,
                "judge": run.judge_label,
                "system": view.system,
                "evaluated": len(view.evaluations),
                "failed": view.errors,
                "partial": run.partial,
                "comparable": False,
                "means": {c: view.mean(c) for c in COLUMNS},
                "abstentionAccuracy": view.abstention_accuracy,
                "costUsd": None,
                "costPerJudgedQueryUsd": None,
                "vsReference": {"system": block.reference, "comparisons": {c: diffs[c] for c in GATED if c in diffs}},
                "biasCorrected": view.bias_corrected,
                "qrels": view.qrels,
            }
        )
    return rows


def query_history(folder: Path, query_id: str, cache: JudgmentCache | None = None) -> list[dict]:
    """One query across runs, oldest first, against the pooled qrels; ``labelOrigins`` says whose each label is;
    ``queryChanged``: the id names another text than in the run before (another query set)."""
    runs, _ = read_runs(folder, cache)
    history: list[dict] = []
    for run in runs:
        ev = next((e for e in run.evaluations if e.queryId == query_id), None)
        if ev is None:
            continue
        history.append(
            {
                "runId": run.run_id,
                "timestamp": run.timestamp,
                "judge": run.judge_label,
                "query": ev.query,
                "queryChanged": bool(history) and history[-1]["query"] != ev.query,
                "scores": dict(ev.scores),
                "metrics": ev.metrics,
                "labels": [r.relevance for r in ev.results],
                "labelOrigins": [r.labelOrigin for r in ev.results],
            }
        )
    return history


def latest_group(runs: list[Run]) -> list[Run]:
    """The complete runs judged like the newest complete run, oldest first. Raises ValueError when there is
    no complete run."""
    complete = in_series_order([r for r in runs if r.comparable])
    if not complete:
        raise ValueError("no complete run with judged queries")
    return [r for r in complete if r.judge == max(complete, key=latest_key).judge]
