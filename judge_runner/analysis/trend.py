"""Quality over time: read a folder of run files, group runs judged alike, and tell real changes from noise.

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

from judge_runner.analysis.changes import GATED, comparable_columns, what_changed
from judge_runner.analysis.corrected_change import LABELS_CAUSE, corrected_change, corrected_regression, label_change, same_results
from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line
from judge_runner.core.models import DIMENSIONS
from judge_runner.evaluation.state import MAX_FAILED_SHARE
from judge_runner.judging.fingerprint import comparability_key, legacy_key
from judge_runner.judging.qrels import QrelsError, labels_from_evaluation, pool_qrels, pooled_metrics
from judge_runner.measures.ir import METRIC_NAMES, NDCG10_NAME, RECALL10_NAME, RR_NAME, canonical_metric_name
from judge_runner.measures.paired import MIN_EFFECT, Comparison, compare_values
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.designed import system_view
from judge_runner.runs.lines import ErrorLine, EvaluationLine, Provenance, SummaryLine
from judge_runner.runs.read import RunFile, read_run_folder
from judge_runner.runs.write import cost_per_judged_query

METRICS = METRIC_NAMES  # ir-measures names: nDCG@10, R@10, RR(rel=2)
COLUMNS = (*DIMENSIONS, "overall", NDCG10_NAME, RECALL10_NAME)
BASELINE_FILE = "baseline.json"


@dataclass
class Run:
    """One run as read from its file (:class:`judge_runner.runs.read.RunFile`): its typed evaluations,
    errors, the summary if it has one, and provenance.

    A compare run (several search systems on one query set, judge_runner/compare.py) is seen as its
    reference system (the first) unless ``system`` names another: its evaluations and errors are that
    system's, so its means continue the reference system's trend; :meth:`system_views` gives one Run
    per system."""

    file: RunFile
    system: str | None = None
    pooled: dict[str, dict[str, float]] = field(default_factory=dict)
    """``{queryId: {"nDCG@10": x, "RR(rel=2)": y}}`` against the labels pooled over the runs of the same judge
    and query set (:func:`pool_metrics`); a query not there keeps its own metric."""

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
    def evaluations(self) -> list[EvaluationLine]:
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
        """How this run's labels became scores (``provenance.scoringVersion``; 1 for a file without it)."""
        return self.provenance.scoringVersion

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
        """A complete run that failed: it judged no query (every query failed, or it stopped before judging:
        a refused key, a spent budget in phase one), or more than ``MAX_FAILED_SHARE`` of its queries failed
        (the share at which the run itself ends incomplete). For a compare run, the shown system's lines
        count: a run whose reference system failed is a failed run of that system."""
        if self.partial:
            return False
        judged, errors = len(self.evaluations), self.errors
        return judged == 0 or errors / (judged + errors) > MAX_FAILED_SHARE

    @property
    def failure(self) -> str | None:
        """Why a failed run failed, in words (None when it did not): how many queries failed, the first
        error (type and message), or the summary's stop reason."""
        if not self.failed:
            return None
        judged, errors = len(self.evaluations), self.errors
        text = f"{errors} of {judged + errors} queries failed" if errors else "no query was judged"
        if self.error_lines:
            first = self.error_lines[0]
            text += f" (first: {first.errorType}: {first.message[:120]})"
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
        an older key such as ``Recall@10``); queries without it, or unscored, are left out."""
        out: dict[str, float] = {}
        pooled_column = canonical_metric_name(column) if canonical_metric_name(column) in (NDCG10_NAME, RR_NAME) else None
        for ev in self.evaluations:
            value = ev.value(column)
            if pooled_column and value is not None and ev.queryId in self.pooled:
                value = self.pooled[ev.queryId].get(pooled_column, value)
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
        (:func:`judge_runner.runs.corrected.bias_corrected`): the summary's block when it is of version 2 and
        of that system (a compare run's holds every system's, its top-level figures the reference's), else the
        same computed from the system's evaluation lines (a file written before, or a version-1 block, which
        pooled a compare run's systems); None without wholly labelled queries."""
        summary = self.summary
        block = summary.biasCorrected if summary is not None else None
        if block is not None and block.skipped:  # labels drawn with unequal probabilities: never recomputed as uniform
            return block.model_dump(by_alias=True, mode="json")
        if block is not None and block.design is not None and block.system != self.shown_system:
            return system_view(block.model_dump(by_alias=True, mode="json"), self.shown_system)  # weighted by the draw
        if block is not None and block.version >= 2 and block.system == self.shown_system:
            return block.model_dump(by_alias=True, mode="json")
        if block is None and summary is not None and "biasCorrected" in summary.model_fields_set:
            return None  # the run said: no wholly labelled query
        return bias_corrected([e.line() for e in self.evaluations])

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
        judged, per = cost_per_judged_query([e.line() for e in self.file.evaluations], legacy=legacy)
        if per is not None or judged == 0:
            return per
        if summary is not None and summary.costUsd is not None and summary.evaluated:
            return round(summary.costUsd / summary.evaluated, 6)
        return None


