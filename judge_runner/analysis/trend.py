"""Quality over time: read a folder of run files, group runs judged alike, and tell real changes from noise.

Every run is scored against the qrels known now (:func:`pool_metrics`), so weeks stay comparable; each row
names them (``qrels``). Runs are read for their figures only (:func:`judge_runner.runs.read.read_run_records`).

Scores are comparable only under the same judge: for a format-version-2 run its judge fingerprint
(provider, requested and returned model ids, judge mode, sampling, the sha256 of every prompt and
schema sent, the render version: :func:`judge_runner.judging.fingerprint.comparability_key`); for a
version-1 run the old key (provider, judge model, judge prompt hashes: ``legacy_key``), which never
equals a version-2 key. Runs under another judge form their own group. Search configuration, corpus and
query-set changes are listed as "what changed" beside a delta, never as a barrier.

Two runs on the same query set are compared per query (paired bootstrap of the mean difference);
runs on different query sets (the main job writes a fresh set each time) by an unpaired bootstrap over
queries. Both use ``scipy.stats.bootstrap`` (percentile intervals, 95%, fixed seed; Efron and
Tibshirani 1993). A change is a regression or an improvement only when the interval excludes zero
*and* the difference is at least ``min_effect`` in size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from judge_runner.analysis.changes import GATED, comparable_columns, failed_side, failure_counts, failure_words, what_changed
from judge_runner.analysis.corrected_change import LABELS_CAUSE, corrected_change, corrected_regression, label_change, same_results
from judge_runner.analysis.judge_bridge import annotate, bridged_baseline, in_series_order, judge_steps, latest_key
from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line
from judge_runner.core.models import DIMENSIONS
from judge_runner.evaluation.state import over_failed_share
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import comparability_key, fingerprint_key, legacy_key
from judge_runner.judging.pooled import Sources, build_pool, rescore_records
from judge_runner.judging.scores import SCORING_VERSION
from judge_runner.measures.ir import METRIC_NAMES, NDCG10_NAME, RECALL10_NAME
from judge_runner.measures.paired import MIN_EFFECT, Comparison, compare_values
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.designed import system_view
from judge_runner.runs.lines import ErrorLine, Provenance, SummaryLine
from judge_runner.runs.read import RunRecords, read_run_folder, run_names
from judge_runner.runs.records import Record
from judge_runner.runs.write import cost_per_judged_query

METRICS = METRIC_NAMES  # ir-measures names: nDCG@10, R@10, RR(rel=2)
COLUMNS = (*DIMENSIONS, "overall", NDCG10_NAME, RECALL10_NAME)
BASELINE_FILE = "baseline.json"


@dataclass
class Run:
    """One run as read from its file (:class:`judge_runner.runs.read.RunRecords`): its evaluations (records,
    re-scored against the pooled qrels by :func:`read_runs`), errors, the summary if it has one, and provenance.

    A compare run (several search systems on one query set, judge_runner/compare.py) is seen as its
    reference system (the first) unless ``system`` names another: its evaluations and errors are that
    system's, so its means continue the reference system's trend; :meth:`system_views` gives one Run
    per system."""

    file: RunRecords
    system: str | None = None

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
        """The system whose lines this Run shows: ``system``, else a compare run's reference, else None (all)."""
        systems = self.systems
        return self.system or (systems[0] if systems else None)

    def system_views(self) -> list[Run]:
        """One Run per system of a compare run (reference first); [self] for any other run."""
        return [Run(self.file, name) for name in self.systems] or [self]

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
        """Who judged, with which prompts, on what (empty when the file does not say)."""
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

    @property
    def legacy(self) -> bool:
        return self.file.legacy

    @property
    def scoring_version(self) -> int:
        """How this run's figures were scored: the current version for a file of version 2 or later (re-scored
        when read, :func:`pool_metrics`), else ``provenance.scoringVersion`` (1 for a file without it)."""
        version = self.provenance.scoringVersion
        return SCORING_VERSION if version >= 2 else version

    @property
    def qrels(self) -> dict | None:
        """The qrels its figures were computed against (:meth:`judge_runner.judging.pooled.Pool.block`)."""
        return self.file.qrels

    @property
    def errors(self) -> int:
        """Queries that could not be searched or judged."""
        return len(self.error_lines)

    @property
    def partial(self) -> bool:
        """A run without a summary line (still running, or killed) is left out of comparisons."""
        return self.summary is None

    @property
    def comparable(self) -> bool:
        """Complete and with at least one judged query: a run stopped before judging anything (budget
        spent in phase one, say) has nothing to compare and never becomes the latest or the baseline."""
        return not self.partial and bool(self.evaluations)

    @property
    def failed(self) -> bool:
        """A complete run that failed: the system shown judged no query (every query failed, or it stopped
        before judging: a refused key, a spent budget in phase one), or more than ``MAX_FAILED_SHARE`` of the
        queries of one of its systems failed, whichever this Run shows (the gate at which the run itself ends
        incomplete: :func:`judge_runner.evaluation.state.over_failed_share`)."""
        if self.partial:
            return False
        return not self.evaluations or bool(over_failed_share(failure_counts(self.file)))

    @property
    def failure(self) -> str | None:
        """Why a failed run failed, in words (None when it did not): how many queries failed (of which system,
        in a compare run), the first error (type and message), or the summary's stop reason."""
        if not self.failed:
            return None
        text = failure_words(self.file)
        stop = self.summary.stopReason if self.summary is not None else None
        return text + (f"; stopped: {stop}" if stop else "")

    @property
    def cut_short(self) -> str | None:
        """Why a complete run stopped before its last query (its summary's ``stopReason``: interrupted,
        budget_exhausted, cache_damaged, disk_full...), None for a run that ran to the end or has no summary."""
        summary = self.summary
        if summary is None:
            return None
        if summary.stopReason:
            return summary.stopReason
        return "interrupted" if summary.interrupted else "budget_exhausted" if summary.budgetExhausted else None

    @property
    def judge(self) -> str:
        """What must be equal for scores to be comparable: the judge fingerprint's comparability key
        with the model ids the API returned (format version 2), else the version-1 key."""
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
        """``{queryId: value}`` of a score dimension, ``overall`` or an IR metric (ir-measures name, or
        an older key such as ``Recall@10``), against the pooled qrels; queries without it, or unscored, are
        left out."""
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
        """The share of this Run's off-topic queries on which the search abstained (the shown system's
        lines in a compare run, whose summary pooled every system before issue 21); None without any."""
        off_topic = [e for e in self.evaluations if e.queryType == "off-topic" and e.abstained is not None]
        return sum(1 for e in off_topic if e.abstained) / len(off_topic) if off_topic else None

    @property
    def bias_corrected(self) -> dict | None:
        """Mean nDCG@10 and relevance corrected by the human-labelled queries of the system shown
        (:func:`judge_runner.runs.corrected.bias_corrected`), from its records re-scored against the qrels known
        now (people's grades given since the run count; a compare run's reference with every system's figures and
        differences); the summary's block when it was skipped (labels drawn with unequal probabilities); None
        without wholly labelled queries."""
        summary = self.summary
        block = summary.biasCorrected if summary is not None else None
        if block is not None and block.skipped:  # labels drawn with unequal probabilities: never recomputed as uniform
            return block.model_dump(by_alias=True, mode="json")
        if block is not None and block.design is not None:  # labels drawn by a budget: the run's figure, weighted by the draw
            dumped = block.model_dump(by_alias=True, mode="json")
            return dumped if block.system == self.shown_system else system_view(dumped, self.shown_system)
        if self.systems and self.shown_system == self.systems[0]:  # a compare run's reference: every system's, with differences
            return bias_corrected(self.file.evaluations, self.systems, errors=[e.line() for e in self.file.errors])
        return bias_corrected(self.evaluations)

    @property
    def cost(self) -> float | None:
        return self.summary.costUsd if self.summary is not None else None

    @property
    def batch(self) -> bool:
        """The run sent its judge calls through a batch API (``--batch``: its config says so, or it holds
        ``batch`` lines): its cost is at batch prices, half the synchronous ones, so trend marks it."""
        config = self.file.run_start.config if self.file.run_start is not None else {}
        return bool(self.file.batches) or bool((config or {}).get("batch"))

    @property
    def cost_per_judged_query(self) -> float | None:
        """USD per judged query: the summary's ``costPerJudgedQueryUsd`` when it has one; for an older file
        the same figure from its evaluation lines (:func:`judge_runner.runs.write.cost_per_judged_query`; a
        format-1 run judged every query it evaluated); for lines without costs the summary's ``costUsd``
        over its evaluated queries; None when none of these is known (or no query was judged)."""
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
    """Every run in ``folder`` (``*.jsonl``), oldest first, scored against the qrels known now
    (:func:`pool_metrics`, with the judgment ``cache`` when given), and the reader's warnings (files that are
    not runs, damaged lines, unscored values; :func:`judge_runner.runs.read.read_run_folder`).

    Per run id only the file with the most evaluations is kept (a resumed run writes a second file).
    """
    files, warnings = read_run_folder(folder)
    runs = [Run(f) for f in files]
    pool_metrics(runs, cache)
    return runs, warnings


