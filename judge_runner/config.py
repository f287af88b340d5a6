"""One settings model, filled from (lowest first) the config file, the environment, then CLI flags.

Config file: ``judge-runner.toml`` in the current folder, else ``[tool.judge-runner]`` of
``./pyproject.toml``. Environment: ``JUDGE_RUNNER_<FIELD>`` (e.g. ``JUDGE_RUNNER_DB``,
``JUDGE_RUNNER_EXTENSIONS``, ``JUDGE_RUNNER_TIMEOUT``). Nested search settings go in a ``[search]``
table of the file.

One source of truth for what is valid: this model. Every value reaches it the same way whatever its
source: a scalar from the file (``count = 5``, ``timeout = inf``, ``concurrency = true``) is first
written as the text a flag or an environment variable would carry (``"5"``, ``"inf"``, ``"true"``), so a
value one source refuses is refused from the others, with the same message naming where it came from
(``--timeout``, ``JUDGE_RUNNER_TIMEOUT``, ``timeout in judge-runner.toml``). The click options of these
settings convert and check nothing (``judge_runner.cli.options.setting_option``); their help shows the
ranges and choices read from here. An empty environment variable counts as unset.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from judge_runner.core.models import DIMENSIONS, JudgeMode, SearchMode
from judge_runner.embed.registry import EmbedderChoice, normalize_kind
from judge_runner.llm.pricing import Price
from judge_runner.llm.registry import ProviderChoice
from judge_runner.search.redact import redact_dsn
from judge_runner.search.settings import SearchSettings

DEFAULT_DB = Path(".judge-runner") / "index.sqlite"
DEFAULT_CACHE = Path(".judge-runner") / "judgments.sqlite"


def cache_path_for(index_db: str | Path | None) -> Path:
    """Where the judgment cache lives by default: beside the SQLite index (``judgments.sqlite`` in the
    index file's folder), or :data:`DEFAULT_CACHE` under the current folder when the index is not a file
    (PostgreSQL backend, ``index_db`` None)."""
    return Path(index_db).parent / "judgments.sqlite" if index_db else DEFAULT_CACHE


class ConfigError(ValueError):
    """Settings that cannot be used; the CLI exits with code 2 and this message."""


class Settings(BaseModel):
    """Every knob of a run. Times in seconds, money in USD. Every number must be finite. Built once per
    command (:func:`load_settings`) and frozen: a job that needs another value derives new settings
    (:func:`derive`), validated like every other source."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    db: Path = DEFAULT_DB
    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: str | None = Field(None, description="PostgreSQL URL (env DATABASE_URL); never logged with its password")
    pg_schema: str = Field("judge_runner", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="PostgreSQL schema holding the index")
    embedder: EmbedderChoice | None = Field(
        None,
        description="the sentence embedder (a kind of judge_runner.embed.registry); unset: the index's own, else the default "
        "(judge_runner.embed.registry.choose)",
    )
    extensions: str | None = None
    exclude: str | None = Field(None, description="comma-separated folder names never indexed, replacing the default list")
    max_file_bytes: int = Field(2 * 1024 * 1024, ge=1, description="larger files are skipped with a reason")
    provider: ProviderChoice = "auto"  # a Literal derived from the provider registry (judge_runner.llm.registry)
    model: str | None = None
    judge_model: str | None = None
    timeout: float = Field(60.0, gt=0, description="seconds per HTTP attempt")
    call_deadline: float | None = Field(None, gt=0, description="seconds per logical call with its retries; default 4 x timeout")
    max_retries: int = Field(3, ge=0, le=10)
    retry_cap: float = Field(120.0, gt=0, description="longest single backoff wait, seconds")
    concurrency: int = Field(5, ge=1, le=64)
    max_budget_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    per_call_cap_usd: float = Field(0.50, gt=0)
    max_budget_tokens: int | None = Field(None, ge=1, description="cap on the run's tokens; the cap when prices are unknown")
    price_per_mtok: str | None = Field(None, description="'INPUT,OUTPUT' USD per million tokens for a model missing from the pricing table")
    search_mode: SearchMode = "hybrid"
    search_modes: list[SearchMode] = Field(
        default_factory=list,
        description="the built-in search's modes judged side by side, when search_mode names several "
        "(fts,vector,hybrid, from any source); search_mode is then the first. Empty for one mode",
    )
    search_limit: int = Field(10, ge=1, le=100)
    count: int = Field(15, ge=1, le=500)
    keep_unverified: bool = Field(
        False, description="keep (and flag) a query the judge did not verify as answerable, instead of dropping it"
    )
    weights: dict[str, float] = Field(default_factory=lambda: {d: 1.0 for d in DIMENSIONS})
    search: SearchSettings = Field(default_factory=SearchSettings)

    min_overall: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="CI gate on the average overall score")
    # the judge protocol: docs/judge-protocol.md
    judge_mode: JudgeMode = Field("pointwise", description="one judge call per result, or one per query")
    trials: int = Field(1, ge=1, le=10, description="label each result this many times; the label is the median")
    seed: int = Field(20240701, ge=0, description="base seed: batched shuffles, and sent where the API takes one")
    reasoning_effort: Literal["minimal", "low", "medium", "high"] = Field(
        "low", description="reasoning effort sent with each judge call to a reasoning model (gpt-5, o-series)"
    )
    cache: Path | None = Field(None, description="judgment cache file; default judgments.sqlite beside the SQLite index")
    no_cache: bool = Field(False, description="judge everything again and store nothing")
    human_qrels: list[str] | None = Field(None, description="names of imported human qrels to apply; default every imported set")
    # judge calls through the provider's batch API (docs/batch.md)
    batch: bool = Field(False, description="send the judge's calls through the provider's batch API (half price, results within 24 h)")
    batch_poll: float = Field(60.0, gt=0, description="longest wait between two status checks of a batch, seconds")

    @model_validator(mode="before")
    @classmethod
    def _several_modes(cls, values: Any) -> Any:
        # "fts,vector" from a flag, JUDGE_RUNNER_SEARCH_MODE or the config file alike: each mode checked by
        # the same Literal (search_modes.N), the first one the run's search_mode
        mode = values.get("search_mode") if isinstance(values, dict) else None
        if isinstance(mode, str) and "," in mode:
            modes = [m.strip() for m in mode.split(",")]  # an empty one is refused by _no_empty_mode, naming the source
            values = {**values, "search_mode": next((m for m in modes if m), mode), "search_modes": modes}
        return values

    @model_validator(mode="before")
    @classmethod
    def _choice_spelling(cls, values: Any) -> Any:
        # " HYBRID ", "Fts,Vector", "OpenAI": a choice setting (a Literal) accepts any case and surrounding spaces,
        # as the embedder's does, from every source alike (a flag, the environment, the config file); what is no choice is left to the Literal's message
        if not isinstance(values, dict):
            return values
        out = dict(values)
        for name, value in values.items():
            field = cls.model_fields.get(name)
            choices = [str(c) for c in get_args(field.annotation)] if field and get_origin(field.annotation) is Literal else []
            if choices and isinstance(value, str):
                spelled = {c.lower(): c for c in choices}
                out[name] = ",".join(spelled.get(part.strip().lower(), part.strip()) for part in value.split(","))
        return out

    @field_validator("embedder", mode="before")
    @classmethod
    def _embedder_kind(cls, kind: Any) -> Any:
        # " Torch ", "minilm" (its former name): the registry's kind, or its message naming the kinds
        return normalize_kind(kind) if isinstance(kind, str) else kind

    @field_validator("search_modes", mode="before")
    @classmethod
    def _no_empty_mode(cls, modes: Any) -> Any:
        if isinstance(modes, list) and not all(modes):
            raise ValueError(f"an empty mode between commas in {','.join(map(str, modes))!r}; give modes like fts,vector,hybrid")
        return modes

    @field_validator("search_modes")
    @classmethod
    def _modes_once(cls, modes: list[str]) -> list[str]:
        if len(set(modes)) != len(modes):
            raise ValueError(f"each mode at most once (got {','.join(modes)!r})")
        return modes

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, weights: dict[str, float]) -> dict[str, float]:
        # a partial table changes only the dimensions it names; the others keep weight 1.0
        weights = {d: float(weights.get(d, 1.0)) for d in DIMENSIONS} | {k: v for k, v in weights.items() if k not in DIMENSIONS}
        unknown = set(weights) - set(DIMENSIONS)
        if unknown:
            raise ValueError(f"unknown weight(s) {sorted(unknown)}; dimensions are {list(DIMENSIONS)}")
        if any(v < 0 for v in weights.values()) or sum(weights.get(d, 0) for d in DIMENSIONS) <= 0:
            raise ValueError("weights must be >= 0 and not all zero")
        return weights

    @field_validator("price_per_mtok")
    @classmethod
    def _check_price(cls, price: str | None) -> str | None:
        if price is not None:
            try:
                values = [float(v) for v in price.split(",")]
            except ValueError:
                values = []
            if len(values) != 2 or not all(v >= 0 and v == v and v != float("inf") for v in values):
                raise ValueError("must be 'INPUT,OUTPUT', two non-negative USD amounts per million tokens")
        return price

    @field_validator("db")
    @classmethod
    def _check_db(cls, db: Path) -> Path:
        if db.is_dir():
            raise ValueError("is a folder; give the SQLite index file")
        return db

    def source_of(self, name: str) -> str | None:
        """Where setting ``name`` came from (``--provider``, ``JUDGE_RUNNER_PROVIDER``, ``provider in
        judge-runner.toml``, ``the provider argument``, ``provider in the API call``); None for a default."""
        return self._sources.get(name)

    @property
    def user_price(self) -> Price | None:
        """The price given with ``price_per_mtok`` (cache writes at 1.25x input and cache reads at the
        input price: upper bounds for both vendors), or None."""
        if self.price_per_mtok is None:
            return None
        inp, out = (float(v) for v in self.price_per_mtok.split(","))
        return Price(inp, out, inp * 1.25, inp)

    @property
    def index_label(self) -> str:
        """Where the index lives, fit for messages and run files: the SQLite path, or the PostgreSQL
        URL without its password."""
        if self.backend != "postgres":
            return str(self.db)
        return redact_dsn(self.dsn or "")

    @property
    def cache_path(self) -> Path | None:
        """The judgment cache file: ``cache``, else ``judgments.sqlite`` beside the SQLite index (or
        ``.judge-runner/judgments.sqlite`` for PostgreSQL); None with ``no_cache``."""
        if self.no_cache:
            return None
        return self.cache or cache_path_for(self.db if self.backend == "sqlite" else None)

    @property
    def deadline(self) -> float:
        """Seconds one logical call may take with all its retries."""
        return self.call_deadline if self.call_deadline is not None else 4 * self.timeout


