"""Quality over time: read a folder of run files, group runs judged alike, and tell real changes from noise.

Scores are comparable only under the same judge: provider, judge model and the sha256 of the judge's
prompt templates. Runs under another judge form their own group. Search configuration, corpus and
query-set changes are listed as "what changed" beside a delta, never as a barrier.

Two runs on the same query set are compared per query (paired bootstrap of the mean difference);
runs on different query sets (the main job writes a fresh set each time) by an unpaired bootstrap over
queries. Both use ``scipy.stats.bootstrap`` (percentile intervals, 95%, fixed seed; Efron and
Tibshirani 1993). A change is a regression or an improvement only when the interval excludes zero
*and* the difference is at least ``min_effect`` in size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from judge_runner.metrics import METRIC_NAMES, NDCG10_NAME, RECALL10_NAME
from judge_runner.models import DIMENSIONS
from judge_runner.runfile import RunFile, read_run_folder
from judge_runner.runlines import ErrorLine, EvaluationLine, Provenance, SummaryLine

METRICS = METRIC_NAMES  # ir-measures names: nDCG@10, R@10, RR(rel=2)
COLUMNS = (*DIMENSIONS, "overall", NDCG10_NAME, RECALL10_NAME)
GATED = ("overall", NDCG10_NAME)  # what --fail-on-regression watches
MIN_QUERIES = 5
CONFIDENCE = 0.95
RESAMPLES = 4000
BASELINE_FILE = "baseline.json"


@dataclass
class Run:
    """One run as read from its file (:class:`judge_runner.runfile.RunFile`): its typed evaluations,
    errors, the summary if it has one, and provenance."""

    file: RunFile

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
        return self.file.evaluations

    @property
    def error_lines(self) -> list[ErrorLine]:
        return self.file.errors

    @property
    def summary(self) -> SummaryLine | None:
        return self.file.summary

    @property
    def legacy(self) -> bool:
        return self.file.legacy

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
    def judge(self) -> tuple:
        """What must be equal for scores to be comparable: provider, judge model, judge prompt hashes."""
        p = self.provenance
        prompts = p.promptSha256
        return (p.provider or None, p.judgeModel, prompts.get("judge_system.md"), prompts.get("judge_user.md"))

    @property
    def judge_label(self) -> str:
        provider, model = self.judge[:2]
        label = f"{provider or '?'}/{model or '?'}"
        return label + (" (heuristic)" if self.provenance.heuristicJudge else "")

    def values(self, column: str) -> dict[str, float]:
        """``{queryId: value}`` of a score dimension, ``overall`` or an IR metric (ir-measures name, or
        an older key such as ``Recall@10``); queries without it, or unscored, are left out."""
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
    def cost(self) -> float | None:
        return self.summary.costUsd if self.summary is not None else None


def read_runs(folder: Path) -> tuple[list[Run], list[str]]:
    """Every run in ``folder`` (``*.jsonl``), oldest first, and the reader's warnings (files that are
    not runs, damaged lines, unscored values; :func:`judge_runner.runfile.read_run_folder`).

    Per run id only the file with the most evaluations is kept (a resumed run writes a second file).
    """
    files, warnings = read_run_folder(folder)
    return [Run(f) for f in files], warnings


@dataclass
class Comparison:
    """A change of one column between two runs: mean difference (new - old), its 95% interval, the
    number of queries behind it, whether it was paired, and the verdict."""

    column: str
    delta: float | None
    low: float | None
    high: float | None
    n: int
    paired: bool
    verdict: str  # "regression", "improvement", "within noise", "too few queries"

    def as_dict(self) -> dict:
        return {"column": self.column, "delta": self.delta, "ci95": [self.low, self.high], "n": self.n,
                "paired": self.paired, "verdict": self.verdict}


def compare(old: Run, new: Run, column: str, min_effect: float = 0.03, seed: int = 0) -> Comparison:
    """Compare ``column`` of two runs. Paired when both ran the same query set (same querySetSha256)."""
    from scipy import stats

    a, b = old.values(column), new.values(column)
    same_set = bool(old.provenance.querySetSha256) and old.provenance.querySetSha256 == new.provenance.querySetSha256
    rng = np.random.default_rng(seed)
    if same_set:
        common = sorted(set(a) & set(b))
        diffs = np.array([b[q] - a[q] for q in common])
        if len(diffs) < MIN_QUERIES:
            return Comparison(column, float(diffs.mean()) if len(diffs) else None, None, None, len(diffs), True, "too few queries")
        delta = float(diffs.mean())
        if np.allclose(diffs, diffs[0]):
            low = high = delta
        else:
            ci = stats.bootstrap((diffs,), np.mean, confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile", rng=rng).confidence_interval
            low, high = float(ci.low), float(ci.high)
        n, paired = len(diffs), True
    else:
        x, y = np.array(list(b.values())), np.array(list(a.values()))
        if min(len(x), len(y)) < MIN_QUERIES:
            delta = float(x.mean() - y.mean()) if len(x) and len(y) else None
            return Comparison(column, delta, None, None, min(len(x), len(y)), False, "too few queries")
        delta = float(x.mean() - y.mean())
        ci = stats.bootstrap((x, y), lambda s, t, axis=-1: np.mean(s, axis=axis) - np.mean(t, axis=axis),
                             confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile", vectorized=True,
                             rng=rng).confidence_interval
        low, high = float(ci.low), float(ci.high)
        n, paired = min(len(x), len(y)), False
    if high < 0 and delta <= -min_effect:
        verdict = "regression"
    elif low > 0 and delta >= min_effect:
        verdict = "improvement"
    else:
        verdict = "within noise"
    return Comparison(column, round(delta, 6), round(low, 6), round(high, 6), n, paired, verdict)


def what_changed(old: Run, new: Run) -> list[str]:
    """Differences between two comparable runs that explain a delta: search config, corpus, query set."""
    changes = []
    po, pn = old.provenance, new.provenance
    if po.searchConfig != pn.searchConfig:
        keys = sorted(k for k in set(po.searchConfig) | set(pn.searchConfig) if po.searchConfig.get(k) != pn.searchConfig.get(k))
        changes.append("search config: " + ", ".join(f"{k} {po.searchConfig.get(k)} -> {pn.searchConfig.get(k)}" for k in keys))
    if po.corpusFingerprint != pn.corpusFingerprint:
        changes.append("corpus changed")
    if po.querySetSha256 != pn.querySetSha256:
        changes.append("different query set (unpaired comparison)")
    if po.generatorModel != pn.generatorModel:
        changes.append(f"generator model {po.generatorModel} -> {pn.generatorModel}")
    if po.judgeRunnerVersion != pn.judgeRunnerVersion:
        changes.append(f"judge-runner {po.judgeRunnerVersion} -> {pn.judgeRunnerVersion}")
    return changes


def read_baseline(folder: Path) -> str | None:
    """The pinned baseline run id of a results folder, or None."""
    path = Path(folder) / BASELINE_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("runId")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def set_baseline(folder: Path, run_id: str) -> Run:
    """Pin ``run_id`` (or ``"latest"``: the newest complete run) as the baseline. Raises ValueError
    when no such complete run exists."""
    runs, _ = read_runs(folder)
    complete = [r for r in runs if r.comparable]
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
        json.dumps({"runId": chosen.run_id, "setAt": datetime.now(UTC).isoformat(timespec="seconds")}, indent=2) + "\n",
        encoding="utf-8")
    return chosen


@dataclass
class Trend:
    """Runs grouped by judge, each complete run compared with the previous comparable run and with
    the baseline (when pinned and comparable)."""

    groups: list[dict]
    warnings: list[str]
    baseline: str | None
    latest_verdict: dict | None = None


def build_trend(folder: Path, min_effect: float = 0.03) -> Trend:
    """Everything ``judge-runner trend`` shows, as plain data."""
    runs, warnings = read_runs(folder)
    baseline_id = read_baseline(folder)
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.judge, []).append(run)
    out_groups = []
    latest_verdict = None
    latest_complete = max((r for r in runs if r.comparable), key=lambda r: (r.timestamp, r.run_id), default=None)
    for judge, members in groups.items():
        rows = []
        previous: Run | None = None
        baseline = next((r for r in members if r.run_id == baseline_id and r.comparable), None)
        for run in members:
            row: dict[str, Any] = {
                "runId": run.run_id, "timestamp": run.timestamp, "file": run.path.name, "judge": run.judge_label,
                "evaluated": len(run.evaluations), "failed": run.errors, "partial": run.partial, "comparable": run.comparable,
                "means": {c: run.mean(c) for c in COLUMNS}, "costUsd": run.cost,
            }
            if run.comparable:
                if previous is not None:
                    row["vsPrevious"] = {"runId": previous.run_id, "changes": what_changed(previous, run),
                                         "comparisons": {c: compare(previous, run, c, min_effect).as_dict() for c in GATED}}
                if baseline is not None and baseline is not run:
                    row["vsBaseline"] = {"runId": baseline.run_id, "changes": what_changed(baseline, run),
                                         "comparisons": {c: compare(baseline, run, c, min_effect).as_dict() for c in GATED}}
                if run is latest_complete:
                    against = row.get("vsBaseline") or row.get("vsPrevious")
                    latest_verdict = {"runId": run.run_id, "against": against["runId"] if against else None,
                                      "regression": bool(against) and any(c["verdict"] == "regression" for c in against["comparisons"].values()),
                                      "comparisons": against["comparisons"] if against else {}}
                previous = run
            rows.append(row)
        reason = None
        if len(groups) > 1:
            reason = "runs judged by another provider, model or judge prompt are not comparable with the others"
        from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line

        calibration = calibration_for_provenance(calibration_folder(folder), members[-1].provenance.model_dump())
        out_groups.append({"judge": members[0].judge_label, "judgeKey": list(judge), "reason": reason, "runs": rows,
                           "baseline": baseline.run_id if baseline else None, "calibration": calibration_line(calibration)})
    return Trend(out_groups, warnings, baseline_id, latest_verdict)


def query_history(folder: Path, query_id: str) -> list[dict]:
    """One query across runs: per run its scores, metrics and the judge's labels."""
    runs, _ = read_runs(folder)
    history = []
    for run in runs:
        ev = next((e for e in run.evaluations if e.queryId == query_id), None)
        if ev is None:
            continue
        history.append({"runId": run.run_id, "timestamp": run.timestamp, "judge": run.judge_label, "query": ev.query,
                        "scores": ev.scores.model_dump(mode="json"), "metrics": ev.metrics,
                        "labels": [r.relevance for r in ev.results]})
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
        ax.plot(x, [np.nan if y is None else y for y in ys], marker="o", label=column,
                linewidth=2.4 if column in GATED else 1.2)
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
