"""The injection pair through today's offline heuristic judge (``heuristic.judge.judge_verdict``), fed what
:func:`judge_runner.fence.without_suspected_lines` leaves of each document: the twin gets the clean
document's label for every query. Once judge.py is wired to the fence this becomes the offline half of
issue 14's injection test (the fake server's honest judge is the other half)."""

from __future__ import annotations

import pytest

from judge_runner.fence import render_document, without_suspected_lines
from judge_runner.heuristic.judge import judge_verdict
from tests.injection_cases import QUERY, injection_pair

QUERIES = [QUERY, "redis failover", "promote the replica", "lantern redis primary down", "kubernetes node drain",
           "rotate the postgres backup keys"]


def as_result(doc, rank=1):
    return {"rank": rank, "source": doc.source, "anchor": doc.anchor, "snippet": doc.body}


@pytest.mark.parametrize("query", QUERIES)
def test_offline_judge_labels_the_twin_like_its_clean_document(query, embedder):
    pair = injection_pair()
    clean = without_suspected_lines(render_document(*pair.clean))
    twin = without_suspected_lines(render_document(*pair.twin))
    alone = [judge_verdict(query, "natural-language", True, [as_result(d)], embedder)["labels"][0]["relevance"] for d in (clean, twin)]
    together = [l["relevance"] for l in judge_verdict(query, "natural-language", True, [as_result(clean, 1), as_result(twin, 2)], embedder)["labels"]]
    assert alone[0] == alone[1] and together[0] == together[1], (query, alone, together)
