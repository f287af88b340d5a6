"""What a job reads and opens before it spends anything: settings (:func:`load`), the query set, the
folder for run files, the judgment cache, a new run file, and the search systems under test (the
built-in search, external adapters, TREC runs). Each raises :class:`~judge_runner.core.failures.UsageError`
for input that cannot be used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judge_runner.app.indexing import open_index
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.core.failures import (
    UsageError,
)
from judge_runner.core.models import Query, QuerySet
from judge_runner.core.printer import Printer, Say
from judge_runner.judging.cache import CacheError, JudgmentCache
from judge_runner.runs.write import RunWriter
from judge_runner.search.systems import System, SystemsError, SystemsSpec, open_systems


def load(flags: dict[str, Any]) -> Settings:
    """Settings from the config file, the environment and ``flags`` (None means not given); raises
    UsageError for settings that cannot be used."""
    try:
        return load_settings(flags)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def check_out_dir(out_dir: Path) -> None:
    """Raise UsageError when run files could not be written to ``out_dir`` (checked before any indexing
    or spending): the nearest existing ancestor must be a writable folder."""
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write run files to {out_dir}: {probe} is not a writable folder")


def warn_missing_sources(index: Any, queries: list[Query], index_label: str, say: Say) -> None:
    """Warn about expected sources of ``queries`` that are not in ``index``: their recall will be 0."""
    indexed = set(index.document_hashes())
    missing = sorted({s for q in queries for s in q.expectedSources if s not in indexed})
    if missing:
        say(
            f"warning: {len(missing)} expected source(s) are not in the index {index_label} (their recall will be 0): "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )


def open_run_writer(out_dir: Path, run_id: str | None = None):
    """A new run file in ``out_dir``; raises UsageError when it cannot be created."""
    try:
        return RunWriter(out_dir, run_id=run_id)
    except OSError as exc:
        raise UsageError(f"cannot write to {out_dir}: {exc}") from None


def open_cache(settings: Settings, printer: Printer):
    """The judgment cache of ``settings`` (None with ``--no-cache``); raises UsageError when the file
    cannot be used."""
    path = settings.cache_path
    if path is None:
        return None
    try:
        cache = JudgmentCache(path)
    except CacheError as exc:
        raise UsageError(str(exc)) from None
    printer.note(f"judgment cache: {path}")
    return cache


def load_query_set(path: Path) -> QuerySet:
    """The query set in ``path``; raises UsageError listing (at most five) problems."""
    try:
        return QuerySet.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError, OSError) as exc:
        problems = (
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            if isinstance(exc, ValidationError)
            else str(exc)
        )
        raise UsageError(f"{path} is not a valid query set: {problems}") from None


def open_search_systems(
    settings: Settings, spec: SystemsSpec | None, index: Any, corpus: Path | None, queries: list[Query], printer: Printer
) -> list[System] | None:
    """The searches under test (:func:`judge_runner.search.systems.open_systems`), or None for an
    ordinary run of the built-in search in one mode. ``corpus`` is where text-less results are looked
    up by default (the fixtures folder). Raises UsageError for systems that cannot be opened."""
    if (spec is None or (not spec.external and len(spec.modes) <= 1)) and not settings.search.external:
        return None
    try:
        systems = open_systems(
            spec or _no_spec(),
            settings,
            index,
            corpus=corpus,
            query_ids={q.query: q.id for q in queries},
            open_builtin=lambda search: open_index(settings.model_copy(update={"search": search}), must_exist=True),
        )
    except SystemsError as exc:
        raise UsageError(str(exc)) from None
    printer.note(f"judging {len(systems)} search system(s) on the same queries: " + ", ".join(s.name for s in systems))
    return systems


def _no_spec() -> SystemsSpec:

    return SystemsSpec()


def systems_spec(**asked: Any) -> SystemsSpec | None:
    """A :class:`~judge_runner.search.systems.SystemsSpec` of the command line's search-system flags
    (``modes``, ``configs``, ``commands``, ``urls``, ``runs``, ``headers``, ``fields``, ``timeout``,
    ``corpus``), or None when they ask only for the built-in search in one mode."""
    spec = SystemsSpec(**asked)
    return spec if (spec.external or len(spec.modes) > 1) else None


def needs_builtin_index(settings: Settings, spec: SystemsSpec | None) -> bool:
    """Whether the run judges the built-in search (so an index must exist)."""
    if spec is None or not (spec.external or settings.search.external):
        return True
    return bool(spec.modes or spec.configs)


def close_systems(systems: list[System] | None) -> None:
    """Close what the systems opened (extra index connections for --compare configurations)."""
    for system in systems or []:
        system.close()
