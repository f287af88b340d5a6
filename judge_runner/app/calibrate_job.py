"""The ``calibrate`` command's job: collection in, index and runs built, judge chosen, calibration written."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judge_runner import __version__
from judge_runner.app.indexing import setting_embedder
from judge_runner.app.steps import make_roles
from judge_runner.calibrate import output
from judge_runner.calibrate.data import Collection, load_beir, load_files, read_qrels, restrict, sample_queries
from judge_runner.calibrate.from_runs import calibrate_from_runs, judge_of
from judge_runner.calibrate.labeling import Labeler, labeler_for
from judge_runner.calibrate.pool import BUILTIN_SYSTEMS, Runs, builtin_runs, control_runs, prepare_index, read_run
from judge_runner.calibrate.run import CalibrationConfig, calibrate
from judge_runner.calibrate.verdicts import PEOPLE_CHECKS
from judge_runner.config import Settings
from judge_runner.core.failures import GateFailedError, IncompleteRunError, UsageError
from judge_runner.core.ids import unique_name
from judge_runner.core.models import JudgeMode
from judge_runner.core.printer import Printer, Say, rich_text, silent
from judge_runner.embed.base import TextEmbedder
from judge_runner.embed.registry import EMBEDDERS, SETTING_ENV, choose
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import build_fingerprint, comparability_key, default_trials
from judge_runner.judging.qrels import people_grades
from judge_runner.llm.errors import LLMError
from judge_runner.runs.read import read_judged_runs
from judge_runner.search.base import SearchIndex
from judge_runner.search.progress import IndexProgress, format_duration
from judge_runner.search.sqlite import IndexMismatchError, SQLiteIndex


@dataclass
class Source:
    """Where the collection comes from: a BEIR folder and split, or three files; ``rescale`` maps the
    qrels' grades onto 0-3 (``--rescale``, as for ``qrels import``)."""

    beir: Path | None = None
    split: str = "test"
    qrels: Path | None = None
    queries: Path | None = None
    corpus: Path | None = None
    rescale: dict[int, int] | None = None

    def load(self) -> Collection:
        """The collection. Raises UsageError unless exactly one of --beir or the three files is given."""
        files = (self.qrels, self.queries, self.corpus)
        if self.beir is not None and not any(files):
            return load_beir(self.beir, self.split, self.rescale)
        if self.beir is None and all(files):
            return load_files(self.qrels, self.queries, self.corpus, rescale=self.rescale)  # type: ignore[arg-type]
        raise UsageError("give either --beir DIR or all of --qrels FILE --queries FILE --corpus FILE")


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest:
    """What ``calibrate`` was asked, built once by the command. Judged: the collection (``source``), a
    ``sample`` of its queries (None: all with qrels), the built-in ``systems`` and the TREC ``run_files``
    compared, the index's ``scope`` (``full``, or ``candidates``: the qrels documents and the BM25 top
    ``candidates`` per query) and file (``db``; None: :func:`default_index_path`). From run files: the
    ``results`` and the human qrels set ``human_set`` (or the file ``source.qrels``). Both: the ``config``,
    the calibration file ``out`` (None: ``calibration/<time id>.json``), ``require_calibrated`` and
    ``dry_run`` (nothing written or printed)."""

    config: CalibrationConfig = field(default_factory=CalibrationConfig)
    source: Source = field(default_factory=Source)
    sample: int | None = None
    systems: tuple[str, ...] = ()
    run_files: tuple[Path, ...] = ()
    scope: str = "full"
    candidates: int = 100
    db: Path | None = None
    results: tuple[Path, ...] = ()
    human_set: str | None = None
    out: Path | None = None
    require_calibrated: bool = False
    dry_run: bool = False


NOT_FOR_RESULTS = (
    "beir",
    "split",
    "queries",
    "corpus",
    "run_files",
    "queries_sample",
    "calibration_trials",
    "compare_output",
    "calibration_mode",
    "probes",
    "systems",
    "pool_depth",
    "corpus_scope",
    "candidates",
    "probe_queries",
    "batch_size",
    "provider",
    "judge_model",
)
"""calibrate's options (parameter names) that shape a judged calibration only: with --results the labels, the
judge and its mode come from the run files."""


def refused_options(given: Mapping[str, str], request: CalibrateRequest) -> list[str]:
    """Why each option of ``given`` (``{parameter name: flag as typed}``, the ones on the command line) would
    have no effect, as "--flag does not apply (why)": a silently ignored option reads as applied, so calibrate
    refuses it. With ``results``: :data:`NOT_FOR_RESULTS`, --rescale of a --human-qrels set, --cache or --db
    beside a --qrels file; otherwise --split without --beir, --candidates without --corpus-scope candidates,
    --batch-size without batched labels, --probe-queries without a probe, --db without a built-in system."""
    qrels, beir, config = request.source.qrels, request.source.beir, request.config
    if request.results:
        rules = [
            (name, True, "--results reads the judge's labels, its mode and the systems from the run files") for name in NOT_FOR_RESULTS
        ]
        rules += [
            ("rescale", request.human_set is not None, "a --human-qrels set is on the judge's 0-3 scale already"),
            ("cache", qrels is not None, "the labels come from --qrels FILE, not from the judgment cache"),
            ("calibration_db", qrels is not None, "with --results it finds the cache of --human-qrels, and --qrels FILE needs none"),
        ]
    else:
        rules = [
            ("split", beir is None, "it picks the qrels of a --beir folder"),
            ("candidates", request.scope != "candidates", "it sets the depth of --corpus-scope candidates"),
            ("batch_size", tuple(config.modes) == ("pointwise",), "only --judge-mode batched or both sends batches"),
            ("probe_queries", not config.probes, "no probe runs (--probes none)"),
            ("calibration_db", not request.systems, "no built-in system searches an index (--systems none)"),
        ]
    return [f"{given[name]} does not apply ({why})" for name, unused, why in rules if unused and name in given]


def default_index_path(collection: Collection, scope: str) -> Path:
    """``.judge-runner/calibrate/<collection>-<scope>-<sha8 of the corpus path>.sqlite``: never the
    evaluation index (calibration prunes whatever is not in the corpus)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", collection.name).strip("-") or "collection"
    digest = hashlib.sha256(str(collection.corpus_path.resolve()).encode()).hexdigest()[:8]
    return Path(".judge-runner") / "calibrate" / f"{slug}-{scope}-{digest}.sqlite"


def judge_envelope(labeler: Labeler, mode: JudgeMode, trials: int, seed: int) -> dict[str, Any]:
    """The ``judge`` block: provider, model, fingerprint (:func:`build_fingerprint`) and its comparability
    key. ``legacyKey`` is null: calibrate measures the label-first protocol (format-version-2 runs); the
    single-call judge of format-version-1 runs is retired, so no calibration can speak for those."""
    fingerprint = build_fingerprint(labeler.name, labeler.model, mode, trials, heuristic=labeler.heuristic).as_dict()
    return {
        "provider": labeler.name,
        "model": labeler.model,
        "heuristic": labeler.heuristic,
        "fingerprint": fingerprint,
        "fingerprintKey": comparability_key(fingerprint),
        "legacyKey": None,
        "adapter": type(labeler).__name__,
    }


def index_plan(collection: Collection, scope: str, candidates: int, queries: int, path: Path) -> str:
    """The line ``calibrate`` prints before indexing: what it indexes, that the index is kept for the next
    calibration of this corpus, that ``--queries-sample`` does not shrink it, and the fast option."""
    documents = len(collection.documents())
    if scope == "candidates":
        return (
            f"indexing the candidate sub-corpus of {collection.name} into {path}: the qrels documents and the BM25 top "
            f"{candidates} of each of the {queries} sampled queries, out of {documents:,} documents. The index is kept: "
            "a later calibration embeds only the documents it does not hold yet."
        )
    return (
        f"indexing the full corpus of {collection.name} ({documents:,} documents) into {path}. The index is kept: a later "
        "calibration of this corpus embeds only what changed. --queries-sample picks the queries but does not shrink "
        f"the index; --corpus-scope candidates indexes only the qrels documents and the BM25 top --candidates of each "
        "sampled query, much faster on a large corpus (systems then re-rank that set)."
    )


def embedding_estimate(chunks: int, embedder: TextEmbedder) -> str:
    """``embedding N chunks with the <kind> embedder: about T (R chunks/s measured on a 2-core machine)``,
    from the registry's :attr:`judge_runner.embed.registry.EmbedderSpec.chunks_per_s`."""
    kind = getattr(embedder, "kind", None) or "torch"
    spec = EMBEDDERS.get(kind)
    rate = spec.chunks_per_s if spec is not None else None
    text = f"embedding {chunks:,} chunks with the {kind} embedder"
    if rate:
        text += f": about {format_duration(chunks / rate)} at the {rate:g} chunks/s measured on a 2-core machine ({SETTING_ENV} chooses for a new index)"
    return text


def planned_progress(
    meter: Callable[[str, int, int], None], embedder: TextEmbedder, say: Callable[[str], None]
) -> Callable[[str, int, int], None]:
    """``meter`` that first says, when embedding starts, how many chunks and about how long
    (:func:`embedding_estimate`)."""

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "embedding" and done == 0:
            say(embedding_estimate(total, embedder))
        meter(stage, done, total)

    return progress


def trec_run_names(run_files: Sequence[Path]) -> list[str]:
    """The system name of each TREC run file: ``run:<file stem>``, ``run:<stem>#2`` ... for a second file of
    that name (``a/bm25.txt`` and ``b/bm25.txt`` are two systems, not one that the second overwrites)."""
    taken: set[str] = set()
    return [unique_name(f"run:{path.stem}", taken) for path in run_files]


def collect_runs(
    index: SearchIndex | None,
    queries: list,
    systems: Sequence[str],
    run_files: Sequence[Path],
    printer: Printer,
    meter: Callable[[str, int, int], None] | None = None,
) -> Runs:
    """The built-in ``systems`` (names of :data:`BUILTIN_SYSTEMS`, plus the controls when ``hybrid`` runs) and
    the TREC runs (``index``: None when no built-in system is asked). Raises UsageError for an unknown
    system name or when no system is left."""
    known = {s.name: s for s in BUILTIN_SYSTEMS}
    unknown = [s for s in systems if s not in known]
    if unknown:
        raise UsageError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    runs: Runs = {}
    if systems:
        assert index is not None, "built-in systems are searched on the index"
        printer.note(f"searching {len(queries)} queries with {', '.join(systems)} ...")
        runs.update(builtin_runs(index, queries, [known[s] for s in systems], progress=meter))
        if "hybrid" in runs:
            runs.update(control_runs(runs["hybrid"]))
    for path, name in zip(run_files, trec_run_names(run_files), strict=True):
        runs[name] = read_run(path, [q.id for q in queries])
        missing = [q.id for q in queries if q.id not in runs[name]]
        if missing:
            printer.err(
                f"warning: {path} has no line for {len(missing)} of the {len(queries)} sampled queries "
                f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}); calibrating on the queries every run ranks"
            )
    if len(runs) < 2:
        raise UsageError("calibration needs at least two systems to compare rankings")
    return runs


def ranked_by_every_run(queries: list, collection: Collection, run_rankings: Sequence[dict]) -> tuple[list, Collection]:
    """``(queries, collection)`` kept to the queries every TREC run ranks: a query a run has no line for
    is not scored for that system (as trec_eval leaves it out), and a system ranking over different
    queries per system would compare nothing; so such a query leaves the calibration for every system.
    Raises UsageError when fewer than two queries are left."""
    kept = [q for q in queries if all(q.id in ranking for ranking in run_rankings)]
    if len(kept) == len(queries):
        return queries, collection
    if len(kept) < 2:
        raise UsageError(f"only {len(kept)} of the {len(queries)} sampled queries are ranked by every --run: nothing to calibrate on")
    return kept, restrict(collection, [q.id for q in kept])


