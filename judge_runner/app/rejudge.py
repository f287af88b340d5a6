"""``judge-runner rejudge RUN.jsonl``: a past run's results judged again by today's judge.

Nothing is searched: each system replays its recorded results with the text its judge was shown. The
new run records the one it re-judges in ``provenance.rejudgeOf`` so ``trend`` can bridge the judge
change. A run without the shown text is refused; a query that failed is not judged again, and said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge_runner.analysis.trend import Run
from judge_runner.app.dry_run import judge_searched
from judge_runner.app.inputs import check_out_dir, load_query_set
from judge_runner.app.steps import RunInputs, evaluate_queries, make_roles, new_job
from judge_runner.config import ConfigError, Settings, derive
from judge_runner.core.failures import UsageError
from judge_runner.core.models import Query
from judge_runner.core.printer import Printer
from judge_runner.core.query_card import QuerySetCard
from judge_runner.estimate.report import build_report, print_report
from judge_runner.evaluation.state import RunOutcome
from judge_runner.judging.fingerprint import build_fingerprint, comparability_key
from judge_runner.judging.llm_judge import SNIPPET_CHARS_SHOWN
from judge_runner.judging.protocol import Judge
from judge_runner.querygen.submitted import query_set_sha256
from judge_runner.runs.lines import EvaluationLine, RejudgeOrigin, ResultLabel
from judge_runner.runs.read import RunFile, read_run_file, read_run_records
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from judge_runner.search.replay import ReplaySearch
from judge_runner.search.systems import System

SOURCE = "the re-judged run's run_start"


@dataclass(frozen=True)
class RecordedSystem:
    """One system of the re-judged run: ``name`` (None: the built-in search alone), ``mode``, ``description``,
    ``answers`` by query text, and ``failures`` (``{query text: (errorType, message)}``)."""

    name: str | None
    mode: str
    description: dict[str, Any]
    answers: dict[str, SearchAnswer]
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)

    def replay(self, corpus_fingerprint: str) -> ReplaySearch:
        return ReplaySearch(
            self.answers, self.name or "builtin", self.description, {"corpus_fingerprint": corpus_fingerprint}, failures=self.failures
        )


@dataclass(frozen=True)
class RejudgeSource:
    """A run to judge again, read once: its file, the queries it judged, the query set to record and its card,
    its systems, and ``notes`` for people."""

    run: RunFile
    queries: list[Query]
    all_queries: list[Query]
    card: QuerySetCard | None
    systems: list[RecordedSystem]
    notes: list[str]

    @property
    def view(self) -> Run:
        """The run as ``trend`` reads it."""
        return Run(read_run_records(self.run.path))

    @property
    def results(self) -> int:
        """Results judged again, every system together."""
        return sum(len(a.results) for s in self.systems for a in s.answers.values())

    def origin(self) -> dict[str, Any]:
        """The provenance fields the new run takes from this one (they win): corpus, search configuration,
        systems, query writer, and ``rejudgeOf``."""
        was = self.run.provenance
        earlier = was.rejudgeOf if was is not None else None  # a re-judged run judged again keeps the first one's place
        block = RejudgeOrigin(
            runId=self.run.run_id,
            file=self.run.path.name,
            timestamp=earlier.timestamp if earlier is not None and earlier.timestamp else self.run.timestamp,
            judge=self.view.judge_label,
            judgeKey=self.view.judge,
            queriesRejudged=len(self.queries),
            queriesNotRejudged=self.not_rejudged,
            stopReason=self.view.cut_short,
        )
        out: dict[str, Any] = {"rejudgeOf": block.model_dump(mode="json")}
        if was is not None:
            out |= {"corpusFingerprint": was.corpusFingerprint, "searchConfig": was.searchConfig, "generatorModel": was.generatorModel}
            systems = (was.model_extra or {}).get("searchSystems")
            if systems:
                out["searchSystems"] = systems
        return out

    @property
    def not_rejudged(self) -> int:
        """Queries no system has results for (failed, or not reached by a run cut short)."""
        judged = {q.id for q in self.queries}
        known = {q.id for q in self.all_queries} | {e.queryId for e in self.run.errors}
        summary = self.run.summary
        per_system = summary.totalQueries // max(1, len(self.systems)) if summary is not None else 0
        return max(len(known - judged), per_system - len(judged), 0)

    @property
    def systems_named(self) -> bool:
        return any(s.name is not None for s in self.systems)


def _hit(result: ResultLabel) -> SearchHit:
    """A hit showing the judge the same source, anchor and text, and the list-level call the same snippet."""
    recorded = (result.model_extra or {}).get("snippet")
    snippet = recorded if isinstance(recorded, str) else ""
    shown = result.shownText or ""
    text: str | None = shown
    if result.shownFrom == "snippet":  # the search gave no text: the judge read its snippet
        text, snippet = None, shown
    document = result.shownFrom == "document"
    return SearchHit(
        rank=result.rank,
        source=result.source,
        anchor=result.anchor,
        lineStart=1,
        lineEnd=1,
        snippet=snippet,
        score=result.score,
        scores=HitScores(),
        matchedBy=[],
        text=text,
        textAnchor=(result.shownAnchor if result.shownAnchor is not None else result.anchor) if document else None,
        textFrom="document" if document else "result",
    )


def _answer(line: EvaluationLine, mode: str) -> SearchAnswer:
    return SearchAnswer(
        query=line.query,
        mode=line.searchMode or mode,
        results=[_hit(r) for r in line.results],
        confident=line.confident,
        latencyMs=line.latencyMs,
        notes=list(line.searchNotes),
    )


def _query(line: EvaluationLine, where: str) -> Query:
    try:
        return Query(
            id=line.queryId, query=line.query, queryIntent=line.queryIntent, queryType=line.queryType, expectedSources=line.expectedSources
        )
    except ValidationError as exc:
        raise UsageError(f"{where}: query {line.queryId!r} cannot be read back: {exc.errors()[0]['msg']}") from None


def read_source(path: Path) -> RejudgeSource:
    """Raises UsageError for a file that is not a run, a run that judged nothing, results without their shown
    text, or two queries of one system with one text."""
    try:
        run = read_run_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not run.is_run:
        raise UsageError(f"{path} is not a judge-runner run file")
    if not run.evaluations:
        raise UsageError(f"{path}: run {run.run_id} judged no query: there are no results to judge again")
    results = [r for e in run.evaluations for r in e.results]
    missing = sum(1 for r in results if r.shownText is None)
    if missing:
        raise UsageError(
            f"{path}: {missing} of {len(results)} results carry no shownText (the text the judge was shown; run files record it "
            "since format version 2): rejudge judges exactly the text the first judge saw and cannot rebuild it. Judge the "
            "query set anew instead (evaluate --queries), which starts a new series under the new judge"
        )
    mode = str((run.run_start.config if run.run_start is not None else {}).get("searchMode") or "hybrid")
    systems = _systems(run, path, mode)
    queries: dict[str, Query] = {}
    for line in run.evaluations:
        queries.setdefault(line.queryId, _query(line, str(path)))
    all_queries, card, notes = _query_set(run, list(queries.values()))
    return RejudgeSource(
        run, list(queries.values()), all_queries, card, systems, [*run.warnings, *notes, *_notes(run, len(queries), results)]
    )


def _systems(run: RunFile, path: Path, mode: str) -> list[RecordedSystem]:
    """The run's systems in order (``provenance.searchSystems``, else as its lines name them)."""
    described = {s.get("name"): s for s in ((run.provenance.model_extra or {}).get("searchSystems") or [])} if run.provenance else {}
    names = list(dict.fromkeys([*described, *(e.system for e in run.evaluations)]))
    names = [n for n in names if any(e.system == n for e in run.evaluations)]
    systems = []
    for name in names:
        answers: dict[str, SearchAnswer] = {}
        ids: dict[str, str] = {}
        lines = [e for e in run.evaluations if e.system == name]
        for line in lines:
            if line.query in ids and ids[line.query] != line.queryId:
                raise UsageError(
                    f"{path}: queries {ids[line.query]!r} and {line.queryId!r} share one text; their results cannot be told apart"
                )
            ids[line.query] = line.queryId
            answers.setdefault(line.query, _answer(line, mode))
        failures = {e.query: (e.errorType or "search_failed", e.message) for e in run.errors if e.system == name and e.query not in answers}
        description = {k: v for k, v in (described.get(name) or {}).items() if k != "name"}
        systems.append(RecordedSystem(name, lines[0].searchMode or mode, description or {"kind": "replay"}, answers, failures))
    return systems


