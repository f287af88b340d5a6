"""TREC run and qrels files that trec_eval and ir-measures read exactly as the tool ranked: ids with
whitespace, non-printables and ``%`` percent-encoded (:func:`encode_id`), and scores strictly decreasing
as 32-bit floats, since trec_eval re-sorts by a C ``float`` score, not by rank.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote

from judge_runner.core.models import SearchMode
from judge_runner.core.textproc import clean_text
from judge_runner.search.base import SearchIndex


def encode_id(value: str) -> str:
    """``"guides/local dev.md"`` -> ``"guides/local%20dev.md"``: ``%``, whitespace and non-printables as
    UTF-8 percent escapes. Raises ValueError on an empty id."""
    if not value:
        raise ValueError("an empty document or query id cannot be written to a TREC file")
    return "".join(
        "".join(f"%{b:02X}" for b in ch.encode("utf-8")) if ch == "%" or ch.isspace() or not ch.isprintable() else ch for ch in value
    )


def decode_id(encoded: str) -> str:
    """The inverse of :func:`encode_id`. Raises ValueError on a malformed escape or bytes not UTF-8."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", encoded):
        raise ValueError(f"malformed %-escape in {encoded!r}")
    try:
        return unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        raise ValueError(f"%-escapes in {encoded!r} are not UTF-8") from None


def rank_consistent_scores(scores: Iterable[float]) -> list[float]:
    """Scores best first, strictly decreasing as float32: each rounded, or the next float32 below the
    previous one where it would tie or rise."""
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
    """9 significant digits: read back into a float32, the same value."""
    return f"{score:.9g}"


def run_lines(qid: str, ranked: Iterable[tuple[str, float]], tag: str) -> list[str]:
    """One query's run lines; ``ranked``: ``[(docid, score)]``, rank 1 first."""
    ranked = list(ranked)
    scores = rank_consistent_scores(score for _, score in ranked)
    q, t = encode_id(qid), encode_id(tag)
    return [
        f"{q} Q0 {encode_id(docid)} {rank} {format_score(score)} {t}"
        for rank, ((docid, _), score) in enumerate(zip(ranked, scores), start=1)
    ]


def write_qrels(path: Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
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
    """``[(id, text)]`` from a BEIR ``queries.jsonl``, split on ``\\n`` only. Raises QueriesFormatError
    naming the line of a bad record, OSError when unreadable."""
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


def write_run(index: SearchIndex, queries: list[tuple[str, str]], path: Path, mode: SearchMode, limit: int) -> list[float]:
    """Write a TREC run of ``queries`` to ``path``; returns each query's latency in milliseconds."""
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
