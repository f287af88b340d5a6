"""Calibration on the team's own labels without paying again: the judge's labels read from run files.

``judge-runner calibrate --results RUN.jsonl ... --qrels ours.qrels`` (or ``--human-qrels NAME``, a set in the
judgment cache, e.g. made with ``judge-runner label``) measures the judge that wrote the runs against the
people's labels of the same (query, document) pairs. Nothing is judged: the judge's label of a result is its
``relevance`` when the judge gave it, or ``judgeLabel`` when a human label won in that run (the judge's own
label is recorded beside it since issue 20).

The pairs are every (query, returned document) of the runs that carries both a human and a judge label; a
document returned several times by one run counts once with its best label (as the run's metrics count it),
and across runs the median of the runs' labels (:func:`judge_runner.judging.scores.median_label`, as
``qrels export`` pools). A returned document nobody labelled is unknown by default (``CalibrationConfig.unlabelled``
``unknown``): left out of agreement and of the system ranking, which is computed on condensed lists (each
system's documents that people labelled, in its order; Sakai 2007), so a system whose documents nobody
labelled is not ranked last for it; with ``non-relevant`` it is a 0, as in TREC pooling. The queries are
those with human labels; ``queriesAvailable`` is the scored queries of the runs (what more labelling could
reach). The systems are the runs' systems (one per run file, or per system of a compare run); with fewer than
four the ranking check is insufficient. The figures and verdicts are those of
:func:`judge_runner.calibrate.run.mode_figures`, the same code as a calibration the judge labels, so both agree
on the same pairs. No probe runs (they need new calls).
"""

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
    """The judge's own label of one result (a :class:`judge_runner.runs.lines.ResultLabel`): ``relevance``
    when the judge gave it, ``judgeLabel`` when a human label won (None in files written before it was kept)."""
    if result.labelOrigin == "human":
        return cast(int | None, result.judgeLabel)
    return int(result.relevance)


def judge_of(runs: Sequence[RunFile]) -> dict[str, Any]:
    """The ``judge`` block of the calibration, from the runs' provenance: provider, model, heuristic,
    fingerprint and its comparability key. Raises UsageError when a run has no judge fingerprint (format 1)
    or the runs were judged under different fingerprints."""
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
    """The system name of each run file, ``run:<name>`` (:func:`judge_runner.runs.read.run_names`: its run id,
    ``<id>#2`` for another run that shares an old-format id); a compare run's systems add ``/<system>``."""
    return [f"run:{name}" for name in run_names(runs)]


def system_lists(runs: Sequence[RunFile]) -> Runs:
    """``{system: {qid: [source, ...best first]}}``: one system per run (``run:<runId>``,
    :func:`system_names`), or per system of a compare run (``run:<runId>/<system>``); a source returned
    twice is kept at its best rank."""
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
    """The judge's labels in run files on the queries people labelled, gathered run by run (:meth:`read`).

    ``scaled``: the human qrels, plus a 0 for each returned document nobody labelled unless ``unknown``;
    ``texts``: ``{qid: query text}``; ``per_run``: ``{(qid, docid): [each run's best judge label]}``;
    ``flags``: whether the judge suspected an injection; ``in_systems``: the systems that returned the pair;
    ``trial_labels``: a run's trial labels per (qid, its document, run and system joined by tabs); ``scored``:
    every scored query of the runs; ``missing_human``, ``missing_judge``: results without a human, a judge label."""

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
        """Gather every scored evaluation of ``runs`` on a query with human labels."""
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
        """``{source: best judge label}`` of one evaluation line, counting what is missing and noting flags,
        systems and trials."""
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
        """``{qid: [PoolEntry]}``: every pair with both labels, with the systems that returned it."""
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
    """The calibration document (without the ``createdAt``/``judge`` envelope the job adds) of the judge that
    wrote ``runs`` against the human qrels ``human`` (``{qid: {docid: grade}}`` on the judge's 0-3 scale, as
    :func:`judge_runner.calibrate.data.read_qrels` and ``qrels import`` put them); ``labels_source`` is
    recorded as ``labels``.
    Raises UsageError when no run holds a query with human labels, or no pair has both labels."""
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
    """The ``pool`` block of runs' pairs: every pair was returned; its depth is the longest list of a system."""
    entries = [e for v in pool.values() for e in v]
    return {
        "pairs": len(entries),
        "retrieved": len(entries),
        "qrelsOnly": 0,
        "humanRelevant": sum(e.human >= 2 for e in entries),
        "labelled": sum(e.docid in human.get(e.qid, {}) for e in entries),
        "depth": max((len(d) for s in systems.values() for d in s.values()), default=0),
    }
