"""Queries embedded ahead of their searches (:func:`prepare_search`): the run loop and the dry run let a
search that can (:class:`~judge_runner.search.base.PreparesQueries`) do its model work before the first
search, so none sits between one judge call and the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from judge_runner.core.models import Query, SearchMode
from judge_runner.search.base import PreparesQueries, SearchBackend

__all__ = ["prepare_search"]


def prepare_search(search: SearchBackend, queries: Sequence[Query], mode: SearchMode, log: Callable[[str], None] = lambda m: None) -> bool:
    """Let a search that can (:class:`~judge_runner.search.base.PreparesQueries`) embed ``queries``
    ahead of their searches (each alone, so its answer is the unprepared one bit for bit), so no model
    work (nor the embedder's lock) sits between one judge call and the next. Returns False when the
    preparation failed: that is logged (with how long it took when it worked, in seconds), never raised,
    and each search embeds its own query as before (and records its own error if that fails too)."""
    if not queries or not isinstance(search, PreparesQueries):
        return True
    started = time.perf_counter()
    try:
        embedded = search.prepare_queries([q.query for q in queries], mode)
    except Exception as exc:  # noqa: BLE001 - the searches will embed (and fail) one by one, each recorded
        log(f"could not embed the queries up front ({type(exc).__name__}: {str(exc)[:200]}); each search embeds its own")
        return False
    if embedded:
        log(f"embedded {embedded} queries in {time.perf_counter() - started:.2f} s ahead of their searches")
    return True