def calibrate_job(settings: Settings, request: CalibrateRequest, printer: Printer, labeler: Labeler | None = None) -> dict:
    """Run one judged calibration and write it; prints the table unless quiet. ``labeler`` overrides the judge
    chosen from ``settings`` (tests, ``--dry-run``). Returns the document. Raises UsageError for bad input,
    IncompleteRunError when the judge fails or the run is interrupted, GateFailedError when
    ``request.require_calibrated`` and the verdict is not ``calibrated`` (written all the same)."""
    source, config, systems, scope = request.source, request.config, request.systems, request.scope
    collection = source.load()
    for note in collection.notes:
        printer.err(f"note: {note}")
    available = len(collection.queries)
    queries = sample_queries(collection, request.sample, config.seed)
    collection = restrict(collection, [q.id for q in queries])
    index_info = None
    index = None
    meter = None if printer.quiet else IndexProgress()
    try:
        if systems:
            path = request.db or default_index_path(collection, scope)
            try:
                index = SQLiteIndex(path, settings.search, setting_embedder(settings))
            except IndexMismatchError as exc:
                raise UsageError(str(exc)) from None
        if labeler is None:  # before anything is embedded: a missing key stops the job here
            labeler = labeler_for(make_roles(settings, False, printer.err, index).judge)
        if not config.trials:  # a judge whose sampling cannot be pinned gets trials enough to show how far it moves
            config = replace(config, trials=default_trials(labeler.name))
        if index is not None:
            printer.note(index_plan(collection, scope, request.candidates, len(queries), path))
            progress = planned_progress(meter, index.embedder, printer.note) if meter is not None else None
            index_info = prepare_index(index, collection, queries, scope, request.candidates, path.parent, progress=progress)
            index_info["path"] = str(path)
            if index_info["indexed"] == 0:
                printer.note(f"the index was up to date ({index_info['unchanged']:,} documents): nothing to embed")
        runs = collect_runs(index, queries, systems, request.run_files, printer, meter)
        queries, collection = ranked_by_every_run(queries, collection, [runs[name] for name in trec_run_names(request.run_files)])
        collection.embedder = index.embedder if index is not None else choose(settings.embedder)  # chooses the passages shown
        started = datetime.now(UTC)
        try:
            document = calibrate(collection, queries, runs, labeler, config, printer.log, meter, available)
        except LLMError as exc:
            raise IncompleteRunError(f"the judge failed during calibration: {type(exc).__name__}: {str(exc)[:300]}") from None
        except KeyboardInterrupt:
            raise IncompleteRunError("calibration interrupted; nothing written") from None
    finally:
        if meter is not None:
            meter.close()
        if index is not None:
            index.close()

    document = {
        "type": "calibration",
        "createdAt": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "judgeRunnerVersion": __version__,
        "judge": judge_envelope(labeler, config.modes[0], config.trials, config.seed),
        "index": index_info,
        **document,
    }
    if request.dry_run:
        return document
    unlabelled_note(document, source, config, printer)
    return written(document, request.out, printer, require_calibrated=request.require_calibrated)


def unlabelled_note(document: dict, source: Source, config: CalibrationConfig, printer: Printer) -> None:
    """With the team's own qrels file (not a BEIR collection) and documents nobody labelled counted as not
    relevant, say how many pooled pairs that is when it is most of the pool, and the option that leaves
    them out."""
    pool = document["pool"]
    unlabelled = pool["pairs"] - pool.get("labelled", pool["pairs"])
    if source.beir is None and config.unlabelled == "non-relevant" and pool["pairs"] and unlabelled > pool["pairs"] / 2:
        printer.err(
            f"note: {unlabelled:,} of the {pool['pairs']:,} pooled pairs carry no label in {source.qrels} and count as not relevant "
            "(TREC pooling); if your labels do not cover every relevant document, give --unlabelled unknown"
        )


