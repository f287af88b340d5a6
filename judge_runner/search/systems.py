"""The search systems a run judges: the built-in search (one or several modes), external adapters
(commands, HTTP endpoints, Python functions given to :mod:`judge_runner.api`), TREC run files, and
configuration files (``--compare a.toml,b.toml``).

:class:`SystemsSpec` is what was asked for, resolved once per command from every source by
:func:`judge_runner.app.inputs.resolve_systems`; :func:`open_systems` opens it as :class:`System`
objects, in this order: the built-in search in each of ``modes``, the ``[search.external]`` table,
each configuration file, then each command, URL, Python function and run file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge_runner.core.ids import unique_name
from judge_runner.core.models import SEARCH_MODES, SearchMode
from judge_runner.embed.base import TextEmbedder
from judge_runner.search.base import SearchBackend
from judge_runner.search.documents import DocumentStoreError, IndexDocuments, open_documents
from judge_runner.search.external import CommandSearch
from judge_runner.search.http_search import HttpSearch, parse_headers
from judge_runner.search.mapping import MAX_REPLY_BYTES, FieldMapping, ReplyRules
from judge_runner.search.python_search import CallableSearch, SearchFunction
from judge_runner.search.settings import SearchSettings
from judge_runner.search.trec_run import TrecRunError, TrecRunSearch


class SystemsError(ValueError):
    """Systems that cannot be opened as asked (bad flag, config table, missing file or variable)."""


class SystemsSettings(Protocol):
    """What opening the systems reads of the run's settings (``judge_runner.config.Settings`` has it)."""

    @property
    def timeout(self) -> float: ...  # seconds per exchange, unless the flag or table says otherwise
    @property
    def max_retries(self) -> int: ...
    @property
    def search(self) -> SearchSettings: ...


class ExternalConfig(BaseModel):
    """A ``[search.external]`` table: exactly one of ``command`` or ``url``; ``headers`` as
    ``NAME=env:VARIABLE``; ``fields`` as ``"id=doc_id,text=body"`` or a table; ``timeout`` in seconds;
    ``corpus`` for text-less results; ``max_reply_mb``: the most of one reply read, in MiB."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    url: str | None = None
    headers: list[str] = Field(default_factory=list)
    fields: str | dict[str, str] | None = None
    timeout: float | None = Field(None, gt=0)
    corpus: Path | None = None
    name: str | None = None
    max_reply_mb: float | None = Field(None, gt=0, le=4096)


@dataclass(frozen=True)
class SystemsSpec:
    """What was asked for. ``modes``: the built-in search's modes; ``mode``: the mode every other system
    is asked in; ``table``: the ``[search.external]`` table (``table_source`` names it in messages);
    ``functions``: ``(name or None, function)`` pairs. ``headers`` (for every URL), ``fields``,
    ``timeout`` (seconds) and ``corpus`` come from flags and override the table's own values."""

    modes: tuple[SearchMode, ...] = ()
    mode: SearchMode = "hybrid"
    configs: tuple[Path, ...] = ()
    commands: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    functions: tuple[tuple[str | None, SearchFunction], ...] = ()
    runs: tuple[Path, ...] = ()
    headers: tuple[str, ...] = ()
    fields: str | None = None
    timeout: float | None = None
    corpus: Path | None = None
    table: dict[str, Any] | None = None
    table_source: str = "[search.external]"

    @property
    def external(self) -> bool:
        """True when anything but the built-in search was asked for."""
        return bool(self.table or self.configs or self.commands or self.urls or self.functions or self.runs)

    @property
    def count(self) -> int:
        """How many systems a run of this spec judges (the built-in search alone: 1)."""
        named = len(self.configs) + len(self.commands) + len(self.urls) + len(self.functions) + len(self.runs)
        return max(1, len(self.modes) + bool(self.table) + named)