def _query_set(run: RunFile, judged: list[Query]) -> tuple[list[Query], QuerySetCard | None, list[str]]:
    """The set saved beside the run when its sha256 is the run's, else the judged queries."""
    config = run.run_start.config if run.run_start is not None else {}
    saved = run.path.parent / str(config.get("querySetFile") or "")
    sha = run.provenance.querySetSha256 if run.provenance is not None else ""
    if config.get("querySetFile") and saved.is_file():
        try:
            query_set = load_query_set(saved)
        except UsageError:
            query_set = None
        if query_set is not None and sha and query_set_sha256(query_set.queries) == sha:
            return query_set.queries, query_set.card, []
    return (
        judged,
        None,
        [
            f"the query set saved beside {run.path.name} is missing or is not the one it ran on: the new run records the set of its "
            "judged queries, so trend compares it with other runs unpaired"
        ],
    )


def _notes(run: RunFile, judged: int, results: list[ResultLabel]) -> list[str]:
    """A run cut short, failed queries, and what of the shown text is not recorded."""
    notes = []
    view = Run(read_run_records(run.path))
    if view.cut_short:
        total = run.summary.totalQueries if run.summary is not None else judged
        notes.append(f"run {run.run_id} stopped early ({view.cut_short}): the {judged} queries it judged (of {total}) are judged again")
    if run.errors:
        notes.append(f"{len(run.errors)} query line(s) of run {run.run_id} failed and have no results: they are not judged again")
    anchors = sum(1 for r in results if r.shownAnchor is None and r.shownFrom == "document")
    if anchors:
        notes.append(
            f"{anchors} result(s) have no recorded shownAnchor (files written before it was): the judge is shown the "
            "result's own anchor beside the same text"
        )
    cut = sum(1 for r in results if len(str((r.model_extra or {}).get("snippet") or "")) >= SNIPPET_CHARS_SHOWN)
    if cut:
        notes.append(
            f"{cut} snippet(s) are {SNIPPET_CHARS_SHOWN} characters, the most a run file keeps: the list-level call may be shown "
            "less of them than the first judge was"
        )
    return notes


