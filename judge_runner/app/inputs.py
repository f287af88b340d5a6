"""What a job reads and opens before it spends anything: settings (:func:`load`), the query set, the
folder for run files, the judgment cache, a new run file, and the search systems under test (the
built-in search, external adapters, TREC runs). Each raises :class:`~judge_runner.core.failures.UsageError`
for input that cannot be used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from judge_runner.app.indexing import open_index
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.core.failures import (
    UsageError,
)
from judge_runner.core.models import Query, QuerySet, SearchMode
from judge_runner.core.printer import Printer, Say
from judge_runner.embed.registry import choose
from judge_runner.human.known import journal_texts
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import human_labels
from judge_runner.runs.read import read_run_file
from judge_runner.runs.write import RunWriter
from judge_runner.search.base import SearchIndex
from judge_runner.search.systems import System, SystemsError, SystemsSpec, open_systems, reopen_systems
from judge_runner.search.trec import QueriesFormatError, read_queries


def load(flags: dict[str, Any], flag_name: Callable[[str], str] | None = None) -> Settings:
    """Settings from the config file, the environment and ``flags`` (None means not given; ``flag_name``: what
    a given one is called, default its flag); raises UsageError for settings that cannot be used."""
    try:
        return load_settings(flags, flag_name=flag_name)
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


def warn_missing_sources(index: SearchIndex, queries: list[Query], index_label: str, say: Say) -> None:
    """Warn about expected sources of ``queries`` that are not in ``index``: their recall will be 0."""
    indexed = set(index.document_hashes())
    missing = sorted({s for q in queries for s in q.expectedSources if s not in indexed})
    if missing:
        say(
            f"warning: {len(missing)} expected source(s) are not in the index {index_label} (their recall will be 0): "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )


def open_run_writer(out_dir: Path, run_id: str | None = None) -> RunWriter:
    """A new run file in ``out_dir``; raises UsageError when it cannot be created."""
    try:
        return RunWriter(out_dir, run_id=run_id)
    except OSError as exc:
        raise UsageError(f"cannot write to {out_dir}: {exc}") from None


def open_cache(settings: Settings, printer: Printer) -> JudgmentCache | None:
    """The judgment cache of ``settings`` (None with ``--no-cache``); raises its CacheError when the file
    cannot be used (damaged: exit 3; read-only, a folder, not a cache: exit 2)."""
    path = settings.cache_path
    if path is None:
        return None
    cache = JudgmentCache(path)  # its CacheError keeps its exit code: a damaged cache is exit 3 in every command
    printer.note(f"judgment cache: {path}")
    return cache


def check_human_coverage(cache: JudgmentCache | None, settings: Settings, queries: list[Query], printer: Printer) -> None:
    """Say when imported human qrels match none (or only some) of the query set's ids: human labels are
    matched by query id, and a set imported for other ids (``1..15`` against ``q01..q15``) would apply
    to nothing without a word. A warning when the sets were named with ``--human-qrels``, a note when
    every imported set applies by default."""
    if cache is None or not queries:
        return
    qids = {qid for qid, _ in human_labels(cache, settings.human_qrels)}
    if not qids:
        return
    ids = [q.id for q in queries]
    matched = [q for q in ids if q in qids]
    named = settings.human_qrels is not None
    shown = ", ".join(sorted(qids)[:3]) + (" ..." if len(qids) > 3 else "")
    if not matched:
        say = printer.err if named else printer.note
        say(
            f"{'warning' if named else 'note'}: no imported human label applies: their query ids ({shown}) match none of "
            f"the query set's ({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}); every result is judged"
        )
    elif named and len(matched) < len(ids):
        printer.note(f"note: imported human labels cover {len(matched)} of {len(ids)} queries; the judge labels the rest")


def query_texts(path: Path) -> dict[str, str]:
    """``{qid: text}`` of a query set (JSON), a run file, a label session's journal, or BEIR ``queries.jsonl``.
    Raises UsageError when ``path`` is none of them."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if data.startswith(b'{"type":"plan"'):  # a label session's journal
        return journal_texts(path)
    try:
        whole = json.loads(data)
    except ValueError:
        whole = None  # JSON lines
    if isinstance(whole, dict) and "queries" in whole:
        return {q.id: q.query for q in load_query_set(path).queries}
    run = read_run_file(path)
    if run.is_run and run.evaluations:
        return {ev.queryId: ev.query for ev in run.evaluations}
    try:
        texts = dict(read_queries(path))
    except (QueriesFormatError, OSError):
        texts = {}
    if not texts:
        raise UsageError(f"{path} is neither a query set, a run file nor BEIR queries.jsonl")
    return texts


