"""An overall a perfect answer earns, end to end: the offline judge on a small knowledge
base, the built-in search and TREC runs that put the one answer where a test wants it.

The unit tests of the arithmetic are in tests/judging/test_scores.py; these run the whole path (search, labels,
list verdict, scores, run file) the way a user does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_runner.judging.scores import SCORING_VERSION
from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

TOPICS = [
    "Angular development server",
    "Go server behind Nginx",
    "Redis cache with expiry",
    "Django in dev mode",
    "FastAPI application",
    "Flask with MySQL",
    "Spring Boot with Postgres",
    "Vue.js frontend",
    "Traefik reverse proxy",
    "Minecraft server",
    "Gitea with Postgres",
    "Prometheus and Grafana",
]
ANSWER = "apache-php/README.md"
OTHERS = [f"app-{i}/README.md" for i in range(len(TOPICS))]


@pytest.fixture()
def kb(tmp_path: Path) -> Path:
    """Thirteen sample-app READMEs, each with the same "Deploy with docker compose" section (as the 40
    READMEs of awesome-compose have); one answers "PHP application with Apache2"."""
    root = tmp_path / "kb"
    (root / "apache-php").mkdir(parents=True)
    (root / ANSWER).write_text(
        "# PHP application with Apache2\n\nThis sample runs a PHP application with Apache2 in one container.\n\n"
        "## Deploy with docker compose\n\n```\ndocker compose up -d\n```\n\nThen open http://localhost:80 to see the PHP "
        "application served by Apache2.\n",
        encoding="utf-8",
    )
    for topic, source in zip(TOPICS, OTHERS):
        (root / source).parent.mkdir()
        (root / source).write_text(
            f"# {topic}\n\nThis sample runs {topic.lower()} with docker compose.\n\n## Deploy with docker compose\n\n"
            "```\ndocker compose up -d\n```\n",
            encoding="utf-8",
        )
    return root


def query_set(folder: Path, query: str, expected: str) -> Path:
    path = folder / "qs.json"
    path.write_text(
        json.dumps(
            {"queries": [{"id": "q1", "query": query, "queryIntent": query, "queryType": "keyword", "expectedSources": [expected]}]}
        ),
        encoding="utf-8",
    )
    return path


def evaluated(out_dir: Path) -> dict:
    lines = run_lines(out_dir)
    (evaluation,) = [line for line in lines if line["type"] == "evaluation"]
    assert lines[0]["provenance"]["scoringVersion"] == SCORING_VERSION
    return evaluation


def judge_run(tmp_path: Path, kb: Path, qs: Path, sources: list[str], name: str) -> dict:
    run = tmp_path / f"{name}.trec"
    run.write_text("".join(f"q1 Q0 {s} {i} {len(sources) - i} test\n" for i, s in enumerate(sources, start=1)), encoding="utf-8")
    out = tmp_path / name
    result = invoke(
        ["evaluate", "--queries", str(qs), "--provider", "offline", "--run", str(run), "--corpus", str(kb), "--out-dir", str(out)]
    )
    assert result.exit_code == 0, result.output
    return evaluated(out)


def test_the_built_in_search_finding_the_one_answer_first_scores_at_least_0_95_at_limit_10(tmp_path, kb):
    qs = query_set(tmp_path, "PHP application with Apache2", ANSWER)
    db = str(tmp_path / "index.sqlite")
    assert invoke(["index", str(kb), "--db", db]).exit_code == 0
    result = invoke(
        ["evaluate", "--queries", str(qs), "--provider", "offline", "--db", db, "--search-limit", "10", "--out-dir", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    ev = evaluated(tmp_path / "out")
    assert ev["resultCount"] == 10 and ev["results"][0]["source"] == ANSWER and ev["results"][0]["relevance"] == 3
    assert ev["scores"]["overall"] >= 0.95, ev["scores"]
    assert ev["scores"]["gradedPrecision"] < 0.2  # what relevance used to be for this list (0.10 in the issue)
    assert "nothing is weak" in result.output


def test_the_answer_moved_from_rank_1_to_rank_10_loses_at_least_0_2_overall(tmp_path, kb):
    qs = query_set(tmp_path, "PHP application with Apache2", ANSWER)
    first = judge_run(tmp_path, kb, qs, [ANSWER, *OTHERS[:9]], "first")
    last = judge_run(tmp_path, kb, qs, [*OTHERS[:9], ANSWER], "last")
    assert first["results"][0]["relevance"] == last["results"][9]["relevance"] == 3  # the same labels, another order
    assert first["scores"]["overall"] >= 0.95
    assert first["scores"]["overall"] - last["scores"]["overall"] >= 0.2, (first["scores"], last["scores"])


def test_a_list_of_lookalikes_missing_the_expected_source_never_scores_one(tmp_path, kb):
    # the "Deploy with docker compose": every README carries the heading, the expected one is not returned
    qs = query_set(tmp_path, "Deploy with docker compose", ANSWER)
    lookalikes = judge_run(tmp_path, kb, qs, OTHERS[:10], "lookalikes")
    assert lookalikes["metrics"]["R@10"] < 1.0  # the expected source is in the qrels (grade 3) and was not found
    assert lookalikes["scores"]["relevance"] < 1.0 and lookalikes["scores"]["overall"] < 1.0, lookalikes["scores"]
    with_it = judge_run(tmp_path, kb, qs, [ANSWER, *OTHERS[:9]], "with-it")
    assert with_it["scores"]["overall"] > lookalikes["scores"]["overall"]
    assert ANSWER in lookalikes["analysis"]["coverage"]  # the offline judge names the missing expected source


def test_a_run_scored_under_the_old_version_is_not_resumed_into_the_new_one(tmp_path):
    from judge_runner.app.resume import read_resume_point
    from judge_runner.core.failures import UsageError

    start = {"type": "run_start", "runId": "r1", "timestamp": "2026-11-30T10:00:00Z", "formatVersion": 2, "config": {}, "provenance": {}}
    evaluation = {"type": "evaluation", "runId": "r1", "queryId": "q1", "query": "x", "scores": {"relevance": 0.1, "overall": 0.6}}
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(start) + "\n" + json.dumps(evaluation) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match="scoring version 1.*start a new run"):
        read_resume_point(old)
    current = tmp_path / "current.jsonl"
    current.write_text(
        json.dumps({**start, "provenance": {"scoringVersion": SCORING_VERSION}}) + "\n" + json.dumps(evaluation) + "\n", encoding="utf-8"
    )
    assert read_resume_point(current).judged_ids == {"q1"}
