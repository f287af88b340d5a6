"""Click options shared by several commands, and the settings and printer every command builds from them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from judge_runner.config import Settings
from judge_runner.llm.registry import PROVIDER_CHOICES, PROVIDERS
from judge_runner.models import SEARCH_MODES
from judge_runner.pipeline import load
from judge_runner.printer import Printer


def settings(**flags: Any) -> Settings:
    """Settings from the config file, the environment and these flags, plus ``--backend``/``--dsn`` kept
    in the click context by :func:`db_option`. Raises UsageError for unusable settings."""
    ctx = click.get_current_context(silent=True)
    return load(merged_flags(ctx, flags))


def merged_flags(ctx: click.Context | None, flags: dict[str, Any]) -> dict[str, Any]:
    """``flags`` plus ``backend`` and ``dsn`` from the click context (see :func:`db_option`)."""
    flags = dict(flags)
    if ctx is not None:
        for name in ("backend", "dsn"):
            flags.setdefault(name, ctx.meta.get(f"judge_runner.{name}"))
    return flags


def _err(message: str) -> None:
    click.echo(message, err=True)


def printer(quiet: bool = False) -> Printer:
    """Results through ``click.echo`` on stdout, progress and warnings on stderr."""
    return Printer(click.echo, _err, quiet)


def _remember(ctx, param, value):
    ctx.meta[f"judge_runner.{param.name}"] = value
    return value


def db_option(f):
    """--db, plus --backend and --dsn (kept in the click context and merged by :func:`settings`)."""
    f = click.option("--dsn", default=None, expose_value=False, callback=_remember,
                     help="PostgreSQL connection URL for --backend postgres [env DATABASE_URL].")(f)
    f = click.option("--backend", type=click.Choice(["sqlite", "postgres"]), default=None, expose_value=False, callback=_remember,
                     help="Where the index lives [default: sqlite; postgres with --dsn or DATABASE_URL].")(f)
    return click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="SQLite index file [default: .judge-runner/index.sqlite; env JUDGE_RUNNER_DB].")(f)


def search_options(f):
    f = click.option("--search-limit", type=click.IntRange(1, 100), default=None, help="Results per query shown to the judge [default: 10].")(f)
    f = click.option("--search-mode", type=click.Choice(SEARCH_MODES), default=None,
                     help="Search mode under test [default: hybrid].")(f)
    return f


def _finite(ctx, param, value):
    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number")
    return value


def _options(f, opts):
    for opt in reversed(opts):
        f = opt(f)
    return f


PROVIDER = click.option("--provider", type=click.Choice(PROVIDER_CHOICES), default=None,
                        help="LLM provider. auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY or "
                             "OPENAI_BASE_URL is set, else the offline heuristic [default: auto].")
MODEL = click.option("--model", default=None, help="Model that writes the queries (phase one) [default: "
                     + " / ".join(spec.default_model for spec in PROVIDERS.values() if not spec.heuristic) + "].")
JUDGE_MODEL = click.option("--judge-model", default=None, help="Model that judges (phase two) [default: --model, else the provider's default].")
COMMON = [
    click.option("--max-budget-usd", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Start no call that could take the run's cost past this many USD [default: no cap]."),
    click.option("--max-budget-tokens", type=click.IntRange(min=1), default=None,
                 help="Start no call that could take the run past this many tokens (input + output) [default: no cap]."),
    click.option("--price-per-mtok", default=None, metavar="IN,OUT",
                 help="USD per million input and output tokens, for a model missing from the pricing table."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Seconds per HTTP attempt [default: 60]."),
    click.option("--call-deadline", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                 help="Seconds per call including its retries [default: 4 x timeout]."),
    click.option("--quiet", is_flag=True, help="Print only the final summary and errors."),
]
JUDGE_PROTOCOL = [
    click.option("--judge-mode", type=click.Choice(["pointwise", "batched"]), default=None,
                 help="pointwise: one judge call per result (plus one list-level call per query); batched: one call per "
                      "query, results in a seeded random order [default: pointwise]."),
    click.option("--trials", type=click.IntRange(1, 10), default=None,
                 help="Label each result N times (pointwise: seeds; batched: new shuffles); the label is the median, "
                      "Krippendorff's alpha goes in the summary [default: 1]."),
    click.option("--seed", type=click.IntRange(min=0), default=None, help="Base seed of the shuffles, and sent where the API takes one."),
    click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help="Judgment cache file [default: judgments.sqlite beside the index]."),
    click.option("--no-cache", is_flag=True, default=None, help="Judge every result again; read and store nothing in the cache."),
    click.option("--human-qrels", multiple=True, default=None, metavar="NAME", callback=lambda ctx, param, value: list(value) or None,
                 help="Apply only these imported human qrels (repeatable) [default: every set imported with `qrels import`]."),
]
CONCURRENCY = click.option("--concurrency", type=click.IntRange(1, 64), default=None, help="Judge calls in flight at once [default: 5].")
OUT_DIR = click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True,
                       help="Folder for the run file (<UTC timestamp>.jsonl) and the run's query set.")
MIN_OVERALL = click.option("--min-overall", type=click.FloatRange(0, 1), default=None, callback=_finite,
                           help="CI gate: exit 1 when the average overall score is below this (0-1).")
FIXTURES = click.option("--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True,
                        help="Knowledge-base folder.")


def generate_options(f):
    return _options(f, [PROVIDER, MODEL, *COMMON])


def evaluate_options(f):
    return _options(f, [PROVIDER, JUDGE_MODEL, *COMMON, CONCURRENCY, *JUDGE_PROTOCOL])


def run_options(f):
    return _options(f, [PROVIDER, MODEL, JUDGE_MODEL, *COMMON, CONCURRENCY, *JUDGE_PROTOCOL])
