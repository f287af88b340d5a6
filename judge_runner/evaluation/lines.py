"""The lines phase two writes, as dicts in the run file's shape (:mod:`judge_runner.runs.lines` checks
them): an ``evaluation`` line per judged query, an ``error`` line per failed one, a ``batch`` line per
batch, and the ``provenance`` block of ``run_start``.
"""

from __future__ import annotations

from dataclasses import dataclass

from judge_runner import __version__
from judge_runner.core.models import Query
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.fingerprint import build_fingerprint, judge_is_generator
from judge_runner.judging.labelling import QueryJudgment, Tally
from judge_runner.judging.llm_judge import SNIPPET_CHARS_SHOWN
from judge_runner.judging.protocol import Judge
from judge_runner.judging.scores import SCORING_VERSION, label_dimensions
from judge_runner.measures.ir import NDCG10_NAME, query_metrics
from judge_runner.runs.lines import BatchLine, ErrorLine, EvaluationLine, EvaluationUsage, Provenance, ResultLabel, Scores
from judge_runner.runs.write import utc_now
from judge_runner.search.base import SearchAnswer

RELEVANT_GRADE = 2  # a result labelled 2 (highly relevant) or 3 (perfectly relevant) counts as relevant


def evaluation_line(run_id: str, query: Query, answer: SearchAnswer, judged: QueryJudgment, depth: int | None = None) -> dict:
    """The ``evaluation`` line (format version 2) for a judged query (docs/run-file.md), built as
    an :class:`~judge_runner.runs.lines.EvaluationLine` and serialised by alias. An off-topic query has
    null scores and metrics and ``abstained`` instead; its results are still labelled. ``depth``: the
    search limit the relevance dimension is cut at (``ProtocolSettings.depth``), for ``judgeOnly``."""
    grades = [o.label for o in judged.labels]
    off_topic = query.queryType == "off-topic"
    tally = judged.tally
    models = set().union(*(o.models_returned for o in judged.labels)) | tally.models_returned
    return EvaluationLine(
        runId=run_id,
        timestamp=utc_now(),
        queryId=query.id,
        query=query.query,
        queryIntent=query.queryIntent,
        queryType=query.queryType,
        expectedSources=query.expectedSources,
        searchMode=answer.mode,
        resultCount=len(answer.results),
        confident=answer.confident,
        latencyMs=answer.latencyMs,
        scores=Scores(**(judged.scores or {})),
        analysis=judged.analysis,
        suggestions=judged.suggestions,
        results=[
            ResultLabel(
                rank=h.rank,
                source=h.source,
                anchor=h.anchor,
                score=h.score,
                relevance=o.label,
                relevant=o.label >= RELEVANT_GRADE,
                reason=o.reason,
                injectionSuspected=o.injection_suspected,
                cached=o.cached,
                labelOrigin=o.origin,
                trialLabels=o.trial_labels,
                labelSpread=o.spread,
                shownAs=o.shown_as,
                shownFrom=shown_from,
                shownChars=o.shown_chars,
                truncated=o.truncated,
                snippet=h.snippet[:SNIPPET_CHARS_SHOWN],
                shownText=o.shown_text,
                shownAnchor=o.shown_anchor or None,
                judgeLabel=o.judge_label,
                outputOrder=o.order,
            )
            for h, o, shown_from in zip(answer.results, judged.labels, judged.shown_from)
        ],
        metrics=None if off_topic else query_metrics([h.source for h in answer.results], grades, query.expectedSources, judged.known),
        abstained=(not answer.confident or not answer.results) if off_topic else None,
        usage=usage_of(tally),
        labelsCached=sum(o.labels_cached for o in judged.labels),
        labelsJudged=sum(o.labels_judged for o in judged.labels),
        humanLabels=sum(1 for o in judged.labels if o.origin == "human"),
        listCached=judged.list_cached,
        expectedSourceDisagreements=judged.disagreements,
        judgeModelsReturned=sorted(models),
        judgeOnly=None if off_topic else judge_only(answer, judged, query.expectedSources, depth),
        **({"judgeRecoveries": tally.recoveries} if tally.recoveries else {}),
        **({"searchNotes": answer.notes} if answer.notes else {}),
    ).line()