def written(document: dict, out: Path | None, printer: Printer, note: str = "", require_calibrated: bool = False) -> dict:
    """Write the calibration ``document`` to ``out`` (default ``calibration/<time id>.json``), print its table
    unless quiet, and say on stderr where it went with its verdict and what it rests on
    (:func:`judge_runner.calibrate.output.verdict_summary`; with no evidence, what the checks against the
    people lack), and ``note``. Returns ``document``. Raises GateFailedError (exit 1) when ``require_calibrated`` and the
    verdict is not ``calibrated``: the file is written all the same."""
    path = out or output.default_path()
    output.write_calibration(document, path)
    if not printer.quiet:
        printer.out(rich_text(lambda console: output.print_table(document, console)))
    verdict = document["verdict"]
    summary = output.verdict_summary(verdict)
    printer.err(f"calibration written to {path}: {verdict['status']}{'; ' + summary if summary else ''}{note}")
    if verdict["status"] == "insufficient":  # what the checks against the people lack, also under --quiet
        for name in PEOPLE_CHECKS:
            if name in verdict.get("missing", {}):
                printer.err(f"  {name}: {verdict['missing'][name]}")
    if require_calibrated and verdict["status"] != "calibrated":
        raise GateFailedError(f"the judge is {verdict['status']}, not calibrated (--require-calibrated): {output.verdict_summary(verdict)}")
    return document


def human_qrels_for(
    settings: Settings,
    qrels: Path | None,
    name: str | None,
    rescale: dict[int, int] | None = None,
    queries: Mapping[str, str] | None = None,
    say: Say = silent,
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """``(qrels on the judge's 0-3 scale, where they came from)``: a TREC qrels or BEIR TSV file (ids
    %-decoded, as ``label`` and ``qrels export`` write them), read and put on 0-3 by the one rule of
    ``qrels import`` (:func:`judge_runner.calibrate.data.read_qrels`, ``rescale`` as ``--rescale``), or the
    human qrels set ``name`` in the judgment cache of ``settings``: its grades of ``queries`` (``{qid: text}``,
    matched by id and text; ``say`` hears of grades left out). Raises UsageError unless exactly one is given,
    or when the file or the set cannot be read or holds nothing."""
    if (qrels is None) == (name is None):
        raise UsageError(
            "with --results give the human labels: --qrels FILE (TREC qrels) or --human-qrels NAME (a set in the judgment cache)"
        )
    if qrels is not None:
        return read_qrels(qrels, rescale), {"humanQrels": str(qrels)}
    path = settings.cache_path
    if path is None or not path.is_file():
        raise UsageError(f"no judgment cache at {path}: give --cache PATH, or --qrels FILE")
    with JudgmentCache(path, readonly=True) as cache:  # its CacheError keeps its exit code (damaged: 3)
        stored = cache.stats()["humanQrels"]
        people = people_grades(cache, [str(name)])
    if str(name) not in stored:
        raise UsageError(f"no human qrels named {name!r} in {path} (it holds: {', '.join(sorted(stored)) or 'none'})")
    grades: dict[str, dict[str, int]] = {}
    for (qid, docid), grade in (people.matching(queries) if queries is not None else {}).items():
        grades.setdefault(qid, {})[docid] = grade
    for line in people.warnings():
        say(line)
    return grades, {"humanQrelsSet": name, "cache": str(path)}


def calibrate_runs_job(settings: Settings, request: CalibrateRequest, printer: Printer) -> dict:
    """``calibrate --results``: the judge that wrote the run files ``request.results`` measured against human
    labels (:func:`human_qrels_for`) with the judge's labels read from the runs
    (:mod:`judge_runner.calibrate.from_runs`): no judge call. Writes the calibration and prints its table
    unless quiet. Returns the document. Raises UsageError for a file that is not a run with judged queries,
    runs of different judges, or labels that match no result; GateFailedError when
    ``request.require_calibrated`` and the verdict is not ``calibrated``."""
    runs = read_judged_runs(request.results, printer.err)
    texts: dict[str, str] = {}
    for run in runs:
        for ev in run.evaluations:
            texts.setdefault(ev.queryId, ev.query)
    human, source = human_qrels_for(settings, request.source.qrels, request.human_set, request.source.rescale, texts, printer.err)
    started = datetime.now(UTC)
    document = calibrate_from_runs(runs, human, request.config, source)
    document = {
        "type": "calibration",
        "createdAt": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "judgeRunnerVersion": __version__,
        "judge": judge_of(runs),
        "index": None,
        **document,
    }
    note = f" (no judge call: labels read from {len(runs)} run files)"
    return written(document, request.out, printer, note, request.require_calibrated)
