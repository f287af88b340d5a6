"""One calibration, from a collection, the systems' runs and a labeller to the calibration document.

:func:`calibrate` is pure apart from the labeller's calls: the command (``judge_runner/cli/calibrate.py``)
loads the collection, builds the index and the runs, and writes what this returns.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from judge_runner.calibrate import probes as probe_mod
from judge_runner.calibrate import stats
from judge_runner.calibrate.collect import CountingLabeler, Labelling, Spend, Study, batching_of, label_counter, label_pool, shown_doc
from judge_runner.calibrate.data import CalibrationQuery, Collection
from judge_runner.calibrate.labeling import Labeler
from judge_runner.calibrate.pool import PoolEntry, Runs, build_pool
from judge_runner.calibrate.verdicts import verdicts
from judge_runner.core.models import JudgeMode
from judge_runner.judging.scores import median_label, ranking_score, relevance_score

FORMAT_VERSION = 3
"""3: verdicts need evidence (minimums, ``insufficient``, ``missing``), expanded and rule-of-three intervals,
trial stability with an interval, ``unlabelled`` and each system's ``labelledAt10``, ``queriesAvailable``."""
UNLABELLED = ("non-relevant", "unknown")
SUBSETS = ("all", "retrieved", "balanced")
REFERENCE_SYSTEM = "hybrid"


@dataclass
class CalibrationConfig:
    """Choices of one calibration: judge ``modes`` (the first is the primary one the verdicts read),
    ``trials`` per pair (0: the judge's default, :func:`judge_runner.judging.fingerprint.default_trials`,
    set by the job once the judge is known), the ``seed`` of every draw, pool ``depth`` (top-k per system), ``probes`` to run on
    ``probe_queries`` queries, bootstrap ``resamples``, documents per batched call (``batch_size``), probe
    sizes, and what a document nobody labelled is (``unlabelled``): ``non-relevant`` (TREC pooling: the
    qrels list every relevant document, as a BEIR or TREC collection's do) or ``unknown`` (left out of the
    pool, of agreement and, by condensed lists, of the system ranking: labels of a sample, as ``label``
    makes); ``compare_output``: label the pool again in the primary mode with no reason asked and set the
    two outputs' agreement with the people side by side (:func:`output_comparison`)."""

    modes: Sequence[JudgeMode] = ("pointwise",)
    trials: int = 1
    seed: int = 13
    depth: int = 10
    probes: Sequence[str] = probe_mod.PROBES
    probe_queries: int = 20
    resamples: int = 1000
    batch_size: int = 10
    position_slots: int = 5
    injection_per_query: int = 3
    length_per_query: int = 4
    unlabelled: str = "non-relevant"
    compare_output: bool = False
    extra: dict = field(default_factory=dict)

    def labelling(self, modes: Sequence[JudgeMode] | None = None) -> Labelling:
        """How the pool is labelled: in ``modes`` (default: every mode of the config)."""
        return Labelling(self.modes if modes is None else modes, self.trials, self.seed, self.batch_size)


def reference_lists(runs: Runs, qids: Sequence[str]) -> tuple[str, dict[str, list[str]]]:
    """``(system, {qid: top 10})`` of the reference system (``hybrid``, else the first)."""
    system = REFERENCE_SYSTEM if REFERENCE_SYSTEM in runs else next(iter(runs))
    return system, {q: runs[system].get(q, [])[:10] for q in qids}


