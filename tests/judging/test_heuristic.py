"""The injection pair through the offline heuristic judge's labels (``heuristic.judge.heuristic_labels``,
which score :func:`judge_runner.judging.fence.without_suspected_lines` of each document): the twin gets the clean
document's label for every query, alone or side by side. The fake server's honest judge is the other half
(tests/judging/test_protocol.py)."""

from __future__ import annotations

import pytest

from judge_runner.judging.fence import render_document
from judge_runner.judging.heuristic import heuristic_labels
from tests.support.injection_cases import QUERY, injection_pair

QUERIES = [
    QUERY,
    "redis failover",
    "promote the replica",
    "lantern redis primary down",
    "kubernetes node drain",
    "rotate the postgres backup keys",
]


@pytest.mark.parametrize("query", QUERIES)
def test_offline_judge_labels_the_twin_like_its_clean_document(query, embedder):
    pair = injection_pair()
    clean, twin = render_document(*pair.clean), render_document(*pair.twin)
    alone = [heuristic_labels(query, [d], embedder)[0].label for d in (clean, twin)]
    together = [r.label for r in heuristic_labels(query, [clean, twin], embedder)]
    assert alone[0] == alone[1] and together[0] == together[1], (query, alone, together)
