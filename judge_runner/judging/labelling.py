"""The label-first judge protocol: per-result labels through the judgment cache, trials, the list-level call,
and a query's scores from the labels (docs/judge-protocol.md).

:func:`label_documents` labels documents (``calibrate``, query writing, dry runs); :func:`judge_query` judges one
search answer (the run loop). A :class:`~judge_runner.judging.protocol.Judge` only answers single calls; caching,
trials, medians and people's grades live here. The judge never sees the search's rank or score.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any, TypeVar

from judge_runner.core.models import JudgeMode, Query
from judge_runner.core.resources import prompt_sha256
from judge_runner.judging.cache import CachedJudgment, JudgmentCache, JudgmentKey, batch_context, topic_key
from judge_runner.judging.cache_failures import CacheError
from judge_runner.judging.call_pool import CallLane
from judge_runner.judging.fence import RENDER_VERSION, RenderedDocument, render_document
from judge_runner.judging.fingerprint import DEFAULT_SEED, build_fingerprint, fingerprint_key, sampling_settings
from judge_runner.judging.protocol import Judge, LabelReply, ListVerdict
from judge_runner.judging.requests import (
    OUTPUTS,
    PROMPTS,
    RUBRIC,
    SCHEMAS,
    ListItem,
    batch_seed,
    list_shown_text,
    schema_sha256,
    shuffled_order,
)
from judge_runner.judging.scores import expected_source_disagreements, labels_from_trials, median_label, query_scores
from judge_runner.llm.pricing import Usage, add_cost
from judge_runner.search.base import SearchAnswer

Log = Callable[[str], None]
T = TypeVar("T")


def _quiet(message: str) -> None:
    """The default ``log``: drop diagnostics."""


@dataclass
class Tally:
    """What calls cost, summed: ``usage`` (tokens), ``cost_usd`` (USD; None once any price was unknown),
    ``attempts`` (HTTP requests), ``calls`` (judge calls; cache hits not counted). Thread-safe."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    attempts: int = 0
    calls: int = 0
    models_returned: set[str] = field(default_factory=set)
    recoveries: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, reply: LabelReply | ListVerdict, calls: int = 1) -> None:
        """Count one paid reply."""
        with self._lock:
            self.usage = self.usage + reply.usage
            self.cost_usd = add_cost(self.cost_usd, reply.cost_usd)
            self.attempts += reply.attempts
            self.calls += calls
            if reply.model_returned:
                self.models_returned.add(reply.model_returned)
            self.recoveries.extend(reply.recoveries)

    def add_failure(self, exc: BaseException) -> None:
        """Count what a failed call spent (the ``usage`` and ``cost_usd`` the provider layer set on it, if any)."""
        usage = getattr(exc, "usage", None)
        if not isinstance(usage, Usage):
            return
        with self._lock:
            self.usage = self.usage + usage
            self.cost_usd = add_cost(self.cost_usd, getattr(exc, "cost_usd", None))
            self.attempts += int(getattr(exc, "attempts", 0) or 0)


@dataclass
class LabelOutcome:
    """One document's label. ``label``: the median of ``trial_labels`` (lower middle on a tie), or a person's
    grade (``origin`` ``"human"``; the judge's own in ``judge_label`` and ``judge_reason``); ``spread``: highest
    minus lowest trial label; ``injection_suspected``: the detector OR any trial's flag; ``cached``: every trial
    from the cache; ``shown_as``: local ids per trial (batched); ``shown_text``, ``shown_anchor``, ``shown_chars``
    and ``truncated``: what the judge was shown; ``order``: how trial 0's reply was written (None: unknown)."""

    label: int
    trial_labels: list[int]
    spread: int
    reason: str
    injection_suspected: bool
    cached: bool
    labels_cached: int = 0
    labels_judged: int = 0
    shown_as: list[str] = field(default_factory=list)
    shown_chars: int = 0
    truncated: bool = False
    origin: str = "judge"
    models_returned: set[str] = field(default_factory=set)
    judge_label: int | None = None
    shown_text: str = ""
    shown_anchor: str = ""
    order: str | None = None
    judge_reason: str = ""

    @property
    def judges_own(self) -> tuple[int, str]:
        """``(label, reason)`` of the judge, whoever's label won: what the list-level call is shown."""
        if self.origin == "human" and self.judge_label is not None:
            return self.judge_label, self.judge_reason
        return self.label, self.reason