def dimensions_for(
    labels: dict, lists: dict[str, list[str]], labeler: CountingLabeler | None, collection: Collection, queries: Sequence[CalibrationQuery]
) -> tuple[dict[str, dict[str, float | None]], str]:
    """Per query the four dimensions of the reference list: ``relevance`` and ``ranking`` computed from the
    judge's labels (:func:`judge_runner.judging.scores.relevance_score`, against the gain attainable from the
    judge's labels on the query's whole pool, every system's results; :func:`ranking_score`), ``coverage`` and
    ``snippetQuality`` from the labeller's list-level scores when it has them (``labeler.list_scores``), else
    None. Returns ``(dimensions, note)``."""
    out: dict[str, dict[str, float | None]] = {}
    list_level = labeler is not None and hasattr(labeler.inner, "list_scores")

    def list_scores(q: CalibrationQuery) -> dict:
        docids = [d for d in lists.get(q.id, []) if (q.id, d) in labels]
        if not (list_level and docids):
            return {}
        return labeler.list_scores(q, [shown_doc(collection, q, d) for d in docids]) or {}  # type: ignore[union-attr]

    batching = batching_of(labeler)  # --batch: every query's list-level call at once, in shared batches
    listed = batching.map(list_scores, list(queries)) if batching is not None else None
    known: dict[str, dict[str, int]] = {}
    for (qid, docid), trials in labels.items():
        if trials:
            known.setdefault(qid, {})[docid] = median_label(trials)
    for k, q in enumerate(queries):
        docids = [d for d in lists.get(q.id, []) if (q.id, d) in labels]
        grades = [median_label(labels[(q.id, d)]) for d in docids]
        dims: dict[str, float | None] = {
            "relevance": relevance_score(grades, docids, known=known.get(q.id), depth=10),
            "ranking": ranking_score(grades),
            "coverage": None,
            "snippetQuality": None,
        }
        scores = listed[k] if listed is not None else list_scores(q)
        if isinstance(scores, BaseException):
            raise scores
        dims["coverage"], dims["snippetQuality"] = scores.get("coverage"), scores.get("snippetQuality")
        out[q.id] = dims
    note = (
        (
            "relevance and ranking from the labels (label_scores); coverage and snippetQuality from the judge's "
            "list-level scores of the reference list"
        )
        if list_level
        else (
            "relevance and ranking from the labels (label_scores); coverage and snippetQuality unavailable: "
            "the labeller has no list-level call"
        )
    )
    return out, note


def qrels_names(human: Mapping[str, Mapping[str, int]], condensed: bool) -> dict[str, str]:
    """Which qrels the ``human`` and ``judge`` columns of the system ranking are computed against, in words."""
    grades = sum(len(docs) for docs in human.values())
    unlabelled = (
        "documents nobody graded left out of every list (condensed lists, Sakai 2007)"
        if condensed
        else "a document nobody graded is not relevant (trec_eval)"
    )
    return {
        "human": f"people's qrels: {grades} grades on {sum(1 for d in human.values() if d)} queries; {unlabelled}",
        "judge": f"the judge's labels of the same documents, pooled over the systems; {unlabelled}",
    }


def mode_figures(
    mode: JudgeMode, labels: dict, flags: dict, study: Study, config: CalibrationConfig, labeler: CountingLabeler | None = None
) -> dict:
    """Every per-mode figure: agreement on each subset, alpha (``trialsAlpha``, and ``trialStability`` with its
    interval), systems, per-query Spearman, flag rate. With ``config.unlabelled == "unknown"`` the systems
    are ranked on condensed lists (documents without a human label left out, for the people and the judge
    alike, :func:`judge_runner.calibrate.stats.condensed`); each system's ``labelledAt10`` says how much of
    its top 10 people labelled."""
    collection, queries, runs, pool = study.collection, study.queries, study.runs, study.pool
    qids = [q.id for q in queries]
    human_qrels = {q: collection.qrels.get(q, {}) for q in qids}
    judge = stats.judge_qrels(labels)
    ranked = runs
    if config.unlabelled == "unknown":
        ranked = stats.condensed(runs, human_qrels)
        judge = {q: {d: g for d, g in docs.items() if d in human_qrels.get(q, {})} for q, docs in judge.items()}
    human_table = stats.per_query_metrics(ranked, human_qrels, qids)
    judge_table = stats.per_query_metrics(ranked, judge, qids)
    reference, lists = reference_lists(runs, qids)
    dims, note = dimensions_for(labels, lists, labeler, collection, queries)
    human_ndcg = {q: human_table[reference][q]["nDCG@10"] for q in qids}
    labelled = stats.labelled_share(runs, human_qrels, qids)
    return {
        "qrels": qrels_names(human_qrels, config.unlabelled == "unknown"),
        "agreement": {
            s: stats.agreement(stats.pairs_for(pool, labels, s, config.seed), collection.graded, config.resamples, config.seed)
            for s in SUBSETS
        },
        "trialsAlpha": stats.alpha(labels),
        "trialStability": stats.trial_stability(labels, config.resamples, config.seed),
        "flagRate": round(sum(flags.values()) / len(flags), 6) if flags else None,
        "systems": stats.system_ranking(human_table, judge_table, qids, config.resamples, config.seed, labelled),
        "perQuery": {
            "referenceSystem": reference,
            "note": note,
            "spearman": stats.per_query_spearman(human_ndcg, dims, config.resamples, config.seed),
        },
    }