@dataclass
class System:
    """One search under test: ``name`` (unique in the run), the ``mode`` it is asked in, and
    ``description`` for provenance (never a secret). ``close`` releases what it opened."""

    name: str
    search: SearchBackend
    mode: str  # one of SEARCH_MODES, checked when the system is opened
    description: dict[str, Any]
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Close what this system opened (an extra index connection)."""
        for closer in self.closers:
            closer()


def read_config_file(path: Path) -> tuple[dict[str, Any], str | None]:
    """``(search table, search_mode)`` of a configuration file (``judge-runner.toml`` shape, or
    ``[tool.judge-runner]`` of a pyproject). Raises SystemsError."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SystemsError(f"cannot read the configuration {path}: {exc}") from None
    data = data.get("tool", {}).get("judge-runner", data) if Path(path).name == "pyproject.toml" else data
    search = data.get("search", {})
    mode = data.get("search_mode", data.get("search-mode"))
    if not isinstance(search, dict):
        raise SystemsError(f"{path}: [search] must be a table")
    return {k.replace("-", "_"): v for k, v in search.items()}, mode


@dataclass(frozen=True)
class _Shared:
    """What every external adapter of one run shares: the default ``timeout`` (seconds), retries, the
    document store (``corpus``, else the built-in index's ``index_store``), the snippet length and the
    embedder passages are chosen under."""

    timeout: float
    max_retries: int
    corpus: Path | None
    snippet_chars: int
    embedder: TextEmbedder | None = None
    index_store: IndexDocuments | None = None  # the built-in index, the store when no corpus is given


def external_backend(config: ExternalConfig, shared: _Shared) -> CommandSearch | HttpSearch:
    """A CommandSearch or HttpSearch for ``config``. Raises SystemsError (bad table, unset variable,
    missing corpus)."""
    if bool(config.command) == bool(config.url):
        raise SystemsError("an external search needs exactly one of command or url")
    try:
        mapping = FieldMapping.parse(config.fields)
        store = config.corpus or shared.corpus
        documents = open_documents(store, shared.embedder) if store is not None else shared.index_store
        bound = int(config.max_reply_mb * 1048576) if config.max_reply_mb else MAX_REPLY_BYTES
        timeout = config.timeout or shared.timeout
        if config.command:
            return CommandSearch(
                config.command,
                timeout=timeout,
                mapping=mapping,
                documents=documents,
                snippet_chars=shared.snippet_chars,
                name=config.name,
                max_bytes=bound,
            )
        return HttpSearch(
            config.url or "",
            headers=parse_headers(config.headers),
            timeout=timeout,
            max_retries=shared.max_retries,
            reply=ReplyRules(mapping, documents, shared.snippet_chars, bound),
            name=config.name,
        )
    except (ValueError, DocumentStoreError) as exc:
        raise SystemsError(str(exc)) from None


def open_systems(
    spec: SystemsSpec,
    settings: SystemsSettings,
    index: SearchBackend | None,
    *,
    corpus: Path | None,
    query_ids: dict[str, str] | None = None,
    open_builtin: Callable[[SearchSettings], Any] | None = None,
    embedder: TextEmbedder | None = None,
    index_label: str = "index",
) -> list[System]:
    """The systems of the resolved ``spec``, in the order the module docstring gives. ``index``: the open
    built-in index (None when none is judged); ``corpus``: the default document store, else, when the built-in
    search is judged, its index (named ``index:<index_label>``), so every system is shown the same passages of a
    document; ``query_ids``: query
    text to id (for run files); ``open_builtin(search settings)`` opens the index with a configuration
    file's settings; ``embedder``: the command's one embedder, under which document stores choose passages.
    Raises SystemsError."""
    taken: set[str] = set()
    systems = builtin_systems(spec, settings.search, index, taken)
    store = spec.corpus or corpus
    # the built-in search judged beside them: every system is shown the index's passages of a document
    index_store = IndexDocuments(index, f"index:{index_label}") if store is None and index is not None and spec.modes else None
    shared = _Shared(spec.timeout or settings.timeout, settings.max_retries, store, settings.search.snippet_chars, embedder, index_store)
    if spec.table:
        systems.append(table_system(spec, shared, taken))
    for path in spec.configs:
        systems.append(config_file_system(path, spec.mode, shared, open_builtin, taken))
    for given in spec.commands:
        name, command = named(given)
        command_search = external_backend(ExternalConfig(command=command, fields=spec.fields), shared)
        system_name = claim(name, taken) if name else unique_name(f"command:{command_search.name}", taken)
        systems.append(System(system_name, command_search, spec.mode, command_search.describe()))
    for given in spec.urls:
        name, url = named(given)
        http = external_backend(ExternalConfig(url=url, headers=list(spec.headers), fields=spec.fields), shared)
        systems.append(System(claim(name, taken) if name else unique_name(f"url:{http.name}", taken), http, spec.mode, http.describe()))
    for name, function in spec.functions:
        systems.append(function_system(function, name, spec, shared, taken))
    for run in spec.runs:
        if store is None and index_store is None:
            raise SystemsError(f"--run {run} needs --corpus (a BEIR corpus.jsonl or a fixtures folder) for the documents' text")
        try:
            documents = open_documents(store, embedder) if store is not None else index_store
            trec = TrecRunSearch(run, documents, query_ids or {}, snippet_chars=shared.snippet_chars)
        except (TrecRunError, DocumentStoreError) as exc:
            raise SystemsError(str(exc)) from None
        systems.append(System(unique_name(f"run:{trec.name}", taken), trec, spec.mode, trec.describe()))
    return systems