@lru_cache(maxsize=8)
def _hashes(mode: str, output: str = "reason-first") -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``(prompt files, schema file)`` a call of ``mode`` sends, each with its sha256."""
    names = PROMPTS[mode] if mode == "list" else (*PROMPTS[mode], RUBRIC, OUTPUTS[output])
    return tuple((n, prompt_sha256(n)) for n in names), ((SCHEMAS[mode], schema_sha256(SCHEMAS[mode])),)


def cache_model(judge: Judge) -> str:
    """The model name a judge's judgments are cached under: ``judge.cache_model``, else ``judge.model``."""
    return str(getattr(judge, "cache_model", None) or judge.model)


def judgment_key(
    judge: Judge, query: str, intent: str, shown: str, mode: str, trial: int, sampling: Mapping[str, Any], context: str = ""
) -> str:
    """The judgment-cache key (hex sha256, :class:`JudgmentKey`) of one call's judgment (``mode`` ``pointwise``,
    ``batched`` or ``list``)."""
    prompts, schemas = _hashes(mode, str(getattr(judge, "output", "reason-first")))
    return JudgmentKey(
        query,
        intent,
        shown,
        judge.name,
        cache_model(judge),
        dict(prompts),
        dict(schemas),
        RENDER_VERSION,
        dict(sampling),
        mode,
        trial,
        context,
    ).digest()


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "inputTokens": usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens,
        "outputTokens": usage.output_tokens,
        "cacheReadTokens": usage.cache_read_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
    }


@lru_cache(maxsize=32)
def _judge_key(name: str, model: str, mode: JudgeMode, seed: int, heuristic: bool) -> str:
    return fingerprint_key(build_fingerprint(name, model, mode, 1, seed, heuristic).as_dict())


def judge_key(judge: Judge, mode: JudgeMode = "pointwise", seed: int = DEFAULT_SEED) -> str:
    """The fingerprint key of ``judge`` in ``mode`` with base ``seed``, kept beside each label in the cache; equal
    to the key of a run's ``provenance.judgeFingerprint`` under the same protocol."""
    return _judge_key(judge.name, judge.model, mode, seed, judge.heuristic)


