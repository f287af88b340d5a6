"""One settings model, filled from (lowest first) the config file, the environment, then CLI flags.

Config file: ``judge-runner.toml`` in the current folder, else ``[tool.judge-runner]`` of
``./pyproject.toml``. Environment: ``JUDGE_RUNNER_<FIELD>`` (e.g. ``JUDGE_RUNNER_DB``,
``JUDGE_RUNNER_EXTENSIONS``, ``JUDGE_RUNNER_TIMEOUT``). Nested search settings go in a ``[search]``
table of the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judge_runner.dsn import redact_dsn
from judge_runner.llm.registry import ProviderChoice
from judge_runner.models import DIMENSIONS, SearchMode
from judge_runner.search_settings import SearchSettings

DEFAULT_DB = Path(".judge-runner") / "index.sqlite"


class ConfigError(ValueError):
    """Settings that cannot be used; the CLI exits with code 2 and this message."""


class Settings(BaseModel):
    """Every knob of a run. Times in seconds, money in USD."""

    model_config = ConfigDict(extra="forbid")

    db: Path = DEFAULT_DB
    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: str | None = Field(None, description="PostgreSQL URL (env DATABASE_URL); never logged with its password")
    pg_schema: str = Field("judge_runner", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="PostgreSQL schema holding the index")
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
    search_limit: int = Field(10, ge=1, le=100)
    count: int = Field(15, ge=1, le=500)
    weights: dict[str, float] = Field(default_factory=lambda: {d: 1.0 for d in DIMENSIONS})
    search: SearchSettings = Field(default_factory=SearchSettings)

    min_overall: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="CI gate on the average overall score")
    # the judge protocol (issue 14): README "The judge protocol"
    judge_mode: Literal["pointwise", "batched"] = Field("pointwise", description="one judge call per result, or one per query")
    trials: int = Field(1, ge=1, le=10, description="label each result this many times; the label is the median")
    seed: int = Field(20240701, ge=0, description="base seed: batched shuffles, and sent where the API takes one")
    cache: Path | None = Field(None, description="judgment cache file; default judgments.sqlite beside the SQLite index")
    no_cache: bool = Field(False, description="judge everything again and store nothing")
    human_qrels: list[str] | None = Field(None, description="names of imported human qrels to apply; default every imported set")

    @model_validator(mode="after")
    def _check_weights(self) -> Settings:
        # a partial table changes only the dimensions it names; the others keep weight 1.0
        self.weights = {d: float(self.weights.get(d, 1.0)) for d in DIMENSIONS} | {k: v for k, v in self.weights.items() if k not in DIMENSIONS}
        unknown = set(self.weights) - set(DIMENSIONS)
        if unknown:
            raise ValueError(f"unknown weight(s) {sorted(unknown)}; dimensions are {list(DIMENSIONS)}")
        if any(v < 0 for v in self.weights.values()) or sum(self.weights.get(d, 0) for d in DIMENSIONS) <= 0:
            raise ValueError("weights must be >= 0 and not all zero")
        return self

    @model_validator(mode="after")
    def _check_price(self) -> Settings:
        if self.price_per_mtok is not None:
            try:
                values = [float(v) for v in self.price_per_mtok.split(",")]
            except ValueError:
                values = []
            if len(values) != 2 or not all(v >= 0 and v == v and v != float("inf") for v in values):
                raise ValueError("price_per_mtok must be 'INPUT,OUTPUT', two non-negative USD amounts per million tokens")
        return self

    @property
    def user_price(self):
        """The price given with ``price_per_mtok`` (cache writes at 1.25x input and cache reads at the
        input price: upper bounds for both vendors), or None."""
        from judge_runner.llm.pricing import Price

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
        from judge_runner.judgment_cache import cache_path_for

        if self.no_cache:
            return None
        return self.cache or cache_path_for(self.db if self.backend == "sqlite" else None)

    @property
    def deadline(self) -> float:
        """Seconds one logical call may take with all its retries."""
        return self.call_deadline if self.call_deadline is not None else 4 * self.timeout


def _file_settings(cwd: Path) -> dict[str, Any]:
    own = cwd / "judge-runner.toml"
    try:
        if own.is_file():
            return tomllib.loads(own.read_text(encoding="utf-8"))
        project = cwd / "pyproject.toml"
        if project.is_file():
            return tomllib.loads(project.read_text(encoding="utf-8")).get("tool", {}).get("judge-runner", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read the config file: {exc}") from None
    return {}


def load_settings(flags: dict[str, Any] | None = None, cwd: Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Merge file < environment < flags (flags that are None are ignored). Raises ConfigError."""
    cwd = cwd or Path.cwd()
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {k.replace("-", "_"): v for k, v in _file_settings(cwd).items()}
    if isinstance(values.get("search"), dict):  # the [search] table takes hyphenated keys too
        values["search"] = {k.replace("-", "_"): v for k, v in values["search"].items()}
    for name in Settings.model_fields:
        if name in ("weights", "search"):
            continue
        env = environ.get(f"JUDGE_RUNNER_{name.upper()}")
        if env not in (None, ""):
            values[name] = env
    if "dsn" not in values and environ.get("DATABASE_URL") and not environ.get("JUDGE_RUNNER_DSN"):
        values["dsn"] = environ["DATABASE_URL"]
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid settings: {problems}") from None