_NAMED = re.compile(r"([A-Za-z][\w.-]*)=(\S.*)", re.DOTALL)


def named(given: str) -> tuple[str | None, str]:
    """``(name, command or URL)`` of a ``--search-command``/``--search-url`` value, ``NAME=VALUE`` naming its
    system (a name: a letter, then letters, digits, ``_ . -``); ``(None, given)`` otherwise."""
    found = _NAMED.fullmatch(given.strip())
    return (found.group(1), found.group(2)) if found else (None, given)


def claim(name: str, taken: set[str]) -> str:
    """``name`` for one system, added to ``taken``. Raises SystemsError when another system has it."""
    if name in taken:
        raise SystemsError(f"two systems are named {name!r}; give each its own NAME=")
    taken.add(name)
    return name


def builtin_systems(spec: SystemsSpec, search: SearchSettings, index: SearchBackend | None, taken: set[str]) -> list[System]:
    """The built-in search in each of ``spec.modes``."""
    systems = []
    for mode in spec.modes:
        if mode not in SEARCH_MODES:
            raise SystemsError(f"unknown search mode {mode!r}; use {', '.join(SEARCH_MODES)}")
        if index is None:
            raise SystemsError("the built-in search is not available here")
        name = unique_name(mode if len(spec.modes) > 1 or spec.external else "builtin", taken)
        systems.append(System(name, index, mode, builtin_description(mode, search)))
    return systems


def builtin_description(mode: str, search: SearchSettings) -> dict[str, Any]:
    """What provenance records of the built-in search in ``mode``."""
    return {"kind": "builtin", "mode": mode, "searchConfig": search.model_dump(exclude={"external"})}


GIVE_AGAIN = {
    "http": "--search-url (with its --search-header): the file keeps neither credentials, query string nor header values",
    "trec-run": "--run and --corpus: the file keeps the run's name, not its path",
    "python": "the same search function: a function cannot be written to a file",
    "builtin": "--compare: the file keeps the configuration's name, not its path",
    "command": "--search-command: the file keeps the command with its secrets hidden",
}
"""What to give again for a recorded system :func:`reopen_systems` cannot rebuild, by kind."""


