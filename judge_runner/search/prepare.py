"""Queries embedded ahead of their searches, so no model work sits between two judge calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from judge_runner.core.models import Query, SearchMode
from judge_runner.search.base import PreparesQueries, SearchBackend

__all__ = ["prepare_search"]


def prepare_search(search: SearchBackend, queries: Sequence[Query], mode: SearchMode, log: Callable[[str], None] = lambda m: None) -> bool:
    """Let a :class:`~judge_runner.search.base.PreparesQueries` search embed ``queries`` now. Returns False
    when that failed: logged, never raised; each search then embeds its own query."""
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
