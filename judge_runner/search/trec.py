"""TREC run and qrels files, written so that trec_eval and ir-measures read exactly what the tool ranked.

Format: a run line is ``qid Q0 docid rank score tag``, a qrels line ``qid 0 docid grade``, fields
separated by single spaces. Two guarantees:

- **Identifiers without whitespace.** Readers split lines on whitespace (ir-measures on any Unicode
  whitespace), so a source such as ``meeting notes 2026.md`` would make an 8-field line. Every
  whitespace or other non-printable character and ``%`` in a qid or docid is percent-encoded as its
  UTF-8 bytes (``%20`` for a space, ``%25`` for ``%``); nothing else changes, so ``decode_id(encode_id(x)) == x`` for every string
  and ordinary ids are written as they are. :func:`decode_id` (``urllib.parse.unquote``) reverses it.
  Encode the qrels you score a run against the same way (:func:`write_qrels` does).
- **Scores in the tool's order.** trec_eval and ir-measures re-sort each query's documents by score and
  break ties by docid (descending), not by the rank column; trec_eval holds scores as C ``float``
  (32-bit), so doubles within ~1e-7 of each other tie too. Scores are therefore written strictly
  decreasing *as float32* down the tool's ranking (:func:`rank_consistent_scores`: the tool's own score,
  moved down to the next float32 below the previous one where it would tie or rise, e.g. after
  rounding) with 9 significant digits, enough to read the same float32 back (:func:`format_score`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from judge_runner.core.textproc import clean_text


def encode_id(value: str) -> str:
    """A qid or docid safe in a whitespace-separated TREC file (runs and qrels alike, so pairs match):
    ``%``, every whitespace character (``str.isspace``: spaces, tabs, newlines, NBSP, ideographic
    space...) and every other non-printable character percent-encoded as its UTF-8 bytes; everything else
    kept. ``"guides/local dev.md"`` -> ``"guides/local%20dev.md"``. Reversed by :func:`decode_id`. Raises
    ValueError on an empty id (a TREC line cannot hold an empty field)."""
    if not value:
        raise ValueError("an empty document or query id cannot be written to a TREC file")
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8")) if ch == "%" or ch.isspace() or not ch.isprintable() else ch for ch in value
    )


def decode_id(encoded: str) -> str:
    """The original id of an :func:`encode_id` result. Raises ValueError when an escape is malformed (``%``
    not followed by two hex digits, or bytes that are not UTF-8)."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", encoded):
        raise ValueError(f"malformed %-escape in {encoded!r}")
    try:
        return unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"%-escapes in {encoded!r} are not UTF-8") from None


def rank_consistent_scores(scores: Iterable[float]) -> list[float]:
    """Scores for a ranking, best first, made strictly decreasing **as 32-bit floats**: trec_eval (and
    pytrec_eval under ir-measures) keeps a score in a C ``float``, so two doubles closer than about
    1e-7 relative would tie there. Each is the tool's score rounded to float32, or the next float32
    below the previous one when it is not lower (a tie, e.g. after rounding, or a non-finite value)."""
    import numpy as np

    written: list[np.float32] = []
    down = np.float32(-np.inf)
    for score in scores:
        value = np.float32(score) if math.isfinite(float(score)) else np.float32(np.nan)
        if written and not (np.isfinite(value) and value < written[-1]):
            value = np.nextafter(written[-1], down)
        elif not np.isfinite(value):
            value = np.float32(0.0)
        written.append(value)
    return [float(v) for v in written]


def format_score(score: float) -> str:
    """A score with 9 significant digits: enough that reading it back into a float32 gives the same value."""
    return f"{score:.9g}"


def run_lines(qid: str, ranked: Iterable[tuple[str, float]], tag: str) -> list[str]:
    """The run lines of one query: ``ranked`` is ``[(docid, score)]`` in the tool's order (rank 1 first)."""
    ranked = list(ranked)
    scores = rank_consistent_scores(score for _, score in ranked)
    q, t = encode_id(qid), encode_id(tag)
    return [
        f"{q} Q0 {encode_id(docid)} {rank} {format_score(score)} {t}"
        for rank, ((docid, _), score) in enumerate(zip(ranked, scores), start=1)
    ]


def write_qrels(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """Write ``{qid: {docid: grade}}`` as a TREC qrels file with encoded ids; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for qid, docs in qrels.items():
            for docid, grade in docs.items():
                out.write(f"{encode_id(qid)} 0 {encode_id(docid)} {int(grade)}\n")
    return path


class QueriesFormatError(ValueError):
    """A batch-search queries file line that is not a ``{"_id", "text"}`` record."""


def read_queries(path: Path) -> list[tuple[str, str]]:
    """``[(id, text)]`` from a JSON-lines queries file (BEIR ``queries.jsonl``). Lines are split on
    ``\\n`` only (a U+2028 inside a query is part of it); text that cannot be encoded becomes U+FFFD.
    Raises QueriesFormatError naming the line of a bad record, OSError when unreadable."""
    queries: list[tuple[str, str]] = []
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append((clean_text(str(record["_id"])), clean_text(str(record["text"]))))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise QueriesFormatError(f'{path} line {number} is not a {{"_id", "text"}} record') from exc
    return queries


def write_run(index: Any, queries: list[tuple[str, str]], path: Path, mode: str, limit: int) -> list[float]:
    """Search every ``(qid, text)`` with ``index.search`` and write a TREC run (tag
    ``judge-runner-<mode>``) to ``path``; returns each query's latency in milliseconds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    latencies: list[float] = []
    with open(path, "w", encoding="utf-8") as out:
        for qid, text in queries:
            answer = index.search(text, mode=mode, limit=limit, passages=False)  # the ranking only: nothing is judged
            latencies.append(answer.latencyMs)
            lines = run_lines(qid, [(hit.source, hit.score) for hit in answer.results], f"judge-runner-{mode}")
            out.writelines(line + "\n" for line in lines)
    return latencies