def labelled_pool(pool: dict, collection: Collection) -> dict:
    """The pool without the documents nobody labelled (``--unlabelled unknown``: they are not judged, not
    compared and not probed)."""
    return {q: [e for e in entries if e.docid in collection.qrels.get(q, {})] for q, entries in pool.items()}


def calibrate(
    collection: Collection,
    queries: Sequence[CalibrationQuery],
    runs: Runs,
    labeler: Labeler,
    config: CalibrationConfig,
    progress: Callable[[str], None] = lambda message: None,
    meter: Callable[[str, int, int], None] | None = None,
    available: int | None = None,
) -> dict:
    """The calibration document (``schemas/calibration.schema.json`` without the ``judge``/``createdAt``
    envelope the command adds): pool, per-mode figures, probes, spend and the verdict. ``meter(stage, done,
    total)`` is told the progress of each long step (``labelling <mode>`` and ``probe <name>`` in labels,
    ``statistics`` in bootstrap resamples). ``available``: the queries the collection holds with labels
    before any sample (``queriesAvailable``; default the queries given)."""
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if meter is not None:
            stack.enter_context(stats.observed(resample_counter(meter)))
        pool = build_pool(runs, collection, list(queries), config.depth)
        if config.unlabelled == "unknown":
            pool = labelled_pool(pool, collection)
        study = Study(collection, queries, runs, pool)
        document = _calibrate(study, labeler, config, progress, meter, started, available or len(queries))
    return document


def resample_counter(meter: Callable[[str, int, int], None]) -> Callable[[int], None]:
    """``callback(resamples)`` for :func:`stats.observed` adding up bootstrap resamples under the stage
    ``statistics`` (total unknown)."""
    done = [0]

    def counted(resamples: int) -> None:
        done[0] += resamples
        meter("statistics", done[0], 0)

    return counted


def _calibrate(
    study: Study,
    labeler: Labeler,
    config: CalibrationConfig,
    progress: Callable[[str], None],
    meter: Callable[[str, int, int], None] | None,
    started: float,
    available: int,
) -> dict:
    collection, queries, runs, pool = study.collection, study.queries, study.runs, study.pool
    spend = Spend()
    counting = CountingLabeler(labeler, spend)
    progress(f"pool: {sum(len(v) for v in pool.values())} pairs over {len(queries)} queries and {len(runs)} systems")
    labels = label_pool(counting, study, config.labelling(), progress=progress, meter=meter)
    primary = config.modes[0]
    modes = {}
    for mode in config.modes:
        progress(f"statistics ({mode}) ...")
        modes[mode] = mode_figures(mode, labels.trials[mode], labels.flags[mode], study, config, counting if mode == primary else None)
    results = run_probes(counting, study, probe_sample(queries, config), primary, config, progress, meter)
    compared = output_comparison(counting, study, config, labels.trials[primary], modes[primary], progress)
    document = {
        "formatVersion": FORMAT_VERSION,
        "collection": {
            "name": collection.name,
            "graded": collection.graded,
            "queries": len(queries),
            "queriesAvailable": available,
            "queryIds": [q.id for q in queries],
        },
        "config": {k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in asdict(config).items()},
        "systems": list(runs),
        "pool": pool_figures(pool, collection, config.depth),
        "modes": modes,
        "probes": results,
        "spend": spend.as_dict(),
    }
    if compared is not None:
        document["outputs"] = compared
    document["verdict"] = verdicts(document, primary)
    document["durationS"] = round(time.monotonic() - started, 3)
    return document


def _headline(figures: dict) -> dict:
    """The figures two outputs are compared on: Cohen's kappa at grade 2 with the people, and the system
    ranking's Kendall tau_b (nDCG@10), each with its interval."""
    return {"kappaAt2": figures["agreement"]["all"]["kappaAt2"], "kendallTauB": figures["systems"]["nDCG@10"]["kendallTauB"]}


