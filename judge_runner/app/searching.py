"""The ``search`` command's jobs: one query for people or as JSON, or a batch of BEIR queries written as a
TREC run for trec_eval or ir-measures."""

from __future__ import annotations

import statistics
from pathlib import Path

from judge_runner.app.indexing import open_index
from judge_runner.config import Settings
from judge_runner.core.failures import UsageError
from judge_runner.core.models import SearchMode
from judge_runner.core.printer import Printer, Say
from judge_runner.core.textproc import scrub_unencodable
from judge_runner.search.base import SearchAnswer, SearchIndex
from judge_runner.search.trec import QueriesFormatError, read_queries, write_run


def describe_answer(answer: SearchAnswer) -> str:
    """One line per hit (rank, source > anchor, lines, score, signals) plus its snippet, and the confidence
    and latency (ms)."""
    lines = [] if answer.results else ["no results"]
    for hit in answer.results:
        anchor = f" > {hit.anchor}" if hit.anchor else ""
        lines.append(
            f"{hit.rank:>3}. {hit.source}{anchor}  (lines {hit.lineStart}-{hit.lineEnd}, score {hit.score:.4f}, {'+'.join(hit.matchedBy)})"
        )
        lines.append(f"     {hit.snippet[:200]}")
    lines.append(f"confident: {str(answer.confident).lower()}  ({answer.latencyMs:.1f} ms)")
    return "\n".join(lines)


def search_job(settings: Settings, query: str, mode: str, limit: int, as_json: bool, printer: Printer) -> None:
    """Print the answer to ``query`` from the existing index, read-only. Raises UsageError without a usable index."""
    query, replaced = scrub_unencodable(query)
    if replaced:
        printer.err(f"note: {replaced} character(s) of the query are not valid text (an invalid byte?) and became U+FFFD")
    with open_index(settings, must_exist=True) as index:
        answer = index.search(query, mode=mode, limit=limit, passages=False)  # the ranking only: nothing is judged
    printer.out(answer.model_dump_json(indent=2) if as_json else describe_answer(answer))


def read_batch_queries(path: Path) -> list[tuple[str, str]]:
    """``(query id, text)`` of a BEIR ``queries.jsonl``, split on ``\n`` only. Raises UsageError naming the
    first bad line, or when there is no query."""
    try:
        queries = read_queries(path)
    except QueriesFormatError as exc:
        raise UsageError(str(exc)) from None
    if not queries:
        raise UsageError(f"{path} holds no queries")
    return queries


def write_trec_run(index: SearchIndex, queries: list[tuple[str, str]], trec_run: Path, mode: SearchMode, limit: int, say: Say) -> None:
    """Write a TREC run (``qid Q0 docid rank score judge-runner-<mode>``); the first query runs once before
    timing to warm up. Latency p50/p95 (ms) go to ``say``."""
    index.search(queries[0][1], mode=mode, limit=1, passages=False)  # warm up: load the model and the vectors
    ordered = sorted(write_run(index, queries, trec_run, mode, limit))
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    say(
        f"{len(queries)} queries, mode {mode}: latency p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms; run written to {trec_run}"
    )


def batch_search_job(settings: Settings, queries_file: Path, trec_run: Path, mode: SearchMode, limit: int, printer: Printer) -> None:
    """``search --queries --trec-run``: every query of ``queries_file`` into a TREC run."""
    with open_index(settings, must_exist=True) as index:
        write_trec_run(index, read_batch_queries(queries_file), trec_run, mode, limit, printer.err)