def read_runs(folder: Path) -> tuple[list[Run], list[str]]:
    """Every run in ``folder`` (``*.jsonl``), oldest first, and the reader's warnings (files that are
    not runs, damaged lines, unscored values; :func:`judge_runner.runs.read.read_run_folder`).

    Per run id only the file with the most evaluations is kept (a resumed run writes a second file).
    """
    files, warnings = read_run_folder(folder)
    runs = [Run(f) for f in files]
    pool_metrics(runs)
    return runs, warnings


def pool_metrics(runs: list[Run]) -> None:
    """Score runs that share a judge and a query set against the same qrels (issue 14, item 6): the labels
    of all those runs pooled (:func:`judge_runner.judging.qrels.pool_qrels`: per document the median of the
    runs' labels, unlabelled expected sources at 3), and each run's nDCG@10 and RR recomputed on them
    (:func:`judge_runner.judging.qrels.pooled_metrics`) into ``Run.pooled``. So two configurations are compared
    on one set of labels, not each on its own. A lone run keeps its own metrics (the pool is its labels);
    runs whose query ids clash (QrelsError) are left as they are."""
    families: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        query_set = run.provenance.querySetSha256
        if query_set and run.evaluations:
            families.setdefault((run.judge, query_set), []).append(run)
    for members in families.values():
        if len(members) < 2:
            continue
        try:
            items = [labels_from_evaluation(r.run_id, ev.line()) for r in members for ev in r.evaluations if ev.metrics is not None]
            pooled = pool_qrels(items)
        except QrelsError:
            continue
        for run in members:
            ranked = {ev.queryId: [res.source for res in ev.results] for ev in run.evaluations if ev.metrics is not None}
            run.pooled = pooled_metrics(pooled.qrels, ranked)


def compare(old: Run, new: Run, column: str, min_effect: float = MIN_EFFECT, seed: int = 0) -> Comparison:
    """Compare ``column`` of two runs. Paired when both ran the same query set (same querySetSha256)."""
    same_set = bool(old.provenance.querySetSha256) and old.provenance.querySetSha256 == new.provenance.querySetSha256
    return compare_values(old.values(column), new.values(column), column, paired=same_set, min_effect=min_effect, seed=seed)


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


def build_trend(folder: Path, min_effect: float = MIN_EFFECT) -> Trend:
    """Everything ``judge-runner trend`` shows, as plain data."""
    runs, warnings = read_runs(folder)
    baseline_id = read_baseline(folder)
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.judge, []).append(run)
    out_groups: list[dict[str, Any]] = []
    latest_verdict = None
    # the newest complete run is the latest, judged or failed: a bad week is never hidden behind an older run
    latest_complete = max((r for r in runs if not r.partial), key=lambda r: (r.timestamp, r.run_id), default=None)
    for judge, members in groups.items():
        baseline = next((r for r in members if r.run_id == baseline_id and r.comparable), None)
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
            }
        )
    return Trend(out_groups, warnings, baseline_id, latest_verdict)


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
            d.column: {"column": d.column, "delta": d.delta, "ci95": d.ci95, "n": d.n, "paired": True, "verdict": d.verdict}
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
            }
        )
    return rows


def query_history(folder: Path, query_id: str) -> list[dict]:
    """One query across runs: per run its scores, metrics and the judge's labels."""
    runs, _ = read_runs(folder)
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
                "scores": ev.scores.model_dump(mode="json"),
                "metrics": ev.metrics,
                "labels": [r.relevance for r in ev.results],
            }
        )
    return history


def latest_group(runs: list[Run]) -> list[Run]:
    """The complete runs judged like the newest complete run, oldest first. Raises ValueError when
    there is no complete run."""
    complete = [r for r in runs if r.comparable]
    if not complete:
        raise ValueError("no complete run with judged queries")
    return [r for r in complete if r.judge == complete[-1].judge]


def plot_runs(group: list[Run], out: Path, columns: tuple[str, ...] = COLUMNS, title: str | None = None) -> Path:
    """A PNG line chart of ``columns`` (means over queries) across ``group`` (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    x = list(range(len(group)))
    for column in columns:
        ys = [r.mean(column) for r in group]
        ax.plot(x, [np.nan if y is None else y for y in ys], marker="o", label=column, linewidth=2.4 if column in GATED else 1.2)
    days = [r.timestamp[:10] for r in group]
    labels = days if len(set(days)) == len(days) else [r.timestamp[:16].replace("T", " ") for r in group]
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("mean over queries")
    ax.set_title(title or f"Search quality over time — judge {group[-1].judge_label}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8, ncol=4)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_trend(folder: Path, out: Path) -> Path:
    """A PNG of each dimension, overall and nDCG@10 over time for the newest judge group. Raises
    ValueError when the folder has no complete run."""
    runs, _ = read_runs(folder)
    try:
        group = latest_group(runs)
    except ValueError:
        raise ValueError(f"no complete run in {folder} to plot") from None
    return plot_runs(group, out)
