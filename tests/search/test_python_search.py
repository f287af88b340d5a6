"""A search written as a Python function (search/python_search.py): mapped like a command's reply, its
failures are the query's error, never a zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_runner.config import Settings
from judge_runner.search.base import HitScores, SearchHit
from judge_runner.search.documents import FolderDocuments
from judge_runner.search.mapping import ExternalSearchError, FieldMapping, ReplyRules, answer_from_reply
from judge_runner.search.python_search import CallableSearch
from judge_runner.search.systems import SystemsError, SystemsSpec, open_systems

STORE = FolderDocuments(Path(__file__).resolve().parents[2] / "fixtures")
QUERY = "redis cache failover promote replica"
REPLY = [
    {"id": "runbooks/redis-cache-failover.md", "score": 2.0},
    {"id": "no-such-file.md", "score": 1.5, "text": "the system's own text about failover"},
    {"id": "runbooks/redis-cache-failover.md", "score": 1.0},  # listed twice: merged into its first place
]


def test_a_function_s_hits_are_mapped_exactly_as_a_command_s_reply(monkeypatch):
    answer = CallableSearch(lambda q, k: REPLY, documents=STORE).search(QUERY, limit=10)
    expected = answer_from_reply(REPLY, ReplyRules(FieldMapping(), STORE, 400), QUERY, "hybrid", 10, 0.0)
    keep = ("rank", "source", "anchor", "snippet", "score", "text", "textAnchor", "textFrom")
    assert [[getattr(h, k) for k in keep] for h in answer.results] == [[getattr(h, k) for k in keep] for h in expected.results]
    assert [h.textFrom for h in answer.results] == ["document", "result"]  # the store's passages, else its own text
    assert answer.notes == expected.notes and "judged once" in answer.notes[0]


def test_search_hits_of_the_search_contract_are_accepted():
    hit = SearchHit(
        rank=1, source="a.md", anchor="A", lineStart=3, lineEnd=4, snippet="alpha beta", score=0.5, scores=HitScores(), matchedBy=[]
    )
    answer = CallableSearch(lambda q, k: (hit,)).search("alpha", limit=5)
    assert [(h.source, h.anchor, h.lineStart, h.lineEnd, h.score, h.shown()) for h in answer.results] == [
        ("a.md", "A", 3, 4, 0.5, ("A", "alpha beta"))
    ]


def test_the_function_gets_the_query_and_the_limit_and_its_order_is_kept():
    seen = []

    def ranked(query: str, k: int) -> list[dict]:
        seen.append((query, k))
        return [{"source": f"d{i}.md", "text": f"text {i}", "score": 1.0 / (i + 1)} for i in range(k + 3)]

    answer = CallableSearch(ranked).search("q", limit=4)
    assert seen == [("q", 4)] and [h.source for h in answer.results] == ["d0.md", "d1.md", "d2.md", "d3.md"]


@pytest.mark.parametrize(
    ("function", "kind", "said"),
    [
        (lambda q, k: 1 / 0, "search_failed", "raised ZeroDivisionError: division by zero"),
        (lambda q, k: "not a list", "search_output", "no list of results"),
        (lambda q, k: [{"id": "nowhere.md"}], "search_unknown_source", "no text and no document"),
    ],
    ids=["raises", "not-a-list", "no-text"],
)
def test_a_failing_function_fails_its_query_with_a_message(function, kind, said):
    with pytest.raises(ExternalSearchError) as failed:
        CallableSearch(function, documents=None, name="mine").search("q", limit=3)
    assert failed.value.kind == kind and said in str(failed.value)


def test_a_function_is_a_system_of_its_own_named_after_it():
    def my_search(query: str, k: int) -> list[dict]:
        return []

    spec = SystemsSpec(functions=((None, my_search), ("named", my_search)))
    assert spec.external and spec.count == 2
    systems = open_systems(spec, Settings(), None, corpus=None)
    assert [s.name for s in systems] == ["python:my_search", "named"]
    assert systems[0].description["kind"] == "python" and systems[0].description["function"].endswith(".my_search")
    with pytest.raises(SystemsError, match="must be a callable"):
        open_systems(SystemsSpec(functions=((None, "not callable"),)), Settings(), None, corpus=None)  # type: ignore[arg-type]
