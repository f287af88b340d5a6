"""A judge-protocol run without an index: six fixed documents with engine scores (``DOCS``, ``StubSearch``),
redis queries, and :func:`run`, which runs phase two over them with a given judge and schema-checks every
line."""

from __future__ import annotations

import jsonschema

from judge_runner.core.models import Query
from judge_runner.core.resources import load_schema
from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.runs.write import RunWriter, read_run
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit

SCHEMAS = {t: load_schema(f"{t}.schema.json") for t in ("run_start", "evaluation", "error", "summary")}


# engine scores with digits that would stand out in a request (none may appear there)
ENGINE_SCORES = [0.987654, 0.876543, 0.765432, 0.654321, 0.543219, 0.432198]


DOCS = [
    (
        "runbooks/redis-failover.md",
        "Redis failover > Promote the replica",
        "Promote the redis replica when the primary is down: run replicaof no one.",
    ),
    ("guides/postgres-backup.md", "Backups > Keys", "Rotate the postgres backup keys every 90 days with the key tool."),
    ("notes/lunch.md", None, "The canteen serves soup on Mondays."),
    ("runbooks/kube-drain.md", "Drain a node", "Drain the kubernetes node before maintenance with kubectl drain."),
    ("adr/0007-cache.md", "Decision", "We chose redis as the cache for the lantern service."),
    ("guides/local dev.md", "Setup", "Install the tools, then promote nothing: this is a setup guide."),
]


class StubSearch:
    """``hits`` fixed results (the DOCS above, with their whole text) for any query; off-topic queries
    (text starting with 'bake') get an unconfident answer."""

    def __init__(self, hits: int = 3):
        self.hits = hits

    def search(self, query, mode="hybrid", limit=10, intent=""):
        hits = [
            SearchHit(
                rank=i + 1,
                source=s,
                anchor=a,
                lineStart=1,
                lineEnd=3,
                snippet=t[:40],
                score=ENGINE_SCORES[i],
                scores=HitScores(bm25=ENGINE_SCORES[i], rrf=ENGINE_SCORES[i]),
                matchedBy=["fts"],
                text=t,
            )
            for i, (s, a, t) in enumerate(DOCS[: self.hits])
        ]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=not query.startswith("bake"), latencyMs=1.0)


def queries(n: int, off_topic: int = 0) -> list[Query]:
    """``n`` redis queries expecting the failover runbook, then ``off_topic`` baking queries."""
    out = [
        Query(
            id=f"q{i}",
            query=f"promote the redis replica {i}",
            queryIntent="Fail the cache over.",
            queryType="natural-language",
            expectedSources=["runbooks/redis-failover.md"],
        )
        for i in range(1, n + 1)
    ]
    out += [
        Query(id=f"x{i}", query=f"bake sourdough bread {i}", queryIntent="Baking.", queryType="off-topic") for i in range(1, off_topic + 1)
    ]
    return out


def run(tmp_path, judge, qs, *, cache=None, hits=3, **options):
    """Phase two of ``qs`` over :class:`StubSearch` with ``judge``; returns (outcome, lines), each line schema-checked."""
    writer = RunWriter(tmp_path / "runs")
    budget = getattr(getattr(judge, "provider", None), "budget", None)
    ctx = RunContext(judge, EvaluateOptions(concurrency=2, **options), budget=budget, cache=cache, output=QUIET)
    outcome = run_evaluation(qs, StubSearch(hits), writer, {"config": {}}, ctx)
    lines = list(read_run(writer.path))
    for line in lines[1:]:
        jsonschema.validate(line, SCHEMAS[line["type"]])
    return outcome, lines