def load_query_set(path: Path) -> QuerySet:
    """The query set in ``path``; raises UsageError naming the file and, for each of at most five problems,
    where it is (line and column for bad JSON, else the field, a query by its index and id) and what is wrong."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a valid query set: byte {exc.start} is not UTF-8 text") from None
    if not text.strip():
        raise UsageError(f"{path} is not a valid query set: the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not a valid query set: line {exc.lineno} column {exc.colno}: {exc.msg} (not JSON)") from None
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a string", type(None): "null"}.get(type(data), "a number")
        raise UsageError(f'{path} is not a valid query set: the file holds {kind}, not an object with a "queries" list') from None
    try:
        return QuerySet.model_validate_json(text)
    except ValidationError as exc:
        raise UsageError(f"{path} is not a valid query set: {query_set_problems(exc, data)}") from None


def query_set_problems(exc: ValidationError, data: dict[str, Any]) -> str:
    """At most five of ``exc``'s problems with the query set ``data``, each as :func:`_problem` says it."""
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(_problem(e, data) for e in exc.errors()[:5]) + more


def _problem(error: Any, data: dict[str, Any]) -> str:
    """One pydantic error as "where: what (got what)": ``queries[2] (id q03).queryType``, the set itself for a
    rule over all queries."""
    where, node = "", cast(Any, data)
    for part in error["loc"]:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            named = f" (id {node['id']})" if isinstance(node, dict) and isinstance(node.get("id"), str) else ""
            where += f"[{part}]{named}"
        else:
            node = node.get(part) if isinstance(node, dict) else None
            where += f".{part}" if where else str(part)
    message = str(error["msg"]).removeprefix("Value error, ")
    shown = "" if error["type"] in ("missing", "too_short", "value_error") else f" (got {json.dumps(error['input'])[:80]})"
    return f"{where or 'the set'}: {message}{shown}"


@dataclass(frozen=True)
class Searches:
    """The searches a command judges, decided once (:func:`resolve_systems`): ``spec`` with its modes,
    table and mode final; ``table_dropped``: the config file's ``[search.external]`` table is not judged,
    since the command line names the systems."""

    spec: SystemsSpec
    table_dropped: bool = False

    @property
    def ordinary(self) -> bool:
        """The built-in search alone in one mode: a run without a systems list."""
        return not self.spec.external and len(self.spec.modes) <= 1

    @property
    def needs_index(self) -> bool:
        """Whether the built-in search is judged, so an index must exist."""
        return bool(self.spec.modes or self.spec.configs)


def resolve_systems(settings: Settings, asked: SystemsSpec | None) -> Searches:
    """The searches under test from every source at once (flag, ``JUDGE_RUNNER_*`` variable or config file),
    the same for ``evaluate``, ``generate-and-evaluate`` and ``weekly``; ``asked`` holds the adapter flags.

    - the ``[search.external]`` table is judged unless a flag names a command, URL, run file or
      configuration; the ``--search-timeout``, ``--search-fields``, ``--corpus`` and ``--search-header``
      flags apply to it;
    - ``search_mode`` naming several modes judges the built-in search in each; ``search_mode`` set at all
      beside an external search adds the built-in search in that mode, first, as the reference.

    Raises UsageError for an adapter flag that applies to no system."""
    asked = asked or SystemsSpec()
    table = settings.search.external or None
    flagged = bool(asked.commands or asked.urls or asked.functions or asked.runs or asked.configs)
    uses_table = bool(table) and not flagged
    url_in_table = uses_table and bool((table or {}).get("url"))
    if asked.headers and not (asked.urls or url_in_table):
        raise UsageError("--search-header applies to --search-url (or a url in [search.external]); no URL was given")
    external = flagged or uses_table
    unused = [
        flag
        for flag, value in (("--search-fields", asked.fields), ("--search-timeout", asked.timeout), ("--corpus", asked.corpus))
        if value
    ]
    if unused and not external:
        raise UsageError(
            f"{', '.join(unused)} applies to an external search (--search-command, --search-url, --run or [search.external]); none is judged"
        )
    several = tuple(settings.search_modes) if len(settings.search_modes) > 1 else ()
    reference = not external or "search_mode" in settings.model_fields_set
    modes = several or ((settings.search_mode,) if reference else ())
    spec = replace(asked, modes=modes, mode=settings.search_mode, table=table if uses_table else None)
    return Searches(spec, table_dropped=asked.external and bool(table) and not uses_table)


