"""Reciprocal Rank Fusion, the one fusion implementation every backend uses.

RRF (Cormack, Clarke and Buettcher, SIGIR 2009): ``score(d) = sum_i w_i / (k + rank_i(d))`` with
1-based ranks; the paper's and the seed's ``k = 60``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def rrf(ranked_lists: Sequence[Sequence[Hashable]], k: float = 60.0, weights: Sequence[float] | None = None) -> dict[Hashable, float]:
    """Fuse ranked lists of ids (best first) into ``{id: rrf score}``.

    ``weights`` gives one weight per list (default 1.0 each). Raises ValueError for ``k < 0`` or a
    weights list of the wrong length. An id missing from a list contributes nothing for it.
    """
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