def pool_metrics(runs: list[Run], cache: JudgmentCache | None = None) -> None:
    """Score every run against the qrels known now: per judge (:attr:`Run.judge`), the labels of all its runs
    pooled with the judgment ``cache``'s labels of that judge and people's grades
    (:func:`judge_runner.judging.pooled.build_pool`), and each run's records re-scored in place
    (:func:`judge_runner.judging.pooled.rescore`: the metrics; relevance and overall for a run scored under
    scoring version 2 or later). So two configurations, and two weeks, are compared on one set of grades,
    never each on its own; ``RunRecords.qrels`` says which."""
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


def compare(old: Run, new: Run, column: str, min_effect: float = MIN_EFFECT, seed: int = 0) -> Comparison:
    """Compare ``column`` of two runs. Paired when both ran the same query set (same querySetSha256); each run's
    failed queries by the rule of :mod:`judge_runner.measures.failed`."""
    same_set = bool(old.provenance.querySetSha256) and old.provenance.querySetSha256 == new.provenance.querySetSha256
    failed = (failed_side(old, f"run {old.run_id}", new), failed_side(new, "this run", old))
    return compare_values(old.values(column), new.values(column), column, paired=same_set, min_effect=min_effect, seed=seed, failed=failed)


def comparisons(old: Run, new: Run, min_effect: float = MIN_EFFECT) -> dict[str, dict]:
    """``{column: comparison}`` of the gated columns two runs can be compared on (:func:`comparable_columns`);
    each marked ``cause`` :data:`judge_runner.analysis.corrected_change.LABELS_CAUSE` when both runs returned the
    same results on every query and their labels differ (the change is the labels', not the search's)."""
    out = {c: compare(old, new, c, min_effect).as_dict() for c in comparable_columns(old, new)}
    if same_results(old, new) and label_change(old, new):
        for entry in out.values():
            entry["cause"] = LABELS_CAUSE
    return out


def versus(old: Run, new: Run, min_effect: float = MIN_EFFECT) -> dict[str, Any]:
    """``new`` against ``old``: ``runId`` (old's), ``changes`` (:func:`what_changed`, and the labels'
    change, :func:`judge_runner.analysis.corrected_change.label_change`), the judge-side ``comparisons``, the
    ``corrected`` change of nDCG@10 and relevance with the people's labels
    (:func:`judge_runner.analysis.corrected_change.corrected_change`; empty without enough labels) and the
    ``regressions`` the gate counts: a column with a corrected change is gated on it (its interval below 0 and
    at least ``min_effect``), any other on the judge's verdict unless its cause is the labels."""
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
    return {"runId": old.run_id, "changes": changes, "comparisons": judged, "corrected": corrected, "regressions": regressions}


def read_baseline(folder: Path) -> str | None:
    """The pinned baseline run id of a results folder, or None."""
    path = Path(folder) / BASELINE_FILE
    try:
        return cast(str | None, json.loads(path.read_text(encoding="utf-8")).get("runId"))
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def set_baseline(folder: Path, run_id: str) -> Run:
    """Pin ``run_id`` (or ``"latest"``: the newest complete run) as the baseline. Raises ValueError
    when no such complete run exists."""
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
    """Runs grouped by judge, each complete run compared with the previous comparable run and with
    the baseline (when pinned and comparable). ``latest_verdict``: the newest complete run, judged or
    failed (``failed``, ``failure``), and whether it regressed against the baseline or previous run."""

    groups: list[dict]
    warnings: list[str]
    baseline: str | None
    latest_verdict: dict | None = None
    judge_changes: list[dict] = field(default_factory=list)
    """Judge changes bridged by a re-judged run (:func:`judge_runner.analysis.judge_bridge.judge_steps`)."""


def build_trend(folder: Path, min_effect: float = MIN_EFFECT, cache: JudgmentCache | None = None) -> Trend:
    """Everything ``judge-runner trend`` shows, as plain data; ``cache``: the judgment cache whose labels and
    people's grades join the pooled qrels (:func:`read_runs`)."""
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
    """``(rows, latest verdict)`` of one judge's runs, oldest first: each comparable run against the previous
    comparable run and the baseline, a compare run's other systems after it; the verdict when it holds the
    newest complete run, else None."""
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
    """A run's row of the trend table before its comparisons: counts, means, cost, failure, corrected block."""
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
    """The newest complete run's verdict against its baseline, else its previous run (none when not comparable)."""
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
    """The rows of a compare run's other systems (the reference is the run's own row): each system's
    means and its paired differences to the reference (``vsReference``, from the run's comparison
    block). They are not chained into vsPrevious/vsBaseline nor gated: the compare run's comparison is
    their comparison."""
    summary = run.summary
    if summary is None or summary.comparison is None:
        return []
    block = summary.comparison
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
    """One query across runs: per run its scores and metrics against the pooled qrels (:func:`read_runs`) and
    its results' labels (``labels``; ``labelOrigins`` says whose each is)."""
    runs, _ = read_runs(folder, cache)
    history = []
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
                "scores": dict(ev.scores),
                "metrics": ev.metrics,
                "labels": [r.relevance for r in ev.results],
                "labelOrigins": [r.labelOrigin for r in ev.results],
            }
        )
    return history


def latest_group(runs: list[Run]) -> list[Run]:
    """The complete runs judged like the newest complete run (a re-judged run never is it), oldest first
    (a re-judged run at the time of the run it re-judges). Raises ValueError when there is no complete run."""
    complete = in_series_order([r for r in runs if r.comparable])
    if not complete:
        raise ValueError("no complete run with judged queries")
    return [r for r in complete if r.judge == max(complete, key=latest_key).judge]
