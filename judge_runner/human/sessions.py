"""Which run files the labelling sessions still need: a budget session estimates from the run file it drew from
each time it ends or resumes, so that file must outlive ``weekly --keep``. Sessions are found in the labels
folder and through the judgment cache."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from judge_runner.judging.cache import JudgmentCache


def session_journals(folder: Path | None, cache: Path | None) -> list[Path]:
    """The journals of ``folder`` and those the cache names, each once. Raises
    :class:`judge_runner.judging.cache_failures.CacheError` for a cache that cannot be read."""
    found: dict[Path, None] = {}
    if folder is not None and folder.is_dir():
        found.update(dict.fromkeys(p.resolve() for p in sorted(folder.glob("*.journal.jsonl"))))
    if cache is not None and cache.is_file():
        with JudgmentCache(cache, readonly=True) as opened:
            for marker in opened.label_designs().values():
                journal = marker.get("journal")
                if isinstance(journal, str) and Path(journal).is_file():
                    found[Path(journal).resolve()] = None
    return list(found)


def needed_runs(journals: Iterable[Path]) -> dict[str, str]:
    """``{run file name: why}`` for every run file a budget session of ``journals`` estimates from."""
    out: dict[str, str] = {}
    for journal in journals:
        try:
            with open(journal, encoding="utf-8") as handle:
                plan = json.loads(handle.readline())
        except (OSError, ValueError):
            continue
        if not isinstance(plan, dict) or not isinstance(plan.get("budget"), dict):
            continue
        for run in plan.get("runs") or []:
            out.setdefault(Path(str(run)).name, f"label session {plan.get('name')!r} ({journal}) estimates from it")
    return out
