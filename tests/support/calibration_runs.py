"""Judged run files and qrels written directly, for ``calibrate --results`` tests that need no index, no query
set and no judge: each run is one system, each of its queries a ranked list of ``(source, judge label)``.

The lines are the run file's own (``runs/lines.py``): a ``run_start`` with a judge fingerprint, one
``evaluation`` per query with ``metrics`` and ``results``, built through the run file's models (``runs/lines.py``) and
validated against their schemas, so a test reads what ``evaluate`` would have written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import jsonschema

from judge_runner.runs.lines import FORMAT_VERSION, EvaluationLine, RunStartLine
from tests.support.clitools import SCHEMAS

FINGERPRINT = {"provider": "anthropic", "model": "claude-sonnet-4-6", "mode": "pointwise", "trials": 1, "protocol": "label-first"}

Ranked = Mapping[str, Sequence[tuple[str, int]]]
"""``{qid: [(source, judge label 0-3), ...best first]}``."""


def _result(rank: int, source: str, label: int, trials: Sequence[int] | None) -> dict:
    return {
        "rank": rank,
        "source": source,
        "score": 1.0 / rank,
        "relevance": label,
        "relevant": label >= 2,
        "labelOrigin": "judge",
        "trialLabels": list(trials) if trials is not None else [label],
    }


def write_run(
    path: Path,
    run_id: str,
    ranked: Ranked,
    trials: Mapping[tuple[str, str], Sequence[int]] | None = None,
    fingerprint: Mapping | None = None,
) -> Path:
    """Write the run ``run_id`` of one system ranking ``ranked`` to ``path``; ``trials`` gives some results'
    trial labels (their median must be the label). Returns ``path``."""
    fingerprint = dict(fingerprint or FINGERPRINT)
    lines: list[dict] = [
        {
            "type": "run_start",
            "formatVersion": FORMAT_VERSION,
            "runId": run_id,
            "timestamp": "2026-12-01T10:00:00.000Z",
            "config": {},
            "provenance": {
                "provider": "anthropic",
                "judgeModel": "claude-sonnet-4-6",
                "generatorModel": "claude-sonnet-4-6",
                "heuristicJudge": False,
                "promptSha256": {},
                "querySetSha256": "a" * 64,
                "corpusFingerprint": "c",
                "searchConfig": {},
                "judgeRunnerVersion": "0.1.0",
                "judgeFingerprint": fingerprint,
            },
            "queriesGenerated": None,
            "queriesDropped": 0,
        }
    ]
    for qid, results in ranked.items():
        lines.append(
            {
                "type": "evaluation",
                "runId": run_id,
                "queryId": qid,
                "query": f"query {qid}",
                "queryType": "keyword",
                "searchMode": "hybrid",
                "metrics": {"nDCG@10": 0.5, "R@10": 0.5, "RR(rel=2)": 0.5},
                "results": [
                    _result(rank, source, label, (trials or {}).get((qid, source))) for rank, (source, label) in enumerate(results, start=1)
                ],
            }
        )
    lines = [RunStartLine.model_validate(lines[0]).line()] + [EvaluationLine.model_validate(line).line() for line in lines[1:]]
    for line in lines:
        jsonschema.validate(line, SCHEMAS[line["type"]])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def write_qrels(path: Path, grades: Mapping[str, Mapping[str, int]]) -> Path:
    """Write TREC qrels ``qid 0 docid grade`` (what ``label`` writes) of ``{qid: {docid: grade}}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in grades.items() for d, g in docs.items()), encoding="utf-8")
    return path


def agreeing(queries: int, per_query: int = 6, relevant: int = 2, flip_every: int = 0) -> dict:
    """``{qid: [(source, judge label)]}`` where the judge gives the human grade (3 to the first ``relevant``
    documents, 0 to the rest), except every ``flip_every``-th document overall, which it flips."""
    ranked, k = {}, 0
    for q in range(queries):
        docs = []
        for d in range(per_query):
            human = 3 if d < relevant else 0
            k += 1
            judge = (3 - human) if flip_every and k % flip_every == 0 else human
            docs.append((f"q{q}-d{d}", judge))
        ranked[f"q{q}"] = docs
    return ranked


def human_of(ranked: dict) -> dict:
    """The people's grades of :func:`agreeing`'s documents: 3 for the first two of each query, 0 for the rest."""
    return {q: {s: (3 if int(s.rsplit("-d", 1)[1]) < 2 else 0) for s, _ in docs} for q, docs in ranked.items()}
