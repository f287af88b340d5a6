"""The search systems a run judges: the built-in search (one or several modes), external adapters
(commands, HTTP endpoints, Python functions given to :mod:`judge_runner.api`), TREC run files, and
configuration files (``--compare a.toml,b.toml``).

:class:`SystemsSpec` is what the command line (or a ``[search.external]`` table) asked for;
:func:`open_systems` turns it into :class:`System` objects, each a backend with a unique ``name``,
the mode it is asked in, and a description for provenance (no secrets). One system is an ordinary
run; two or more make a compare run (:mod:`judge_runner.evaluation.compare`).

Which systems, in this order: the built-in search in each mode of ``modes`` (or, when nothing else
is asked for, in ``settings.search_mode``), then the ``[search.external]`` table, then each
configuration file, then each command, URL, Python function and run file. ``SystemsSpec`` is resolved from every source
at once by :func:`judge_runner.app.inputs.resolve_systems` (flags, ``JUDGE_RUNNER_*`` variables and the
config file), so a setting means the same wherever it is set and whichever command reads it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judge_runner.core.ids import unique_name
from judge_runner.core.models import SEARCH_MODES
from judge_runner.search.documents import DocumentStoreError, open_documents
from judge_runner.search.external import CommandSearch
from judge_runner.search.http_search import HttpSearch, parse_headers
from judge_runner.search.mapping import MAX_REPLY_BYTES, FieldMapping
from judge_runner.search.python_search import CallableSearch, SearchFunction
from judge_runner.search.settings import SearchSettings
from judge_runner.search.trec_run import TrecRunError, TrecRunSearch


class SystemsError(ValueError):
    """Systems that cannot be opened as asked (bad flag, config table, missing file or variable)."""


class ExternalConfig(BaseModel):
    """A ``[search.external]`` table: exactly one of ``command`` or ``url``; ``headers`` as
    ``NAME=env:VARIABLE`` (or a literal value), ``fields`` as ``"id=doc_id,text=body"`` or a table,
    ``timeout`` in seconds (default: the run's ``timeout``), ``corpus`` for text-less results (default:
    the fixtures folder), ``name`` as shown in the run file, ``max_reply_mb``: the most of one reply
    read, in MiB (default 16: :data:`~judge_runner.search.mapping.MAX_REPLY_BYTES`)."""

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
    """What was asked for: built-in ``modes``, the ``[search.external]`` ``table`` (from the config
    file; ``table_source`` names it in messages), config files, commands, URLs, Python ``functions``
    (``(name or None, function)``: :mod:`judge_runner.search.python_search`), run files, plus what
    adapters share: ``headers`` (for every URL), ``fields`` mapping, ``timeout`` (seconds) and
    ``corpus`` (document store for text-less results and run files); given as flags, these four
    override the table's own values."""

    modes: tuple[str, ...] = ()
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
    """One search under test: ``name`` (unique in the run), ``search`` (a SearchBackend), the ``mode``
    it is asked in, and ``description`` for provenance (never a secret). ``close`` releases it."""

    name: str
    search: Any
    mode: str  # one of SEARCH_MODES (checked when the system is opened)
    description: dict[str, Any]
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        """Close what this system opened (an extra index connection)."""
        for closer in self.closers:
            closer()


def read_config_file(path: Path) -> tuple[dict[str, Any], str | None]:
    """``(search table, search_mode)`` of a configuration file (``judge-runner.toml`` shape: a
    ``[search]`` table, maybe ``[search.external]``; or ``[tool.judge-runner]`` of a pyproject).
    Raises SystemsError."""
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


def external_backend(
    config: ExternalConfig, *, timeout: float, max_retries: int, corpus: Path | None, snippet_chars: int, embedder: Any = None
) -> Any:
    """A CommandSearch or HttpSearch for ``config`` (its document store choosing passages under
    ``embedder``). Raises SystemsError (bad table, unset variable, missing corpus)."""
    if bool(config.command) == bool(config.url):
        raise SystemsError("an external search needs exactly one of command or url")
    try:
        mapping = FieldMapping.parse(config.fields)
        store = config.corpus or corpus
        documents = open_documents(store, embedder) if store is not None else None
        bound = int(config.max_reply_mb * 1048576) if config.max_reply_mb else MAX_REPLY_BYTES
        if config.command:
            return CommandSearch(
                config.command,
                timeout=config.timeout or timeout,
                mapping=mapping,
                documents=documents,
                snippet_chars=snippet_chars,
                name=config.name,
                max_bytes=bound,
            )
        return HttpSearch(
            config.url or "",
            headers=parse_headers(config.headers),
            timeout=config.timeout or timeout,
            max_retries=max_retries,
            mapping=mapping,
            documents=documents,
            snippet_chars=snippet_chars,
            name=config.name,
            max_bytes=bound,
        )
    except (ValueError, DocumentStoreError) as exc:
        raise SystemsError(str(exc)) from None


