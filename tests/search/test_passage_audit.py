"""The passage audit (docs/judge-protocol.md, "What the judge sees of a document"): by query type, how often
the text the judge is shown of the expected source holds its best-matching chunk, on the hand-written set
(conceptual and cross-language queries the offline writer cannot write) and on the offline writer's set.
Measured with all-MiniLM-L6-v2 on torch, the reference path; the baseline is the same rule given the
query's words alone (no intent, no embedder), which is what the judge was shown before."""

from __future__ import annotations

import pytest

from judge_runner.search.passages import select_passages
from tests.support.passage_audit import CORPORA, audit, generated, hand_written, table


def words_alone(query, intent, chunks):
    return select_passages(query, chunks)


def test_the_intent_and_meaning_show_the_answer_more_often_and_never_less(embedder):
    cases = [c for c in hand_written() if CORPORA[c.corpus].is_dir()]

    def rule(query, intent, chunks):
        return select_passages(query, chunks, intent=intent, embedder=embedder)

    before, after = audit(cases, words_alone), audit(cases, rule)
    print(table(before), table(after), sep="\n\n")
    for kind, was in before.items():
        now = after[kind]
        assert (now.held, now.long_first) >= (was.held, was.long_first), kind
    # conceptual queries are worded away from the document: words alone miss their answer
    assert after["conceptual"].held > before["conceptual"].held
    assert after["conceptual"].long_first > before["conceptual"].long_first
    assert after["all"].held / after["all"].cases >= 0.8


@pytest.mark.parametrize("corpus,count", [("fixtures", 15), ("fixtures-kb", 30)])
def test_the_offline_writers_queries_keep_their_chunk(embedder, corpus, count):
    if not CORPORA[corpus].is_dir():
        pytest.skip(f"{CORPORA[corpus]} is not here")
    found = audit(generated(corpus, count), lambda q, i, ch: select_passages(q, ch, intent=i, embedder=embedder))
    assert found["all"].cases >= count // 2
    assert found["all"].held == found["all"].cases, table(found)