# Names of settings whose values are never echoed in an error message.
_SECRET_SETTING = ("dsn", "key", "password", "secret")


def _file_settings(cwd: Path) -> tuple[dict[str, Any], str, str]:
    """The config file's settings table, the file's name and the table's TOML name (``""`` for the top
    level of judge-runner.toml). Raises ConfigError for a file that is not TOML."""
    own = cwd / "judge-runner.toml"
    try:
        if own.is_file():
            return tomllib.loads(own.read_text(encoding="utf-8")), own.name, ""
        project = cwd / "pyproject.toml"
        if project.is_file():
            table = tomllib.loads(project.read_text(encoding="utf-8")).get("tool", {}).get("judge-runner", {})
            return table, project.name, "tool.judge-runner"
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read the config file: {exc}") from None
    return {}, "", ""


def as_text(value: Any) -> Any:
    """A scalar setting as the text a flag or environment variable would carry: TOML ``true`` -> ``"true"``,
    ``5`` -> ``"5"``, ``0.25`` -> ``"0.25"``, ``inf`` -> ``"inf"``, a Path -> its string. Lists, tables and
    None are returned as they are (they have no flag)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str, Path)):
        return str(value)
    return value


def _problem(error: Any, sources: dict[tuple[str, ...], str]) -> str:
    """One validation error as ``<where>: <what> (got '<value>')``; ``where`` names the flag, variable or
    file key the value came from; the value is never shown for a secret setting (a DSN, a key)."""
    loc = tuple(str(part) for part in error["loc"])
    where = sources.get(loc[:2]) or sources.get(loc[:1]) or ".".join(loc) or "settings"
    if len(loc) > 1 and loc[:2] not in sources:
        where = where.replace(loc[0], ".".join(loc), 1)
    if error["type"] == "extra_forbidden":
        return f"{where}: not a judge-runner setting"
    message = error["msg"].removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    shown = error.get("input")
    if isinstance(shown, str) and not any(part in ".".join(loc).lower() for part in _SECRET_SETTING):
        message += f" (got {shown[:80]!r})"
    return f"{where}: {message}"


def load_settings(
    flags: dict[str, Any] | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flag_name: Callable[[str], str] | None = None,
) -> Settings:
    """Merge file < environment < flags (flags that are None are ignored); every scalar is validated as
    text (:func:`as_text`), so all three sources are held to the same rules. Raises ConfigError naming
    each bad value's source: ``--search-limit``, ``JUDGE_RUNNER_SEARCH_LIMIT``, ``search-limit in
    judge-runner.toml``, ``tool.judge-runner.search-limit in pyproject.toml``, ``search.depth in
    judge-runner.toml``; ``flag_name`` names a given value's source (the Python API: its argument)."""
    cwd = cwd or Path.cwd()
    env_vars: Mapping[str, str] = os.environ if environ is None else environ
    table, file_name, prefix = _file_settings(cwd)
    values: dict[str, Any] = {}
    sources: dict[tuple[str, ...], str] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        values[name] = as_text(value)
        sources[(name,)] = f"{prefix + '.' if prefix else ''}{key} in {file_name}"
        if name == "search" and isinstance(value, dict):  # the [search] table takes hyphenated keys too
            values[name] = {k.replace("-", "_"): as_text(v) for k, v in value.items()}
            for k in value:
                sources[(name, k.replace("-", "_"))] = f"{prefix + '.' if prefix else ''}{key}.{k} in {file_name}"
    for name in Settings.model_fields:
        if name in ("weights", "search"):
            if env_vars.get(f"JUDGE_RUNNER_{name.upper()}"):  # a table: never silently ignored
                raise ConfigError(
                    f"invalid settings: JUDGE_RUNNER_{name.upper()}: {name} can be set only in the config file "
                    f"(judge-runner.toml or [tool.judge-runner] in pyproject.toml)"
                )
            continue
        env = env_vars.get(f"JUDGE_RUNNER_{name.upper()}")
        if env not in (None, ""):
            values[name] = env
            sources[(name,)] = f"JUDGE_RUNNER_{name.upper()}"
    if "dsn" not in values and env_vars.get("DATABASE_URL") and not env_vars.get("JUDGE_RUNNER_DSN"):
        values["dsn"] = env_vars["DATABASE_URL"]
        sources[("dsn",)] = "DATABASE_URL"
    for name, value in (flags or {}).items():
        if value is not None:
            values[name] = as_text(value)
            sources[(name,)] = flag_name(name) if flag_name is not None else "--" + name.replace("_", "-")
    if ("search_mode",) in sources:  # several modes are checked where the value came from
        sources[("search_modes",)] = sources[("search_mode",)]
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError("invalid settings: " + "; ".join(_problem(e, sources) for e in exc.errors())) from None
    settings._sources = {key[0]: where for key, where in sources.items() if len(key) == 1}
    return settings


def derive(settings: Settings, changes: Mapping[str, Any], source: str) -> Settings:
    """New settings: ``settings`` with ``changes`` (``{field: value}``) applied and validated by the same
    model, so a value another source would refuse is refused here too. ``source`` names where the
    values came from in an error message (``"the resumed run's run_start"``). The fields the user set
    (:attr:`Settings.model_fields_set`: flag, environment or config file) stay what they were: a derived
    value is not one the user chose. Raises ConfigError naming the field and ``source``."""
    if not changes:
        return settings
    values = {**settings.model_dump(), **{name: as_text(value) for name, value in changes.items()}}
    try:
        checked = Settings.model_validate(values)
    except ValidationError as exc:
        sources: dict[tuple[str, ...], str] = {(name,): f"{name.replace('_', '-')} in {source}" for name in changes}
        raise ConfigError("invalid settings: " + "; ".join(_problem(e, sources) for e in exc.errors())) from None
    derived = Settings.model_construct(_fields_set=set(settings.model_fields_set), **dict(checked))
    derived._sources = {**settings._sources, **{name: f"{name.replace('_', '-')} in {source}" for name in changes}}
    return derived
