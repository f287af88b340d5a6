"""Phase one's answerability check shows the judge a document as phase two does: the
document's passages by the one rule (judge_runner/search/passages.py), path words not counted. Before, it
showed the chunk with most of the query's terms with path words counted, so a query naming the file tied
every chunk and the first, often a bare heading, won: "Flask redis", "traefik golang" and "PHP application
with Apache2" were dropped as unanswerable, and a query naming the sample hit this for 25 of the 39
awesome-compose READMEs of fixtures-kb."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_runner.core.models import Query
from judge_runner.judging.protocol import LabelReply
from judge_runner.querygen.answerability import check_answerability, passages
from judge_runner.search.documents import FolderDocuments
from tests.support.fakes.honest_judge import honest_label

FIXTURES_KB = Path(__file__).resolve().parents[3] / "shared" / "data" / "fixtures-kb"
needs_kb = pytest.mark.skipif(not (FIXTURES_KB / "awesome-compose").is_dir(), reason="fixtures-kb is not available")


class HonestJudge:
    """The honest fake judge (tests/support/fakes/honest_judge.py) in process: it grades what it is shown, the
    share of the query's words in the anchor and text (never the source path)."""

    name, model, heuristic = "honest", "m", True

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        reply = honest_label(query, {"source": document.source, "anchor": document.anchor, "text": document.body})
        return LabelReply(label=reply["relevance"], reason=reply["reason"])


def query(qid: str, text: str, source: str) -> Query:
    return Query(id=qid, query=text, queryIntent=f"Find the Docker Compose sample: {text}.", queryType="keyword", expectedSources=[source])


def test_a_query_naming_the_file_is_shown_the_sections_that_hold_its_words(tmp_path):
    root = tmp_path / "kb"
    (root / "flask-redis").mkdir(parents=True)
    (root / "flask-redis" / "README.md").write_text(
        "## Compose sample application\n### Python/Flask application using a Redis database\n\nProject structure: app.py\n\n"
        "## Deploy with docker compose\n\n```\n$ docker compose up -d\n```\n",
        encoding="utf-8",
    )
    (shown,) = passages(query("q1", "flask redis", "flask-redis/README.md"), FolderDocuments(root))
    assert "Python/Flask application using a Redis database" in shown[1].body
    checks, _ = check_answerability([query("q1", "flask redis", "flask-redis/README.md")], root, HonestJudge())
    assert checks[0].verified


@needs_kb
@pytest.mark.parametrize(
    "text, source",
    [
        ("Flask redis", "awesome-compose/flask-redis/README.md"),
        ("traefik golang", "awesome-compose/traefik-golang/README.md"),
        ("PHP application with Apache2", "awesome-compose/apache-php/README.md"),
    ],
)
def test_the_issues_dropped_queries_are_kept(text, source):
    (shown,) = passages(query("q1", text, source), FolderDocuments(FIXTURES_KB))
    assert shown[1].body.strip() != "## Compose sample application"  # not the bare heading
    checks, _ = check_answerability([query("q1", text, source)], FIXTURES_KB, HonestJudge())
    assert checks[0].verified, checks[0].reason()


@needs_kb
def test_a_query_naming_the_sample_is_kept_for_nearly_every_awesome_compose_readme():
    readmes = sorted(FIXTURES_KB.glob("awesome-compose/*/README.md"))
    assert len(readmes) == 39
    queries = [query(f"q{i}", p.parent.name.replace("-", " "), str(p.relative_to(FIXTURES_KB))) for i, p in enumerate(readmes)]
    store = FolderDocuments(FIXTURES_KB)
    shown = {q.query: passages(q, store)[0][1].body.strip() for q in queries}
    assert [text for text, body in shown.items() if "\n" not in body] == []  # before: a bare heading for 25 of 39
    checks, _ = check_answerability(queries, FIXTURES_KB, HonestJudge())
    dropped = [c.query.query for c in checks if not c.verified]
    assert dropped == ["official documentation samples"]  # its README says "samples" but neither of the other words