def reopen_systems(
    recorded: list[dict[str, Any]],
    settings: SystemsSettings,
    index: SearchBackend | None,
    *,
    mode: SearchMode,
    embedder: TextEmbedder | None = None,
) -> list[System]:
    """The systems a run file's ``provenance.searchSystems`` records, opened again under their recorded names:
    the built-in search in its modes (with today's search settings) and commands recorded whole; ``mode``: the
    mode the run asked other systems in. Raises SystemsError naming what to give again for any other system."""
    systems = []
    for entry in recorded:
        kind, name = str(entry.get("kind")), str(entry.get("name"))
        if kind == "builtin" and "config" not in entry:
            if index is None:
                raise SystemsError("the built-in search is not available here")
            systems.append(System(name, index, entry["mode"], builtin_description(entry["mode"], settings.search)))
        elif kind == "command" and "***" not in str(entry.get("command")):
            documents = str(entry.get("documents") or "")
            in_index = documents.startswith("index:") and index is not None
            if documents and not in_index and not Path(documents).exists():
                raise SystemsError(f"{name}: its documents {documents} are gone; give --search-command and --corpus again")
            config = ExternalConfig(
                command=entry.get("command"),
                fields=entry.get("fields") or None,
                timeout=entry.get("timeoutS"),
                corpus=Path(documents) if documents and not in_index else None,
                max_reply_mb=entry["maxReplyBytes"] / 1048576 if entry.get("maxReplyBytes") else None,
            )
            store = IndexDocuments(index, documents) if in_index else None
            shared = _Shared(settings.timeout, settings.max_retries, None, settings.search.snippet_chars, embedder, store)
            backend = external_backend(config, shared)
            systems.append(System(name, backend, mode, backend.describe()))
        else:
            raise SystemsError(f"{name} cannot be rebuilt from the run file; give {GIVE_AGAIN.get(kind, 'its flags')} again")
    return systems


def table_system(spec: SystemsSpec, shared: _Shared, taken: set[str]) -> System:
    """The ``[search.external]`` table's system, the flags' timeout, fields, corpus and headers over its own."""
    try:
        config = ExternalConfig.model_validate(spec.table)
    except ValidationError as exc:
        raise SystemsError(f"{spec.table_source}: {exc.errors()[0]['msg']} ({'.'.join(map(str, exc.errors()[0]['loc']))})") from None
    given = {"timeout": spec.timeout, "fields": spec.fields, "corpus": spec.corpus}  # flags over the file
    config = config.model_copy(update={k: v for k, v in given.items() if v is not None} | {"headers": [*config.headers, *spec.headers]})
    backend = external_backend(config, shared)
    return System(unique_name(backend.name, taken), backend, spec.mode, backend.describe())


def config_file_system(
    path: Path, mode: SearchMode, shared: _Shared, open_builtin: Callable[[SearchSettings], Any] | None, taken: set[str]
) -> System:
    """A configuration file's system: its ``[search.external]`` adapter, else the built-in search opened
    with its settings; in the file's ``search_mode``, else ``mode``."""
    search_table, asked = read_config_file(path)
    chosen = asked or mode
    if chosen not in SEARCH_MODES:
        raise SystemsError(f"{path}: unknown search_mode {chosen!r}")
    if search_table.get("external"):
        try:
            config = ExternalConfig.model_validate(search_table["external"])
        except ValidationError as exc:
            raise SystemsError(f"{path} [search.external]: {exc.errors()[0]['msg']}") from None
        backend = external_backend(config, shared)
        return System(unique_name(config.name or Path(path).stem, taken), backend, chosen, backend.describe())
    try:
        search_settings = SearchSettings.model_validate(search_table)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SystemsError(f"{path} [search]: {problems}") from None
    if open_builtin is None:
        raise SystemsError(f"{path}: the built-in search is not available here")
    opened = open_builtin(search_settings)
    described = {
        "kind": "builtin",
        "mode": mode,
        "config": Path(path).name,
        "searchConfig": search_settings.model_dump(exclude={"external"}),
    }
    return System(unique_name(Path(path).stem, taken), opened, chosen, described, [opened.close])


def function_system(function: SearchFunction, name: str | None, spec: SystemsSpec, shared: _Shared, taken: set[str]) -> System:
    """A Python function's system (:class:`~judge_runner.search.python_search.CallableSearch`), named
    ``name`` or ``python:<function name>``. Raises SystemsError (not a callable, bad fields or corpus)."""
    try:
        documents = open_documents(shared.corpus, shared.embedder) if shared.corpus is not None else shared.index_store
        backend = CallableSearch(
            function, mapping=FieldMapping.parse(spec.fields), documents=documents, snippet_chars=shared.snippet_chars, name=name
        )
    except (ValueError, DocumentStoreError) as exc:
        raise SystemsError(str(exc)) from None
    return System(unique_name(name or f"python:{backend.name}", taken), backend, spec.mode, backend.describe())
