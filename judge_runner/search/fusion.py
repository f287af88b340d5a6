"""Reciprocal Rank Fusion (Cormack, Clarke and Buettcher, SIGIR 2009): ``score(d) = sum_i w_i / (k +
rank_i(d))``, 1-based ranks, ``k = 60`` as in the paper.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def rrf(ranked_lists: Sequence[Sequence[Hashable]], k: float = 60.0, weights: Sequence[float] | None = None) -> dict[Hashable, float]:
    """``{id: rrf score}`` of ranked lists, best first; ``weights`` 1.0 each by default. Raises ValueError
    for ``k < 0`` or one weight too many or few."""
    if k < 0:
        raise ValueError("RRF k must be >= 0")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    if len(weights) != len(ranked_lists):
        raise ValueError(f"{len(weights)} weights for {len(ranked_lists)} ranked lists")
    fused: dict[Hashable, float] = {}
    for weight, ranking in zip(weights, ranked_lists):
        seen: set[Hashable] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:  # only an id's best rank in a list counts
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused
