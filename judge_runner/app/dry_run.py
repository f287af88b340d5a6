"""``--dry-run``: what ``evaluate``, ``generate-and-evaluate``, ``weekly`` and ``calibrate``
would send and cost. Nothing is sent, no key is needed, nothing is written. On a known query set the
estimate is exact in calls (each query is searched); with a set still to write it is rough
(docs/cost.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge_runner.app.indexing import check_corpus, open_index, require_folder
from judge_runner.app.inputs import Searches, close_systems, load_query_set, open_search_systems, reopen_search_systems, resolve_systems
from judge_runner.app.resume import ResumePoint, check_same_systems, read_resume_point, rebuilds_systems, resumed_settings
from judge_runner.app.roles import check_batch_provider
from judge_runner.calibrate.labeling import ProtocolLabeler
from judge_runner.config import ConfigError, Settings
from judge_runner.core.failures import UsageError
from judge_runner.core.models import QUERY_TYPES, Query
from judge_runner.core.printer import Printer
from judge_runner.core.resources import load_prompt
from judge_runner.corpus.walk import parse_extensions, walk_corpus
from judge_runner.embed.registry import choose
from judge_runner.estimate.answers import estimate_answers, estimate_labels, search_all
from judge_runner.estimate.costs import (
    AGENT_MAX_TOKENS,
    AGENT_TURN_OUTPUT_TOKENS,
    CHARS_PER_TOKEN,
    CONTEXT_TOKENS,
    EXPECTED_AGENT_TURNS,
    MODES,
    QUERY_OUTPUT_TOKENS,
    ROUGH_SNIPPET_CHARS,
    ModelEstimate,
    RecordingJudge,
    tokens,
    wire_parts,
)
from judge_runner.estimate.report import build_report, print_report
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import default_trials
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.labelling import LabelTask, ProtocolSettings, label_documents
from judge_runner.judging.qrels import human_grades
from judge_runner.llm.pricing import Price, price_for
from judge_runner.llm.registry import PROVIDERS, detect, get_spec
from judge_runner.querygen.agent import MAX_TOOL_TURNS, READ_CAP_CHARS, TOOLS, first_turn, submit_tool
from judge_runner.querygen.submitted import query_set_sha256
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit, SearchIndex
from judge_runner.search.passages import SHOWN_TEXT_CAP
from judge_runner.search.systems import SystemsSpec


# -- which judges -------------------------------------------------------------------------------------------
def candidates(settings: Settings, generator: bool = False) -> list[tuple[str, str, Price | None, bool]]:
    """``[(provider, model, price or None, chosen)]``: the chosen judge (or query writer, ``generator``) first,
    then each other LLM provider's default model. An offline choice gives only the comparison rows. Raises
    UsageError for ``--batch`` with the heuristic judge."""
    spec, reason = (
        detect() if settings.provider == "auto" else (get_spec(settings.provider), settings.source_of("provider") or "the provider setting")
    )
    if not generator:
        try:
            check_batch_provider(spec, reason, settings)  # refused as the real run refuses it (exit 2)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    out: list[tuple[str, str, Price | None, bool]] = []
    if not spec.heuristic:
        model = settings.model if generator else (settings.judge_model or settings.model)
        model = model or spec.default_model
        out.append((spec.name, model, price_for(model) or settings.user_price, True))
    for other in PROVIDERS.values():
        if not other.heuristic and other.name != spec.name:
            out.append((other.name, other.default_model, price_for(other.default_model), False))
    return out


# -- phase two ------------------------------------------------------------------------------------------------
def read_only_cache(settings: Settings) -> Any:
    """The judgment cache, read-only, when its file exists (None otherwise: a dry run creates nothing). Raises
    CacheError for a damaged file (exit 3) or one that is not a judgment cache (exit 2)."""
    path = settings.cache_path
    if path is None or not Path(path).exists():
        return None
    return JudgmentCache(path, readonly=True)  # a dry run writes nothing; its CacheError keeps its exit code


def chosen_spec(settings: Settings) -> Any:
    """The provider the run would judge with (``auto``: the one a key is found for, else offline)."""
    return detect()[0] if settings.provider == "auto" else get_spec(settings.provider)


def heuristic_judge(settings: Settings, embedder: Any = None) -> HeuristicJudge | None:
    """The heuristic judge the run would build (``embedder``: the index's, else the setting's, as
    :func:`judge_runner.app.roles.build_roles` chooses), whose cache identity holds the embedder; None when an
    LLM judges (the chosen row's identity is the run's)."""
    spec = chosen_spec(settings)
    return HeuristicJudge(embedder if embedder is not None else choose(settings.embedder)) if spec.heuristic else None


def judge_searched(settings: Settings, queries: list[Query], searches: Sequence[tuple[Any, ...]], embedder: Any = None) -> dict[str, Any]:
    """Search each query, then estimate every candidate judge; ``runJudge``: the labels the run's own judge
    would reuse or make, under its own cache key (``embedder``: the run's index's)."""
    answers, failed, why = search_all(queries, searches, settings.search_limit)
    cache = read_only_cache(settings)
    try:
        human = human_grades(cache, settings.human_qrels, {q.id: q.query for q in queries})
        judges = estimate_answers(answers, candidates(settings), _protocol(settings), cache, human, settings.reasoning_effort)
        own = heuristic_judge(settings, embedder)
        mine = estimate_labels(answers, own, _protocol(settings), cache, human).figures() if own is not None else None
        held = cache.stats() if cache is not None else None
    finally:
        if cache is not None:
            cache.close()
    return {
        "precision": "searched",
        "queries": len(queries),
        "searches": len(answers),
        "searchFailures": failed,
        "firstSearchFailure": why,
        "judges": [j.figures() for j in judges],
        "runJudge": mine or next(({**j.figures()} for j in judges if j.chosen), None),
        "judgmentCache": cache_holdings(settings, held),
    }


def cache_holdings(settings: Settings, stats: dict[str, Any] | None) -> dict[str, Any]:
    """``{"path", "state" ("off", "absent" or "present"), "labels", "labelsByJudge"}``, so the report can say why
    labels are (not) in the cache."""
    path = settings.cache_path
    if path is None:
        return {"path": None, "state": "off", "labels": 0, "labelsByJudge": {}}
    if stats is None:
        return {"path": str(path), "state": "absent", "labels": 0, "labelsByJudge": {}}
    return {"path": str(path), "state": "present", "labels": sum(stats["labels"].values()), "labelsByJudge": stats["labelsByJudge"]}


def _protocol(settings: Settings) -> ProtocolSettings:
    return ProtocolSettings(settings.judge_mode, settings.trials, settings.seed, settings.weights, settings.search_limit)


# -- phase one (rough) ----------------------------------------------------------------------------------------
def rough_judge(settings: Settings, count: int, systems: int = 1) -> dict[str, Any]:
    """Phase two of a query set not yet written: ``count`` on-topic queries on ``systems`` systems, each result
    at the shown-text cap, nothing cached (a new set is never in the cache)."""
    filler = ("Rotate the staging database backup keys with the key tool, then restart the replica. " * 40)[:SHOWN_TEXT_CAP]
    hits = [
        SearchHit(
            rank=i + 1,
            source=f"guides/some-document-{i + 1}.md",
            anchor="Operations > Backups",
            lineStart=1,
            lineEnd=20,
            snippet=filler[:ROUGH_SNIPPET_CHARS],
            score=1.0,
            scores=HitScores(),
            matchedBy=["fts"],
            text=filler,
        )
        for i in range(settings.search_limit)
    ]
    answers = [
        (
            Query(
                id=f"q{n}",
                query=f"how do I rotate the backup keys of the staging database {n}",
                queryIntent="An operator needs the exact steps to rotate the keys without losing the replica.",
                queryType="natural-language",
                expectedSources=["guides/some-document-1.md"],
            ),
            SearchAnswer(query="q", mode="hybrid", results=hits, confident=True, latencyMs=0.0),
        )
        for n in range(count * systems)
    ]
    judges = estimate_answers(answers, candidates(settings), _protocol(settings), effort=settings.reasoning_effort)
    own = heuristic_judge(settings)
    mine = estimate_labels(answers, own, _protocol(settings)).figures() if own is not None else None
    return {
        "precision": "rough",
        "queries": count,
        "searches": count * systems,
        "searchFailures": 0,
        "judges": [j.figures() for j in judges],
        "runJudge": mine or next((j.figures() for j in judges if j.chosen), None),
    }


def agent_calls(base: int, turns: int, result_tokens: int, turn_out: int, last_out: int) -> tuple[int, int, int]:
    """``(requests, input tokens, output tokens)`` of ``turns`` agent requests: request t resends ``base``
    tokens plus t replies of ``turn_out`` and t tool results of ``result_tokens``, capped at
    :data:`CONTEXT_TOKENS`; the last reply is ``last_out``."""
    step = result_tokens + turn_out
    return turns, sum(min(CONTEXT_TOKENS, base + t * step) for t in range(turns)), (turns - 1) * turn_out + last_out


def rough_phase_one(settings: Settings, fixtures: Path, count: int) -> dict[str, Any]:
    """Phase one's agent, rough: ``EXPECTED_AGENT_TURNS`` requests with one mean-sized file read each; worst
    case ``MAX_TOOL_TURNS`` requests, each a full read and a ``max_tokens`` reply."""
    from string import Template

    extensions = parse_extensions(settings.extensions)
    files = walk_corpus(fixtures, extensions=extensions).files
    mean_chars = min(READ_CAP_CHARS, sum(f.size for f in files) // len(files)) if files else READ_CAP_CHARS
    system = Template(load_prompt("generate_system.md")).substitute(count=count, query_types=", ".join(QUERY_TYPES))
    user = first_turn(fixtures, count, extensions)
    rows = []
    for provider, model, price, chosen in candidates(settings, generator=True):
        base = tokens(wire_parts(provider, system, user, [*TOOLS, submit_tool(count)], None)[0])
        expected = agent_calls(
            base, EXPECTED_AGENT_TURNS, mean_chars // CHARS_PER_TOKEN, AGENT_TURN_OUTPUT_TOKENS, count * QUERY_OUTPUT_TOKENS
        )
        worst = agent_calls(base, MAX_TOOL_TURNS, READ_CAP_CHARS // CHARS_PER_TOKEN, AGENT_MAX_TOKENS, AGENT_MAX_TOKENS)

        def usd(calls: tuple[int, int, int], p: Price | None) -> float | None:
            return None if p is None else round((calls[1] * p.input + calls[2] * p.output) / 1_000_000, 6)

        rows.append(
            {
                "provider": provider,
                "model": model,
                "chosen": chosen,
                "calls": expected[0],
                "inputTokens": expected[1],
                "outputTokens": expected[2],
                "worstCalls": worst[0],
                "worstInputTokens": worst[1],
                "worstOutputTokens": worst[2],
                # each turn depends on the one before (no batch API) and the agent marks nothing cacheable:
                # every mode costs what "sync" does
                "costUsd": {mode: {"expected": usd(expected, price), "worst": usd(worst, price)} for mode in MODES},
            }
        )
    return {
        "precision": "rough",
        "corpusFiles": len(files),
        "meanFileChars": mean_chars,
        "writers": rows,
        "answerability": rough_answerability(settings, count),
    }


def off_topic_share(count: int) -> int:
    """Off-topic queries in a set of ``count``, as the writing prompt asks (one, two from 10; none for one)."""
    return 0 if count < 2 else (2 if count >= 10 else 1)


def rough_answerability(settings: Settings, count: int) -> dict[str, Any]:
    """Phase one's answerability check, rough: each on-topic query labelled against one document's passages,
    through the real protocol; nothing cached."""
    queries = count - off_topic_share(count)
    passage = ("Rotate the staging database backup keys with the key tool, then restart the replica. " * 40)[:SHOWN_TEXT_CAP]
    judges = []
    for provider, model, price, chosen in candidates(settings):
        judge = RecordingJudge(provider, model, effort=settings.reasoning_effort)
        estimate = ModelEstimate(provider, model, price, chosen=chosen)
        for n in range(queries):
            task = LabelTask(
                f"how do I rotate the backup keys of the staging database {n}",
                "An operator needs the exact steps to rotate the keys without losing the replica.",
                [("guides/some-document.md", "Operations > Backups", passage)],
                f"q{n}",
            )
            protocol = ProtocolSettings(settings.judge_mode, settings.trials, settings.seed)
            outcomes = label_documents(judge, task, protocol)
            estimate.labels_to_judge += sum(o.labels_judged for o in outcomes)
        estimate.calls = judge.calls
        judges.append(estimate.figures())
    return {"precision": "rough", "queries": queries, "judges": judges}


# -- the jobs -------------------------------------------------------------------------------------------------
def searched_report(
    command: str,
    settings: Settings,
    searches: Searches,
    index: SearchIndex | None,
    fixtures: Path | None,
    queries: list,
    printer: Printer,
    resume: ResumePoint | None = None,
) -> dict[str, Any]:
    """The report of ``command`` with judge calls estimated from ``queries`` searched on the run's systems
    (``resume``: the run's own, rebuilt or checked as ``evaluate --resume`` does, each searching only what
    it has not judged). Closes the systems it opens and ``index``."""
    try:
        if resume is not None and resume.recorded_systems is not None and searches.ordinary:
            mode = str(resume.config.get("searchMode") or settings.search_mode)
            opened: list[Any] | None = reopen_search_systems(settings, resume.recorded_systems, index, mode, printer)
        else:
            opened = open_search_systems(settings, searches, index, fixtures, queries, printer)
        try:
            if resume is not None and opened is not None:
                check_same_systems(resume, opened)
            left = (
                (lambda name: [q for q in queries if q.id not in resume.judged_by(name)]) if resume is not None else (lambda name: queries)
            )
            asked = [(s.search, s.mode, left(s.name)) for s in opened] if opened else [(index, settings.search_mode, left(None))]
            embedder = index.embedder if index is not None else None
            todo = {q.id for _, _, mine in asked for q in mine}
            return build_report(command, settings, judge_searched(settings, [q for q in queries if q.id in todo], asked, embedder))
        finally:
            close_systems(opened)
    finally:
        if index is not None:
            index.close()


def evaluate_dry_run(
    settings: Settings,
    queries_path: Path | None,
    resume_path: Path | None,
    printer: Printer,
    systems: SystemsSpec | None = None,
    as_json: bool = False,
) -> dict[str, Any]:
    """``evaluate --dry-run``. Raises UsageError as ``evaluate`` does."""
    resume = read_resume_point(resume_path) if resume_path is not None else None
    if resume is not None and queries_path is None:
        queries_path = resume.saved_query_set
    if queries_path is None:
        raise UsageError("give --queries FILE (or --resume RUN.jsonl with its query set beside it)")
    queries = load_query_set(queries_path).queries
    searches = resolve_systems(settings, systems)
    needs_index = searches.needs_index
    if resume is not None:
        if resume.query_set_sha256 != query_set_sha256(queries):
            raise UsageError(f"{queries_path} is not the query set {resume.path} was judged on (sha256 differs)")
        if rebuilds_systems(resume, searches.ordinary):
            needs_index = any(s.get("kind") == "builtin" for s in resume.recorded_systems or [])
        settings = resumed_settings(settings, resume, printer)  # estimated as the resumed run will judge
    index = open_index(settings, must_exist=True) if needs_index else None
    report = searched_report("evaluate", settings, searches, index, None, queries, printer, resume)
    print_report(report, printer, as_json)
    return report


def main_dry_run(
    settings: Settings,
    fixtures: Path,
    printer: Printer,
    as_json: bool = False,
    command: str = "generate-and-evaluate",
    systems: SystemsSpec | Searches | None = None,
) -> dict:
    """``generate-and-evaluate --dry-run``: both phases rough, nothing indexed. Raises UsageError when FIXTURES
    is missing or holds no file to index."""
    require_folder(fixtures)
    check_corpus(settings, fixtures)
    searches = systems if isinstance(systems, Searches) else resolve_systems(settings, systems)
    judging = rough_judge(settings, settings.count, searches.spec.count)
    report = build_report(command, settings, judging, rough_phase_one(settings, fixtures, settings.count))
    print_report(report, printer, as_json)
    return report


def weekly_dry_run(
    settings: Settings, plan: Any, printer: Printer, as_json: bool = False, systems: SystemsSpec | None = None
) -> dict[str, Any]:
    """``weekly --dry-run``: no lock, log, index, report or pruning; the pinned set searched on the run's
    systems, or both phases rough when the run would write a new set."""
    searches = resolve_systems(settings, systems)
    pinned = plan.results / "pinned-queries.json"
    if plan.regenerate or (plan.queries_path is None and not pinned.is_file()):
        return main_dry_run(settings, plan.fixtures, printer, as_json, "weekly", systems=searches)
    queries = load_query_set(plan.queries_path or pinned).queries
    index = None
    if searches.needs_index:
        try:
            index = open_index(settings, must_exist=True)
        except UsageError as exc:
            printer.err(f"note: {exc}; weekly would index {plan.fixtures} first: phase two estimated roughly")
            report = build_report("weekly", settings, rough_judge(settings, len(queries), searches.spec.count))
            print_report(report, printer, as_json)
            return report
        printer.err(f"note: searching the index as it is now; weekly re-indexes {plan.fixtures} first")
    report = searched_report("weekly", settings, searches, index, plan.fixtures, queries, printer)
    print_report(report, printer, as_json)
    return report


def calibrate_labeler(settings: Settings) -> tuple[Any, RecordingJudge]:
    """``(labeler, judge)`` for ``calibrate --dry-run``: the protocol labeller over a :class:`RecordingJudge`
    that also lays out every call for each other provider's default model."""
    rows = candidates(settings)
    provider, model, _, _ = rows[0]
    judge = RecordingJudge(provider, model, layouts=[(p, m) for p, m, _, _ in rows], effort=settings.reasoning_effort)
    return ProtocolLabeler(judge), judge


def calibrate_report(settings: Settings, judge: RecordingJudge, mode: str, trials: int, printer: Printer, as_json: bool) -> dict[str, Any]:
    """Print and return ``calibrate --dry-run``'s report (``trials`` 0: the judge's default)."""
    judges = []
    for provider, model, price, chosen in candidates(settings):
        estimate = ModelEstimate(provider, model, price, judge.calls_for(provider, model), chosen)
        judges.append(estimate.figures())
    labels = sum(1 for c in judge.calls if c.kind == "label")
    report = build_report(
        "calibrate",
        settings,
        {"precision": "pool", "queries": None, "searches": None, "searchFailures": 0, "judges": judges, "labelCalls": labels},
    )
    report["judgeMode"], report["trials"] = mode, trials or default_trials(chosen_spec(settings).name)
    print_report(report, printer, as_json)
    return report