def rejudge_settings(settings: Settings, source: RejudgeSource) -> Settings:
    """``settings`` with the re-judged run's search mode and depth, and batch mode off (a re-judging is no run
    ``--resume`` can pick up). Raises UsageError for a value no setting accepts."""
    config = source.run.run_start.config if source.run.run_start is not None else {}
    deepest = max((len(a.results) for s in source.systems for a in s.answers.values()), default=1)
    limit = config.get("searchLimit") or max(deepest, settings.search_limit)
    changes = {"search_mode": source.systems[0].mode, "search_limit": max(int(limit), deepest), "batch": False}
    try:
        return derive(settings, changes, SOURCE)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def same_judge(judge: Judge, settings: Settings, source: RejudgeSource) -> bool:
    """Whether ``judge`` is the run's judge: its fingerprint with the returned model ids, and the embedder."""
    recorded = source.run.provenance.judgeFingerprint if source.run.provenance is not None else None
    embedder = str((recorded or {}).get("passageEmbedder") or "")
    fingerprint = build_fingerprint(
        judge.name, judge.model, settings.judge_mode, settings.trials, settings.seed, judge.heuristic, passage_embedder=embedder
    )
    returned = source.run.summary.judgeReturnedModels if source.run.summary is not None else []
    return comparability_key(fingerprint.as_dict(), returned) == source.view.judge


def rejudge_job(settings: Settings, path: Path, out_dir: Path, printer: Printer) -> RunOutcome:
    """Judge the run in ``path`` again into a new run file in ``out_dir``. Raises UsageError."""
    source = read_source(path)
    check_out_dir(out_dir)
    if settings.batch:
        printer.err("note: rejudge judges synchronously (--batch is for runs evaluate --resume can pick up)")
    settings = rejudge_settings(settings, source)
    for note in source.notes:
        printer.err(f"note: {note}")
    roles = make_roles(settings, need_generator=False, say=printer.err)
    if same_judge(roles.judge, settings, source):
        printer.err(
            f"note: run {source.run.run_id} was judged by this same judge ({source.view.judge_label}): its labels come from the "
            "judgment cache where it holds them"
        )
    corpus = source.run.provenance.corpusFingerprint if source.run.provenance is not None else ""
    named = source.systems_named
    systems = [System(s.name or "builtin", s.replay(corpus), s.mode, s.description) for s in source.systems] if named else None
    index = None if named else source.systems[0].replay(corpus)
    job = new_job(settings, roles, index, out_dir, printer, systems)
    printer.note(
        f"re-judging run {source.run.run_id} (judge {source.view.judge_label}) with {roles.judge.name}/{roles.judge.model}: "
        f"{len(source.queries)} queries, {source.results} results, nothing searched"
    )
    outcome = evaluate_queries(job, source.queries, RunInputs(all_queries=source.all_queries, card=source.card, origin=source.origin()))
    printer.out(f"{Path(outcome.path).name} re-judges run {source.run.run_id}: trend bridges the judge change through it")
    return outcome


def rejudge_dry_run(settings: Settings, path: Path, printer: Printer, as_json: bool = False) -> dict[str, Any]:
    """``rejudge --dry-run``: what judging ``path`` again would send and cost. Raises UsageError."""
    source = read_source(path)
    settings = rejudge_settings(settings, source)
    for note in source.notes:
        printer.err(f"note: {note}")
    searches = [(s.replay(""), s.mode) for s in source.systems]
    report = build_report("rejudge", settings, judge_searched(settings, source.queries, searches) | {"precision": "recorded"})
    print_report(report, printer, as_json)
    return report
