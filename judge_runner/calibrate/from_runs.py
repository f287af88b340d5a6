"""Calibration on the team's own grades without paying again: ``calibrate --results RUN.jsonl ...`` measures the
judge that wrote the runs against people's grades of the same pairs, its labels read from the run files
(``judgeLabel`` where an assessor's grade won). A document returned several times counts once with its best
label, across runs the median. A returned document nobody graded is unknown by default: left out, the ranking
computed on condensed lists (Sakai 2007); with ``non-relevant`` it counts 0, as in TREC pooling. Figures and
verdicts are a judged calibration's, so both agree on the same pairs; no probes."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from judge_runner.calibrate.collect import Spend, Study
from judge_runner.calibrate.data import CalibrationQuery, Collection, is_graded
from judge_runner.calibrate.pool import PoolEntry, Runs
from judge_runner.calibrate.run import FORMAT_VERSION, CalibrationConfig, mode_figures
from judge_runner.calibrate.stats import trial_stability
from judge_runner.calibrate.verdicts import verdicts
from judge_runner.core.failures import UsageError
from judge_runner.judging.fingerprint import comparability_key
from judge_runner.measures.agreement import trials_alpha
from judge_runner.runs.read import RunFile, run_names


def judge_label(result: Any) -> int | None:
    """The judge's own label of a result: ``relevance``, or ``judgeLabel`` where an assessor's grade won (None
    in files from before it was kept)."""
    if result.labelOrigin == "human":
        return cast(int | None, result.judgeLabel)
    return int(result.relevance)


def judge_of(runs: Sequence[RunFile]) -> dict[str, Any]:
    """The calibration's ``judge`` block from the runs' provenance. Raises UsageError for a run without a judge
    fingerprint, or runs of different fingerprints."""
    keys: dict[str, str] = {}
    for run in runs:
        provenance = run.provenance
        if provenance is None or not provenance.judgeFingerprint:
            raise UsageError(f"{run.path} has no judge fingerprint (a format-1 run): its labels cannot be attributed to a judge")
        keys[comparability_key(provenance.judgeFingerprint)] = str(run.path)
    if len(keys) > 1:
        raise UsageError(
            "the runs were judged under different judge fingerprints (" + ", ".join(sorted(keys.values())) + "); give runs of one judge"
        )
    provenance = runs[0].provenance
    assert provenance is not None and provenance.judgeFingerprint  # checked above
    return {
        "provider": provenance.provider,
        "model": provenance.judgeModel or "",
        "heuristic": provenance.heuristicJudge,
        "fingerprint": dict(provenance.judgeFingerprint),
        "fingerprintKey": next(iter(keys)),
        "legacyKey": None,
        "adapter": "run files",
    }


def system_names(runs: Sequence[RunFile]) -> list[str]:
    """``run:<name>`` per run file (:func:`judge_runner.runs.read.run_names`)."""
    return [f"run:{name}" for name in run_names(runs)]


def system_lists(runs: Sequence[RunFile]) -> Runs:
    """``{system: {qid: [source, ...best first]}}``: one system per run, or per system of a compare run
    (``run:<runId>/<system>``); a repeated source keeps its best rank."""
    out: Runs = {}
    for run, run_name in zip(runs, system_names(runs), strict=True):
        for ev in run.evaluations:
            if ev.metrics is None:  # off-topic: no ranking to compare
                continue
            name = run_name + (f"/{ev.system}" if ev.system else "")
            ranked = out.setdefault(name, {}).setdefault(ev.queryId, [])
            for r in ev.results:
                if r.source not in ranked:
                    ranked.append(r.source)
    return out


@dataclass
class RunLabels:
    """The judge's labels in run files on the queries people graded: ``scaled`` the human qrels (plus a 0 for
    each ungraded returned document unless ``unknown``), ``per_run`` each run's best label per pair, ``scored``
    every scored query, ``missing_*`` results lacking a grade or a label."""

    scaled: dict[str, dict[str, int]]
    unknown: bool
    texts: dict[str, str] = field(default_factory=dict)
    per_run: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    flags: dict[tuple[str, str], bool] = field(default_factory=dict)
    in_systems: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    trial_labels: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    scored: set[str] = field(default_factory=set)
    missing_human: int = 0
    missing_judge: int = 0

    def read(self, runs: Sequence[RunFile]) -> None:
        """Gather every scored evaluation of ``runs`` on a graded query."""
        for run, run_name in zip(runs, system_names(runs), strict=True):
            for ev in run.evaluations:
                if ev.metrics is not None:
                    self.scored.add(ev.queryId)
                if ev.queryId not in self.scaled or ev.metrics is None:
                    continue
                self.texts.setdefault(ev.queryId, ev.query)
                for source, grade in self.best_labels(ev, run_name).items():
                    self.per_run.setdefault((ev.queryId, source), []).append(grade)

    def best_labels(self, ev: Any, run_name: str) -> dict[str, int]:
        """``{source: best judge label}`` of one evaluation line."""
        scaled = self.scaled[ev.queryId]
        best: dict[str, int] = {}
        for r in ev.results:
            own = judge_label(r)
            key = (ev.queryId, r.source)
            if r.source not in scaled:
                self.missing_human += 1
                if self.unknown:
                    continue
                scaled[r.source] = 0  # --unlabelled non-relevant: TREC pooling
            if own is None:
                self.missing_judge += 1
                continue
            best[r.source] = max(best.get(r.source, 0), own)
            self.flags[key] = self.flags.get(key, False) or r.injectionSuspected
            self.in_systems.setdefault(key, set()).add(run_name + (f"/{ev.system}" if ev.system else ""))
            if r.labelOrigin == "judge" and len(r.trialLabels) > 1:  # one unit per run's labels: a run's trials
                self.trial_labels[(ev.queryId, f"{r.source}\t{run_name}\t{ev.system or ''}")] = list(r.trialLabels)
        return best

    def pool(self, queries: Sequence[CalibrationQuery]) -> dict[str, list[PoolEntry]]:
        """``{qid: [PoolEntry]}``: every pair with both a label and a grade."""
        return {
            q.id: [
                PoolEntry(q.id, d, tuple(sorted(self.in_systems[(qid, d)])), self.scaled[q.id][d])
                for (qid, d) in self.per_run
                if qid == q.id
            ]
            for q in queries
        }


def calibrate_from_runs(
    runs: Sequence[RunFile], human: Mapping[str, Mapping[str, int]], config: CalibrationConfig, labels_source: Mapping[str, Any]
) -> dict:
    """The calibration document (without the job's ``createdAt``/``judge`` envelope) of the judge that wrote
    ``runs`` against ``human`` (``{qid: {docid: grade 0-3}}``). Raises UsageError when no run holds a graded
    query or no pair has both."""
    started = time.monotonic()
    found = RunLabels({q: dict(d) for q, d in human.items()}, unknown=config.unlabelled == "unknown")
    graded = is_graded(found.scaled)
    found.read(runs)
    if not found.texts:
        raise UsageError("no query of these runs has human labels: label some with `judge-runner label`, or check the qrels' query ids")
    if not found.per_run:
        raise UsageError("no returned document carries both a human and a judge label in these runs")
    queries = [CalibrationQuery(q, found.texts[q]) for q in sorted(found.texts)]
    systems = system_lists(runs)
    pool = found.pool(queries)
    collection = Collection({q.id: q.text for q in queries}, {q.id: found.scaled[q.id] for q in queries}, Path("-"), graded, "run files")
    mode = str((runs[0].provenance.judgeFingerprint or {}).get("mode") or "pointwise") if runs[0].provenance else "pointwise"
    figures = mode_figures(mode, found.per_run, found.flags, Study(collection, queries, systems, pool), config)  # type: ignore[arg-type]
    trial_labels = found.trial_labels
    figures["trialsAlpha"] = trials_alpha(list(trial_labels.values())) if trial_labels else None  # across a run's trials, not runs
    figures["trialStability"] = trial_stability(trial_labels, config.resamples, config.seed)
    document = {
        "formatVersion": FORMAT_VERSION,
        "collection": {
            "name": "run files",
            "graded": graded,
            "queries": len(queries),
            "queriesAvailable": len(found.scored),
            "queryIds": [q.id for q in queries],
        },
        "config": {k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in asdict(config).items()},
        "systems": list(systems),
        "pool": pool_figures(pool, human, systems),
        "labels": {
            **labels_source,
            "runs": [str(r.path) for r in runs],
            "resultsWithoutHumanLabel": found.missing_human,
            "resultsWithoutJudgeLabel": found.missing_judge,
        },
        "modes": {mode: figures},
        "probes": {},
        "spend": Spend().as_dict(),
    }
    document["verdict"] = verdicts(document, mode)
    document["durationS"] = round(time.monotonic() - started, 3)
    return document


def pool_figures(pool: dict[str, list[PoolEntry]], human: Mapping[str, Mapping[str, int]], systems: Runs) -> dict[str, int]:
    """The ``pool`` block: every pair was returned; depth is a system's longest list."""
    entries = [e for v in pool.values() for e in v]
    return {
        "pairs": len(entries),
        "retrieved": len(entries),
        "qrelsOnly": 0,
        "humanRelevant": sum(e.human >= 2 for e in entries),
        "labelled": sum(e.docid in human.get(e.qid, {}) for e in entries),
        "depth": max((len(d) for s in systems.values() for d in s.values()), default=0),
    }
