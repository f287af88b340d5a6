"""Run files with judge and people's labels, written with the run file's own models and the product's summary
code (build_summary, the compare run's comparison block and corrected block), for the corrected-estimate tests.

A system's answer to a query is a list of ``(source, judge grade, people's grade or None)``, best first; a
result with a people's grade is labelled ``human`` (its ``relevance`` the people's, ``judgeLabel`` the
judge's), and a line with any human label records ``judgeOnly`` as evaluate does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from judge_runner.evaluation.compare import comparison_block
from judge_runner.judging.scores import SCORING_VERSION, label_dimensions
from judge_runner.measures.ir import NDCG10_NAME, query_metrics
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.lines import EvaluationLine, Provenance, ResultLabel, RunStartLine, Scores
from judge_runner.runs.write import SummaryInputs, build_summary

Answer = list[tuple[str, int, int | None]]


def evaluation(run_id: str, qid: str, answer: Answer, system: str | None = None, expected: tuple[str, ...] = ()) -> dict:
    """One evaluation line (a dict by alias) for ``answer``."""
    sources = [s for s, _, _ in answer]
    judge = [j for _, j, _ in answer]
    final = [h if h is not None else j for _, j, h in answer]
    human = any(h is not None for _, _, h in answer)
    dims = label_dimensions(final, sources, list(expected))
    overall = round((dims["relevance"] + dims["ranking"]) / 2, 6)
    results = [
        ResultLabel(
            rank=i + 1,
            source=s,
            score=1.0 - i / 100,
            relevance=g,
            relevant=g >= 2,
            labelOrigin="human" if h is not None else "judge",
            judgeLabel=j if h is not None else None,
        )
        for i, ((s, j, h), g) in enumerate(zip(answer, final))
    ]
    judge_only = None
    if human:
        judge_only = {
            NDCG10_NAME: query_metrics(sources, judge, list(expected))[NDCG10_NAME],
            "relevance": label_dimensions(judge, sources, list(expected))["relevance"],
        }
    return EvaluationLine(
        runId=run_id,
        timestamp="2026-12-01T09:00:01.000Z",
        queryId=qid,
        query=f"query {qid}",
        queryIntent="Find it.",
        queryType="natural-language",
        expectedSources=list(expected),
        searchMode="hybrid",
        resultCount=len(answer),
        scores=Scores(relevance=dims["relevance"], ranking=dims["ranking"], coverage=0.5, snippetQuality=0.5, overall=overall),
        results=results,
        metrics=query_metrics(sources, final, list(expected)),
        humanLabels=sum(1 for _, _, h in answer if h is not None),
        judgeOnly=judge_only,
        system=system,
    ).line()


def write_run(folder: Path, run_id: str, systems: dict[str, dict[str, Answer]], *, query_set: str = "set-1", minute: int = 0) -> Path:
    """Write a run of one system (one key, lines without ``system`` when it is ``""``) or a compare run
    (several keys, the first the reference) into ``folder``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"2026-12-01T09:{minute:02d}:00.000Z"
    names = list(systems)
    evaluations = [evaluation(run_id, qid, answer, name or None) for name in names for qid, answer in systems[name].items()]
    provenance = Provenance(
        provider="offline", judgeModel="heuristic", heuristicJudge=True, querySetSha256=query_set, scoringVersion=SCORING_VERSION
    )
    start = RunStartLine(runId=run_id, timestamp=stamp, formatVersion=2, config={}, provenance=provenance).line()
    summary = build_summary(
        run_id,
        evaluations,
        [],
        len(evaluations),
        SummaryInputs(
            interrupted=False,
            budget_exhausted=False,
            cost_usd=0.0,
            usage={"inputTokens": 0, "outputTokens": 0, "calls": 0},
            duration_s=1.0,
            heuristic=True,
        ),
    )
    summary["timestamp"] = stamp
    if len(names) > 1:
        summary["comparison"] = comparison_block(evaluations, [], names)
        summary["biasCorrected"] = bias_corrected(evaluations, names)
    path = folder / f"{run_id}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [start, *evaluations, summary]), encoding="utf-8")
    return path


def graded_answers(
    rng: np.random.Generator, queries: int, labelled: int, *, shift: int = 0, docs: int = 5, prefix: str = "d"
) -> dict[str, Answer]:
    """``queries`` answers of ``docs`` results with random people's grades, the judge's one grade above them
    (capped at 3) plus ``shift``; the first ``labelled`` queries carry the people's grades."""
    out: dict[str, Answer] = {}
    for q in range(queries):
        human = rng.integers(0, 4, docs)
        judge = np.clip(human + 1 + shift + rng.integers(-1, 2, docs), 0, 3)
        out[f"q{q:03d}"] = [(f"{prefix}{q}-{i}", int(j), int(h) if q < labelled else None) for i, (j, h) in enumerate(zip(judge, human))]
    return out
