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
from judge_runner.pipeline import systems_spec as make_systems_spec
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


class ModeList(click.Choice):
    """A search mode, or several distinct ones comma-separated (``fts,vector,hybrid``); converts to the
    comma-joined string."""

    def convert(self, value, param, ctx):
        modes = [m.strip() for m in str(value).split(",") if m.strip()]
        if not modes or len(set(modes)) != len(modes) or any(m not in self.choices for m in modes):
            self.fail(f"give one or more distinct modes of {', '.join(map(str, self.choices))}, comma-separated (got {value!r})",
                      param, ctx)
        return ",".join(modes)


def search_options(f):
    f = click.option("--search-limit", type=click.IntRange(1, 100), default=None, help="Results per query shown to the judge [default: 10].")(f)
    f = click.option("--search-mode", type=ModeList(SEARCH_MODES), default=None, metavar="MODE[,MODE...]",
                     help=f"Search mode under test ({'|'.join(SEARCH_MODES)}) [default: hybrid]. Several modes (fts,vector,hybrid) "
                          "judge the built-in search in each, side by side in one run (evaluate, generate-and-evaluate).")(f)
    return f


def search_adapter_options(f):
    """--search-command, --search-url, --search-header, --search-fields, --search-timeout, --corpus: judge a
    search judge-runner does not run itself (see judge_runner/search/systems.py). Read with :func:`systems_spec`."""
    return _options(f, [
        click.option("--search-command", multiple=True, metavar="'CMD {query} --limit {limit}'",
                     help="Judge a search run as a command (no shell; {query}, {limit}, {mode} replaced; without {query} the "
                          "query goes to stdin). It prints JSON results. Repeatable."),
        click.option("--search-url", multiple=True, metavar="URL",
                     help="Judge a search behind an HTTP endpoint: POST {query, limit, mode}, JSON results back. Repeatable."),
        click.option("--search-header", multiple=True, metavar="NAME=env:VAR",
                     help="Header for --search-url; NAME=env:VAR reads a token from the environment (never logged). Repeatable."),
        click.option("--search-fields", default=None, metavar="KEY=PATH,...",
                     help="Where the results are in the reply: results, id, text, score, anchor, lineStart, lineEnd "
                          "(e.g. results=hits.hits,id=_id,text=_source.body,score=_score)."),
        click.option("--search-timeout", type=click.FloatRange(min=0, min_open=True), default=None, callback=_finite,
                     help="Seconds per external search call [default: --timeout]."),
        click.option("--corpus", type=click.Path(exists=True, path_type=Path), default=None,
                     help="Text of results that come without it (and of --run documents): a fixtures folder or a BEIR "
                          "corpus.jsonl [default for generate-and-evaluate: --fixtures]."),
    ])


def compare_options(f):
    """--run and --compare (``evaluate`` only). Read with :func:`systems_spec`."""
    return _options(f, [
        click.option("--run", "runs", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="RUN.trec",
                     help="Judge an existing TREC run file (qid Q0 docid rank score tag); needs --corpus. Repeatable."),
        click.option("--compare", default=None, metavar="A.toml,B.toml",
                     help="Judge the search of each configuration file ([search] table, search_mode, or [search.external]) "
                          "side by side on the same queries; the first is the reference."),
    ])


def systems_spec(flags: dict[str, Any]) -> Any:
    """Take the search-system flags out of ``flags`` (leaving ``search_mode`` as the first mode given)
    and return a ``SystemsSpec`` (:func:`judge_runner.pipeline.systems_spec`), or None when none was given."""
    modes = tuple(flags["search_mode"].split(",")) if flags.get("search_mode") else ()
    if modes:
        flags["search_mode"] = modes[0]
    compare = flags.pop("compare", None)
    configs = tuple(Path(p.strip()) for p in compare.split(",") if p.strip()) if compare else ()
    headers, urls = tuple(flags.pop("search_header", ()) or ()), tuple(flags.pop("search_url", ()) or ())
    if headers and not urls:
        raise click.UsageError("--search-header applies to --search-url; no --search-url was given")
    missing = [str(p) for p in configs if not p.is_file()]
    if missing:
        raise click.UsageError(f"--compare: no such configuration file: {', '.join(missing)}")
    return make_systems_spec(modes=modes, configs=configs, commands=tuple(flags.pop("search_command", ()) or ()), urls=urls,
                             runs=tuple(flags.pop("runs", ()) or ()), headers=headers, fields=flags.pop("search_fields", None),
                             timeout=flags.pop("search_timeout", None), corpus=flags.pop("corpus", None))


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
    return _options(f, [PROVIDER, JUDGE_MODEL, *COMMON, CONCURRENCY])


def run_options(f):
    return _options(f, [PROVIDER, MODEL, JUDGE_MODEL, *COMMON, CONCURRENCY])
