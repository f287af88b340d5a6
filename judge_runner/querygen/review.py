"""Phase one's review of a written query set, the same for every writer: distinct, specific, answerable,
then leakage and spread measured on what is kept, and the card. Cheap checks run first, so the judge is
never paid for a query dropped anyway (docs/query-sets.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import mean

from judge_runner.core.models import QUERY_TYPES, Query
from judge_runner.core.query_card import (
    Answerability,
    DroppedQuery,
    DuplicatePair,
    Duplicates,
    NonSpecific,
    NonSpecificQuery,
    QueryFacts,
    QuerySetCard,
    TypeLeakage,
)
from judge_runner.embed.base import TextEmbedder
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.labelling import ProtocolSettings
from judge_runner.judging.protocol import Judge
from judge_runner.querygen.answerability import AnswerCheck, check_answerability
from judge_runner.querygen.checks import (
    DUPLICATE_COSINE,
    INTENT_COPY_LIMIT,
    CorpusBM25,
    Duplicate,
    IntentOverlap,
    Leakage,
    find_duplicates,
    measure_intent,
    measure_leakage,
    non_specific,
    resolve_non_specific,
)
from judge_runner.querygen.profile import CorpusProfile
from judge_runner.querygen.protocol import GenerationResult
from judge_runner.querygen.spread import measure_spread


@dataclass(frozen=True)
class ReviewOptions:
    """``keep_unverified`` (keep and flag what the judge did not verify), the judge ``protocol`` (the run's, so
    phase two reuses the labels) and ``concurrency``."""

    keep_unverified: bool = False
    protocol: ProtocolSettings = ProtocolSettings()
    concurrency: int = 1


def _dropped(query: Query, check: str, reason: str) -> DroppedQuery:
    return DroppedQuery.model_validate({"id": query.id, "query": query.query, "check": check, "reason": reason})


def review_query_set(
    result: GenerationResult,
    profile: CorpusProfile,
    judge: Judge | None,
    *,
    embedder: TextEmbedder,
    cache: JudgmentCache | None = None,
    options: ReviewOptions = ReviewOptions(),
    log: Callable[[str], None] = lambda message: None,
) -> GenerationResult:
    """``result`` reviewed: the queries kept (some widened), each drop added to ``dropped``, the judge's cost
    to ``cost_usd``, and its ``card``. ``judge`` None skips the answerability check. Raises
    KeyboardInterrupt, what the embedder raises, and the judge's BudgetExhausted, SpendLimitError or
    AuthError; any other failed judge call leaves its query unchecked."""
    dropped = [
        DroppedQuery(
            id=str(d.get("id", "?")), query=str(d.get("query", "")), check=d.get("check", "sources"), reason=str(d.get("reason", ""))
        )
        for d in result.dropped
    ]
    queries, duplicates = find_duplicates(result.queries, embedder)
    for d in duplicates:
        why = "the same text" if d.same_text else f"the same expected sources and embedding cosine {d.cosine:.2f} >= {DUPLICATE_COSINE}"
        dropped.append(_dropped(d.dropped, "duplicate", f"near-duplicate of {d.kept.id} (“{d.kept.query}”): {why}"))
    specific, flagged, not_specific = _specific_queries(queries, profile)
    dropped.extend(not_specific)
    originals = {q.id: q.expectedSources for q in result.queries}
    answerability, checks, cost = _answerability(specific, originals, profile, judge, cache, options, log, embedder)
    kept, answer_flags, unanswered = _answerable_queries(specific, checks, options.keep_unverified)
    dropped.extend(unanswered)
    flags: dict[str, list[str]] = {e.id: ["non-specific"] for e in flagged}
    for qid, flag in answer_flags.items():
        flags.setdefault(qid, []).append(flag)
    leak = {q.id: measure_leakage(q, profile) for q in kept}
    intent = {q.id: measure_intent(q, profile) for q in kept}
    for qid, overlap in intent.items():
        if overlap.over_limit:
            flags.setdefault(qid, []).append("intent-copies-source")
    card = QuerySetCard(
        written=result.generated,
        kept=len(kept),
        corpusFiles=len(profile.files),
        byType={t: n for t in QUERY_TYPES if (n := sum(1 for q in kept if q.queryType == t))},
        spread=measure_spread(kept, profile),
        answerability=answerability,
        duplicates=_duplicates_block(duplicates, embedder),
        nonSpecific=NonSpecific(
            flagged=len(flagged),
            widened=sum(1 for e in flagged if e.action == "widened"),
            dropped=sum(1 for e in flagged if e.action == "dropped"),
            queries=flagged,
        ),
        leakage=_leakage_by_type(kept, leak, intent),
        intentCopyLimit=INTENT_COPY_LIMIT,
        queries=_query_facts(kept, leak, checks, flags, intent),
        dropped=dropped,
    )
    new_dropped = [{"id": x.id, "query": x.query, "reason": x.reason, "check": x.check} for x in dropped[len(result.dropped) :]]
    for gone in new_dropped:
        log(f"dropped query {gone['id']} ({gone['check']}): {gone['reason']}")
    total_cost = None if result.cost_usd is None or cost is None else result.cost_usd + cost
    return replace(result, queries=kept, dropped=[*result.dropped, *new_dropped], card=card, cost_usd=total_cost)


def _specific_queries(queries: Sequence[Query], profile: CorpusProfile) -> tuple[list[Query], list[NonSpecificQuery], list[DroppedQuery]]:
    """``(the specific queries, some widened; every non-specific one found; those dropped)``."""
    bm25 = CorpusBM25(profile)
    specific: list[Query] = []
    flagged: list[NonSpecificQuery] = []
    dropped: list[DroppedQuery] = []
    try:
        for q in queries:
            finding = non_specific(q, profile, bm25)
            if finding is None:
                specific.append(q)
                continue
            widened, entry = resolve_non_specific(q, finding)
            flagged.append(entry)
            if widened is None:
                dropped.append(_dropped(q, "non-specific", entry.why))
            else:
                specific.append(widened)
    finally:
        bm25.close()
    return specific, flagged, dropped


def _answerable_queries(
    queries: Sequence[Query], checks: dict[str, AnswerCheck], keep_unverified: bool
) -> tuple[list[Query], dict[str, str], list[DroppedQuery]]:
    """``(the queries kept, {id: "unchecked" or "unverified"} of those kept unverified, those dropped)``."""
    kept: list[Query] = []
    flags: dict[str, str] = {}
    dropped: list[DroppedQuery] = []
    for q in queries:
        check = checks.get(q.id)
        if check is None or check.verified:
            kept.append(q)
        elif check.error is not None or not check.labels:
            flags[q.id] = "unchecked"
            kept.append(q)
        elif keep_unverified:
            flags[q.id] = "unverified"
            kept.append(q)
        else:
            dropped.append(_dropped(q, "answerability", check.reason()))
    return kept, flags, dropped


def _duplicates_block(duplicates: Sequence[Duplicate], embedder: TextEmbedder) -> Duplicates:
    return Duplicates(
        threshold=DUPLICATE_COSINE,
        embedder=str(getattr(embedder, "name", type(embedder).__name__)),
        removed=len(duplicates),
        pairs=[
            DuplicatePair(
                kept=d.kept.id,
                dropped=d.dropped.id,
                keptQuery=d.kept.query,
                droppedQuery=d.dropped.query,
                cosine=d.cosine,
                sameText=d.same_text,
            )
            for d in duplicates
        ],
    )


def _query_facts(
    kept: Sequence[Query],
    leak: dict[str, Leakage],
    checks: dict[str, AnswerCheck],
    flags: dict[str, list[str]],
    intent: dict[str, IntentOverlap],
) -> list[QueryFacts]:
    return [
        QueryFacts(
            id=q.id,
            queryType=q.queryType,
            leakage=leak[q.id].value,
            background=leak[q.id].background,
            headingCopy=leak[q.id].heading_copy,
            intentLeakage=intent[q.id].value,
            intentCopied=intent[q.id].copied,
            intentNamesSource=intent[q.id].names_source,
            answerLabel=checks[q.id].best if q.id in checks else None,
            flags=flags.get(q.id, []),
        )
        for q in kept
    ]


def _answerability(
    queries: Sequence[Query],
    originals: dict[str, list[str]],
    profile: CorpusProfile,
    judge: Judge | None,
    cache: JudgmentCache | None,
    options: ReviewOptions,
    log: Callable[[str], None],
    embedder: TextEmbedder | None = None,
) -> tuple[Answerability | None, dict[str, AnswerCheck], float | None]:
    """The judge's check against the sources the writer named (``originals``; widened ones are not labelled),
    its card block, and its cost in USD."""
    if judge is None:
        return None, {}, 0.0
    asked = [q.model_copy(update={"expectedSources": originals.get(q.id, q.expectedSources)}) for q in queries]
    results, tally = check_answerability(
        asked, profile.root, judge, protocol=options.protocol, cache=cache, concurrency=options.concurrency, log=log, embedder=embedder
    )
    checks = {r.query.id: r for r in results}
    unverified = [r for r in results if r.labels and r.error is None and not r.verified]
    block = Answerability(
        checked=len(results),
        verified=sum(1 for r in results if r.verified),
        flagged=len(unverified) if options.keep_unverified else 0,
        dropped=0 if options.keep_unverified else len(unverified),
        unchecked=sum(1 for r in results if r.error is not None or not r.labels),
        judge=f"{judge.name}/{judge.model}" + (" (heuristic)" if getattr(judge, "heuristic", False) else ""),
        judgeMode=options.protocol.mode,
        calls=tally.calls,
        labelsCached=sum(r.cached for r in results),
        costUsd=None if tally.cost_usd is None else round(tally.cost_usd, 6),
    )
    return block, checks, tally.cost_usd


def _leakage_by_type(queries: Sequence[Query], leak: dict[str, Leakage], intent: dict[str, IntentOverlap]) -> list[TypeLeakage]:
    out = []
    by_type: Counter[str] = Counter(q.queryType for q in queries)
    for query_type in QUERY_TYPES:
        if not by_type.get(query_type):
            continue
        values = [leak[q.id] for q in queries if q.queryType == query_type and leak[q.id].value is not None]
        if not values:
            continue
        backgrounds = [v.background for v in values if v.background is not None]
        intents = [intent[q.id] for q in queries if q.queryType == query_type]
        intent_values = [i.value for i in intents if i.value is not None]
        out.append(
            TypeLeakage(
                queryType=query_type,
                queries=len(values),
                meanLeakage=round(mean(v.value for v in values if v.value is not None), 4),
                meanBackground=round(mean(backgrounds), 4) if backgrounds else None,
                headingCopies=sum(1 for v in values if v.heading_copy),
                meanIntentLeakage=round(mean(intent_values), 4) if intent_values else None,
                intentsOverLimit=sum(1 for i in intents if i.over_limit),
            )
        )
    return out