def open_search_systems(
    settings: Settings, searches: Searches, index: SearchIndex | None, corpus: Path | None, queries: list[Query], printer: Printer
) -> list[System] | None:
    """The systems of ``searches`` opened (:func:`judge_runner.search.systems.open_systems`), or None for an
    ordinary run. ``corpus``: where text-less results are looked up by default. Says which systems are
    judged. Raises UsageError for systems that cannot be opened, and for a TREC run none of whose query ids
    is in the query set."""
    if searches.ordinary:
        return None
    spec = searches.spec
    if searches.table_dropped:
        printer.note("note: the [search.external] table of the config file is not judged: the command line names the systems")
    try:
        systems = open_systems(
            spec,
            settings,
            index,
            corpus=corpus,
            query_ids={q.query: q.id for q in queries},
            open_builtin=lambda search: open_index(settings.model_copy(update={"search": search}), must_exist=True),
            embedder=(index.embedder if index is not None else None) or choose(settings.embedder),
            index_label=settings.index_label,
        )
    except SystemsError as exc:
        raise UsageError(str(exc)) from None
    check_run_coverage(systems, queries, printer)
    warn_own_text(systems, printer)
    joined = " (search_mode is set, so the built-in search joins as the reference)" if len(spec.modes) == 1 else ""
    printer.note(f"judging {len(systems)} search system(s) on the same queries: " + ", ".join(s.name for s in systems) + joined)
    say_systems(systems, printer)
    return systems


def say_systems(systems: list[System], printer: Printer) -> None:
    """One line per system: its name and what it runs (command, URL, run file, function, mode), as
    ``provenance.searchSystems`` keeps them."""
    for system in systems:
        d = system.description
        what = {
            "builtin": f"built-in search, {d.get('mode')}" + (f" ({d['config']})" if d.get("config") else ""),
            "command": f"command {d.get('command')}",
            "http": f"POST {d.get('url')}",
            "trec-run": f"TREC run {d.get('run')}",
            "python": f"function {d.get('function')}",
        }.get(str(d.get("kind")), str(d.get("kind")))
        printer.note(f"  {system.name}: {what}")


def warn_own_text(systems: list[System], printer: Printer) -> None:
    """Warn once when systems of one run show the judge their own text (no document store): a document two
    systems return could then be judged on two texts, and a label belongs to the query and the document."""
    own = [s.name for s in systems if s.description.get("kind") != "builtin" and not s.description.get("documents")]
    if len(systems) > 1 and own:
        printer.err(
            f"warning: {', '.join(own)} show the judge their own text: a document two systems return may be judged on "
            "different text; give --corpus (the folder or corpus.jsonl they search) so every system is shown the same passages"
        )


def reopen_search_systems(settings: Settings, recorded: list[dict[str, Any]], index: Any, mode: str, printer: Printer) -> list[System]:
    """The systems a resumed run recorded, opened again (:func:`judge_runner.search.systems.reopen_systems`;
    ``mode``: the run's search mode). Raises UsageError for a system that cannot be rebuilt."""
    try:
        systems = reopen_systems(
            recorded,
            settings,
            index,
            mode=cast(SearchMode, mode),
            embedder=(index.embedder if index is not None else None) or choose(settings.embedder),
        )
    except SystemsError as exc:
        raise UsageError(str(exc)) from None
    printer.note(f"resuming with the run's {len(systems)} search system(s), rebuilt from its file:")
    say_systems(systems, printer)
    return systems


def check_run_coverage(systems: list[System], queries: list[Query], printer: Printer) -> None:
    """Compare each TREC run's query ids with the query set's: none in common is a UsageError (every
    query would go unscored: a run of ``1..15`` for a set of ``q01..q15``), some missing is a warning
    naming them (those queries become error lines, never zeros, as trec_eval leaves a query out of a
    run's averages when the run has no line for it)."""
    ids = [q.id for q in queries]
    for system in systems:
        covered = getattr(system.search, "qids", None)
        if covered is None or not ids:
            continue
        missing = [q for q in ids if q not in covered]
        if len(missing) == len(ids):
            shown = ", ".join(sorted(covered)[:3])
            raise UsageError(
                f"{system.name}: the run's query ids ({shown}{' ...' if len(covered) > 3 else ''}) match none of the query "
                f"set's ({', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}): every query would go unscored. A run's qid "
                "column must hold the query set's ids"
            )
        if missing:
            printer.err(
                f"warning: {system.name}: the run has no line for {len(missing)} of {len(ids)} queries "
                f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}); they are not scored (error lines, as "
                "trec_eval leaves them out), the averages cover the rest"
            )
        extra = len(set(covered) - set(ids))
        if extra:
            printer.note(f"note: {system.name}: {extra} query id(s) of the run are not in the query set (ignored)")


def systems_spec(**asked: Any) -> SystemsSpec | None:
    """The command line's search-system flags as a :class:`~judge_runner.search.systems.SystemsSpec`, or
    None when none was given; :func:`resolve_systems` adds what the settings ask for."""
    spec = SystemsSpec(**asked)
    return spec if (spec.external or spec.headers or spec.fields or spec.timeout or spec.corpus) else None


def close_systems(systems: list[System] | None) -> None:
    """Close what the systems opened (extra index connections for --compare configurations)."""
    for system in systems or []:
        system.close()