def judge_only(
    answer: SearchAnswer, judged: QueryJudgment, expected_sources: list[str], depth: int | None = None
) -> dict[str, float | None] | None:
    """``{"nDCG@10", "relevance"}`` of an on-topic query from the judge's labels alone (its own, and the judge's
    grades known from elsewhere, ``judged.judge_known``) when people graded something of the query (a result,
    or a document in ``judged.known``), so that :mod:`judge_runner.runs.corrected` can correct the judge's mean by
    the people's; None otherwise (the line's own figures are then the judge's). ``relevance`` is computed
    exactly as the line's own (:func:`judge_runner.judging.scores.label_dimensions`: the same sources, expected
    sources and ``depth``), only from the judge's grades."""
    people = any(o.origin == "human" for o in judged.labels) or any(judged.judge_known.get(d) != g for d, g in judged.known.items())
    if not people:
        return None
    own = [o.judge_label if o.judge_label is not None else o.label for o in judged.labels]
    sources = [h.source for h in answer.results]
    known = judged.judge_known
    ndcg = query_metrics(sources, own, expected_sources, known)[NDCG10_NAME]
    return {NDCG10_NAME: ndcg, "relevance": label_dimensions(own, sources, expected_sources, known, depth=depth)["relevance"]}


def usage_of(tally: Tally) -> EvaluationUsage:
    """A query's ``usage`` block from what its calls cost (``tally``): tokens (input with cache writes and
    reads), USD (None when unknown, never 0) and HTTP requests."""
    usage = tally.usage
    return EvaluationUsage(
        inputTokens=usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens,
        outputTokens=usage.output_tokens,
        costUsd=None if tally.cost_usd is None else round(tally.cost_usd, 6),
        calls=usage.calls,
    )


def error_line(run_id: str, query: Query, stage: str, exc: BaseException, tally: Tally | None = None) -> dict:
    """The ``error`` line for a query that could not be searched or judged (an
    :class:`~judge_runner.runs.lines.ErrorLine` serialised by alias; ``stage`` is "search" or "judge",
    else pydantic.ValidationError). ``tally``: what the query's calls spent before it failed (its
    ``usage``; None: none recorded)."""
    return ErrorLine.model_validate(
        {
            "runId": run_id,
            "timestamp": utc_now(),
            "queryId": query.id,
            "query": query.query,
            "queryType": query.queryType,
            "stage": stage,
            "errorType": getattr(exc, "kind", type(exc).__name__),
            "message": str(exc)[:1000],
            "attempts": getattr(exc, "attempts", 0),
            "usage": usage_of(tally) if tally is not None else None,
        }
    ).line()


def batch_line(run_id: str, fields: dict) -> dict:
    """The ``batch`` line (a :class:`~judge_runner.runs.lines.BatchLine` serialised by alias) for a batch a
    ``--batch`` run just submitted: ``fields`` are ``batchId``, ``provider``, ``requests``, ``customIds``."""
    return BatchLine.model_validate({"runId": run_id, "timestamp": utc_now(), **fields}).line()


@dataclass(frozen=True, kw_only=True)
class Basis:
    """What a run's judgments rest on beside the judge: the prompts' sha256 by file name, the query set's
    sha256, the corpus fingerprint, the search config, the query writer (None: a set read from a file) and
    the embedder that chose the passages (``""``: none)."""

    prompt_hashes: dict
    query_set_sha: str
    corpus_fingerprint: str
    search_config: dict
    generator_provider: str | None = None
    generator_model: str | None = None
    passage_embedder: str = ""


def provenance(judge: Judge, basis: Basis, options: EvaluateOptions | None = None) -> dict:
    """The ``provenance`` block of ``run_start`` (a :class:`~judge_runner.runs.lines.Provenance` by alias),
    with the judge fingerprint of ``options``' protocol (:func:`judge_runner.judging.fingerprint.build_fingerprint`)
    and :data:`judge_runner.judging.scores.SCORING_VERSION`."""
    options = options or EvaluateOptions()
    generator_model, generator_provider = basis.generator_model, basis.generator_provider
    return Provenance(
        provider=judge.name,
        generatorModel=generator_model,
        judgeModel=judge.model,
        heuristicJudge=judge.heuristic,
        promptSha256=basis.prompt_hashes,
        querySetSha256=basis.query_set_sha,
        corpusFingerprint=basis.corpus_fingerprint,
        searchConfig=basis.search_config,
        judgeRunnerVersion=__version__,
        judgeFingerprint=build_fingerprint(
            judge.name,
            judge.model,
            options.judge_mode,
            options.trials,
            options.seed,
            judge.heuristic,
            basis.passage_embedder,
            getattr(judge, "reasoning_effort", None),
        ).as_dict(),
        # the heuristic judge is no model: the offline writer sharing its provider name is no circularity
        judgeIsGenerator=not judge.heuristic and judge_is_generator(generator_provider, generator_model, judge.name, judge.model),
        scoringVersion=SCORING_VERSION,
    ).model_dump(by_alias=True, mode="json")