def open_systems(
    spec: SystemsSpec,
    settings: Any,
    index: Any,
    *,
    corpus: Path | None,
    query_ids: dict[str, str] | None = None,
    open_builtin: Any = None,
    embedder: Any = None,
) -> list[System]:
    """The systems of ``spec`` (see the module docstring for the order). ``settings`` is the run's
    Settings (timeout, retries, search settings, the mode); ``index`` the open built-in
    index (None when no built-in system is judged); ``corpus`` the default document store (a fixtures
    folder or a BEIR corpus.jsonl); ``query_ids`` maps query text to id (needed for run files);
    ``open_builtin(search_settings)`` opens the index with other search settings (for config files);
    ``embedder``: the command's one embedder, under which document stores choose passages (the built-in
    index chooses under its own, the same one). Raises SystemsError."""
    taken: set[str] = set()
    systems = builtin_systems(spec, settings, index, taken)
    shared = {
        "timeout": spec.timeout or settings.timeout,
        "max_retries": settings.max_retries,
        "corpus": spec.corpus or corpus,
        "snippet_chars": settings.search.snippet_chars,
        "embedder": embedder,
    }
    if spec.table:
        systems.append(table_system(spec, settings, shared, taken))
    for path in spec.configs:
        systems.append(config_file_system(path, settings, shared, open_builtin, taken))
    for command in spec.commands:
        backend = external_backend(ExternalConfig(command=command, fields=spec.fields), **shared)
        systems.append(System(unique_name(f"command:{backend.name}", taken), backend, settings.search_mode, backend.describe()))
    for url in spec.urls:
        backend = external_backend(ExternalConfig(url=url, headers=list(spec.headers), fields=spec.fields), **shared)
        systems.append(System(unique_name(f"url:{backend.name}", taken), backend, settings.search_mode, backend.describe()))
    store = spec.corpus or corpus
    for name, function in spec.functions:
        systems.append(
            function_system(function, name, store, spec.fields, settings.search.snippet_chars, settings.search_mode, taken, embedder)
        )
    for run in spec.runs:
        if store is None:
            raise SystemsError(f"--run {run} needs --corpus (a BEIR corpus.jsonl or a fixtures folder) for the documents' text")
        try:
            backend = TrecRunSearch(run, open_documents(store, embedder), query_ids or {}, snippet_chars=settings.search.snippet_chars)
        except (TrecRunError, DocumentStoreError) as exc:
            raise SystemsError(str(exc)) from None
        systems.append(System(unique_name(f"run:{backend.name}", taken), backend, settings.search_mode, backend.describe()))
    return systems


def builtin_systems(spec: SystemsSpec, settings: Any, index: Any, taken: set[str]) -> list[System]:
    """The built-in search in each mode asked for (or in ``settings.search_mode`` when nothing else is)."""
    systems = []
    builtin_modes = list(spec.modes) or ([] if spec.external else [settings.search_mode])
    for mode in builtin_modes:
        if mode not in SEARCH_MODES:
            raise SystemsError(f"unknown search mode {mode!r}; use {', '.join(SEARCH_MODES)}")
        systems.append(
            System(
                unique_name(mode if len(builtin_modes) > 1 or spec.external else "builtin", taken),
                index,
                mode,
                {"kind": "builtin", "mode": mode, "searchConfig": settings.search.model_dump(exclude={"external"})},
            )
        )
    return systems


def table_system(spec: SystemsSpec, settings: Any, shared: dict[str, Any], taken: set[str]) -> System:
    """The ``[search.external]`` table's system, the flags' timeout, fields, corpus and headers over its own."""
    try:
        config = ExternalConfig.model_validate(spec.table)
    except ValidationError as exc:
        raise SystemsError(f"{spec.table_source}: {exc.errors()[0]['msg']} ({'.'.join(map(str, exc.errors()[0]['loc']))})") from None
    given = {"timeout": spec.timeout, "fields": spec.fields, "corpus": spec.corpus}  # flags over the file
    config = config.model_copy(update={k: v for k, v in given.items() if v is not None} | {"headers": [*config.headers, *spec.headers]})
    backend = external_backend(config, **shared)
    return System(unique_name(backend.name, taken), backend, settings.search_mode, backend.describe())


def config_file_system(path: Path, settings: Any, shared: dict[str, Any], open_builtin: Any, taken: set[str]) -> System:
    """A configuration file's system: its ``[search.external]`` adapter, else the built-in search opened with its settings."""
    search_table, asked = read_config_file(path)
    mode = asked or settings.search_mode
    if mode not in SEARCH_MODES:
        raise SystemsError(f"{path}: unknown search_mode {mode!r}")
    if search_table.get("external"):
        try:
            config = ExternalConfig.model_validate(search_table["external"])
        except ValidationError as exc:
            raise SystemsError(f"{path} [search.external]: {exc.errors()[0]['msg']}") from None
        backend = external_backend(config, **shared)
        return System(unique_name(config.name or Path(path).stem, taken), backend, mode, backend.describe())
    try:
        search_settings = SearchSettings.model_validate(search_table)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SystemsError(f"{path} [search]: {problems}") from None
    if open_builtin is None:
        raise SystemsError(f"{path}: the built-in search is not available here")
    opened = open_builtin(search_settings)
    return System(
        unique_name(Path(path).stem, taken),
        opened,
        mode,
        {
            "kind": "builtin",
            "mode": mode,
            "config": Path(path).name,
            "searchConfig": search_settings.model_dump(exclude={"external"}),
        },
        [opened.close],
    )


def function_system(
    function: SearchFunction,
    name: str | None,
    store: Path | None,
    fields: str | None,
    snippet_chars: int,
    mode: str,
    taken: set[str],
    embedder: Any = None,
) -> System:
    """A Python function's system (:class:`~judge_runner.search.python_search.CallableSearch`), named
    ``name`` or ``python:<function name>``, its document store choosing passages under ``embedder``. Raises
    SystemsError (not a callable, bad fields or corpus)."""
    try:
        documents = open_documents(store, embedder) if store is not None else None
        backend = CallableSearch(function, mapping=FieldMapping.parse(fields), documents=documents, snippet_chars=snippet_chars, name=name)
    except (ValueError, DocumentStoreError) as exc:
        raise SystemsError(str(exc)) from None
    return System(unique_name(name or f"python:{backend.name}", taken), backend, mode, backend.describe())