def known_grades(
    cache: JudgmentCache | None, key: str, query: str, intent: str, people: Mapping[str, int] | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """``(known, judge's)``, each ``{docid: grade}``: the judge ``key``'s labels of the query in ``cache`` (per
    document the median), overlaid by ``people``'s grades; and the judge's alone. A failed cache gives none."""
    judged: dict[str, int] = {}
    if cache is not None and getattr(cache, "failure", None) is None:
        try:
            found = cache.judge_labels(key, [topic_key(query, intent)])
        except CacheError:
            found = {}
        judged = {docid: median_label(labels) for (_, docid), labels in found.items()}
    return {**judged, **{d: int(g) for d, g in (people or {}).items()}}, judged


def _stored(reply: LabelReply, document: RenderedDocument, judge: Judge, where: tuple[str, str] = ("", "")) -> CachedJudgment:
    topic, key = where
    return CachedJudgment(
        reply.label,
        reply.reason,
        reply.injection_suspected,
        reply.model_returned,
        _usage_dict(reply.usage),
        reply.cost_usd,
        reply.latency_s,
        payload={"order": reply.order} if reply.order else None,
        detector_flagged=document.injection_suspected,
        judge=f"{judge.name}/{cache_model(judge)}",
        topic=topic or None,
        docid=document.source if topic else None,
        judge_key=key or None,
    )


def _from_cache(hit: CachedJudgment, shown_as: str | None = None) -> LabelReply:
    """The :class:`LabelReply` a stored label stands for."""
    order = hit.payload.get("order") if isinstance(hit.payload, dict) else None
    return LabelReply(
        label=int(hit.label or 0),
        reason=hit.reason,
        injection_suspected=hit.injection_suspected,
        model_returned=hit.model_returned,
        shown_as=shown_as,
        order=order,
    )


def cached(cache: JudgmentCache | None, keys: Iterable[str]) -> dict[str, CachedJudgment]:
    """The judgments stored in ``cache`` under ``keys``; none without a cache or once it failed (the failure is
    kept on ``cache.failure``, which stops the run loop)."""
    if cache is None or getattr(cache, "failure", None) is not None:
        return {}
    try:
        return cache.get_many(keys)
    except CacheError:
        return {}


def store(cache: JudgmentCache | None, items: list[tuple[str, CachedJudgment, str]]) -> None:
    """Store ``(key, judgment, mode)`` items in ``cache``. Raises nothing: a failed cache stores nothing (the
    failure on ``cache.failure`` stops the run; the judgment is kept in its query's line)."""
    if cache is None or getattr(cache, "failure", None) is not None or not items:
        return
    try:
        cache.put_many(items)
    except CacheError:
        pass


def as_documents(docs: Sequence[RenderedDocument | tuple[str, str | None, str]]) -> list[RenderedDocument]:
    """``docs`` as :class:`RenderedDocument` values (tuples rendered by :func:`fence.render_document`)."""
    return [d if isinstance(d, RenderedDocument) else render_document(*d) for d in docs]


def each_call(
    judge: Judge, call: Callable[[int], LabelReply], items: Sequence[int], calls: CallLane | None = None
) -> list[tuple[int, LabelReply | BaseException]]:
    """``(i, reply or the exception raised)`` of ``call(i)`` for each of ``items`` called, in order. Without
    ``calls``: one after another, the first failure ending the list. With ``calls`` (a lane of the run's call
    pool): side by side, the first failure cancelling those not started. A batching judge: all at once, so
    their requests share one batch, each failure in its place."""
    batching = getattr(judge, "batching", None)
    if batching is not None and len(items) > 1:
        return list(zip(items, batching.map(call, items)))
    if calls is not None and items:
        return calls.map(call, items)
    out: list[tuple[int, LabelReply | BaseException]] = []
    for i in items:
        try:
            out.append((i, call(i)))
        except Exception as exc:  # noqa: BLE001 - handed back in place; the caller raises it
            out.append((i, exc))
            break
    return out


def _one(calls: CallLane | None, fn: Callable[[], T]) -> T:
    """``fn()``: in a slot of the run's call pool when ``calls`` is given, else here."""
    return fn() if calls is None else calls.call(fn)


@dataclass(frozen=True)
class ProtocolSettings:
    """How a run judges: ``mode``, ``trials`` (>= 1), the base ``seed``, dimension ``weights`` (None: equal), and
    ``depth``, the cut-off of ``relevance`` (the search limit; None: each list's length)."""

    mode: JudgeMode = "pointwise"
    trials: int = 1
    seed: int = DEFAULT_SEED
    weights: Mapping[str, float] | None = None
    depth: int | None = None


@dataclass(frozen=True)
class Channel:
    """How labelling reaches the judge: through ``cache`` (None: none; judgments stored the moment they are made),
    its cost into ``tally`` (failed calls included), diagnostics to ``log``, calls in ``calls``, the query's lane of
    the run's call pool (None: one after another here)."""

    cache: JudgmentCache | None = None
    tally: Tally = field(default_factory=Tally)
    log: Log = _quiet
    calls: CallLane | None = None


@dataclass(frozen=True)
class LabelTask:
    """Documents to label for ``query`` and its ``intent``: ``docs`` (rendered, or ``(source, anchor, text)``);
    ``query_id`` seeds the batched order; ``human``: per document a person's grade 0-3 or None."""

    query: str
    intent: str
    docs: Sequence[RenderedDocument | tuple[str, str | None, str]]
    query_id: str = ""
    human: Sequence[int | None] | None = None


def label_documents(
    judge: Judge, task: LabelTask, protocol: ProtocolSettings = ProtocolSettings(), via: Channel | None = None
) -> list[LabelOutcome]:
    """One :class:`LabelOutcome` per document of ``task``, in its order. ``pointwise``: one call per document and
    trial; ``batched``: one call per trial, the documents in a seeded order. A person's grade is the label; the
    judge's own is still obtained and kept beside it. Raises ValueError on trials < 1 or a ``human`` of another
    length, and what the judge raises (judgments stored before stay stored)."""
    if protocol.trials < 1:
        raise ValueError("trials must be >= 1")
    via = via if via is not None else Channel()
    documents = as_documents(task.docs)
    human = list(task.human) if task.human is not None else [None] * len(documents)
    if len(human) != len(documents):
        raise ValueError("human must hold one grade (or None) per document")
    todo = list(range(len(documents)))  # human-labelled documents too: their judge label is kept beside
    where = (topic_key(task.query, task.intent), judge_key(judge, protocol.mode, protocol.seed))
    labelling = _Trials(judge, task.query, task.intent, documents, via, todo, {i: [] for i in todo}, where)
    for trial in range(protocol.trials):
        sampling = sampling_settings(judge.name, trial, protocol.seed)
        if protocol.mode == "pointwise":
            labelling.pointwise(trial, sampling)
        elif todo:
            labelling.batched(trial, sampling, batch_seed(protocol.seed, task.query_id, trial))
    return [_outcome(doc, labelling.got[i], human[i]) for i, doc in enumerate(documents)]


@dataclass
class _Trials:
    """The trials of one :func:`label_documents` call; ``got``: per document index one ``(reply, from the cache)``
    per trial; ``where``: ``(topic, judge key)`` stored beside each new label."""

    judge: Judge
    query: str
    intent: str
    documents: list[RenderedDocument]
    via: Channel
    todo: list[int]
    got: dict[int, list[tuple[LabelReply, bool]]]
    where: tuple[str, str] = ("", "")

    def pointwise(self, trial: int, sampling: Mapping[str, Any]) -> None:
        """One pointwise trial: each document's label from the cache, else from a call of its own (stored at
        once); the first failed call is raised once every call made is counted."""
        judge, documents, todo = self.judge, self.documents, self.todo
        keys = {i: judgment_key(judge, self.query, self.intent, documents[i].shown, "pointwise", trial, sampling) for i in todo}
        found = cached(self.via.cache, keys.values())
        missing = []
        for i in todo:
            hit = found.get(keys[i])
            if hit is not None and hit.label is not None:
                self.got[i].append((_from_cache(hit), True))
            else:
                missing.append(i)

        def label(i: int) -> LabelReply:
            return judge.label_one(self.query, self.intent, documents[i], sampling, self.via.log)

        failure: BaseException | None = None
        for i, made in each_call(judge, label, missing, self.via.calls):
            if isinstance(made, BaseException):
                self.via.tally.add_failure(made)
                failure = failure or made
                continue
            self.via.tally.add(made)
            store(self.via.cache, [(keys[i], _stored(made, documents[i], judge, self.where), "pointwise")])
            self.got[i].append((made, False))
        if failure is not None:
            raise failure

    def batched(self, trial: int, sampling: Mapping[str, Any], seed: int) -> None:
        """One batched trial: every document's label from the cache when all are there, else one call with
        the documents in the order ``seed`` draws (stored at once); each reply keeps the id it was shown as."""
        judge, documents, todo = self.judge, self.documents, self.todo
        order = shuffled_order(len(todo), seed)
        batch = [documents[i] for i in todo]
        context = batch_context(batch[o].shown for o in order)
        keys = {i: judgment_key(judge, self.query, self.intent, documents[i].shown, "batched", trial, sampling, context) for i in todo}
        found = cached(self.via.cache, keys.values())
        shown_as = {todo[original]: f"D{shown + 1}" for shown, original in enumerate(order)}
        if all(found.get(keys[i]) is not None and found[keys[i]].label is not None for i in todo):
            for i in todo:
                self.got[i].append((_from_cache(found[keys[i]], shown_as[i]), True))
            return
        try:
            replies = _one(self.via.calls, partial(judge.label_batch, self.query, self.intent, batch, order, sampling, self.via.log))
        except BaseException as exc:
            self.via.tally.add_failure(exc)
            raise
        if len(replies) != len(batch):
            raise ValueError(f"the judge returned {len(replies)} labels for {len(batch)} documents")
        self.via.tally.add(replies[0])
        for reply in replies[1:]:
            self.via.tally.add(reply, calls=0)
        store(self.via.cache, [(keys[i], _stored(r, documents[i], judge, self.where), "batched") for i, r in zip(todo, replies)])
        for i, reply in zip(todo, replies):
            self.got[i].append((reply if reply.shown_as else replace(reply, shown_as=shown_as[i]), False))


def _outcome(doc: RenderedDocument, trial_replies: list[tuple[LabelReply, bool]], human: int | None) -> LabelOutcome:
    """One document's :class:`LabelOutcome` from its ``(reply, from the cache)`` per trial; a ``human`` grade wins."""
    labels, spreads = labels_from_trials([[r.label for r, _ in trial_replies]])
    outcome = LabelOutcome(
        label=labels[0],
        trial_labels=[r.label for r, _ in trial_replies],
        spread=spreads[0],
        reason=trial_replies[0][0].reason,
        injection_suspected=doc.injection_suspected or any(r.injection_suspected for r, _ in trial_replies),
        cached=all(c for _, c in trial_replies),
        labels_cached=sum(1 for _, c in trial_replies if c),
        labels_judged=sum(1 for _, c in trial_replies if not c),
        shown_as=[r.shown_as for r, _ in trial_replies if r.shown_as],
        shown_chars=len(doc.body),
        truncated=doc.truncated,
        models_returned={r.model_returned for r, _ in trial_replies if r.model_returned},
        shown_text=doc.body,
        shown_anchor=doc.anchor,
        order=trial_replies[0][0].order,
    )
    if human is not None:  # the person's label wins; the judge's is kept beside it
        outcome = replace(
            outcome, label=int(human), judge_label=outcome.label, judge_reason=outcome.reason, reason="human label", origin="human"
        )
    return outcome


@dataclass
class QueryJudgment:
    """One query judged: ``labels`` per result in the search's order; ``shown_from`` per result (``document``,
    ``result`` or ``snippet``); ``scores`` (None: off-topic, scored on abstention); ``list_cached`` (None: no
    list-level call); ``disagreements``: expected sources labelled 0 or 1; ``known``: the grades known when
    judged (:func:`known_grades`), ``judge_known`` the judge's alone."""

    labels: list[LabelOutcome]
    shown_from: list[str]
    scores: dict[str, float] | None
    analysis: dict[str, str]
    suggestions: list[str]
    list_cached: bool | None
    disagreements: list[str]
    tally: Tally
    known: dict[str, int] = field(default_factory=dict)
    judge_known: dict[str, int] = field(default_factory=dict)


OFF_TOPIC_ANSWERED = "Return no results or confident: false when no result clears a relevance threshold"
NO_RESULTS = "Return results for on-topic queries"


def list_verdict(judge: Judge, query: Query, items: list[ListItem], via: Channel) -> tuple[ListVerdict, bool]:
    """``(verdict, from the cache)`` on ``items`` (the labelled results in the search's order): from the cache (mode
    ``list``, trial 0, keyed with the judge's ``list_version``: the offline judge's verdict is code) or one call."""
    sampling = sampling_settings(judge.name, 0)
    shown = list_shown_text(query.expectedSources, items)
    key = judgment_key(judge, query.query, query.queryIntent, shown, "list", 0, sampling, str(getattr(judge, "list_version", "") or ""))
    hit = cached(via.cache, [key]).get(key)
    if hit is not None and hit.payload:
        return ListVerdict.from_payload(hit.payload, hit.model_returned), True
    try:
        ask = partial(judge.list_verdict, query.query, query.queryIntent, query.expectedSources, items, sampling, via.log)
        verdict = _one(via.calls, ask)
    except BaseException as exc:
        via.tally.add_failure(exc)
        raise
    via.tally.add(verdict)
    stored = CachedJudgment(
        None,
        "",
        False,
        verdict.model_returned,
        _usage_dict(verdict.usage),
        verdict.cost_usd,
        verdict.latency_s,
        payload=verdict.payload(),
        judge=f"{judge.name}/{cache_model(judge)}",
    )
    store(via.cache, [(key, stored, "list")])
    return verdict, False


def judge_query(
    judge: Judge,
    query: Query,
    answer: SearchAnswer,
    protocol: ProtocolSettings = ProtocolSettings(),
    human: Mapping[str, int] | None = None,
    via: Channel | None = None,
) -> QueryJudgment:
    """Judge one search answer: label every result (as :meth:`~judge_runner.search.base.SearchHit.shown` gives
    it), then one list-level call for an on-topic query with results, shown the judge's own labels. Scores by
    :func:`judge_runner.judging.scores.query_scores` (relevance against the grades known when judged,
    :func:`known_grades`). An on-topic query with no results scores 0 without a call; an off-topic one is
    labelled but gets no scores. ``human``: ``{source: grade}`` of people's grades for this query. Raises what
    :func:`label_documents` raises (and :class:`~judge_runner.llm.errors.CallsStopped` once the pool is closed)."""
    via = via if via is not None else Channel()
    hits = answer.results
    shown_from = [h.textFrom if h.text else "snippet" for h in hits]
    docs = [render_document(h.source, *h.shown()) for h in hits]
    grades = [(human or {}).get(h.source) for h in hits]
    labels = label_documents(judge, LabelTask(query.query, query.queryIntent, docs, query.id, grades), protocol, via)
    disagreements = expected_source_disagreements([(h.source, o.label) for h, o in zip(hits, labels)], query.expectedSources)
    tally = via.tally
    if query.queryType == "off-topic":
        abstained = not answer.confident or not hits
        return QueryJudgment(labels, shown_from, None, {}, [] if abstained else [OFF_TOPIC_ANSWERED], None, disagreements, tally)
    known, judge_known = known_grades(via.cache, judge_key(judge, protocol.mode, protocol.seed), query.query, query.queryIntent, human)
    if not hits:
        zero = {"relevance": 0.0, "ranking": 0.0, "gradedPrecision": 0.0, "coverage": 0.0, "snippetQuality": 0.0, "overall": 0.0}
        analysis = {"coverage": "No results were returned.", "snippetQuality": "No snippets were shown."}
        return QueryJudgment(labels, shown_from, zero, analysis, [NO_RESULTS], None, disagreements, tally, known, judge_known)
    items = [ListItem(render_document(h.source, h.anchor, h.snippet), *o.judges_own) for h, o in zip(hits, labels)]
    verdict, list_cached = list_verdict(judge, query, items, via)
    scores = query_scores(
        [o.label for o in labels],
        {"coverage": verdict.coverage, "snippetQuality": verdict.snippet_quality},
        verdict.holistic,
        protocol.weights,
        sources=[h.source for h in hits],
        expected_sources=query.expectedSources,
        known=known,
        depth=protocol.depth,
    )
    return QueryJudgment(
        labels, shown_from, scores, dict(verdict.analysis), list(verdict.suggestions), list_cached, disagreements, tally, known, judge_known
    )