def output_comparison(
    counting: CountingLabeler,
    study: Study,
    config: CalibrationConfig,
    primary_labels: dict,
    primary_figures: dict,
    progress: Callable[[str], None],
) -> dict | None:
    """With ``compare_output`` (:class:`CalibrationConfig`): the reason written before the grade (every run's protocol) against the
    grade alone (UMBRELA's and the DNA prompt's form), measured the same way against the people: the pool
    labelled again in the primary mode with no reason asked. ``{"reason-first": {kappaAt2, kendallTauB},
    "grade-only": {...}, "labelsChanged": share of pairs whose label differs}``, or a note when the judge
    writes no reason (the offline judge); None without it."""
    if not config.compare_output:
        return None
    other = getattr(counting.inner, "with_output", lambda output: None)("grade-only")
    if other is None:
        return {"note": "not compared: this judge writes no reasoning its grade could follow"}
    mode = config.modes[0]
    progress(f"labelling the pool again, grade only ({mode}) ...")
    relabelled = label_pool(
        CountingLabeler(other, counting.spend), study, config.labelling([mode]), progress=progress, purpose=f"{mode}:grade-only"
    )
    grade_only = relabelled.trials[mode]
    figures = mode_figures(mode, grade_only, relabelled.flags[mode], study, config)
    shared = [k for k in primary_labels if k in grade_only]
    changed = sum(1 for k in shared if median_label(primary_labels[k]) != median_label(grade_only[k]))
    return {
        "mode": mode,
        "reason-first": _headline(primary_figures),
        "grade-only": _headline(figures),
        "labelsChanged": round(changed / len(shared), 6) if shared else None,
    }


def probe_sample(queries: Sequence[CalibrationQuery], config: CalibrationConfig) -> list[CalibrationQuery]:
    """The queries the probes run on: all, or the config's ``probe_queries`` drawn with its ``seed``, in order."""
    probe_set = list(queries)
    if len(probe_set) > config.probe_queries:
        chosen = set(q.id for q in random.Random(config.seed).sample(probe_set, config.probe_queries))
        probe_set = [q for q in probe_set if q.id in chosen]
    return probe_set


def run_probes(
    counting: CountingLabeler,
    study: Study,
    probe_set: list[CalibrationQuery],
    primary: JudgeMode,
    config: CalibrationConfig,
    progress: Callable[[str], None],
    meter: Callable[[str, int, int], None] | None,
) -> dict:
    """``{probe: figures}`` for each of the config's ``probes``, in order: position, injection, length."""
    results: dict = {}
    collection, pool = study.collection, study.pool

    def probe(name: str) -> None:
        progress(f"probe: {name} ...")
        if meter is not None:
            counting.on_labels = label_counter(meter, f"probe {name}", 0)

    if "position" in config.probes:
        probe("position")
        results["position"] = probe_mod.position_probe(
            counting, collection, probe_set, pool, config.trials, config.seed, config.resamples, config.position_slots
        )
    if "injection" in config.probes:
        probe("injection")
        results["injection"] = probe_mod.injection_probe(
            counting, collection, probe_set, pool, primary, config.seed, config.resamples, config.injection_per_query
        )
    if "length" in config.probes:
        probe("length")
        results["length"] = probe_mod.length_probe(
            counting, collection, probe_set, pool, primary, config.seed, config.resamples, config.length_per_query
        )
    counting.on_labels = None
    return results


def pool_figures(pool: Mapping[str, list[PoolEntry]], collection: Collection, depth: int) -> dict:
    """The calibration document's ``pool`` block: how many pairs, retrieved, qrels-only, relevant, labelled."""
    entries = [e for v in pool.values() for e in v]
    return {
        "pairs": len(entries),
        "retrieved": sum(e.retrieved for e in entries),
        "qrelsOnly": sum(not e.retrieved for e in entries),
        "humanRelevant": sum(e.human >= 2 for e in entries),
        "labelled": sum(e.docid in collection.qrels.get(e.qid, {}) for e in entries),
        "depth": depth,
    }
